/*
 * Retention: deletion by age (windows and their pages, trace entries),
 * max_size (the oldest hours first, in steps of windows, counting the
 * coarse windows built; a full store accepts writes again) and compaction
 * of old 10 s windows into 100 s ones.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <lmdb.h>

#include "storage/store.h"
#include "tests/unit/fc_test.h"
#include "tests/unit/store_fixture.h"

static void test_retention_deletes_old_windows_and_frees_pages(void **state)
{
    struct fc_store *s2 = open_sub("retention");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t used_before, used_after, recent_before;
    uint64_t deleted = 0;
    const int64_t later = BASE + 40 * 86400;

    (void)state;
    for (int i = 0; i < 40; i++) {
        struct fc_batch *b = load("go-1s-cpu.pb.gz", i % 2, (i < 20 ? BASE : later) + i * 10, "r");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "r";
    q.selector = &sel;
    recent_before = range_total(s2, &q, later - 60, later + 86400);
    assert_int_equal(fc_store_oldest(s2), BASE);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK); /* the open windows take pages too */
    used_before = fc_store_used_bytes(s2);
    /* Everything ending 35 days after BASE goes; the later 20 profiles stay. */
    assert_int_equal(fc_store_delete_before(s2, BASE + 35 * 86400, 0, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    used_after = fc_store_used_bytes(s2);
    assert_true(used_after < used_before);
    assert_int_equal(range_total(s2, &q, BASE - 60, BASE + 3600), 0);
    assert_int_equal(range_total(s2, &q, later - 60, later + 86400), recent_before);
    assert_true(fc_store_oldest(s2) >= later);
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/* max_size: past the high mark the oldest hours go until under the low mark. */
static void test_trim_deletes_oldest_hours_down_to_low(void **state)
{
    struct fc_store *s2 = open_sub("trim");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    const int64_t end = BASE + 48 * 3600;
    int64_t used, last_hour;
    uint64_t deleted = 0;

    (void)state;
    for (int h = 0; h < 48; h++) {
        for (int k = 0; k < 6; k++) {
            struct fc_batch *b = load("go-1s-cpu.pb.gz", k, BASE + h * 3600 + k * 10, "z");
            assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
            fc_batch_unref(b);
        }
    }
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "z";
    q.selector = &sel;
    last_hour = range_total(s2, &q, end - 3600, end);
    assert_true(last_hour > 0);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK); /* the open windows take pages too */
    used = fc_store_used_bytes(s2);
    /* Under the high mark: nothing happens. */
    assert_int_equal(fc_store_trim(s2, used, used / 2, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(fc_store_oldest(s2), BASE);
    assert_int_equal(fc_store_trim(s2, used * 6 / 10, used / 2, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    assert_true(fc_store_used_bytes(s2) <= used / 2);
    assert_true(fc_store_oldest(s2) > BASE);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 60), 0);         /* the oldest went first */
    assert_int_equal(range_total(s2, &q, end - 3600, end), last_hour); /* the newest stayed */
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/* Pod p0's Go CPU profile at t, every sample in span `span` of trace `trace` (hex). */
static void write_traced(struct fc_store *s2, int64_t t, const char *span, const char *trace)
{
    struct fc_batch *b = load_pod(0, t, "tr");

    label_every_sample(b, "span_id", span);
    label_every_sample(b, "trace_id", trace);
    write_batch(s2, b);
}

/* The trace ids the trace test writes: 4bf92f3577b34da6a3ce929d0e0e47 then n. */
static void trace_id_of(uint8_t n, uint8_t out[16])
{
    static const uint8_t head[15] = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6,
                                     0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47};
    memcpy(out, head, 15);
    out[15] = n;
}

/* The CPU total trace n finds over [from, until). */
static int64_t trace_total(struct fc_store *s2, uint8_t n, int64_t from, int64_t until)
{
    uint8_t ids[1][16];
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t total;

    trace_id_of(n, ids[0]);
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "tr";
    q.selector = &sel;
    q.trace_ids = (const uint8_t(*)[16])ids;
    q.n_trace_ids = 1;
    total = range_total(s2, &q, from, until);
    fc_selector_release(&sel);
    return total;
}

/*
 * Retention deletes the trace -> span entries of spans whose windows it
 * deleted. Trace 0x36 (span ab) only 40 days ago; 0x37 (cd) now; 0x38 (ef)
 * now and then, written out of order, the old one last; 0x3a (a1) in the
 * last 10 s window that ends by the cutoff, 0x3b (a2) in the first that
 * does not; 0x39 an entry as builds before kept it (no time: it stays). By
 * hand, after everything 35 days old goes: 0x37, 0x38, 0x3b and 0x39 stay,
 * and 0x37 and 0x38 each find their one profile left.
 */
static void test_retention_deletes_old_trace_entries(void **state)
{
    static const char *const dbs[] = {"trace"};
    const int64_t later = BASE + 40 * 86400, cutoff = BASE + 35 * 86400;
    struct fc_store *s2 = open_sub("traces");
    struct fc_error err = {0};
    uint64_t deleted = 0;
    size_t entries;
    char sub[128];

    (void)state;
    snprintf(sub, sizeof(sub), "%s/traces", dir);
    write_traced(s2, BASE, "00000000000000ab", "4bf92f3577b34da6a3ce929d0e0e4736");
    write_traced(s2, later, "00000000000000cd", "4bf92f3577b34da6a3ce929d0e0e4737");
    write_traced(s2, later + 10, "00000000000000ef", "4bf92f3577b34da6a3ce929d0e0e4738");
    write_traced(s2, BASE + 10, "00000000000000ef", "4bf92f3577b34da6a3ce929d0e0e4738");
    write_traced(s2, cutoff - 10, "00000000000000a1", "4bf92f3577b34da6a3ce929d0e0e473a");
    write_traced(s2, cutoff, "00000000000000a2", "4bf92f3577b34da6a3ce929d0e0e473b");
    fc_store_close(s2);
    {
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi db;
        uint8_t key[3 + 16 + 8] = {'t', 'r', 0};
        MDB_val k = {sizeof(key), key}, v = {0, (void *)""};
        trace_id_of(0x39, key + 3);
        memset(key + 19, 0xaa, 8);
        lmdb_begin(sub, 0, &env, &txn);
        assert_int_equal(mdb_dbi_open(txn, "trace", 0, &db), 0);
        assert_int_equal(mdb_put(txn, db, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }
    db_entries(sub, dbs, 1, &entries);
    assert_int_equal(entries, 6);

    s2 = open_sub("traces");
    assert_int_equal(trace_total(s2, 0x38, BASE, later + 3600), 2 * GO_CPU_TOTAL);
    assert_int_equal(fc_store_delete_before(s2, cutoff, 0, &deleted, &err), FC_OK);
    assert_int_equal(trace_total(s2, 0x37, BASE, later + 3600), GO_CPU_TOTAL);
    assert_int_equal(trace_total(s2, 0x38, BASE, later + 3600), GO_CPU_TOTAL);
    assert_int_equal(trace_total(s2, 0x3b, BASE, later + 3600), GO_CPU_TOTAL);
    fc_store_close(s2);
    db_entries(sub, dbs, 1, &entries);
    assert_int_equal(entries, 4);
}

/*
 * max_size with data lopsided in time: one profile 300 days old, the rest in
 * one hour. The steps are by windows, not by time: a 64th of those 300 days
 * would take the whole hour, its newest profile too, in one step.
 */
static void test_trim_steps_by_windows_not_time(void **state)
{
    struct fc_store *s2 = open_sub("trim-lopsided");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    const int64_t old = BASE - 300 * 86400, last = BASE + 47 * 60;
    int64_t used, newest;
    uint64_t deleted = 0;

    (void)state;
    for (int k = -1; k < 48; k++) {
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, k < 0 ? old : BASE + k * 60, "lop");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "lop";
    q.selector = &sel;
    newest = range_total(s2, &q, last, last + 10);
    assert_true(newest > 0);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10), newest); /* the same profile each time */
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    used = fc_store_used_bytes(s2);
    assert_int_equal(fc_store_trim(s2, used * 9 / 10, used * 3 / 4, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    assert_true(fc_store_used_bytes(s2) <= used * 3 / 4);
    assert_int_equal(range_total(s2, &q, old, old + 10), 0);        /* the oldest went first */
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10), 0);      /* then the hour's first */
    assert_int_equal(range_total(s2, &q, last, last + 10), newest); /* the newest stayed */
    assert_int_equal(range_total(s2, &q, last - 60, last - 50), newest);
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/* fine_retention: old 10 s windows go; that past is answered from 100 s windows. */
static void test_compaction_rounds_old_ranges_out_to_100s(void **state)
{
    struct fc_store *s2 = open_sub("compaction");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t aligned, unaligned, rounded, fine, used_before, sum_before = 0, sum_after = 0;
    int64_t before[60], after[60];
    uint64_t deleted = 0;

    (void)state;
    for (int i = 0; i < 60; i++) { /* one profile per 10 s over [BASE, BASE + 600) */
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE + i * 10, "c");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "c";
    q.selector = &sel;
    /* By hand: one go-1s-cpu profile (GO_CPU_TOTAL) per 10 s window. */
    aligned = range_total(s2, &q, BASE + 100, BASE + 300);
    unaligned = range_total(s2, &q, BASE + 130, BASE + 270);
    fine = range_total(s2, &q, BASE + 430, BASE + 570);
    assert_int_equal(aligned, 20 * GO_CPU_TOTAL);
    assert_int_equal(unaligned, 14 * GO_CPU_TOTAL);
    assert_int_equal(fine, 14 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE + 330, BASE + 370), 4 * GO_CPU_TOTAL);
    q.from_ns = BASE * 1000000000LL;
    q.until_ns = (BASE + 600) * 1000000000LL;
    assert_int_equal(fc_store_timeline(s2, &q, 10000000000LL, before, 60, &err), FC_OK);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK); /* the open windows take pages too */
    used_before = fc_store_used_bytes(s2);

    /* The cutoff rounds down to 100 s: the 10 s windows of [BASE, BASE + 400) go. */
    assert_int_equal(fc_store_compact_before(s2, BASE + 455, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 40);
    assert_true(fc_store_used_bytes(s2) <= used_before);
    for (int reopen = 0; reopen < 2; reopen++) {
        assert_int_equal(range_total(s2, &q, BASE + 100, BASE + 300), aligned);
        rounded = range_total(s2, &q, BASE + 130, BASE + 270);
        assert_int_equal(rounded, aligned); /* rounded out, nothing lost at the edges */
        assert_int_equal(range_total(s2, &q, BASE + 430, BASE + 570), fine);
        /* The boundary: [BASE + 300, BASE + 400) is the last compacted window (it
         * ends exactly at the cutoff); any slice of it answers with all of it, and
         * the first window after the cutoff keeps its 10 s resolution. */
        assert_int_equal(range_total(s2, &q, BASE + 330, BASE + 370), 10 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 390, BASE + 400), 10 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 300, BASE + 310), 10 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 390, BASE + 410), 11 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 400, BASE + 410), 1 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 290, BASE + 300), 10 * GO_CPU_TOTAL);
        q.from_ns = BASE * 1000000000LL;
        q.until_ns = (BASE + 600) * 1000000000LL;
        assert_int_equal(fc_store_timeline(s2, &q, 10000000000LL, after, 60, &err), FC_OK);
        sum_before = sum_after = 0;
        for (int i = 0; i < 60; i++) {
            sum_before += before[i];
            sum_after += after[i];
            if (i >= 40) {
                assert_int_equal(after[i], before[i]); /* the fine part keeps 10 s steps */
            }
        }
        assert_int_equal(sum_after, sum_before);
        assert_int_equal(after[11], 0); /* BASE + 110 now lies in the BASE + 100 window */
        assert_true(after[10] > before[10]);
        /* Remembered across restarts. */
        fc_store_close(s2);
        s2 = open_sub("compaction");
    }
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/*
 * max_size reached: writes are refused as retryable; retention (trim, as the
 * exporter runs it) deletes the oldest data and writes are accepted again.
 */
