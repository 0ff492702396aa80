/*
 * What downsample `window: 60s` does to a day of profiles: requests and bytes
 * out for the same requests in, the collector's CPU per profile, and the
 * store's disk use, beside the same pipeline without it, in the same run.
 *
 *   bench_downsample FLAMECOL_BIN [series=100] [hours=24] [connections=4]
 *
 * Two collectors, one after the other: `otlp` receiver (HTTP) -> [downsample
 * window: 60s] -> `store` (sync: none, retention 0) and `otlphttp`
 * (protobuf, compression none) to a sink in this program that counts the
 * requests and bytes it receives. The load: every 10 s of `hours` (synthetic
 * profile times, from a fixed midnight, pushed as fast as the collector
 * takes them), one profile per series (service_name svc-<i>, cpu, 10 s
 * long) of 24 samples drawn from 60 stacks by a fixed PRNG; a connection
 * owns series i % connections and sends its series' profiles of one 10 s
 * tick as one OTLP request, ticks in order. A phase ends when the collector
 * stopped (SIGTERM: the downsample windows still open are sent, the exporter
 * drained). Printed: requests and bytes in and out, collector CPU seconds
 * per 1000 profiles in, the store's data directory size, and the ratios.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/buf.h"
#include "core/timeutil.h"
#include "formats/otlp.h"

#include <dirent.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define DAY0 1700006400LL /* a midnight (UTC), unix s */
#define N_FUNCS 24
#define N_STACKS 60
#define SAMPLES 24

static int collector_port, n_series, n_conns;
static int64_t n_ticks;
static _Atomic int64_t failures, bytes_in, requests_in, profiles_in;
static _Atomic int64_t sink_requests, sink_bytes; /* counted by bench_start_http_sink */

/* ---- the load ------------------------------------------------------------------------------ */

static uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* The request of one tick for the series of connection conn: one cpu profile per series. */
static void build_request(int conn, int64_t tick, struct fc_buf *out)
{
    struct fc_batch *b = fc_batch_new(0);
    uint32_t locs[N_FUNCS], stacks[N_STACKS];
    struct fc_value_type vt;
    struct fc_error err = {0};
    uint64_t seed = 0x9e3779b97f4a7c15ULL;

    fc_batch_set_tenant(b, "anonymous");
    for (int f = 0; f < N_FUNCS; f++) {
        char name[32];
        struct fc_function fn = {0};
        struct fc_location l = {0};
        struct fc_line line = {0};
        snprintf(name, sizeof(name), "pkg.func%02d", f);
        fc_dict_cstring(b, name, &fn.name);
        fc_dict_function(b, &fn, &line.function);
        fc_dict_location(b, &l, &line, 1, &locs[f]);
    }
    for (int s = 0; s < N_STACKS; s++) { /* the same 60 stacks in every profile */
        uint32_t path[8];
        uint32_t depth = 2 + (uint32_t)(rng(&seed) % 7);
        for (uint32_t d = 0; d < depth; d++) {
            path[depth - 1 - d] = d == 0 ? locs[0] : locs[1 + rng(&seed) % (N_FUNCS - 1)];
        }
        fc_dict_stack(b, path, depth, &stacks[s]);
    }
    fc_dict_cstring(b, "cpu", &vt.type);
    fc_dict_cstring(b, "nanoseconds", &vt.unit);
    for (int i = conn; i < n_series; i += n_conns) {
        struct fc_profile *p = fc_batch_add_profile(b);
        char svc[32];
        uint64_t st = (uint64_t)(tick * 1000003 + i) * 2654435761ULL + 1;
        snprintf(svc, sizeof(svc), "svc-%d", i);
        fc_profile_set_label(b, p, "service_name", svc);
        fc_profile_set_label(b, p, "__name__", "process_cpu");
        fc_profile_set_sample_types(b, p, &vt, 1);
        p->period_type = vt;
        p->period = 10000000;
        p->time_ns = (DAY0 + tick * 10) * 1000000000LL;
        p->duration_ns = 10000000000LL;
        for (int k = 0; k < SAMPLES; k++) {
            struct fc_sample s = {.stack = stacks[rng(&st) % N_STACKS]};
            int64_t v = (int64_t)(1 + rng(&st) % 20) * 10000000;
            fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0);
        }
        atomic_fetch_add(&profiles_in, 1);
    }
    fc_buf_reset(out);
    if (fc_otlp_encode(b, out, &err) != FC_OK) {
        fprintf(stderr, "encode: %s\n", err.msg);
        exit(1);
    }
    fc_batch_unref(b);
}

static void *client(void *arg)
{
    int conn = (int)(intptr_t)arg;
    int fd = bench_connect(collector_port);
    struct fc_buf req;

    fc_buf_init(&req, 0);
    for (int64_t t = 0; t < n_ticks && fd >= 0; t++) {
        build_request(conn, t, &req);
        for (int attempt = 0;; attempt++) {
            int code = bench_http_post(fd, "/v1development/profiles", "application/x-protobuf",
                                       req.data, req.len);
            if (code == 200) {
                break;
            }
            atomic_fetch_add(&failures, 1);
            if (code < 0) {
                close(fd);
                fd = bench_connect(collector_port);
            }
            if (attempt > 100 || fd < 0) {
                fprintf(stderr, "client %d: tick %lld refused (%d)\n", conn, (long long)t, code);
                break;
            }
            fc_sleep_ns(10 * FC_NS_PER_MS);
        }
        atomic_fetch_add(&bytes_in, (int64_t)req.len);
        atomic_fetch_add(&requests_in, 1);
    }
    if (fd >= 0) {
        close(fd);
    }
    fc_buf_release(&req);
    return NULL;
}

