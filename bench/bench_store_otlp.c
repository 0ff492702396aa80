/*
 * Issue 14's ingest target in its own terms: the corpus mix as OTLP over
 * gRPC (every corpus pprof as one ExportProfilesServiceRequest, as
 * bench_otlp sends them) into `nop` and into the store (its defaults:
 * `sync: batch`), two collectors side by side whose phases alternate, so
 * that the ratio of their CPU per request is measured in the same run and
 * round by round. At 1 pod, then at `pods` pods of one service (the
 * requests' `pod` label, rewritten in place before each send).
 *
 *   bench_store_otlp FLAMECOL_BIN CORPUS_DIR [seconds=5] [pods=10000] [rounds=3] [times=now]
 *
 * Printed per phase: requests/s, requests and profiles (an OTLP profile is
 * one sample type) per collector CPU-second, acknowledgement p50/p99. Per
 * pod count: the store's CPU per request against nop's at 4 in flight (each
 * round's ratio and their median) and at 64, and the collectors' RssAnon.
 * Before the store's phases at `pods` pods, each pod is sent every request
 * once (its series made: printed, not in the ratios), so that the phases
 * measure writes into pods that exist.
 *
 * times=now (as the SDKs push): each request's profiles are stamped with the
 * clock as it is sent (the time field rewritten in place), so a pod's
 * requests open new 10 s windows as time passes and coarse windows close
 * during the run. times=kept: the corpus profiles keep their own times, so
 * each pod's writes land in the windows of its earlier ones and every flush
 * merges into stored windows (read, decode, merge, encode, compress): the
 * costlier case, which SDKs do not make.
 *
 * Figures, not assertions.
 */
#define _GNU_SOURCE /* memmem */
#include "bench/bench_util.h"
#include "core/timeutil.h"

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_REQS 64
#define POD_MARK "p000000" /* the pod label's value as encoded; its digits are rewritten */
#define TIME_MARK 0x0123456789abcdefLL /* each profile's time as encoded, when rewritten */
#define MAX_TIMES 16

static struct bench_otlp_request reqs[MAX_REQS];
static size_t pod_at[MAX_REQS];             /* offset of POD_MARK's digits in each request */
static size_t time_at[MAX_REQS][MAX_TIMES]; /* offsets of its profiles' time_unix_nano */
static size_t n_times[MAX_REQS];
static size_t n_reqs;
static double profiles_per_req;

static grpc_channel *channel; /* of the collector under load */
static _Atomic int stop;
static _Atomic int64_t next_req;
static int64_t limit; /* > 0: the first round, every request once into every pod */
static int pods;

struct client {
    int64_t *lat;
    size_t n, cap;
    int64_t failed;
    uint8_t *copy[MAX_REQS]; /* this thread's requests, their pod rewritten */
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void *client_run(void *arg)
{
    struct client *c = arg;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);

    while (!atomic_load(&stop)) {
        int64_t i = atomic_fetch_add(&next_req, 1), t0;
        size_t k = (size_t)(i % (int64_t)n_reqs);
        int64_t pod = limit > 0 ? i / (int64_t)n_reqs : i % pods;
        char digits[8];
        if (limit > 0 && i >= limit) {
            break;
        }
        snprintf(digits, sizeof(digits), "%06lld", (long long)pod);
        memcpy(c->copy[k] + pod_at[k], digits, 6);
        if (n_times[k] > 0) {
            uint64_t now = (uint64_t)fc_now_ns();
            uint8_t le[8];
            for (int b = 0; b < 8; b++) {
                le[b] = (uint8_t)(now >> (8 * b));
            }
            for (size_t t = 0; t < n_times[k]; t++) {
                memcpy(c->copy[k] + time_at[k][t], le, 8);
            }
        }
        t0 = fc_now_mono_ns();
        if (bench_grpc_export(channel, cq, c->copy[k], reqs[k].len, false) != GRPC_STATUS_OK) {
            c->failed++;
            continue;
        }
        bench_lat_push(&c->lat, &c->n, &c->cap, fc_now_mono_ns() - t0);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    return NULL;
}

struct collector {
    const char *name;
    pid_t pid;
    grpc_channel *channel;
};

struct result {
    double req_per_cpu;
    double p50_ms, p99_ms;
};

/* in_flight clients for `seconds` (or, with limit set, until it is reached). */
static struct result phase(const struct collector *col, int in_flight, double seconds)
{
    struct client clients[64];
    pthread_t threads[64];
    struct result r = {0};
    int64_t t0, n = 0, failed = 0, *all;
    double c0, cpu, wall;

