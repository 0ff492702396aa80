/*
 * What the batch processor does to the traffic it forwards: requests and
 * bytes out for the same requests in, beside the same pipeline without it,
 * in the same run.
 *
 *   bench_batch FLAMECOL_BIN CORPUS_DIR [requests=2000] [connections=8]
 *
 * Two collectors, one after the other: `pprof` receiver -> `otlphttp`
 * exporter (protobuf, compression none) to a sink in this program, and the
 * same with a `batch` processor (its defaults: 8192 samples or 200 ms). The
 * clients post the corpus round-robin to /ingest as raw gzipped pprof, under
 * 8 service names, `requests` in all over `connections` keep-alive
 * connections. The sink counts the requests and body bytes it receives; a
 * phase ends when the exporter's queue is empty. Printed: requests and bytes
 * out per phase, and the ratios of the batched phase to the direct one.
 */
#include "bench/bench_util.h"
#include "core/timeutil.h"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

static uint8_t *files[64];
static size_t lens[64];
static size_t n_files;
static int collector_port;
static _Atomic int64_t next_request, requests_total;
static _Atomic int64_t failures, bytes_in;
static _Atomic int64_t sink_requests, sink_bytes; /* counted by bench_start_http_sink */

/* ---- the load ------------------------------------------------------------------------------ */

static void *client(void *arg)
{
    int fd = bench_connect(collector_port);
    char path[160];

    (void)arg;
    for (;;) {
        int64_t i = atomic_fetch_add(&next_request, 1);
        size_t k;
        if (i >= atomic_load(&requests_total) || fd < 0) {
            break;
        }
        k = (size_t)i % n_files;
        snprintf(path, sizeof(path), "/ingest?name=svc-%d&from=1700000000&until=1700000010",
                 (int)(i % 8));
        if (bench_http_post(fd, path, "application/octet-stream", files[k], lens[k]) != 200) {
            atomic_fetch_add(&failures, 1);
            close(fd);
            fd = bench_connect(collector_port);
            continue;
        }
        atomic_fetch_add(&bytes_in, (int64_t)lens[k]);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

struct phase {
    int64_t requests_in, bytes_in, requests_out, bytes_out, failures;
    double wall;
};

static struct phase run_phase(const char *bin, int sink_port, bool batch, int64_t requests,
                              int conns)
{
    int metrics_port = bench_free_port();
    char yaml[2048];
    pthread_t threads[64];
    struct phase ph;
    int64_t t0;
    pid_t pid;

    collector_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "processors:\n  batch:\n"
             "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%d\n"
             "    compression: none\n"
             "service:\n  telemetry: {metrics: {endpoint: 127.0.0.1:%d}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], processors: [%s], "
             "exporters: [otlphttp]}\n",
             collector_port, sink_port, metrics_port, batch ? "batch" : "");
    pid = bench_start_collector(bin, yaml, collector_port);
    atomic_store(&next_request, 0);
    atomic_store(&requests_total, requests);
    atomic_store(&failures, 0);
    atomic_store(&bytes_in, 0);
    atomic_store(&sink_requests, 0);
    atomic_store(&sink_bytes, 0);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < conns; i++) {
        pthread_create(&threads[i], NULL, client, NULL);
    }
    for (int i = 0; i < conns; i++) {
        pthread_join(threads[i], NULL);
    }
    /* Until the exporter has sent what it took (at most 60 s). */
    for (int i = 0; i < 6000; i++) {
        double q = bench_metric(metrics_port, "flamecol_exporter_queue_size", "");
        double f = bench_metric(metrics_port, "flamecol_exporter_in_flight_requests", "");
        if (q == 0 && f == 0) {
            break;
        }
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
    ph.wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    ph.requests_in = requests - atomic_load(&failures);
    ph.bytes_in = atomic_load(&bytes_in);
    ph.requests_out = atomic_load(&sink_requests);
    ph.bytes_out = atomic_load(&sink_bytes);
    ph.failures = atomic_load(&failures);
    bench_stop_collector(pid);
    return ph;
}

static void print_phase(const char *name, const struct phase *p)
{
    printf("%-26s in %6lld requests %9.1f KB (pprof, gzipped) | out %6lld requests %9.1f KB "
           "(OTLP protobuf) | %.1f s | refused %lld\n",
           name, (long long)p->requests_in, (double)p->bytes_in / 1024, (long long)p->requests_out,
           (double)p->bytes_out / 1024, p->wall, (long long)p->failures);
}

int main(int argc, char **argv)
{
    int64_t requests = argc > 3 ? atoll(argv[3]) : 2000;
    int conns = argc > 4 ? atoi(argv[4]) : 8;
    struct phase direct, batched;
    int sink_port;

    if (argc < 3 || requests <= 0 || conns < 1 || conns > 64) {
        fprintf(stderr, "usage: bench_batch FLAMECOL_BIN CORPUS_DIR [requests] [connections]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    n_files = bench_load_corpus(argv[2], files, lens, 64);
    sink_port = bench_start_http_sink(&sink_requests, &sink_bytes);
    printf("corpus: %zu files; %lld requests under 8 service names; %d connections\n", n_files,
           (long long)requests, conns);
    direct = run_phase(argv[1], sink_port, false, requests, conns);
    print_phase("without batch", &direct);
    batched = run_phase(argv[1], sink_port, true, requests, conns);
    print_phase("with batch (defaults)", &batched);
    printf("batch: %.3fx the requests and %.3fx the bytes sent without it (%.1f requests in per "
           "request out)\n",
           direct.requests_out ? (double)batched.requests_out / (double)direct.requests_out : 0,
           direct.bytes_out ? (double)batched.bytes_out / (double)direct.bytes_out : 0,
           batched.requests_out ? (double)batched.requests_in / (double)batched.requests_out : 0);
    for (size_t i = 0; i < n_files; i++) {
        free(files[i]);
    }
    return 0;
}