/* Bytes the files of dir take on disk (allocated blocks). */
static int64_t dir_bytes(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int64_t total = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        char path[512];
        struct stat st;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            total += (int64_t)st.st_blocks * 512;
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    return total;
}

struct phase {
    int64_t requests_in, bytes_in, profiles_in, requests_out, bytes_out, failures, store_bytes;
    double wall, cpu;
};

static struct phase run_phase(const char *bin, int sink_port, bool window)
{
    int metrics_port = bench_free_port();
    char yaml[4096], data[128];
    pthread_t threads[64];
    struct phase ph;
    int64_t t0;
    pid_t pid;

    snprintf(data, sizeof(data), "/tmp/flamecol-bench-ds-%d-%d", (int)getpid(), window);
    collector_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%d\n"
             "%s"
             "exporters:\n  otlphttp:\n    endpoint: http://127.0.0.1:%d\n"
             "    compression: none\n"
             "  store:\n    path: %s\n    sync: none\n    retention: 0\n"
             "    query: {endpoint: 127.0.0.1:%d}\n"
             "service:\n  telemetry: {metrics: {endpoint: 127.0.0.1:%d}, logs: {level: warn}}\n"
             "  shutdown_timeout: 60s\n"
             "  pipelines:\n    profiles: {receivers: [otlp], processors: [%s], "
             "exporters: [store, otlphttp]}\n",
             collector_port, window ? "processors:\n  downsample:\n    window: 60s\n" : "",
             sink_port, data, bench_free_port(), metrics_port, window ? "downsample" : "");
    pid = bench_start_collector(bin, yaml, collector_port);
    atomic_store(&failures, 0);
    atomic_store(&bytes_in, 0);
    atomic_store(&requests_in, 0);
    atomic_store(&profiles_in, 0);
    atomic_store(&sink_requests, 0);
    atomic_store(&sink_bytes, 0);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < n_conns; i++) {
        pthread_create(&threads[i], NULL, client, (void *)(intptr_t)i);
    }
    for (int i = 0; i < n_conns; i++) {
        pthread_join(threads[i], NULL);
    }
    /* Until every closed window is sent and the exporter's queue is empty (at most 120 s). */
    for (int i = 0; i < 12000; i++) {
        double q = bench_metric(metrics_port, "flamecol_exporter_queue_size", "");
        double f = bench_metric(metrics_port, "flamecol_exporter_in_flight_requests", "");
        double open = window
                          ? bench_metric(metrics_port,
                                         "flamecol_processor_downsample_window_buffer_windows", "")
                          : 0;
        if (q == 0 && f == 0 && open <= n_series) {
            break;
        }
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
    ph.cpu = bench_cpu_of(pid); /* the last windows' sending at shutdown is left out */
    bench_stop_collector(pid);  /* the open windows are sent, the exporter drained */
    ph.wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    ph.requests_in = atomic_load(&requests_in);
    ph.bytes_in = atomic_load(&bytes_in);
    ph.profiles_in = atomic_load(&profiles_in);
    ph.requests_out = atomic_load(&sink_requests);
    ph.bytes_out = atomic_load(&sink_bytes);
    ph.failures = atomic_load(&failures);
    ph.store_bytes = dir_bytes(data);
    bench_remove_dir(data);
    return ph;
}

static void print_phase(const char *name, const struct phase *p)
{
    printf("%-22s in %6lld requests %9.1f KB %8lld profiles | out %6lld requests %9.1f KB | "
           "CPU %.3f s per 1000 profiles | store %8.1f KB | %.1f s | refused %lld\n",
           name, (long long)p->requests_in, (double)p->bytes_in / 1024, (long long)p->profiles_in,
           (long long)p->requests_out, (double)p->bytes_out / 1024,
           p->profiles_in ? p->cpu * 1000 / (double)p->profiles_in : 0,
           (double)p->store_bytes / 1024, p->wall, (long long)p->failures);
}

static double ratio(int64_t a, int64_t b)
{
    return b ? (double)a / (double)b : 0;
}

int main(int argc, char **argv)
{
    double hours = argc > 3 ? atof(argv[3]) : 24;
    struct phase direct, windowed;
    int sink_port;

    n_series = argc > 2 ? atoi(argv[2]) : 100;
    n_conns = argc > 4 ? atoi(argv[4]) : 4;
    n_ticks = (int64_t)(hours * 360);
    if (argc < 2 || n_series < 1 || n_ticks < 1 || n_conns < 1 || n_conns > 64) {
        fprintf(stderr, "usage: bench_downsample FLAMECOL_BIN [series] [hours] [connections]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    sink_port = bench_start_http_sink(&sink_requests, &sink_bytes);
    printf("load: %d series x %lld profiles (10 s apart, %g h), %d samples each, %d "
           "connections\n",
           n_series, (long long)n_ticks, hours, SAMPLES, n_conns);
    direct = run_phase(argv[1], sink_port, false);
    print_phase("without downsample", &direct);
    windowed = run_phase(argv[1], sink_port, true);
    print_phase("with window: 60s", &windowed);
    printf("window 60s: %.3fx the requests and %.3fx the bytes sent, %.3fx the store's disk, "
           "%.3fx the CPU per profile of the same pipeline without it\n",
           ratio(windowed.requests_out, direct.requests_out),
           ratio(windowed.bytes_out, direct.bytes_out),
           ratio(windowed.store_bytes, direct.store_bytes),
           direct.cpu > 0 ? (windowed.cpu / (double)windowed.profiles_in) /
                                (direct.cpu / (double)direct.profiles_in)
                          : 0);
    return 0;
}
