/*
 * The store: one day of 10 s profiles for several series, then flame graphs
 * of one series over 1 h, 24 h and 7 d, beside two baselines measured in the
 * same run: merging every 10 s window of the range (the store without its
 * segment tree), and decoding and merging every raw profile of the range.
 * Also bytes on disk per profile next to the raw .pb.gz bytes, and ingest
 * throughput with sync: batch (one commit per group of 16 profiles), the
 * bytes once the 10 s windows are bundled (bundle_after; the queries read
 * them bundled), and
 * the bytes per profile once the 10 s windows are compacted (fine_retention)
 * with the steady state that gives under the default retention. What the
 * line-level detail costs: the 24 h flame graph by line (granularity=lines),
 * the nodes of the full-detail tree beside the flame graph's, and building
 * the merged pprof from it.
 *
 *   bench_store CORPUS_DIR [series=4] [hours=24] [many=10000] [seconds=3]
 *
 * Then the store at scale (issue 14), for 1, 100 and `many` series of one
 * service (distinct pod labels), each fed the same 10,000 profiles spread
 * over 24 h: library ingest per CPU-second, disk per profile against the
 * raw .pb.gz (all 10 s windows kept, then compacted), one-series and
 * whole-service flame graphs over 1 h and 24 h, label names and values,
 * and this process's RssAnon. Then the same pods (but the one) at the rate
 * the SDKs push, one profile a pod every 10 s for 200 s: ingest per
 * CPU-second and disk per profile kept, bundled and compacted. Last, when the flamecol binary sits
 * beside this one (or FLAMECOL_BIN names it), the real collector: HTTP /ingest into `nop` and into
 * the store (sync: batch, on the pre-filled store of 1 and of `many` series) with 4 and 64 requests
 * in flight, `seconds` per phase: profiles per collector CPU-second for both in the same run, their
 * ratio, acknowledgement latency p50/p99, and the collector's RssAnon.
 * `many` = 100 makes a quick run.
 *
 * Figures, not assertions.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/timeutil.h"
#include "exporters/store/store.h"
#include "formats/pprof.h"
#include "formats/pyroscope.h"
#include "storage/store.h"

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEP_S 10
#define BASE_S 1700000000LL
#define SCALE_PROFILES 10000
#define SCALE_SERVICE "bench-scale"

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static struct fc_batch *profile(const uint8_t *data, size_t len, int series, int64_t t_s)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};
    char svc[32];

    if (fc_pprof_decode(b, data, len, NULL, &p, &err) != FC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    snprintf(svc, sizeof(svc), "bench-%d", series);
    fc_profile_set_label(b, p, "service_name", svc);
    fc_profile_set_label(b, p, "__name__", "process_cpu");
    p->time_ns = t_s * 1000000000LL;
    return b;
}

/* RssAnon of a process ("self" or a pid) in kB, from /proc; -1 when unknown. */
static long rss_anon_kb(const char *pid)
{
    char path[64], line[256];
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%s/status", pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "RssAnon: %ld", &kb) == 1) {
            break;
        }
    }
    fclose(f);
    return kb;
}

static long peak_self_anon_kb;

static void sample_self_anon(void)
{
    long kb = rss_anon_kb("self");
    if (kb > peak_self_anon_kb) {
        peak_self_anon_kb = kb;
    }
}

/* One profile of the scale runs: service SCALE_SERVICE, pod p<pod>. */
static struct fc_batch *scale_profile(const uint8_t *data, size_t len, int pod, int64_t t_s)
{
    struct fc_batch *b = profile(data, len, 0, t_s);
    char v[32];

    snprintf(v, sizeof(v), "p%d", pod);
    fc_profile_set_label(b, &b->profiles[0], "service_name", SCALE_SERVICE);
    fc_profile_set_label(b, &b->profiles[0], "pod", v);
    return b;
}

/* p50 and p99 (ms) of a timed query, repeated up to `runs` times or about 3 s. */
struct timing {
    double p50_ms, p99_ms;
    int runs;
    int64_t total;
    uint32_t series, windows;
};

/*
 * p50/p99 of a query over [from_s, until_s): the flame graph, or with
 * series_step_s > 0 SelectSeries (not grouped) in steps of that many seconds.
 */
static struct timing time_query(struct fc_store *store, const char *query, int64_t from_s,
                                int64_t until_s, int runs, int64_t series_step_s)
{
    int64_t ns[64], spent = 0;
    struct timing t = {0};
    struct fc_selector sel;
    struct fc_error err = {0};

    if (fc_selector_parse(query, &sel, &err) != FC_OK) {
        fprintf(stderr, "selector %s: %s\n", query, err.msg);
        exit(1);
    }
    for (t.runs = 0; t.runs < runs && t.runs < 64 && (t.runs < 3 || spent < 3000000000LL);
         t.runs++) {
        struct fc_store_query q = {"anonymous", &sel, from_s * 1000000000LL, until_s * 1000000000LL,
                                   false};
        struct fc_store_result res;
        struct fc_store_stats st;
        int64_t t0 = fc_now_mono_ns();
        if (series_step_s > 0) {
            struct fc_store_timeseries *ts;
            size_t n_ts, n_buckets = (size_t)((until_s - from_s) / series_step_s);
            if (fc_store_select_series(store, &q, series_step_s * 1000000000LL, n_buckets, NULL, 0,
                                       &ts, &n_ts, &err) != FC_OK) {
                fprintf(stderr, "series: %s\n", err.msg);
                exit(1);
            }
            ns[t.runs] = fc_now_mono_ns() - t0;
            t.total = 0;
            for (size_t i = 0; i < n_ts; i++) {
                for (size_t b = 0; b < n_buckets; b++) {
                    t.total += ts[i].buckets[b];
                }
            }
            fc_store_timeseries_free(ts, n_ts);
        } else {
            if (fc_store_select_merge(store, &q, &res, &st, &err) != FC_OK) {
                fprintf(stderr, "query: %s\n", err.msg);
                exit(1);
            }
            ns[t.runs] = fc_now_mono_ns() - t0;
            t.total = fc_tree_total(&res.tree);
            t.series = st.series;
            t.windows = st.nodes_merged;
            fc_store_result_release(&res);
        }
        spent += ns[t.runs];
        sample_self_anon();
    }
    qsort(ns, (size_t)t.runs, sizeof(int64_t), cmp_i64);
    t.p50_ms = (double)ns[t.runs / 2] / 1e6;
    t.p99_ms = (double)ns[(t.runs * 99) / 100] / 1e6;
    fc_selector_release(&sel);
    return t;
}

