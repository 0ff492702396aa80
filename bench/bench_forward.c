/*
 * Forwarding cost: OTLP/gRPC in -> `otlp` exporter out to a sink, beside the
 * same load into a receive-only collector (`otlp` -> `nop`), measured in the
 * same run.
 *
 *   bench_forward FLAMECOL_BIN CORPUS_DIR [seconds=5] [mode=all|memory|persistent]
 *
 * Requests: each corpus pprof converted to an OTLP ExportProfilesServiceRequest
 * (about 11 KB on average). Each client thread has its own connection (a
 * gRPC channel with a local subchannel pool) and keeps one request in
 * flight. Processes: the sink (`otlp` -> `nop`), the receive-only baseline
 * (`otlp` -> `nop`) and the forwarder (`otlp` -> `otlp` exporter -> sink);
 * only the baseline's and the forwarder's CPU (utime + stime from /proc) is
 * counted. A forwarder phase ends when its queue is empty and nothing is in
 * flight, so the CPU of sending what it acknowledged is in its figure. Every
 * collector first gets WARMUP_S of the same load, not counted (connections
 * made, threads started, first-touch page faults): the figures are the
 * steady state, baseline and forwarders alike.
 *
 * Modes:
 *   memory      the baseline again with clients sending gzip (as the
 *               Collector's otlp exporter does by default), and at 8
 *               connections (its peak RSS, for scale); the forwarder
 *               with the in-memory queue (compression gzip, the default,
 *               then none) at 4 connections, the gzip forwarder with gzip
 *               clients (beside the gzip baseline: the request goes out as
 *               it came), then at 8 connections: peak RSS (VmHWM)
 *   persistent  the forwarder with sending_queue.storage in a temp dir:
 *               CPU per request and fsyncs per second
 *               (flamecol_exporter_persistent_queue_fsyncs_total)
 *   all         both (default)
 * The headline (memory mode): receive-only and the default forwarder (gzip,
 * 4 connections) measured alternately, ROUNDS times, each round's ratio
 * from two phases a few seconds apart: the machines are shared and their
 * speed drifts over a run, so the median of the rounds is printed beside the
 * single phases above it.
 * Targets (printed, not asserted): forwarding <= 1.5x the receive-only CPU
 * per request, >= 6,000 requests per forwarder CPU-second, peak RSS <= 30 MB.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/timeutil.h"
#include "formats/gzip.h"
#include "formats/otlp.h"
#include "formats/pprof.h"

#include <grpc/byte_buffer.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CLIENTS 16
#define WARMUP_S 1.0
#define ROUNDS 3 /* the headline pair, alternated: receive-only then forward, this many times */

struct collector {
    pid_t pid;
    int grpc_port;
    int metrics_port;
    double sent_before, failed_before; /* a forwarder's counters after its last phase */
};

struct phase_result {
    double wall, cpu;
    int64_t requests, failures;
};

static struct bench_otlp_request reqs[64];
static struct fc_buf reqs_gz[64]; /* the same requests gzipped (level 6, as Go's default) */
static size_t n_reqs;
static bool clients_gzip; /* clients send gzip-compressed messages */
static _Atomic int64_t done_requests, failures;
static _Atomic int stop;
static int target_port;

/* ---- the load: gRPC core's client API, one channel (connection) per thread ------------------ */

static grpc_channel *new_channel(int port, bool gzip)
{
    char target[64];
    grpc_arg arg[2] = {
        {.type = GRPC_ARG_INTEGER,
         .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
         .value.integer = 1},
        {.type = GRPC_ARG_INTEGER,
         .key = (char *)GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
         .value.integer = gzip ? GRPC_COMPRESS_GZIP : GRPC_COMPRESS_NONE},
    };
    grpc_channel_args args = {.num_args = 2, .args = arg};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_channel *ch;

    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    ch = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    return ch;
}

static void *client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    bool gz = clients_gzip;
    grpc_channel *ch = new_channel(target_port, gz);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);

    while (!atomic_load(&stop)) {
        size_t k = i++ % n_reqs;
        int status = gz ? bench_grpc_export(ch, cq, reqs_gz[k].data, reqs_gz[k].len, true)
                        : bench_grpc_export(ch, cq, reqs[k].data, reqs[k].len, false);
        if (status != GRPC_STATUS_OK) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        atomic_fetch_add(&done_requests, 1);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    grpc_channel_destroy(ch);
    return NULL;
}

