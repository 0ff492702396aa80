/*
 * pprof ingest throughput over HTTP, beside its floor measured in the same
 * run.
 *
 *   bench_ingest FLAMECOL_BIN CORPUS_DIR [seconds=10] [connections=8]
 *
 * Floor: in-process gunzip + protobuf decode into a batch of the same bytes
 * (the work no pipeline can avoid). Pipeline: the real flamecol binary,
 * `pprof` receiver -> `nop` exporter, driven by N keep-alive connections
 * posting the corpus round-robin as raw gzipped pprof (the Node.js SDK shape).
 * Printed: profiles/s, MB/s, collector CPU seconds per 1,000 profiles, peak
 * RSS, and the ratio of the collector's CPU per profile to the floor's.
 * Figures, not assertions: machines are shared and noisy.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/timeutil.h"
#include "formats/pprof.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static uint8_t *files[64];
static size_t lens[64];
static size_t n_files;
static int port;
static _Atomic int64_t requests_done;
static _Atomic int64_t bytes_sent;
static _Atomic int64_t failures;
static _Atomic int stop;

static void *client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    int fd = bench_connect(port);

    while (!atomic_load(&stop) && fd >= 0) {
        size_t k = i++ % n_files;
        if (bench_http_post(fd, "/ingest?name=bench&from=1700000000&until=1700000010",
                            "application/octet-stream", files[k], lens[k]) != 200) {
            atomic_fetch_add(&failures, 1);
            close(fd);
            fd = bench_connect(port);
            continue;
        }
        atomic_fetch_add(&requests_done, 1);
        atomic_fetch_add(&bytes_sent, (int64_t)lens[k]);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static double floor_run(double seconds, double *mb_s)
{
    int64_t t0 = fc_now_mono_ns();
    double c0 = bench_cpu_self();
    int64_t n = 0, bytes = 0;
    struct fc_pprof_limits lim = {.max_decompressed = 128 << 20};

    while (fc_now_mono_ns() - t0 < (int64_t)(seconds * 1e9)) {
        for (size_t i = 0; i < n_files; i++) {
            struct fc_batch *b = fc_batch_new(512u << 20);
            struct fc_error err = {0};
            if (fc_pprof_decode(b, files[i], lens[i], &lim, NULL, &err) != FC_OK) {
                fprintf(stderr, "floor: %s\n", err.msg);
                exit(1);
            }
            fc_batch_unref(b);
            n++;
            bytes += (int64_t)lens[i];
        }
    }
    *mb_s = (double)bytes / 1e6 / ((double)(fc_now_mono_ns() - t0) / 1e9);
    return (double)n / (bench_cpu_self() - c0);
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 10;
    int conns = argc > 4 ? atoi(argv[4]) : 8;
    char yaml[1024];
    double floor_rate, floor_mb;
    pid_t pid;
    double wall, cpu;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_ingest FLAMECOL_BIN CORPUS_DIR [seconds] [connections]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    n_files = bench_load_corpus(argv[2], files, lens, 64);
    if (n_files == 0) {
        fprintf(stderr, "no .pb.gz files in %s\n", argv[2]);
        return 2;
    }
    conns = conns < 1 ? 1 : conns > 64 ? 64 : conns;
    port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "exporters:\n  nop:\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], exporters: [nop]}\n",
             port);
    pid = bench_start_collector(argv[1], yaml, port);

    printf("corpus: %zu files; %d connections; %.0f s per phase\n", n_files, conns, seconds);
    floor_rate = floor_run(seconds, &floor_mb);
    printf("floor    (in-process gunzip + pprof decode, 1 thread): %8.0f profiles per CPU-second, "
           "%.1f MB/s\n",
           floor_rate, floor_mb);
    bench_run_clients(client, conns, 3, seconds, &stop, pid, &wall, &cpu);
    {
        double n = (double)atomic_load(&requests_done);
        double per_cpu = n / cpu;
        printf(
            "pipeline (HTTP /ingest -> pprof receiver -> nop):      %8.0f profiles/s, %.1f MB/s, "
            "%.0f profiles per CPU-second\n",
            n / wall, (double)atomic_load(&bytes_sent) / 1e6 / wall, per_cpu);
        printf("collector CPU: %.3f s per 1,000 profiles; peak RSS %.1f MB; failed requests %lld\n",
               cpu / n * 1000, (double)bench_peak_rss_kb(pid) / 1024,
               (long long)atomic_load(&failures));
        printf("ratio pipeline/floor (CPU per profile): %.2fx  (target: <= 2x)\n",
               floor_rate / per_cpu);
    }
    bench_stop_collector(pid);
    return 0;
}