    memset(clients, 0, sizeof(clients));
    for (int t = 0; t < in_flight; t++) {
        for (size_t k = 0; k < n_reqs; k++) {
            clients[t].copy[k] = malloc(reqs[k].len);
            memcpy(clients[t].copy[k], reqs[k].data, reqs[k].len);
        }
    }
    channel = col->channel;
    atomic_store(&stop, 0);
    atomic_store(&next_req, 0);
    c0 = bench_cpu_of(col->pid);
    t0 = fc_now_mono_ns();
    for (int t = 0; t < in_flight; t++) {
        pthread_create(&threads[t], NULL, client_run, &clients[t]);
    }
    if (limit == 0) {
        fc_sleep_ns((int64_t)(seconds * 1e9));
        atomic_store(&stop, 1);
    }
    for (int t = 0; t < in_flight; t++) {
        pthread_join(threads[t], NULL);
        n += (int64_t)clients[t].n;
        failed += clients[t].failed;
    }
    wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    cpu = bench_cpu_of(col->pid) - c0;
    all = malloc(((size_t)n + 1) * sizeof(int64_t));
    n = 0;
    for (int t = 0; t < in_flight; t++) {
        memcpy(all + n, clients[t].lat, clients[t].n * sizeof(int64_t));
        n += (int64_t)clients[t].n;
        free(clients[t].lat);
        for (size_t k = 0; k < n_reqs; k++) {
            free(clients[t].copy[k]);
        }
    }
    qsort(all, (size_t)n, sizeof(int64_t), cmp_i64);
    r.req_per_cpu = cpu > 0 ? (double)n / cpu : 0;
    r.p50_ms = n ? (double)all[n / 2] / 1e6 : 0;
    r.p99_ms = n ? (double)all[n * 99 / 100] / 1e6 : 0;
    printf("phase %-5s %5d pods %2d in flight: %6.0f requests/s, %6.0f requests and %6.0f "
           "profiles per collector CPU-second, ack p50 %.2f ms p99 %.2f ms (%lld requests, %lld "
           "failed)\n",
           col->name, pods, in_flight, (double)n / wall, r.req_per_cpu,
           r.req_per_cpu * profiles_per_req, r.p50_ms, r.p99_ms, (long long)n, (long long)failed);
    free(all);
    return r;
}

static double rss_anon_mb(pid_t pid)
{
    char path[64], line[256];
    FILE *f;
    double kb = -1;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "RssAnon:", 8) == 0) {
            kb = atof(line + 8);
        }
    }
    fclose(f);
    return kb / 1024;
}

static void start(struct collector *c, const char *bin, const char *name, const char *exporter)
{
    int port = bench_free_port();
    char yaml[2048], target[64];
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();

    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n"
             "      grpc: {endpoint: 127.0.0.1:%d, max_in_flight: 128}\n"
             "exporters:\n%s"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [otlp], exporters: [%s]}\n",
             port, exporter, name);
    c->name = name;
    c->pid = bench_start_collector(bin, yaml, port);
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    c->channel = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
}

static void stop_collector(struct collector *c)
{
    grpc_channel_destroy(c->channel);
    bench_stop_collector(c->pid);
}