/*
 * A store with max_size 512 KiB (sync none) written until it refuses: profiles
 * a minute apart from BASE, each 200 samples of one 3-frame stack (total 200
 * each). *t is the next time, *last the newest written.
 */
static struct fc_store *full_store(const char *name, int64_t *t, int64_t *last)
{
    char sub[256];
    struct fc_store_options o = {0};
    struct fc_store *s2;
    struct fc_error err = {0};
    const int64_t max = 512 * 1024;
    int64_t values[200];
    int written = 0, rc = FC_OK;

    for (int i = 0; i < 200; i++) {
        values[i] = 1;
    }
    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    o.path = sub;
    o.sync = FC_SYNC_NONE;
    o.max_size = max;
    assert_int_equal(fc_store_open(&o, &s2, &err), FC_OK);
    for (*t = BASE; written < 100000; written++, *t += 60) {
        struct fc_batch *b =
            stacks_batch("full", *t, 3 + (uint32_t)(written % 50), 60, values, 200);
        rc = fc_store_write(s2, &b, 1, &err);
        fc_batch_unref(b);
        if (rc != FC_OK) {
            break;
        }
        *last = *t;
    }
    assert_int_equal(rc, FC_EUNAVAIL);
    assert_true(fc_err_retryable(rc));
    assert_non_null(strstr(err.msg, "max_size"));
    assert_true(written > 20);
    assert_true(fc_store_full(s2));
    assert_true(fc_store_failures(s2, FC_STORE_FULL) >= 1);
    assert_true(fc_store_used_bytes(s2) >= max);
    return s2;
}

