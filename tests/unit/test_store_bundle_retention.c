/*
 * Retention and compaction through bundles (storage/store_bundle.c): deletion
 * by age and compaction take bundles with their spans or keep a span's 100 s
 * window alone in its bundle; in slices with writes between (as a twin store
 * given each pass at once), in steps over more spans than a transaction
 * takes, stopped at shutdown, and with a bundle missing its 100 s window.
 * Answers by hand from the profiles written by write_all (bundle_fixture.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <lmdb.h>

#include "core/buf.h"
#include "storage/store.h"
#include "tests/unit/bundle_fixture.h"
#include "tests/unit/fc_test.h"

static void test_retention_and_compaction_delete_bundles(void **state)
{
    struct fc_store *s = written("retention");
    struct fc_error err = {0};
    uint64_t n = 0;

    (void)state;
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 12 * 17);
    /*
     * The first four windows go; the rest of their span is read from its
     * bundle (the store stays open: the watermark is not reset by a reopen).
     */
    assert_int_equal(fc_store_delete_before(s, BASE + 40, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 40, BASE + 100),
                     want_p0(BASE + 40, BASE + 100));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 100),
                     want_p0(BASE + 40, BASE + 100));
    assert_int_equal(total(s, CPU "{pod=\"p1\"}", BASE + 10, BASE + 90),
                     want_p1(BASE + 40, BASE + 90));
    /*
     * The span's 100 s windows, rebuilt without what went, are stored whole:
     * the next pass bundles them again with the span's 6 + 3 windows left.
     */
    flush_all(s);
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 6 + 3 + 2);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE, BASE + 100),
                     want_p0(BASE + 40, BASE + 100) + want_p1(BASE + 40, BASE + 100));
    fc_store_close(s);
    assert_int_equal(entries_in("retention", "bundle"), 12 * 2);
    s = fc_test_store_open(dir, "retention");
    fc_store_close(s);
    assert_int_equal(entries_in("retention", "bundle"), 12 * 2);
    /* The span's end: its bundles go with its last windows. */
    s = fc_test_store_open(dir, "retention");
    assert_int_equal(fc_store_delete_before(s, BASE + 100, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE, BASE + 1200),
                     want_p0(BASE + 100, BASE + 1200) + want_p1(BASE + 100, BASE + 1200));
    fc_store_close(s);
    assert_int_equal(entries_in("retention", "bundle"), 11 * 2);
    /*
     * Compaction keeps the 100 s windows of the spans it compacts in their
     * bundles, alone, and answers from them.
     */
    s = fc_test_store_open(dir, "retention");
    assert_int_equal(fc_store_compact_before(s, BASE + 650, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 600, BASE + 1130),
                     want_p0(BASE + 600, BASE + 1130));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 100, BASE + 600),
                     want_p0(BASE + 100, BASE + 600));
    assert_int_equal(total(s, CPU "{pod=\"p1\"}", BASE + 100, BASE + 600),
                     want_p1(BASE + 100, BASE + 600));
    fc_store_close(s);
    assert_int_equal(entries_in("retention", "bundle"), 11 * 2);
    assert_int_equal(lone_parents_in("retention"), 5 * 2);
    /* Again: nothing changes. Then retention takes them with their spans. */
    s = fc_test_store_open(dir, "retention");
    assert_int_equal(fc_store_compact_before(s, BASE + 650, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE + 100, BASE + 600),
                     want_p0(BASE + 100, BASE + 600) + want_p1(BASE + 100, BASE + 600));
    fc_store_close(s);
    assert_int_equal(lone_parents_in("retention"), 5 * 2);
    s = fc_test_store_open(dir, "retention");
    assert_int_equal(fc_store_delete_before(s, BASE + 600, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 1130),
                     want_p0(BASE + 600, BASE + 1130));
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
    assert_int_equal(entries_in("retention", "bundle"), 6 * 2);
    assert_int_equal(lone_parents_in("retention"), 0);
}

/*
 * Deletion by age and compaction with a budget (1 ns: a call stops after
 * at most CLOCK_EVERY keys), writes committed between their calls, as the
 * exporter's writer does between slices, and a later call's cutoff
 * ignored until the pass ends. Answers: by hand; tables: as a twin store
 * given the same writes and each pass at once has them.
 */