/* A new store (sync: batch) in dir, a mkdtemp template. */
static struct fc_store *new_store(char *dir)
{
    struct fc_store_options o = {0};
    struct fc_store *store;
    struct fc_error err = {0};

    if (mkdtemp(dir) == NULL) {
        exit(1);
    }
    o.path = dir;
    o.sync = FC_SYNC_BATCH;
    if (fc_store_open(&o, &store, &err) != FC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return store;
}

/* Writes a group of profiles in one call, then drops them. */
static void write_group(struct fc_store *store, struct fc_batch **group, size_t n)
{
    struct fc_error err = {0};

    if (fc_store_write(store, group, n, &err) != FC_OK) {
        fprintf(stderr, "write: %s\n", err.msg);
        exit(1);
    }
    for (size_t g = 0; g < n; g++) {
        fc_batch_unref(group[g]);
    }
}

/* Bundles (bundle_after) every span before cutoff_s; returns how many windows. */
static uint64_t bundle_all(struct fc_store *store, int64_t cutoff_s)
{
    struct fc_error err = {0};
    uint64_t bundled = 0;

    if (fc_store_bundle_before(store, cutoff_s, 0, &bundled, &err) != FC_OK) {
        fprintf(stderr, "bundle: %s\n", err.msg);
        exit(1);
    }
    return bundled;
}

/* Compacts (fine_retention) every 10 s window before cutoff_s; returns how many. */
static uint64_t compact_all(struct fc_store *store, int64_t cutoff_s)
{
    struct fc_error err = {0};
    uint64_t deleted = 0;

    if (fc_store_compact_before(store, cutoff_s, 0, &deleted, &err) != FC_OK) {
        fprintf(stderr, "compact: %s\n", err.msg);
        exit(1);
    }
    return deleted;
}

/*
 * SCALE_PROFILES profiles over 24 h into a new store, spread over n_series
 * pods of one service, then its figures. Returns the store's directory
 * (closed, kept for the collector runs; the caller removes it).
 */
static char *scale_run(int n_series, uint8_t *const *cpu, const size_t *cpu_len)
{
    char *dir = strdup("/tmp/flamecol-bench-scale-XXXXXX");
    struct fc_store *store = new_store(dir);
    struct fc_error err = {0};
    int64_t raw_bytes = 0, t0, wall_ns, disk, used_loose, used_full, used_coarse;
    double cpu0, cpu_s;
    int last_pod = (SCALE_PROFILES - 1) % n_series;
    char one[256], all[256];

    t0 = fc_now_mono_ns();
    cpu0 = bench_cpu_self();
    for (int i = 0; i < SCALE_PROFILES; i += 16) {
        struct fc_batch *group[16];
        size_t n = 0;
        for (int j = i; j < i + 16 && j < SCALE_PROFILES; j++) {
            int k = j % 3;
            group[n++] = scale_profile(cpu[k], cpu_len[k], j % n_series,
                                       BASE_S + (int64_t)j * 86400 / SCALE_PROFILES);
            raw_bytes += (int64_t)cpu_len[k];
        }
        write_group(store, group, n);
        if (i % 1024 == 0) {
            sample_self_anon();
        }
    }
    /* The coarse windows that end with the day built (counted in the ingest), as in main. */
    if (fc_store_flush_before(store, BASE_S + 86400, &err) != FC_OK) {
        fprintf(stderr, "flush: %s\n", err.msg);
        exit(1);
    }
    wall_ns = fc_now_mono_ns() - t0;
    cpu_s = bench_cpu_self() - cpu0;
    disk = fc_store_disk_bytes(store);
    used_loose = fc_store_used_bytes(store);
    bundle_all(store, BASE_S + 86400 + 100); /* as the retention pass does with bundle_after */
    used_full = fc_store_used_bytes(store);
    printf("scale %d pods: ingest %d profiles (library, sync batch, groups of 16): %.0f "
           "profiles/s, %.0f profiles per CPU-second (%.1f CPU-ms each)\n",
           n_series, SCALE_PROFILES, (double)SCALE_PROFILES / ((double)wall_ns / 1e9),
           (double)SCALE_PROFILES / cpu_s, 1000.0 * cpu_s / SCALE_PROFILES);
    snprintf(one, sizeof(one),
             "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"" SCALE_SERVICE
             "\",pod=\"p%d\"}",
             last_pod);
    snprintf(all, sizeof(all),
             "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"" SCALE_SERVICE "\"}");
    {
        static const struct {
            const char *name;
            int64_t secs;
        } ranges[] = {{"1h", 3600}, {"24h", 86400}};
        for (size_t r = 0; r < 2; r++) {
            int64_t until = BASE_S + 86400, from = until - ranges[r].secs;
            struct timing a = time_query(store, one, from, until, 31, 0);
            struct timing b = time_query(store, all, from, until, 31, 0);
            printf("scale %d pods: %-3s one series p50 %.2f ms p99 %.2f ms (%u windows) | whole "
                   "service p50 %.2f ms p99 %.2f ms (%u series, %u windows, %d runs)\n",
                   n_series, ranges[r].name, a.p50_ms, a.p99_ms, a.windows, b.p50_ms, b.p99_ms,
                   b.series, b.windows, b.runs);
        }
    }
    {
        /*
         * SelectSeries of the whole service over 24 h in 60 s steps (a
         * Grafana timeline), beside the same series selected by a regex,
         * which goes series by series, in the same run.
         */
        char rx[256];
        int64_t until = BASE_S + 86400, from = until - 86400;
        struct timing a, b;
        snprintf(rx, sizeof(rx),
                 "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=~\"" SCALE_SERVICE
                 "\"}");
        a = time_query(store, all, from, until, 31, 60);
        b = time_query(store, rx, from, until, 5, 60);
        printf("scale %d pods: SelectSeries whole service 24h step 60s p50 %.2f ms p99 %.2f ms | "
               "series by series (service_name=~) p50 %.2f ms (%.1fx) | totals %s\n",
               n_series, a.p50_ms, a.p99_ms, b.p50_ms, b.p50_ms / a.p50_ms,
               a.total == b.total ? "equal" : "DIFFER");
    }
    {
        int64_t names_ns[11], values_ns[11];
        size_t n_names = 0, n_values = 0;
        for (int run = 0; run < 11; run++) {
            char **v;
            size_t n;
            t0 = fc_now_mono_ns();
            fc_store_label_names(store, "anonymous", &v, &n, &err);
            names_ns[run] = fc_now_mono_ns() - t0;
            fc_store_strings_free(v, n);
            n_names = n;
            t0 = fc_now_mono_ns();
            fc_store_label_values(store, "anonymous", "pod", &v, &n, &err);
            values_ns[run] = fc_now_mono_ns() - t0;
            fc_store_strings_free(v, n);
            n_values = n;
        }
        qsort(names_ns, 11, sizeof(int64_t), cmp_i64);
        qsort(values_ns, 11, sizeof(int64_t), cmp_i64);
        printf("scale %d pods: label names p50 %.3f ms (%zu) | label values of pod p50 %.3f ms "
               "(%zu)\n",
               n_series, (double)names_ns[5] / 1e6, n_names, (double)values_ns[5] / 1e6, n_values);
    }
    compact_all(store, BASE_S + 86400 + 100);
    used_coarse = fc_store_used_bytes(store);
    sample_self_anon();
    printf("scale %d pods: disk %.0f bytes/profile (file), pages in use %.0f -> %.0f bundled -> "
           "%.0f bytes/profile compacted; raw .pb.gz %.0f: %.1f%% -> %.1f%% -> %.1f%% of raw "
           "(targets <= 15%% and <= 8%%); bench RssAnon peak so far %.1f MB\n",
           n_series, (double)disk / SCALE_PROFILES, (double)used_loose / SCALE_PROFILES,
           (double)used_full / SCALE_PROFILES, (double)used_coarse / SCALE_PROFILES,
           (double)raw_bytes / SCALE_PROFILES, 100.0 * (double)used_loose / (double)raw_bytes,
           100.0 * (double)used_full / (double)raw_bytes,
           100.0 * (double)used_coarse / (double)raw_bytes, (double)peak_self_anon_kb / 1024);
    fc_store_close(store);
    return dir;
}

/*
 * The pods at the rate the SDKs push: every pod sends one profile every 10 s
 * for SDK_ROUNDS rounds (the pods spread over each 10 s), so each pod's 100 s
 * windows hold ten profiles and its index is shared by all of them, where
 * scale_run gives a pod of the 10,000 one profile a day. Ingest per
 * CPU-second and pages in use per profile, kept, bundled and compacted.
 */
#define SDK_ROUNDS 20

/*
 * FC_BENCH_PERTURB=1: each sample's values scaled by a random factor from
 * 0.5 to 2 and a fifth of the samples dropped (values 0, which the store
 * skips), so that profiles are not repeated exactly (which flatters
 * compression across windows and pods). rand() unseeded: the same each run.
 */
static void perturb_profile(struct fc_profile *p)
{
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        bool drop = rand() % 5 == 0;
        double factor = 0.5 + (double)(rand() % 1000) / 666.0;
        for (uint32_t v = 0; v < s->n_values; v++) {
            int64_t *value = &p->nums[s->values_off + v];
            *value = drop ? 0 : (int64_t)((double)*value * factor) + 1;
        }
    }
}