static double median(double *x, int n)
{
    for (int i = 1; i < n; i++) {
        for (int j = i; j > 0 && x[j] < x[j - 1]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    }
    return n % 2 ? x[n / 2] : (x[n / 2 - 1] + x[n / 2]) / 2;
}

static void pod_count(struct collector *nop, struct collector *store, int n_pods, double seconds,
                      int rounds)
{
    double ratio[16], sorted[16], profiles[16];
    struct result a, b;

    pods = n_pods;
    if (n_pods > 1) {
        double c0 = bench_cpu_of(store->pid);
        int64_t t0 = fc_now_mono_ns();
        limit = (int64_t)n_pods * (int64_t)n_reqs;
        phase(store, 16, 0);
        limit = 0;
        printf("first round %d pods: every request once into each pod (its series new; not in "
               "the ratios): %lld requests in %.1f s, %.0f requests per CPU-second\n",
               n_pods, (long long)n_pods * (long long)n_reqs, (double)(fc_now_mono_ns() - t0) / 1e9,
               (double)n_pods * (double)n_reqs / (bench_cpu_of(store->pid) - c0));
    }
    for (int r = 0; r < rounds; r++) {
        a = phase(nop, 4, seconds);
        b = phase(store, 4, seconds);
        ratio[r] = b.req_per_cpu > 0 ? a.req_per_cpu / b.req_per_cpu : 0;
        profiles[r] = b.req_per_cpu * profiles_per_req;
    }
    memcpy(sorted, ratio, sizeof(ratio));
    printf("pods %d: 4 in flight: store/nop CPU per request median %.2fx (rounds", n_pods,
           median(sorted, rounds));
    for (int r = 0; r < rounds; r++) {
        printf(" %.2f", ratio[r]);
    }
    printf("); store %.0f profiles per CPU-second (median of rounds; target <= 2.5x and >= "
           "4,000)\n",
           median(profiles, rounds));
    a = phase(nop, 64, seconds);
    b = phase(store, 64, seconds);
    printf("pods %d: 64 in flight: store/nop CPU per request %.2fx; RssAnon nop %.1f MB, store "
           "%.1f MB\n",
           n_pods, b.req_per_cpu > 0 ? a.req_per_cpu / b.req_per_cpu : 0, rss_anon_mb(nop->pid),
           rss_anon_mb(store->pid));
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    int many = argc > 4 ? atoi(argv[4]) : 10000;
    int rounds = argc > 5 ? atoi(argv[5]) : 3;
    bool now = argc <= 6 || strcmp(argv[6], "kept") != 0;
    char dir[] = "/tmp/flamecol-bench-store-otlp-XXXXXX";
    char exporter[1024];
    struct collector nop, store;
    size_t total = 0;
    uint64_t n_profiles = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_store_otlp FLAMECOL_BIN CORPUS_DIR [seconds] [pods] "
                        "[rounds]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    rounds = rounds < 1 ? 1 : rounds > 16 ? 16 : rounds;
    many = many < 2 ? 2 : many > 999999 ? 999999 : many;
    n_reqs = bench_otlp_requests_of(argv[2], reqs, MAX_REQS, "bench-otlp", POD_MARK,
                                    now ? TIME_MARK : 0);
    for (size_t k = 0; k < n_reqs; k++) {
        /* fixed64 time_unix_nano = 3: tag 0x19, then 8 bytes little-endian */
        uint8_t mark[9] = {0x19};
        for (int b = 0; b < 8; b++) {
            mark[1 + b] = (uint8_t)((uint64_t)TIME_MARK >> (8 * b));
        }
        for (uint8_t *t = reqs[k].data; now && t != NULL;) {
            t = memmem(t, reqs[k].len - (size_t)(t - reqs[k].data), mark, sizeof(mark));
            if (t != NULL) {
                if (n_times[k] == MAX_TIMES) {
                    fprintf(stderr, "request %zu: more than %d profiles\n", k, MAX_TIMES);
                    return 1;
                }
                time_at[k][n_times[k]++] = (size_t)(t - reqs[k].data) + 1;
                t += sizeof(mark);
            }
        }
        if (now && n_times[k] != reqs[k].profiles) {
            fprintf(stderr, "request %zu: %zu time fields for %u profiles\n", k, n_times[k],
                    reqs[k].profiles);
            return 1;
        }
        uint8_t *at = memmem(reqs[k].data, reqs[k].len, POD_MARK, strlen(POD_MARK));
        if (at == NULL || memmem(at + 1, reqs[k].len - (size_t)(at + 1 - reqs[k].data), POD_MARK,
                                 strlen(POD_MARK)) != NULL) {
            fprintf(stderr, "request %zu: the pod label is not encoded exactly once\n", k);
            return 1;
        }
        pod_at[k] = (size_t)(at - reqs[k].data) + 1;
        total += reqs[k].len;
        n_profiles += reqs[k].profiles;
    }
    profiles_per_req = (double)n_profiles / (double)n_reqs;
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    grpc_init();
    start(&nop, argv[1], "nop", "  nop:\n");
    snprintf(exporter, sizeof(exporter),
             "  store:\n    path: %s\n    query: {endpoint: 127.0.0.1:%d}\n", dir,
             bench_free_port());
    start(&store, argv[1], "store", exporter);
    printf("requests: %zu from the corpus, %.1f KB and %.2f profiles on average; %.0f s per phase, "
           "%d rounds; times %s; store with its defaults (sync: batch)\n",
           n_reqs, (double)total / (double)n_reqs / 1024, profiles_per_req, seconds, rounds,
           now ? "now (each request stamped as sent)" : "kept (the corpus profiles' own)");
    pod_count(&nop, &store, 1, seconds, rounds);
    pod_count(&nop, &store, many, seconds, rounds);
    printf("collector peak RSS (VmHWM): nop %.1f MB, store %.1f MB\n",
           (double)bench_peak_rss_kb(nop.pid) / 1024, (double)bench_peak_rss_kb(store.pid) / 1024);
    stop_collector(&nop);
    stop_collector(&store);
    grpc_shutdown();
    bench_remove_dir(dir);
    for (size_t k = 0; k < n_reqs; k++) {
        free(reqs[k].data);
    }
    return 0;
}