static int sliced(int (*pass)(struct fc_store *, int64_t, int64_t, uint64_t *, struct fc_error *),
                  struct fc_store *s, int64_t cutoff, int64_t later_cutoff, int64_t late_s,
                  int64_t *written_at, uint64_t *deleted)
{
    struct fc_error err = {0};
    int calls = 0, rc;
    uint64_t n = 0;

    *deleted = 0;
    do {
        rc = pass(s, calls == 0 ? cutoff : later_cutoff, 1, &n, &err);
        assert_true(rc == FC_OK || rc == FC_EAGAIN);
        *deleted += n;
        if (rc == FC_EAGAIN) {
            /* A new profile, and one into the past the pass is taking (kept or not). */
            write_batch(s, profile("p0", *written_at, "work", 7));
            *written_at += 10;
            write_batch(s, profile("p1", late_s, "late", 11));
        }
        calls++;
        assert_true(calls < 10000);
    } while (rc == FC_EAGAIN);
    return calls;
}

/* What sliced wrote between calls, written into the twin after its pass: count of each. */
static void twin_writes(struct fc_store *s, int count, int64_t *written_at, int64_t late_s)
{
    for (int i = 0; i < count; i++) {
        write_batch(s, profile("p0", *written_at, "work", 7));
        *written_at += 10;
        write_batch(s, profile("p1", late_s, "late", 11));
    }
}

static void test_retention_in_slices_with_writes_between(void **state)
{
    struct fc_store *s = written("slices"), *twin = written("slices-twin");
    struct fc_error err = {0};
    int64_t at = BASE + 1200 + 3, twin_at = at; /* after every window written */
    uint64_t n = 0, deleted = 0, twin_deleted = 0;
    int calls, extra;

    (void)state;
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(fc_store_bundle_before(twin, BASE + 1200, 0, &n, &err), FC_OK);
    /*
     * Compaction up to 650 (whole 100 s windows: 600, and not the 1100 of
     * the calls after the first); the late profiles, at 203, are compacted
     * with the rest.
     */
    calls = sliced(fc_store_compact_before, s, BASE + 650, BASE + 1100, BASE + 203, &at, &deleted);
    assert_true(calls > 3);
    assert_int_equal(fc_store_coarse_before(s), BASE + 600);
    assert_int_equal(fc_store_compact_before(twin, BASE + 650, 0, &twin_deleted, &err), FC_OK);
    assert_int_equal(deleted, twin_deleted);
    twin_writes(twin, calls - 1, &twin_at, BASE + 203);
    extra = calls - 1;
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, at),
                     want_p0(BASE, BASE + 1200) + 7 * extra);
    assert_int_equal(total(s, CPU "{pod=\"p1\"}", BASE, BASE + 600),
                     want_p1(BASE, BASE + 600) + 11 * extra);
    assert_int_equal(total(s, CPU "{pod=\"p1\"}", BASE + 600, BASE + 1200),
                     want_p1(BASE + 600, BASE + 1200));
    /*
     * Deletion by age up to 600, not 1100. The late profiles at 203 written
     * between its calls may outlive it (a write after a pass does): a
     * second pass, at once, takes them, in both stores.
     */
    calls = sliced(fc_store_delete_before, s, BASE + 600, BASE + 1100, BASE + 203, &at, &deleted);
    assert_true(calls >= 3); /* about 200 keys left: stopped twice at least */
    assert_int_equal(fc_store_delete_before(twin, BASE + 600, 0, &twin_deleted, &err), FC_OK);
    twin_writes(twin, calls - 1, &twin_at, BASE + 203);
    extra += calls - 1;
    assert_int_equal(fc_store_delete_before(s, BASE + 600, 0, &n, &err), FC_OK);
    assert_int_equal(fc_store_delete_before(twin, BASE + 600, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE - 1000, BASE + 600), 0);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 600, at),
                     want_p0(BASE + 600, BASE + 1200) + 7 * extra);
    assert_int_equal(total(s, CPU "{pod=\"p1\"}", BASE + 600, at),
                     want_p1(BASE + 600, BASE + 1200));
    assert_int_equal(total(twin, CPU "{pod=~\"p.\"}", BASE - 1000, twin_at),
                     total(s, CPU "{pod=~\"p.\"}", BASE - 1000, at));
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    flush_all(s);
    flush_all(twin);
    fc_store_close(s);
    fc_store_close(twin);
    assert_int_equal(at, twin_at);
    assert_int_equal(lone_parents_in("slices"), lone_parents_in("slices-twin"));
    assert_int_equal(entries_in("slices", "bundle"), entries_in("slices-twin", "bundle"));
    assert_int_equal(entries_in("slices", "dict"), entries_in("slices-twin", "dict"));
    assert_int_equal(entries_in("slices", "node"), entries_in("slices-twin", "node"));
}