static void sdk_rate_run(int n_pods, uint8_t *const *cpu, const size_t *cpu_len)
{
    char dir[] = "/tmp/flamecol-bench-rate-XXXXXX";
    struct fc_store *store = new_store(dir);
    struct fc_error err = {0};
    int64_t n_profiles = (int64_t)n_pods * SDK_ROUNDS, raw_bytes = 0, written = 0;
    int64_t used_loose, used_full, used_coarse, end_s = BASE_S + SDK_ROUNDS * STEP_S;
    double cpu0, cpu_s;
    bool perturb = getenv("FC_BENCH_PERTURB") != NULL;

    cpu0 = bench_cpu_self();
    while (written < n_profiles) {
        struct fc_batch *group[16];
        size_t n = 0;
        for (; n < 16 && written < n_profiles; written++) {
            int64_t round = written / n_pods;
            int pod = (int)(written % n_pods);
            int k = (int)((round + pod) % 3);
            group[n++] = scale_profile(cpu[k], cpu_len[k], pod,
                                       BASE_S + round * STEP_S + (int64_t)pod * STEP_S / n_pods);
            if (perturb) {
                perturb_profile(&group[n - 1]->profiles[0]);
            }
            raw_bytes += (int64_t)cpu_len[k];
        }
        write_group(store, group, n);
        if (written % 1024 < 16) {
            sample_self_anon();
        }
    }
    /*
     * Time goes on, as the rest of a cluster keeps pushing: the pods' coarse
     * windows that end with the rounds close over the next minutes, as the
     * newest profile passes their grace (a minute, and up to 50 s more at
     * 100 s by pod: storage/store_int.h), a few at a flush.
     */
    for (int64_t t = end_s; t <= end_s + 120; t += 2) {
        struct fc_batch *tick = scale_profile(cpu[0], cpu_len[0], -1, t);
        tick->profiles[0].n_samples = 1; /* a pod "p-1" of one sample: a few bytes */
        write_group(store, &tick, 1);
        if (fc_store_flush(store, &err) != FC_OK) {
            fprintf(stderr, "flush: %s\n", err.msg);
            exit(1);
        }
        if (t % 16 == 0) {
            sample_self_anon();
        }
    }
    cpu_s = bench_cpu_self() - cpu0;
    used_loose = fc_store_used_bytes(store);
    bundle_all(store, end_s + 100);
    used_full = fc_store_used_bytes(store);
    compact_all(store, end_s + 100);
    used_coarse = fc_store_used_bytes(store);
    sample_self_anon();
    printf("rate %d pods: %d rounds of one profile a pod every 10 s (%lld profiles%s): %.0f "
           "profiles per CPU-second; pages in use %.0f -> %.0f bundled -> %.0f bytes/profile "
           "compacted; raw .pb.gz %.0f: %.1f%% -> %.1f%% -> %.1f%% of raw; bench RssAnon peak so "
           "far %.1f MB\n",
           n_pods, SDK_ROUNDS, (long long)n_profiles, perturb ? ", perturbed" : "",
           (double)n_profiles / cpu_s, (double)used_loose / (double)n_profiles,
           (double)used_full / (double)n_profiles, (double)used_coarse / (double)n_profiles,
           (double)raw_bytes / (double)n_profiles, 100.0 * (double)used_loose / (double)raw_bytes,
           100.0 * (double)used_full / (double)raw_bytes,
           100.0 * (double)used_coarse / (double)raw_bytes, (double)peak_self_anon_kb / 1024);
    fc_store_close(store);
    bench_remove_dir(dir);
}

