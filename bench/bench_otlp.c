/*
 * OTLP ingest throughput over gRPC and HTTP, beside the in-process
 * decode-only floor measured in the same run.
 *
 *   bench_otlp FLAMECOL_BIN CORPUS_DIR [seconds=10] [in_flight=4]
 *
 * Requests: each corpus pprof converted to an OTLP ExportProfilesServiceRequest.
 * The collector runs `otlp` (grpc + http) -> `nop`; N clients keep one
 * request in flight each. Printed per transport: requests/s, profiles/s,
 * samples/s, MB/s, requests per CPU-second of the collector, and peak RSS;
 * and the ratio of the floor's requests per CPU-second to the collector's.
 * Figures, not assertions.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/timeutil.h"
#include "formats/otlp.h"
#include "formats/pprof.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct bench_otlp_request reqs[64];
static size_t n_reqs;
static int http_port, grpc_port;
static _Atomic int64_t done_requests, done_bytes, done_profiles, done_samples, failures;
static _Atomic int stop;
static grpc_channel *channel;

static void count(const struct bench_otlp_request *r)
{
    atomic_fetch_add(&done_requests, 1);
    atomic_fetch_add(&done_bytes, (int64_t)r->len);
    atomic_fetch_add(&done_profiles, r->profiles);
    atomic_fetch_add(&done_samples, (int64_t)r->samples);
}

static void *http_client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    int fd = bench_connect(http_port);

    while (!atomic_load(&stop) && fd >= 0) {
        const struct bench_otlp_request *r = &reqs[i++ % n_reqs];
        if (bench_http_post(fd, "/v1development/profiles", "application/x-protobuf", r->data,
                            r->len) != 200) {
            atomic_fetch_add(&failures, 1);
            close(fd);
            fd = bench_connect(http_port);
            continue;
        }
        count(r);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static void *grpc_client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);

    while (!atomic_load(&stop)) {
        const struct bench_otlp_request *r = &reqs[i++ % n_reqs];
        if (bench_grpc_export(channel, cq, r->data, r->len, false) != GRPC_STATUS_OK) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        count(r);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    return NULL;
}

static double floor_run(double seconds)
{
    int64_t t0 = fc_now_mono_ns();
    double c0 = bench_cpu_self();
    int64_t n = 0;

    while (fc_now_mono_ns() - t0 < (int64_t)(seconds * 1e9)) {
        for (size_t i = 0; i < n_reqs; i++) {
            struct fc_batch *b = fc_batch_new(256u << 20);
            struct fc_otlp_result res;
            struct fc_error err = {0};
            if (fc_otlp_decode(b, reqs[i].data, reqs[i].len, &res, &err) != FC_OK) {
                fprintf(stderr, "floor: %s\n", err.msg);
                exit(1);
            }
            fc_batch_unref(b);
            n++;
        }
    }
    return (double)n / (bench_cpu_self() - c0);
}

static void phase(const char *name, void *(*fn)(void *), int n, double seconds, pid_t pid,
                  double floor)
{
    double cpu, wall;

    atomic_store(&done_requests, 0);
    atomic_store(&done_bytes, 0);
    atomic_store(&done_profiles, 0);
    atomic_store(&done_samples, 0);
    atomic_store(&failures, 0);
    bench_run_clients(fn, n, 5, seconds, &stop, pid, &wall, &cpu);
    printf("%-5s %7.0f req/s %8.0f profiles/s %9.0f samples/s %6.1f MB/s | %6.0f req per "
           "collector CPU-s (floor/collector %.2fx) | failed %lld\n",
           name, (double)done_requests / wall, (double)done_profiles / wall,
           (double)done_samples / wall, (double)done_bytes / 1e6 / wall,
           (double)done_requests / cpu, floor / ((double)done_requests / cpu),
           (long long)atomic_load(&failures));
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 10;
    int in_flight = argc > 4 ? atoi(argv[4]) : 4;
    char yaml[1024], target[64];
    size_t total = 0;
    double floor;
    pid_t pid;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_otlp FLAMECOL_BIN CORPUS_DIR [seconds] [in_flight]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    in_flight = in_flight < 1 ? 1 : in_flight > 64 ? 64 : in_flight;
    n_reqs = bench_otlp_requests(argv[2], reqs, 64);
    for (size_t i = 0; i < n_reqs; i++) {
        total += reqs[i].len;
    }
    http_port = bench_free_port();
    grpc_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n"
             "      grpc: {endpoint: 127.0.0.1:%d}\n      http: {endpoint: 127.0.0.1:%d}\n"
             "exporters:\n  nop:\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [otlp], exporters: [nop]}\n",
             grpc_port, http_port);
    pid = bench_start_collector(argv[1], yaml, http_port);
    grpc_init();
    snprintf(target, sizeof(target), "127.0.0.1:%d", grpc_port);
    {
        grpc_channel_credentials *creds = grpc_insecure_credentials_create();
        channel = grpc_channel_create(target, creds, NULL);
        grpc_channel_credentials_release(creds);
    }
    printf("requests: %zu from the corpus, %.1f KB on average; %d in flight; %.0f s per phase\n",
           n_reqs, (double)total / (double)n_reqs / 1024, in_flight, seconds);
    floor = floor_run(seconds);
    printf("floor (in-process OTLP protobuf decode, 1 thread): %.0f requests per CPU-second\n",
           floor);
    phase("grpc", grpc_client, in_flight, seconds, pid, floor);
    phase("http", http_client, in_flight, seconds, pid, floor);
    printf(
        "collector peak RSS: %.1f MB  (targets: >= 6,000 req per collector CPU-s, RSS < 30 MB)\n",
        (double)bench_peak_rss_kb(pid) / 1024);
    grpc_channel_destroy(channel);
    grpc_shutdown();
    bench_stop_collector(pid);
    return 0;
}