/*
 * A compaction pass stopped by its budget after it moved the cutoff, in
 * fc_store_bundle_compact (more than BUNDLE_TXN_SPANS spans to rewrite),
 * and never resumed: the exporter's writer stops slicing at shutdown. The
 * next pass after a reopen redoes it from its start (kept in DB_META), so
 * every bundle ends alone, as in a twin compacted at once (found in
 * review: the next pass started at the moved cutoff and left the bundles
 * it had not reached with their 10 s slices).
 */
static void test_compaction_stopped_at_shutdown_leaves_bundles(void **state)
{
    struct fc_store *s = fc_test_store_open(dir, "halted"),
                    *twin = fc_test_store_open(dir, "halted-twin");
    struct fc_error err = {0};
    uint64_t n = 0;
    char pod[16];
    int rc;

    (void)state;
    for (int p = 0; p < 50; p++) { /* 50 pods x 6 spans before 600: 300 bundles to rewrite */
        snprintf(pod, sizeof(pod), "q%02d", p);
        for (int i = 0; i < 24; i++) {
            write_batch(s, profile(pod, BASE + 50 * i + 3, "work", 100 + i));
            write_batch(twin, profile(pod, BASE + 50 * i + 3, "work", 100 + i));
        }
    }
    flush_all(s);
    flush_all(twin);
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(fc_store_bundle_before(twin, BASE + 1200, 0, &n, &err), FC_OK);
    rc = fc_store_compact_before(s, BASE + 650, 1, &n, &err);
    assert_int_equal(rc, FC_EAGAIN);
    assert_int_equal(fc_store_coarse_before(s), BASE + 600); /* moved by this first call */
    fc_store_close(s); /* shutdown: the pass is never resumed */
    assert_int_equal(fc_store_compact_before(twin, BASE + 650, 0, &n, &err), FC_OK);
    fc_store_close(twin);
    s = fc_test_store_open(dir, "halted");
    assert_int_equal(fc_store_compact_before(s, BASE + 650, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=~\"q.*\"}", BASE, BASE + 1200),
                     50 * (24 * 100 + 23 * 24 / 2));
    fc_store_close(s);
    assert_int_equal(entries_in("halted", "node"), entries_in("halted-twin", "node"));
    assert_int_equal(lone_parents_in("halted"), lone_parents_in("halted-twin"));
}