/* ---- the collectors and their /metrics ----------------------------------------------------- */

static struct collector start(const char *bin, const char *pipeline_exporters,
                              const char *exporters_yaml)
{
    struct collector c = {.grpc_port = bench_free_port(), .metrics_port = bench_free_port()};
    char yaml[2048];

    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      grpc: {endpoint: 127.0.0.1:%d}\n"
             "exporters:\n%s"
             "service:\n  telemetry: {metrics: {endpoint: 127.0.0.1:%d}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [otlp], exporters: [%s]}\n",
             c.grpc_port, exporters_yaml, c.metrics_port, pipeline_exporters);
    c.pid = bench_start_collector(bin, yaml, c.grpc_port);
    /* The telemetry server may come up a moment after the gRPC port. */
    for (int i = 0; i < 500 && bench_metric(c.metrics_port,
                                            "flamecol_receiver_accepted_requests_total", "") < 0;
         i++) {
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
    return c;
}

static struct collector start_forwarder(const char *bin, int sink_port, const char *compression,
                                        const char *storage)
{
    char exporters[1024];

    snprintf(exporters, sizeof(exporters),
             "  otlp:\n    endpoint: 127.0.0.1:%d\n    tls: {insecure: true}\n"
             "    compression: %s\n    sending_queue: {queue_size: 1000%s%s}\n",
             sink_port, compression, storage ? ", storage: " : "", storage ? storage : "");
    return start(bin, "otlp", exporters);
}

/* Until the forwarder's queue is empty and nothing is in flight (at most 60 s). */
static void wait_drained(const struct collector *c)
{
    for (int i = 0; i < 6000; i++) {
        double q =
            bench_metric(c->metrics_port, "flamecol_exporter_queue_size", "exporter=\"otlp\"");
        double f = bench_metric(c->metrics_port, "flamecol_exporter_in_flight_requests",
                                "exporter=\"otlp\"");
        if (q == 0 && f == 0) {
            return;
        }
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
    fprintf(stderr, "forwarder did not drain in 60 s\n");
}

static struct phase_result phase(const struct collector *c, int clients, double seconds,
                                 bool forwarder)
{
    pthread_t threads[MAX_CLIENTS];
    struct phase_result res;
    double c0;
    int64_t t0;

    target_port = c->grpc_port;
    atomic_store(&stop, 0);
    atomic_store(&done_requests, 0);
    atomic_store(&failures, 0);
    c0 = bench_cpu_of(c->pid);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < clients; i++) {
        pthread_create(&threads[i], NULL, client, (void *)(uintptr_t)(i * 5));
    }
    fc_sleep_ns((int64_t)(seconds * 1e9));
    atomic_store(&stop, 1);
    for (int i = 0; i < clients; i++) {
        pthread_join(threads[i], NULL);
    }
    res.wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    if (forwarder) {
        wait_drained(c);
    }
    res.cpu = bench_cpu_of(c->pid) - c0;
    res.requests = atomic_load(&done_requests);
    res.failures = atomic_load(&failures);
    return res;
}

/* WARMUP_S of load at `clients` connections, not counted. */
static void warm_up(const struct collector *c, int clients, bool forwarder)
{
    (void)phase(c, clients, WARMUP_S, forwarder);
}

