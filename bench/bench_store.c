/*
 * The store: one day of 10 s profiles for several series, then flame graphs
 * of one series over 1 h, 24 h and 7 d, beside two baselines measured in the
 * same run: merging every 10 s window of the range (the store without its
 * segment tree), and decoding and merging every raw profile of the range.
 * Also bytes on disk per profile next to the raw .pb.gz bytes, and ingest
 * throughput with sync: batch (one commit per group of 16 profiles), and
 * the bytes per profile once the 10 s windows are compacted (fine_retention)
 * with the steady state that gives under the default retention. What the
 * line-level detail costs: the 24 h flame graph by line (granularity=lines),
 * the nodes of the full-detail tree beside the flame graph's, and building
 * the merged pprof from it.
 *
 *   bench_store CORPUS_DIR [series=4] [hours=24]
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

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEP_S 10
#define BASE_S 1700000000LL

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
    int64_t per_series = hours * 3600 / STEP_S;
    char dir[] = "/tmp/flamecol-bench-store-XXXXXX";
    struct fc_store_options o = {0};
    struct fc_store *store;
    struct fc_error err = {0};
    int64_t raw_bytes = 0, t0;
    double cpu0;
    int64_t written = 0;
    char paths[64][256];

    if (argc < 2) {
        fprintf(stderr, "usage: bench_store CORPUS_DIR [series] [hours]\n");
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
    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    o.path = dir;
    o.sync = FC_SYNC_BATCH;
    if (fc_store_open(&o, &store, &err) != FC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
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
        uint64_t deleted = 0;
        t0 = fc_now_mono_ns();
        if (fc_store_compact_before(store, BASE_S + hours * 3600LL + 100, &deleted, &err) !=
            FC_OK) {
            fprintf(stderr, "compact: %s\n", err.msg);
            return 1;
        }
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
        return 0;
    }
    {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0) {
            return 1;
        }
    }
    return 0;
}