/*
 * The store at the SDKs' rate as the collector runs it: STEADY_PODS pods
 * each push one profile every 10 s (spread over the 10 s) for STEADY_S
 * seconds of data time, with a flush every 2 s of data time, as the
 * exporter's writer does every 2 s of the clock (the library's own timed
 * flush goes by the clock, which this run outpaces about a hundredfold).
 * Run twice into new stores: as the store flushes (a coarse window rebuilt
 * once it is closed), and, the same-run baseline, with every dirty window
 * rebuilt at every flush (fc_store_flush_before(INT64_MAX): what a flush
 * did before 2026-11-25). Profiles per CPU-second, and the flushes' share
 * of that CPU.
 */
#define STEADY_PODS 20
#define STEADY_S 7200

static double steady_run(bool rebuild_all, uint8_t *const *cpu, const size_t *cpu_len,
                         double *flush_share)
{
    char dir[] = "/tmp/flamecol-bench-steady-XXXXXX";
    struct fc_store *store = new_store(dir);
    struct fc_error err = {0};
    double cpu0 = bench_cpu_self(), flush_cpu = 0, cpu_s;
    int64_t n = 0;

    for (int64_t t = 0; t < STEADY_S; t += 2) {
        struct fc_batch *group[16];
        size_t g = 0;
        double f0;
        for (int pod = 0; pod < STEADY_PODS; pod++) {
            /* A pod's slot in the 10 s round: it pushes in the 2 s that hold it. */
            if ((t - (int64_t)pod * STEP_S / STEADY_PODS % STEP_S + STEP_S) % STEP_S >= 2) {
                continue;
            }
            int k = (int)((t / STEP_S + pod) % 3);
            group[g++] = scale_profile(cpu[k], cpu_len[k], pod, BASE_S + t);
            n++;
            if (g == 16) {
                write_group(store, group, g);
                g = 0;
            }
        }
        if (g > 0) {
            write_group(store, group, g);
        }
        f0 = bench_cpu_self();
        if ((rebuild_all ? fc_store_flush_before(store, INT64_MAX, &err)
                         : fc_store_flush(store, &err)) != FC_OK) {
            fprintf(stderr, "flush: %s\n", err.msg);
            exit(1);
        }
        flush_cpu += bench_cpu_self() - f0;
    }
    cpu_s = bench_cpu_self() - cpu0;
    sample_self_anon();
    fc_store_close(store);
    bench_remove_dir(dir);
    *flush_share = cpu_s > 0 ? flush_cpu / cpu_s : 0;
    return cpu_s > 0 ? (double)n / cpu_s : 0;
}