/* Copies the first bundle of the store at name to its base's key with span -100. */
static void plant_negative_span(const char *name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t key[64];
    struct fc_buf copy;

    fc_buf_init(&copy, 0);
    assert_true(lmdb_open(name, "bundle", 0, &env, &txn, &db));
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    assert_int_equal(mdb_cursor_get(c, &k, &v, MDB_FIRST), 0);
    assert_true(k.mv_size <= sizeof(key) && k.mv_size > 8);
    memcpy(key, k.mv_data, k.mv_size);
    for (int i = 0; i < 8; i++) {
        key[k.mv_size - 8 + i] = (uint8_t)((uint64_t)-100 >> (56 - 8 * i));
    }
    fc_buf_append(&copy, v.mv_data, v.mv_size);
    mdb_cursor_close(c);
    k.mv_data = key;
    v = (MDB_val){copy.len, copy.data};
    assert_int_equal(mdb_put(txn, db, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    fc_buf_release(&copy);
}

/*
 * Compaction over more spans than one transaction takes (256), in two
 * passes: the second starts where the first's cutoff was. Pod q: cpu 2i+1
 * at BASE + 100 i + 3 and 2i+2 at + 13, for 300 spans.
 */
static void test_compaction_in_steps(void **state)
{
    struct fc_store *s = fc_test_store_open(dir, "compactsteps");
    struct fc_error err = {0};
    uint64_t n = 0;
    int64_t want_all = 0, want_first = 0;

    (void)state;
    for (int i = 0; i < 300; i++) {
        write_batch(s, profile("q", BASE + 100 * i + 3, "work", 2 * i + 1));
        write_batch(s, profile("q", BASE + 100 * i + 13, "work", 2 * i + 2));
        want_all += 4 * i + 3;
        want_first += i < 150 ? 4 * i + 3 : 0;
    }
    flush_all(s);
    assert_int_equal(fc_store_bundle_before(s, BASE + 30000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 300 * 3 + 3); /* and the three 10^4 s windows packed */
    assert_int_equal(fc_store_compact_before(s, BASE + 15000, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=\"q\"}", BASE, BASE + 30000), want_all);
    assert_int_equal(total(s, CPU "{pod=\"q\"}", BASE, BASE + 15000), want_first);
    assert_int_equal(total(s, CPU "{pod=\"q\"}", BASE + 14900, BASE + 15000), 4 * 149 + 3);
    fc_store_close(s);
    assert_int_equal(lone_parents_in("compactsteps"), 150);
    plant_negative_span("compactsteps");
    s = fc_test_store_open(dir, "compactsteps");
    /*
     * A key with a negative span (a damaged store; sorting after the base's
     * other spans) is stepped over: the pass ends (found by review: it
     * sought back to the previous cutoff forever).
     */
    alarm(60);
    assert_int_equal(fc_store_compact_before(s, BASE + 30000, 0, &n, &err), FC_OK);
    alarm(0);
    assert_int_equal(total(s, CPU "{pod=\"q\"}", BASE, BASE + 30000), want_all);
    assert_int_equal(total(s, CPU "{pod=\"q\"}", BASE + 29900, BASE + 30000), 4 * 299 + 3);
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
    assert_int_equal(lone_parents_in("compactsteps"), 300 + 1);
    assert_int_equal(entries_in("compactsteps", "bundle"), 300 + 1 + 1); /* and the pack */
}

/*
 * A span bundled while its 100 s window was dirty (here a dirty key put in
 * by hand, as a crash leaves one) holds its 10 s windows only; compaction
 * deletes that bundle with them, and keeps the others with their 100 s
 * windows alone.
 */
static void test_compaction_drops_a_bundle_without_its_100s_window(void **state)
{
    struct fc_store *s = written("noparent");
    struct fc_error err = {0};
    uint64_t n = 0;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node, dirty;
    MDB_cursor *c;
    MDB_val k, v, empty = {0, (void *)""};
    bool marked = false;

    (void)state;
    fc_store_close(s);
    /* Node keys: tenant 0 be32(base) u8(level) be64(start); the first 100 s window at BASE. */
    assert_true(lmdb_open("noparent", "node", 0, &env, &txn, &node));
    assert_int_equal(mdb_dbi_open(txn, "dirty", 0, &dirty), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0 && !marked;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *kb = (const uint8_t *)k.mv_data + k.mv_size - 9;
        uint64_t start = 0;
        for (int i = 1; i < 9; i++) {
            start = start << 8 | kb[i];
        }
        if (kb[0] == 1 && start == (uint64_t)BASE) {
            assert_int_equal(mdb_put(txn, dirty, &k, &empty, 0), 0);
            marked = true;
        }
    }
    mdb_cursor_close(c);
    assert_true(marked);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    s = fc_test_store_open(dir, "noparent");
    assert_int_equal(fc_store_bundle_before(s, BASE + 200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 2 * 17 - 1); /* one 100 s window left out */
    assert_int_equal(fc_store_compact_before(s, BASE + 200, 0, &n, &err), FC_OK);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE, BASE + 200),
                     want_p0(BASE, BASE + 200) + want_p1(BASE, BASE + 200));
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
    assert_int_equal(entries_in("noparent", "bundle"), 3);
    assert_int_equal(lone_parents_in("noparent"), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retention_and_compaction_delete_bundles),
        cmocka_unit_test(test_retention_in_slices_with_writes_between),
        cmocka_unit_test(test_compaction_drops_a_bundle_without_its_100s_window),
        cmocka_unit_test(test_compaction_in_steps),
        cmocka_unit_test(test_compaction_stopped_at_shutdown_leaves_bundles),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_bundle_retention", tests, fixture_setup,
                                       fixture_teardown);
}