/* One profile of total 200 at t: accepted (the store is not full). */
static void accepted_again(struct fc_store *s2, int64_t t)
{
    int64_t values[200];
    struct fc_error err = {0};
    struct fc_batch *b;

    for (int i = 0; i < 200; i++) {
        values[i] = 1;
    }
    b = stacks_batch("full", t, 3, 60, values, 200);
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
}

static void test_full_store_recovers(void **state)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    const int64_t max = 512 * 1024;
    int64_t t, last = 0;
    uint64_t deleted = 0;

    (void)state;
    s2 = full_store("full", &t, &last);
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "lim";
    q.selector = &sel;
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10), 200);
    assert_int_equal(fc_store_trim(s2, max / 10 * 9, max / 10 * 8, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    assert_false(fc_store_full(s2));
    assert_true(fc_store_used_bytes(s2) <= max / 10 * 8);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10), 0);   /* the oldest went */
    assert_int_equal(range_total(s2, &q, last, last + 10), 200); /* the newest stayed */
    accepted_again(s2, t);
    assert_int_equal(range_total(s2, &q, t, t + 10), 200);
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/*
 * Deletion by age frees a full store at once: the bytes in use that refuse
 * writes are measured again when it ends, not at the next flush or write.
 */
static void test_full_store_recovers_by_age(void **state)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    int64_t t, last = 0;
    uint64_t deleted = 0;

    (void)state;
    s2 = full_store("full_age", &t, &last);
    /* Everything older than the newest hour goes (compaction aside: windows of every level). */
    assert_int_equal(fc_store_delete_before(s2, last - 3600, 0, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    assert_false(fc_store_full(s2));
    accepted_again(s2, t);
    fc_store_close(s2);
}

static void test_trim_counts_coarse_windows_built(void **state)
{
    (void)state;
    /* Without a budget, and with one that leaves all but one window a flush for later. */
    for (int budget = 0; budget < 2; budget++) {
        char sub[256];
        struct fc_store_options o = {0};
        struct fc_store *s2;
        struct fc_error err = {0};
        const int64_t max = 512 * 1024;
        int64_t t = BASE, after_trim;
        uint64_t deleted = 0;
        int rc = FC_OK;

        snprintf(sub, sizeof(sub), "%s/full-dirty-%d", dir, budget);
        o.path = sub;
        o.sync = FC_SYNC_NONE;
        o.max_size = max;
        o.flush_interval_ns = 3600 * 1000000000LL;
        o.rebuild_max_bytes = budget ? 1 : 0;
        assert_int_equal(fc_store_open(&o, &s2, &err), FC_OK);
        for (int written = 0; rc == FC_OK && written < 100000; written++, t += 60) {
            struct fc_batch *b =
                load(written % 2 ? "go-1s-cpu.pb.gz" : "go-1s-heap.pb.gz", 0, t, "dirty");
            rc = fc_store_write(s2, &b, 1, &err);
            fc_batch_unref(b);
        }
        assert_int_equal(rc, FC_EUNAVAIL);
        assert_int_equal(fc_store_trim(s2, max / 10 * 9, max / 10 * 8, &deleted, &err), FC_OK);
        assert_true(deleted > 0);
        after_trim = fc_store_used_bytes(s2);
        assert_true(after_trim <= max / 10 * 8);
        /* The flushes after it build nothing the trim did not count. */
        assert_int_equal(fc_store_flush_before(s2, INT64_MIN, &err), FC_OK);
        assert_int_equal(fc_store_rebuilds_deferred(s2), 0);
        assert_true(fc_store_used_bytes(s2) <= max / 10 * 9);
        fc_store_close(s2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trim_deletes_oldest_hours_down_to_low),
        cmocka_unit_test(test_trim_steps_by_windows_not_time),
        cmocka_unit_test(test_trim_counts_coarse_windows_built),
        cmocka_unit_test(test_compaction_rounds_old_ranges_out_to_100s),
        cmocka_unit_test(test_retention_deletes_old_windows_and_frees_pages),
        cmocka_unit_test(test_retention_deletes_old_trace_entries),
        cmocka_unit_test(test_full_store_recovers),
        cmocka_unit_test(test_full_store_recovers_by_age),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_retention", tests, fixture_setup, fixture_teardown);
}