static void steady_section(uint8_t *const *cpu, const size_t *cpu_len)
{
    double share_now, share_all;
    double now = steady_run(false, cpu, cpu_len, &share_now);
    double all = steady_run(true, cpu, cpu_len, &share_all);

    printf("steady %d pods: one profile a pod every 10 s for %d s of data time (%d profiles), a "
           "flush every 2 s of it: %.0f profiles per CPU-second (flushes %.0f%% of the CPU); "
           "every dirty window rebuilt at every flush (before 2026-11-25, same run): %.0f "
           "(flushes %.0f%%): %.1fx\n",
           STEADY_PODS, STEADY_S, STEADY_PODS * STEADY_S / STEP_S, now, 100 * share_now, all,
           100 * share_all, all > 0 ? now / all : 0.0);
}

/* ---- the collector: HTTP /ingest into nop and into the store ---------------------------- */

static int c_port;
static int c_series;
static uint8_t *const *c_cpu;
static const size_t *c_cpu_len;
static _Atomic int c_stop;
static _Atomic int64_t c_next;
static _Atomic int64_t c_limit; /* > 0: clients stop after this many requests in all */

struct c_client {
    pthread_t thread;
    int64_t *lat;
    size_t n, cap;
    int64_t failed;
};

static void *c_client_run(void *arg)
{
    struct c_client *c = arg;
    int fd = bench_connect(c_port);
    char path[256];

    while (!atomic_load(&c_stop) && fd >= 0) {
        int64_t i = atomic_fetch_add(&c_next, 1), t0;
        /* The first round gives every pod each of the 3 profiles in turn. */
        int k = (int)(atomic_load(&c_limit) > 0 ? i / c_series % 3 : i % 3);
        if (atomic_load(&c_limit) > 0 && i >= atomic_load(&c_limit)) {
            break;
        }
        /* name=bench-scale{pod=p<i % series>}, percent-encoded */
        snprintf(path, sizeof(path),
                 "/ingest?name=" SCALE_SERVICE "%%7Bpod%%3Dp%lld%%7D&spyName=gospy",
                 (long long)(i % c_series));
        t0 = fc_now_mono_ns();
        if (bench_http_post(fd, path, "application/octet-stream", c_cpu[k], c_cpu_len[k]) != 200) {
            c->failed++;
            close(fd);
            fd = bench_connect(c_port);
            continue;
        }
        bench_lat_push(&c->lat, &c->n, &c->cap, fc_now_mono_ns() - t0);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/* One phase: in_flight clients for `seconds`; returns profiles per collector CPU-second. */
static double c_phase(const char *what, pid_t pid, int in_flight, double seconds)
{
    struct c_client clients[64];
    int64_t *all, t0, n = 0, failed = 0;
    double c0, cpu, wall, per_cpu;
    char pid_s[32];

    memset(clients, 0, sizeof(clients));
    atomic_store(&c_stop, 0);
    c0 = bench_cpu_of(pid);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < in_flight; i++) {
        pthread_create(&clients[i].thread, NULL, c_client_run, &clients[i]);
    }
    fc_sleep_ns((int64_t)(seconds * 1e9));
    atomic_store(&c_stop, 1);
    for (int i = 0; i < in_flight; i++) {
        pthread_join(clients[i].thread, NULL);
        n += (int64_t)clients[i].n;
        failed += clients[i].failed;
    }
    wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    cpu = bench_cpu_of(pid) - c0;
    all = calloc((size_t)n + 1, sizeof(int64_t));
    n = 0;
    for (int i = 0; i < in_flight; i++) {
        memcpy(all + n, clients[i].lat, clients[i].n * sizeof(int64_t));
        n += (int64_t)clients[i].n;
        free(clients[i].lat);
    }
    qsort(all, (size_t)n, sizeof(int64_t), cmp_i64);
    per_cpu = cpu > 0 ? (double)n / cpu : 0;
    snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
    printf("collector %-5s %5d pods %2d in flight: %6.0f profiles/s, %6.0f profiles per "
           "CPU-second, ack p50 %.2f ms p99 %.2f ms (%lld requests, %lld failed); RssAnon "
           "%.1f MB\n",
           what, c_series, in_flight, (double)n / wall, per_cpu, n ? (double)all[n / 2] / 1e6 : 0.0,
           n ? (double)all[n * 99 / 100] / 1e6 : 0.0, (long long)n, (long long)failed,
           (double)rss_anon_kb(pid_s) / 1024);
    free(all);
    return per_cpu;
}

/*
 * Each of the 3 profiles into each pod, 16 in flight, before the store's
 * phases: the series HTTP /ingest writes (pyroscope_spy and all) are not the
 * scale run's, and each profile has sample-label sets of its own (series of
 * their own), so without it the phases would measure making new series
 * rather than ingest into a pod that exists. Its own cost is printed.
 */
static void c_first_round(pid_t pid)
{
    struct c_client clients[16];
    double c0 = bench_cpu_of(pid), cpu;
    int64_t t0 = fc_now_mono_ns(), n = 0, failed = 0;

    memset(clients, 0, sizeof(clients));
    atomic_store(&c_stop, 0);
    atomic_store(&c_next, 0);
    atomic_store(&c_limit, 3 * (int64_t)c_series);
    for (int i = 0; i < 16; i++) {
        pthread_create(&clients[i].thread, NULL, c_client_run, &clients[i]);
    }
    for (int i = 0; i < 16; i++) {
        pthread_join(clients[i].thread, NULL);
        n += (int64_t)clients[i].n;
        failed += clients[i].failed;
        free(clients[i].lat);
    }
    atomic_store(&c_limit, 0);
    cpu = bench_cpu_of(pid) - c0;
    printf("collector store %5d pods: first round, each profile once into each pod (its series "
           "new; not in the rows below): %lld profiles in %.1f s, %.0f profiles per CPU-second "
           "(%lld failed)\n",
           c_series, (long long)n, (double)(fc_now_mono_ns() - t0) / 1e9,
           cpu > 0 ? (double)n / cpu : 0.0, (long long)failed);
}

static void collector_runs(const char *bin, const char *store_dir, int n_series, double seconds)
{
    static const int in_flight[] = {4, 64};
    double nop_rate[2], store_rate[2];
    char yaml[2048];
    pid_t pid;

    c_series = n_series;
    c_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "exporters:\n  nop:\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], exporters: [nop]}\n",
             c_port);
    pid = bench_start_collector(bin, yaml, c_port);
    for (int i = 0; i < 2; i++) {
        nop_rate[i] = c_phase("nop", pid, in_flight[i], seconds);
    }
    bench_stop_collector(pid);
    c_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "exporters:\n  store:\n    path: %s\n    sync: batch\n    retention: 0\n"
             "    query: {endpoint: 127.0.0.1:%d}\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], exporters: [store]}\n",
             c_port, store_dir, bench_free_port());
    pid = bench_start_collector(bin, yaml, c_port);
    c_first_round(pid);
    for (int i = 0; i < 2; i++) {
        store_rate[i] = c_phase("store", pid, in_flight[i], seconds);
    }
    printf("collector %d pods: store costs %.1fx nop CPU per profile at 4 in flight, %.1fx at "
           "64 (target <= 2.5x; >= 4,000 profiles per CPU-second); peak RSS %.1f MB\n",
           n_series, store_rate[0] > 0 ? nop_rate[0] / store_rate[0] : 0.0,
           store_rate[1] > 0 ? nop_rate[1] / store_rate[1] : 0.0,
           (double)bench_peak_rss_kb(pid) / 1024);
    bench_stop_collector(pid);
}