static double per_cpu(const struct phase_result *r)
{
    return r->cpu > 0 ? (double)r->requests / r->cpu : 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/*
 * ROUNDS of receive-only (base) then the forwarder (fwd), at 4 connections:
 * prints the median of each, and of the rounds' ratios.
 */
static void alternate(struct collector *base, struct collector *fwd, double seconds)
{
    double ratio[ROUNDS], base_cpu[ROUNDS], fwd_cpu[ROUNDS], lo, hi;
    struct phase_result r;

    for (int i = 0; i < ROUNDS; i++) {
        r = phase(base, 4, seconds, false);
        base_cpu[i] = per_cpu(&r);
        r = phase(fwd, 4, seconds, true);
        fwd_cpu[i] = per_cpu(&r);
        ratio[i] = fwd_cpu[i] > 0 ? base_cpu[i] / fwd_cpu[i] : 0;
    }
    fwd->sent_before = bench_metric(fwd->metrics_port, "flamecol_exporter_sent_requests_total",
                                    "exporter=\"otlp\"");
    fwd->failed_before =
        bench_metric(fwd->metrics_port, "flamecol_exporter_send_failed_profile_samples_total",
                     "exporter=\"otlp\"");
    lo = hi = ratio[0];
    for (int i = 1; i < ROUNDS; i++) {
        lo = ratio[i] < lo ? ratio[i] : lo;
        hi = ratio[i] > hi ? ratio[i] : hi;
    }
    printf("alternating %d rounds (median): receive-only %.0f, forward gzip %.0f req per CPU-s | "
           "CPU per request %.2fx the receive-only (rounds %.2f..%.2f)\n",
           ROUNDS, median(base_cpu, ROUNDS), median(fwd_cpu, ROUNDS), median(ratio, ROUNDS), lo,
           hi);
}

/* Prints a forwarder phase; sent and failed are counted since the previous call for c. */
static void print_forward(const char *name, const struct phase_result *r, struct collector *c,
                          double baseline)
{
    double sent =
        bench_metric(c->metrics_port, "flamecol_exporter_sent_requests_total", "exporter=\"otlp\"");
    double failed =
        bench_metric(c->metrics_port, "flamecol_exporter_send_failed_profile_samples_total",
                     "exporter=\"otlp\"");
    double sent0 = c->sent_before, failed0 = c->failed_before;

    c->sent_before = sent;
    c->failed_before = failed;
    printf("%-44s %7.0f req/s | %6.0f req per forwarder CPU-s | CPU per request %.2fx the "
           "receive-only | sent %.0f, send failed samples %.0f, refused %lld\n",
           name, (double)r->requests / r->wall, per_cpu(r), baseline / per_cpu(r), sent - sent0,
           failed - failed0, (long long)r->failures);
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    const char *mode = argc > 4 ? argv[4] : "all";
    bool memory = strcmp(mode, "all") == 0 || strcmp(mode, "memory") == 0;
    bool persistent = strcmp(mode, "all") == 0 || strcmp(mode, "persistent") == 0;
    struct collector sink, base;
    struct phase_result r;
    double baseline, baseline_gz = 0;
    size_t total = 0, total_gz = 0;
    char exporters[256];

    if (argc < 3 || (!memory && !persistent)) {
        fprintf(stderr, "usage: bench_forward FLAMECOL_BIN CORPUS_DIR [seconds] "
                        "[all|memory|persistent]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    n_reqs = bench_otlp_requests(argv[2], reqs, 64);
    for (size_t i = 0; i < n_reqs; i++) {
        struct fc_error err = {0};
        total += reqs[i].len;
        fc_buf_init(&reqs_gz[i], 0);
        if (fc_gzip(reqs[i].data, reqs[i].len, 6, &reqs_gz[i], &err) != FC_OK) {
            fprintf(stderr, "gzip: %s\n", err.msg);
            return 1;
        }
        total_gz += reqs_gz[i].len;
    }
    grpc_init();
    snprintf(exporters, sizeof(exporters), "  nop:\n");
    sink = start(argv[1], "nop", exporters);
    base = start(argv[1], "nop", exporters);
    printf("requests: %zu from the corpus, %.1f KB on average (%.1f KB gzipped); one connection "
           "per client, one request in flight each; %.0f s per phase\n",
           n_reqs, (double)total / (double)n_reqs / 1024, (double)total_gz / (double)n_reqs / 1024,
           seconds);

    warm_up(&base, 4, false);
    r = phase(&base, 4, seconds, false);
    baseline = per_cpu(&r);
    printf("%-44s %7.0f req/s | %6.0f req per collector CPU-s | refused %lld\n",
           "receive-only (otlp -> nop), 4", (double)r.requests / r.wall, baseline,
           (long long)r.failures);
    if (memory) {
        clients_gzip = true;
        r = phase(&base, 4, seconds, false);
        clients_gzip = false;
        baseline_gz = per_cpu(&r);
        printf("%-44s %7.0f req/s | %6.0f req per collector CPU-s | refused %lld\n",
               "receive-only, clients send gzip, 4", (double)r.requests / r.wall, baseline_gz,
               (long long)r.failures);
        r = phase(&base, 8, seconds, false);
        printf("%-44s %7.0f req/s | %6.0f req per collector CPU-s | refused %lld\n",
               "receive-only (otlp -> nop), 8", (double)r.requests / r.wall, per_cpu(&r),
               (long long)r.failures);
        printf("receive-only peak RSS (VmHWM, after 4 then 8 connections): %.1f MB\n",
               (double)bench_peak_rss_kb(base.pid) / 1024);
    }

    if (memory) {
        struct collector fwd = start_forwarder(argv[1], sink.grpc_port, "gzip", NULL);
        struct collector plain = start_forwarder(argv[1], sink.grpc_port, "none", NULL);

        warm_up(&fwd, 4, true);
        alternate(&base, &fwd, seconds);
        bench_stop_collector(base.pid);
        r = phase(&fwd, 4, seconds, true);
        print_forward("forward, memory queue, gzip, 4", &r, &fwd, baseline);
        warm_up(&plain, 4, true);
        plain.sent_before = bench_metric(
            plain.metrics_port, "flamecol_exporter_sent_requests_total", "exporter=\"otlp\"");
        r = phase(&plain, 4, seconds, true);
        print_forward("forward, memory queue, none, 4", &r, &plain, baseline);
        bench_stop_collector(plain.pid);
        clients_gzip = true;
        r = phase(&fwd, 4, seconds, true);
        clients_gzip = false;
        print_forward("forward, clients send gzip, gzip, 4", &r, &fwd, baseline_gz);
        r = phase(&fwd, 8, seconds, true);
        print_forward("forward, memory queue, gzip, 8", &r, &fwd, baseline);
        printf("forwarder peak RSS (VmHWM, after 4 then 8 connections): %.1f MB\n",
               (double)bench_peak_rss_kb(fwd.pid) / 1024);
        bench_stop_collector(fwd.pid);
    } else {
        bench_stop_collector(base.pid);
    }
    if (persistent) {
        char dir[] = "/tmp/flamecol-bench-queue-XXXXXX";
        struct collector pq;
        double fs0, fs1;

        if (mkdtemp(dir) == NULL) {
            perror("mkdtemp");
            return 1;
        }
        pq = start_forwarder(argv[1], sink.grpc_port, "gzip", dir);
        warm_up(&pq, 4, true);
        pq.sent_before = bench_metric(pq.metrics_port, "flamecol_exporter_sent_requests_total",
                                      "exporter=\"otlp\"");
        fs0 = bench_metric(pq.metrics_port, "flamecol_exporter_persistent_queue_fsyncs_total",
                           "exporter=\"otlp\"");
        r = phase(&pq, 4, seconds, true);
        fs1 = bench_metric(pq.metrics_port, "flamecol_exporter_persistent_queue_fsyncs_total",
                           "exporter=\"otlp\"");
        print_forward("forward, persistent queue, gzip, 4", &r, &pq, baseline);
        printf("persistent queue: %.0f fsyncs/s (%.1f requests per fsync); peak RSS %.1f MB\n",
               (fs1 - fs0) / r.wall, fs1 > fs0 ? (double)r.requests / (fs1 - fs0) : 0,
               (double)bench_peak_rss_kb(pq.pid) / 1024);
        bench_stop_collector(pq.pid);
        bench_remove_dir(dir);
    }
    printf("targets: forwarding <= 1.5x the receive-only CPU per request, >= 6,000 requests per "
           "forwarder CPU-second, peak RSS <= 30 MB at 8 connections\n");
    bench_stop_collector(sink.pid);
    grpc_shutdown();
    for (size_t i = 0; i < n_reqs; i++) {
        free(reqs[i].data);
        fc_buf_release(&reqs_gz[i]);
    }
    return 0;
}