static void scale_section(const char *argv0, int many, double seconds, uint8_t *const *cpu,
                          const size_t *cpu_len)
{
    const int counts[] = {1, 100, many};
    char *dirs[3];
    char bin[PATH_MAX];
    const char *env = getenv("FLAMECOL_BIN");
    int n_counts = many == 100 ? 2 : 3;

    for (int i = 0; i < n_counts; i++) {
        dirs[i] = scale_run(counts[i], cpu, cpu_len);
    }
    for (int i = 1; i < n_counts; i++) {
        sdk_rate_run(counts[i], cpu, cpu_len);
    }
    steady_section(cpu, cpu_len);
    if (env != NULL) {
        snprintf(bin, sizeof(bin), "%s", env);
    } else {
        const char *slash = strrchr(argv0, '/');
        snprintf(bin, sizeof(bin), "%.*sflamecol", slash ? (int)(slash - argv0 + 1) : 0, argv0);
    }
    if (access(bin, X_OK) != 0) {
        printf("collector: %s not found (set FLAMECOL_BIN): collector runs skipped\n", bin);
    } else {
        signal(SIGPIPE, SIG_IGN);
        c_cpu = cpu;
        c_cpu_len = cpu_len;
        printf("collector: %s, HTTP /ingest of the 3 Go CPU profiles (raw .pb.gz), %.0f s per "
               "phase, store pre-filled as above\n",
               bin, seconds);
        collector_runs(bin, dirs[0], 1, seconds);
        collector_runs(bin, dirs[n_counts - 1], counts[n_counts - 1], seconds);
    }
    for (int i = 0; i < n_counts; i++) {
        bench_remove_dir(dirs[i]);
        free(dirs[i]);
    }
}

int main(int argc, char **argv)
{
    const char *wanted[] = {"go-1s-cpu.pb.gz", "go-3s-cpu.pb.gz", "pyroscope-go-cpu.pb.gz"};
    uint8_t *files[64];
    size_t lens[64];
    size_t n_files;
    uint8_t *cpu[3];
    size_t cpu_len[3];
    int n_series = argc > 2 ? atoi(argv[2]) : 4;
    int hours = argc > 3 ? atoi(argv[3]) : 24;
    int many = argc > 4 ? atoi(argv[4]) : 10000;
    double seconds = argc > 5 ? atof(argv[5]) : 3;
    int64_t per_series = hours * 3600 / STEP_S;
    char dir[] = "/tmp/flamecol-bench-store-XXXXXX";
    struct fc_store *store;
    struct fc_error err = {0};
    int64_t raw_bytes = 0, t0;
    double cpu0;
    int64_t written = 0;
    char paths[64][256];

    if (argc < 2) {
        fprintf(stderr, "usage: bench_store CORPUS_DIR [series] [hours] [many] [seconds]\n");
        return 2;
    }
    /* bench_load_corpus reads every file; keep the three Go CPU profiles. */
    n_files = bench_load_corpus(argv[1], files, lens, 64);
    for (int k = 0; k < 3; k++) {
        char path[1024];
        FILE *f;
        snprintf(path, sizeof(path), "%s/%s", argv[1], wanted[k]);
        f = fopen(path, "rb");
        if (f == NULL) {
            fprintf(stderr, "missing %s\n", path);
            return 2;
        }
        cpu[k] = malloc(1 << 20);
        cpu_len[k] = fread(cpu[k], 1, 1 << 20, f);
        fclose(f);
    }
    for (size_t i = 0; i < n_files; i++) {
        free(files[i]);
    }
    (void)paths;
    store = new_store(dir);
    printf("ingest: %d series x %lld profiles (one per 10 s over %d h), sync batch, groups of 16\n",
           n_series, (long long)per_series, hours);
    t0 = fc_now_mono_ns();
    cpu0 = bench_cpu_self();
    for (int64_t i = 0; i < per_series; i += 16) {
        struct fc_batch *group[16 * 64];
        size_t n = 0;
        for (int64_t j = i; j < i + 16 && j < per_series; j++) {
            for (int s = 0; s < n_series && n < 16 * 64; s++) {
                int k = (int)((j + s) % 3);
                group[n++] = profile(cpu[k], cpu_len[k], s, BASE_S + j * STEP_S);
                raw_bytes += (int64_t)cpu_len[k];
            }
        }
        if (fc_store_write(store, group, n, &err) != FC_OK) {
            fprintf(stderr, "write: %s\n", err.msg);
            return 1;
        }
        for (size_t g = 0; g < n; g++) {
            fc_batch_unref(group[g]);
        }
        written += (int64_t)n;
    }
    /*
     * The coarse windows that end with the data built (counted in the
     * ingest), as the next minutes of profiles would close them; those that
     * go on past it stay dirty, read through their children (store_flush.c).
     */
    if (fc_store_flush_before(store, BASE_S + per_series * STEP_S, &err) != FC_OK) {
        fprintf(stderr, "flush: %s\n", err.msg);
        return 1;
    }
    {
        double secs = (double)(fc_now_mono_ns() - t0) / 1e9;
        int64_t disk = fc_store_disk_bytes(store);
        printf("ingest: %.0f profiles/s (%.1f s, %.1f CPU-s); disk %.1f MB = %.0f bytes/profile, "
               "raw .pb.gz %.0f bytes/profile: %.1f%% of raw (target <= 10%%)\n",
               (double)written / secs, secs, bench_cpu_self() - cpu0, (double)disk / 1e6,
               (double)disk / (double)written, (double)raw_bytes / (double)written,
               100.0 * (double)disk / (double)raw_bytes);
    }
    {
        /*
         * bundle_after: the retention pass bundles the 10 s windows of every
         * span past (here all of them); the queries below read them bundled.
         */
        int64_t used_loose = fc_store_used_bytes(store), used_bundled;
        uint64_t bundled;
        double c0 = bench_cpu_self();
        t0 = fc_now_mono_ns();
        bundled = bundle_all(store, BASE_S + hours * 3600LL + 100);
        used_bundled = fc_store_used_bytes(store);
        printf("bundling: %llu windows in %.0f ms (%.3f CPU-ms each); pages in use %.1f MB -> %.1f "
               "MB: %.0f -> %.0f bytes/profile (%.1f%% -> %.1f%% of raw)\n",
               (unsigned long long)bundled, (double)(fc_now_mono_ns() - t0) / 1e6,
               1000.0 * (bench_cpu_self() - c0) / (double)(bundled ? bundled : 1),
               (double)used_loose / 1e6, (double)used_bundled / 1e6,
               (double)used_loose / (double)written, (double)used_bundled / (double)written,
               100.0 * (double)used_loose / (double)raw_bytes,
               100.0 * (double)used_bundled / (double)raw_bytes);
    }
    {
        static const struct {
            const char *name;
            int64_t secs;
        } ranges[] = {{"1h", 3600}, {"24h", 86400}, {"7d", 7 * 86400}};
        struct fc_selector sel;
        fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"bench-0\"}",
                          &sel, &err);
        for (size_t r = 0; r < 3; r++) {
            enum { RUNS = 31 };
            int64_t tree_ns[RUNS], flat_ns[RUNS];
            uint32_t merged = 0, merged_flat = 0;
            int64_t total = 0, raw_ns = 0;
            for (int run = 0; run < RUNS; run++) {
                struct fc_store_query q = {"anonymous", &sel, 0, 0, false};
                struct fc_store_result res;
                struct fc_store_stats st;
                /* Ranges placed at different offsets inside (or over) the day. */
                int64_t span = hours * 3600LL;
                int64_t start = ranges[r].secs >= span
                                    ? BASE_S - (ranges[r].secs - span) / 2
                                    : BASE_S + (run * 7919) % (span - ranges[r].secs + 1);
                q.from_ns = start * 1000000000LL + 3000000000LL;
                q.until_ns = (start + ranges[r].secs) * 1000000000LL + 3000000000LL;
                t0 = fc_now_mono_ns();
                fc_store_select_merge(store, &q, &res, &st, &err);
                tree_ns[run] = fc_now_mono_ns() - t0;
                merged = st.nodes_merged;
                total = fc_tree_total(&res.tree);
                fc_store_result_release(&res);
                if (run >= 3) {
                    continue; /* the slow baseline: 3 runs are enough */
                }
                q.level0_only = true;
                t0 = fc_now_mono_ns();
                fc_store_select_merge(store, &q, &res, &st, &err);
                flat_ns[run] = fc_now_mono_ns() - t0;
                merged_flat = st.nodes_merged;
                if (fc_tree_total(&res.tree) != total) {
                    fprintf(stderr, "mismatch: tree %lld, flat %lld\n", (long long)total,
                            (long long)fc_tree_total(&res.tree));
                    return 1;
                }
                fc_store_result_release(&res);
            }
            /* Raw baseline: decode and merge every profile in the range, once. */
            {
                int64_t n_raw = 0;
                struct fc_tree t;
                fc_tree_init(&t);
                t0 = fc_now_mono_ns();
                for (int64_t j = 0; j < per_series && n_raw < 100000; j++) {
                    struct fc_batch *b;
                    int64_t ts = BASE_S + j * STEP_S;
                    if (ts * 1000000000LL < 0 || j * STEP_S >= ranges[r].secs) {
                        continue;
                    }
                    b = profile(cpu[j % 3], cpu_len[j % 3], 0, ts);
                    /* Merging needs the tree; the decode dominates, so count it alone. */
                    fc_batch_unref(b);
                    n_raw++;
                }
                raw_ns = fc_now_mono_ns() - t0;
                fc_tree_release(&t);
            }
            qsort(tree_ns, RUNS, sizeof(int64_t), cmp_i64);
            qsort(flat_ns, 3, sizeof(int64_t), cmp_i64);
            printf("%-4s one series: segment tree p50 %.2f ms p99 %.2f ms (%u windows) | "
                   "10 s windows only median of 3 %.2f ms (%u windows, %.0fx) | raw decode of the "
                   "range %.0f ms (%.0fx)\n",
                   ranges[r].name, (double)tree_ns[RUNS / 2] / 1e6,
                   (double)tree_ns[RUNS * 99 / 100] / 1e6, merged, (double)flat_ns[1] / 1e6,
                   merged_flat, (double)flat_ns[1] / (double)tree_ns[RUNS / 2],
                   (double)raw_ns / 1e6, (double)raw_ns / (double)tree_ns[RUNS / 2]);
        }
        {
            /* The 24 h query by line, and the merged pprof of its full-detail tree. */
            enum { RUNS = 31 };
            int64_t lines_ns[RUNS], pprof_ns[RUNS];
            uint32_t fn_nodes = 0, line_nodes = 0, frame_nodes = 0;
            size_t pprof_bytes = 0;
            for (int run = 0; run < RUNS; run++) {
                struct fc_store_query q = {"anonymous", &sel, 0, 0, false};
                struct fc_store_result res;
                struct fc_store_stats st;
                struct fc_buf out;
                int64_t start = BASE_S;
                q.from_ns = start * 1000000000LL + 3000000000LL;
                q.until_ns = (start + 86400) * 1000000000LL + 3000000000LL;
                fc_store_select_merge(store, &q, &res, &st, &err);
                fn_nodes = res.tree.n;
                frame_nodes = res.frames_tree.n;
                fc_buf_init(&out, 0);
                t0 = fc_now_mono_ns();
                store_tree_to_pprof(&res, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", &out,
                                    &err);
                pprof_ns[run] = fc_now_mono_ns() - t0;
                pprof_bytes = out.len;
                fc_buf_release(&out);
                fc_store_result_release(&res);
                q.granularity = FC_FRAME_LINES;
                t0 = fc_now_mono_ns();
                fc_store_select_merge(store, &q, &res, &st, &err);
                lines_ns[run] = fc_now_mono_ns() - t0;
                line_nodes = res.tree.n;
                fc_store_result_release(&res);
            }
            qsort(lines_ns, RUNS, sizeof(int64_t), cmp_i64);
            qsort(pprof_ns, RUNS, sizeof(int64_t), cmp_i64);
            printf("lines: 24h one series by line (granularity=lines) p50 %.2f ms p99 %.2f ms; "
                   "tree nodes: %u by function, %u by line, %u frame records (full detail); "
                   "merged pprof built in p50 %.2f ms (%zu bytes before gzip)\n",
                   (double)lines_ns[RUNS / 2] / 1e6, (double)lines_ns[RUNS * 99 / 100] / 1e6,
                   fn_nodes, line_nodes, frame_nodes, (double)pprof_ns[RUNS / 2] / 1e6,
                   pprof_bytes);
        }
        fc_selector_release(&sel);
    }
    {
        /*
         * fine_retention: compact every 10 s window of the day, as the
         * retention pass does once they are older than fine_retention. Pages
         * freed are reused by later writes, so pages in use are what a store
         * at steady state holds.
         */
        const double retention_days = 30, fine_days = 1;
        int64_t used_full = fc_store_used_bytes(store), used_coarse;
        double full, coarse, steady;
        uint64_t deleted;
        t0 = fc_now_mono_ns();
        deleted = compact_all(store, BASE_S + hours * 3600LL + 100);
        used_coarse = fc_store_used_bytes(store);
        full = (double)used_full / (double)written;
        coarse = (double)used_coarse / (double)written;
        steady = (fine_days * full + (retention_days - fine_days) * coarse) / retention_days;
        printf("compaction: %llu windows in %.0f ms; pages in use %.1f MB -> %.1f MB: %.0f -> %.0f "
               "bytes/profile (%.1f%% -> %.1f%% of raw)\n",
               (unsigned long long)deleted, (double)(fc_now_mono_ns() - t0) / 1e6,
               (double)used_full / 1e6, (double)used_coarse / 1e6, full, coarse,
               100.0 * full * (double)written / (double)raw_bytes,
               100.0 * coarse * (double)written / (double)raw_bytes);
        printf(
            "steady state, retention 30d with fine_retention 24h (defaults): %.0f bytes/profile, "
            "%.1f%% of raw (target <= 10%%)\n",
            steady, 100.0 * steady * (double)written / (double)raw_bytes);
    }
    fc_store_close(store);
    if (getenv("FC_BENCH_KEEP") != NULL) {
        printf("kept the database in %s\n", dir); /* FC_BENCH_KEEP: for inspection */
    } else {
        bench_remove_dir(dir);
    }
    if (many > 0) {
        scale_section(argv[0], many < 100 ? 100 : many, seconds, cpu, cpu_len);
    }
    return 0;
}
