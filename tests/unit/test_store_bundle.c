/*
 * Bundles (storage/store_bundle.c): the past 10 s windows of a base in one
 * 100 s span compressed together. Every answer after bundling is computed by
 * hand from the profiles written by write_all (bundle_fixture.h). Also
 * through a late write into a bundled window, a backfill, a link, a pass in
 * steps, a reopen, damage (a bundle, a marker, a window off the grid), a
 * reader's bundle caches; and that a real pod's store shrinks (the corpus'
 * Go CPU profiles). Retention and compaction through bundles:
 * test_store_bundle_retention; dictionaries and packs: test_store_bundle_pack.
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

#include "core/batch.h"
#include "formats/pprof.h"
#include "storage/store.h"
#include "storage/store_int.h" /* a reader's bundle caches (test_reader_bundle_caches) */
#include "tests/unit/bundle_fixture.h"
#include "tests/unit/fc_test.h"

/* Ranges that read 10 s windows at their edges (bundled or not) and coarse ones inside. */
static const int64_t ranges[][2] = {
    {0, 1200}, {30, 570}, {50, 60}, {0, 100}, {10, 90}, {950, 1130}, {990, 1010}, {370, 380},
};

static void assert_answers(struct fc_store *s, int64_t extra_at, int64_t extra)
{
    for (size_t r = 0; r < sizeof(ranges) / sizeof(ranges[0]); r++) {
        int64_t from = BASE + ranges[r][0], until = BASE + ranges[r][1];
        int64_t add = extra_at >= from && extra_at < until ? extra : 0;
        assert_int_equal(total(s, CPU "{pod=\"p0\"}", from, until), want_p0(from, until) + add);
        assert_int_equal(total(s, CPU "{pod=\"p1\"}", from, until), want_p1(from, until));
        assert_int_equal(total(s, CPU "{pod=~\"p.\"}", from, until),
                         want_p0(from, until) + want_p1(from, until) + add);
    }
}

/* 10 s timeline buckets of p0 over [BASE, BASE + 1200): each one profile, by hand. */
static void assert_timeline(struct fc_store *s)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t buckets[WINDOWS];

    assert_int_equal(fc_selector_parse(CPU "{pod=\"p0\"}", &sel, &err), FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    q.from_ns = BASE * 1000000000LL;
    q.until_ns = (BASE + 10 * WINDOWS) * 1000000000LL;
    assert_int_equal(fc_store_timeline(s, &q, 10000000000LL, buckets, WINDOWS, &err), FC_OK);
    for (int i = 0; i < WINDOWS; i++) {
        assert_int_equal(buckets[i], 1000 + i);
    }
    fc_selector_release(&sel);
}

static void test_bundled_windows_answer_as_before(void **state)
{
    struct fc_store *s = written("answers");
    struct fc_error err = {0};
    uint64_t n = 0;

    (void)state;
    assert_answers(s, 0, 0);
    /*
     * Spans ending by BASE + 1000: 10 spans, 10 windows of p0 and 5 of p1
     * each, and each pod's 100 s window.
     */
    assert_int_equal(fc_store_bundle_before(s, BASE + 1000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 10 * (10 + 5 + 2));
    assert_answers(s, 0, 0);
    assert_timeline(s);
    /* Done once: the same cutoff again bundles nothing. */
    assert_int_equal(fc_store_bundle_before(s, BASE + 1000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
    assert_int_equal(entries_in("answers", "bundle"), 10 * 2);
    /* Reopened: read the same; every span is bundled already. */
    s = fc_test_store_open(dir, "answers");
    assert_answers(s, 0, 0);
    assert_int_equal(fc_store_bundle_before(s, BASE + 1000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    /* The rest, up to a cutoff not on a span's edge (rounded down to 1100). */
    assert_int_equal(fc_store_bundle_before(s, BASE + 1150, 0, &n, &err), FC_OK);
    assert_int_equal(n, 10 + 5 + 2);
    assert_answers(s, 0, 0);
    assert_timeline(s);
    fc_store_close(s);
}

static void test_late_write_into_a_bundled_window(void **state)
{
    struct fc_store *s = written("late");
    struct fc_error err = {0};
    uint64_t n = 0;
    int64_t at = BASE + 57; /* p0's window BASE + 50, bundled */

    (void)state;
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 12 * 17);
    write_batch(s, profile("p0", at, "work", 100000));
    assert_answers(s, at, 100000); /* open, not flushed */
    flush_all(s);
    assert_answers(s, at, 100000);
    /*
     * Its 10 s window was stored whole and its 100 s window rebuilt: the next
     * pass bundles its span again, and only it.
     */
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 10 + 1);
    assert_answers(s, at, 100000);
    fc_store_close(s);
    /* After a reopen every span is looked at again: all bundled. */
    s = fc_test_store_open(dir, "late");
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    assert_answers(s, at, 100000);
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
}

static void test_backfill_after_a_pass_is_bundled(void **state)
{
    struct fc_store *s = fc_test_store_open(dir, "backfill");
    struct fc_error err = {0};
    uint64_t n = 0;

    (void)state;
    /* A pass over an empty store first: the data comes after it, into that past. */
    assert_int_equal(fc_store_bundle_before(s, BASE + 5000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    write_all(s);
    assert_int_equal(fc_store_bundle_before(s, BASE + 5000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 12 * 17);
    assert_answers(s, 0, 0);
    fc_store_close(s);
}

/*
 * A pod with one profile in its 1000 s window: that window links to its
 * 100 s window, which is bundled with its one 10 s window; the link is read
 * through the bundle (flame graph and timeline).
 */
static void test_link_to_a_bundled_window(void **state)
{
    struct fc_store *s = fc_test_store_open(dir, "link");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t buckets[2];
    uint64_t n = 0;

    (void)state;
    write_batch(s, profile("p2", BASE + 503, "work", 77));
    flush_all(s);
    assert_int_equal(fc_store_bundle_before(s, BASE + 2000, 0, &n, &err), FC_OK);
    assert_int_equal(n, 2);
    assert_int_equal(total(s, CPU "{pod=\"p2\"}", BASE, BASE + 1000), 77);
    assert_int_equal(total(s, CPU "{pod=\"p2\"}", BASE, BASE + 10000), 77);
    assert_int_equal(total(s, CPU "{pod=\"p2\"}", BASE + 500, BASE + 510), 77);
    assert_int_equal(total(s, CPU "{pod=\"p2\"}", BASE + 510, BASE + 1000), 0);
    assert_int_equal(fc_selector_parse(CPU "{pod=\"p2\"}", &sel, &err), FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    q.from_ns = BASE * 1000000000LL;
    q.until_ns = (BASE + 2000) * 1000000000LL;
    assert_int_equal(fc_store_timeline(s, &q, 1000000000000LL, buckets, 2, &err), FC_OK);
    assert_int_equal(buckets[0], 77);
    assert_int_equal(buckets[1], 0);
    fc_selector_release(&sel);
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
}

/*
 * A pass with a time budget stops after a transaction and goes on at the
 * next call; a transaction begins no span past the budget after its first:
 * with 1 ns, one span a call. 300 spans of two 10 s windows and a 100 s
 * window (one call each), then the packs of the three 10^4 s windows (one
 * 10^5 s span, one call).
 */
static void test_pass_in_steps(void **state)
{
    struct fc_store *s = fc_test_store_open(dir, "steps");
    struct fc_error err = {0};
    uint64_t n = 0;
    int64_t want = 0;

    (void)state;
    for (int i = 0; i < 600; i++) {
        write_batch(s, profile("p3", BASE + 50 * i + 1, "work", 1 + i));
        want += 1 + i;
    }
    flush_all(s);
    for (int call = 0; call < 300; call++) {
        assert_int_equal(fc_store_bundle_before(s, BASE + 30000, 1, &n, &err), FC_EAGAIN);
        assert_int_equal(n, 3);
        if (call % 50 == 0 || call == 299) {
            assert_int_equal(total(s, CPU "{pod=\"p3\"}", BASE, BASE + 30000), want);
        }
    }
    /* Then the packs: the three 10^4 s windows ended by the cutoff (format 17). */
    assert_int_equal(fc_store_bundle_before(s, BASE + 30000, 1, &n, &err), FC_OK);
    assert_int_equal(n, 3);
    assert_int_equal(total(s, CPU "{pod=\"p3\"}", BASE, BASE + 30000), want);
    assert_int_equal(total(s, CPU "{pod=\"p3\"}", BASE + 50, BASE + 60), 2);
    assert_int_equal(fc_store_bundle_before(s, BASE + 30000, 1, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    fc_store_close(s);
}

/* Overwrites every bundle of the store at name with bytes that are no zstd frame. */
static void damage_bundles(const char *name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v, junk = {16, (void *)"not a zstd frame"};

    assert_true(lmdb_open(name, "bundle", 0, &env, &txn, &db));
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        assert_int_equal(mdb_cursor_put(c, &k, &junk, MDB_CURRENT), 0);
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/* Copies the level-0 window at BASE + 10 (p0's) to a key at BASE + 15: off the 10 s grid. */
static void plant_off_grid_window(const char *name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t keys[8][64], vals[8][4096];
    size_t klen[8], vlen[8], n = 0;

    assert_true(lmdb_open(name, "node", 0, &env, &txn, &db));
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0 && n < 8;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *kb = k.mv_data;
        uint64_t start = 0;
        /* tenant 0 be32(base) u8(level) be64(start) */
        for (int i = 0; i < 8; i++) {
            start = start << 8 | kb[k.mv_size - 8 + i];
        }
        if (kb[k.mv_size - 9] == 0 && start == (uint64_t)BASE + 10 && k.mv_size <= 64 &&
            v.mv_size <= 4096) {
            memcpy(keys[n], k.mv_data, k.mv_size);
            keys[n][k.mv_size - 1] = (uint8_t)(keys[n][k.mv_size - 1] + 5);
            klen[n] = k.mv_size;
            memcpy(vals[n], v.mv_data, v.mv_size);
            vlen[n++] = v.mv_size;
        }
    }
    mdb_cursor_close(c);
    assert_true(n > 0);
    for (size_t i = 0; i < n; i++) {
        MDB_val kk = {klen[i], keys[i]}, vv = {vlen[i], vals[i]};
        assert_int_equal(mdb_put(txn, db, &kk, &vv, 0), 0);
    }
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/*
 * A damaged store with a 10 s window off the grid (at +15): its span is left
 * as it is (eleven windows and the 100 s one used to overrun the span's
 * slots), the others are bundled.
 */
static void test_window_off_the_grid_left_alone(void **state)
{
    struct fc_store *s = written("offgrid");
    struct fc_error err = {0};
    uint64_t n = 0;

    (void)state;
    fc_store_close(s);
    plant_off_grid_window("offgrid");
    s = fc_test_store_open(dir, "offgrid");
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    assert_int_equal(n, 11 * 17 + 5 + 1); /* every span but p0's first (p1 has no +10) */
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 100, BASE + 1200),
                     want_p0(BASE + 100, BASE + 1200));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 130, BASE + 170),
                     want_p0(BASE + 130, BASE + 170));
    /* The span left alone still answers (its 100 s window, a 10 s window). */
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 100), want_p0(BASE, BASE + 100));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 20, BASE + 30),
                     want_p0(BASE + 20, BASE + 30));
    assert_int_equal(fc_store_corrupt_windows(s), 0);
    fc_store_close(s);
}

static void test_damaged_bundle_is_skipped(void **state)
{
    struct fc_store *s = written("damaged");
    struct fc_error err = {0};
    uint64_t n = 0;

    (void)state;
    assert_int_equal(fc_store_bundle_before(s, BASE + 200, 0, &n, &err), FC_OK);
    fc_store_close(s);
    damage_bundles("damaged");
    s = fc_test_store_open(dir, "damaged");
    /*
     * Its 10 s and 100 s windows are skipped and counted; the 1000 s window
     * above them and the spans not bundled still answer.
     */
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 10, BASE + 90), 0);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 200), 0);
    assert_true(fc_store_corrupt_windows(s) > 0);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 1000), want_p0(BASE, BASE + 1000));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 210, BASE + 290),
                     want_p0(BASE + 210, BASE + 290));
    fc_store_close(s);
}

/*
 * Points the markers of the level-0 windows at BASE + 20 (p0's and p1's) at
 * slot 3 of their span (the window at BASE + 30), as damage would: a marker
 * is le32 0x20000000, u8 slot, be64 span.
 */
static void repoint_markers(const char *name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v;
    size_t n = 0;

    assert_true(lmdb_open(name, "node", 0, &env, &txn, &db));
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *kb = k.mv_data;
        uint64_t start = 0;
        uint8_t marker[13];
        for (int i = 0; i < 8; i++) {
            start = start << 8 | kb[k.mv_size - 8 + i];
        }
        if (kb[k.mv_size - 9] != 0 || start != (uint64_t)BASE + 20) {
            continue;
        }
        assert_int_equal(v.mv_size, sizeof(marker));
        memcpy(marker, v.mv_data, sizeof(marker));
        assert_int_equal(marker[4], 2); /* bundled: slot 2 of span BASE */
        marker[4] = 3;
        v = (MDB_val){sizeof(marker), marker};
        assert_int_equal(mdb_cursor_put(c, &k, &v, MDB_CURRENT), 0);
        n++;
    }
    mdb_cursor_close(c);
    assert_int_equal(n, 2);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/*
 * A marker that names another window of its span (damage) is skipped and
 * counted: never answered with the neighbour's data, by a flame graph, a
 * timeline or a write that merges into the window (which replaces it).
 */
static void test_marker_of_another_window_is_skipped(void **state)
{
    struct fc_store *s = written("repointed");
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t buckets[10];
    uint64_t n = 0;

    (void)state;
    assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
    fc_store_close(s);
    repoint_markers("repointed");
    s = fc_test_store_open(dir, "repointed");
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 20, BASE + 30), 0);
    assert_int_equal(total(s, CPU "{pod=~\"p.\"}", BASE + 20, BASE + 30), 0);
    assert_true(fc_store_corrupt_windows(s) > 0);
    /* Its neighbours and the 100 s window above it answer as before. */
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 30, BASE + 40),
                     want_p0(BASE + 30, BASE + 40));
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE, BASE + 100), want_p0(BASE, BASE + 100));
    /* The 10 s timeline: the damaged bucket is empty, the others by hand. */
    assert_int_equal(fc_selector_parse(CPU "{pod=\"p0\"}", &sel, &err), FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    q.from_ns = BASE * 1000000000LL;
    q.until_ns = (BASE + 100) * 1000000000LL;
    assert_int_equal(fc_store_timeline(s, &q, 10000000000LL, buckets, 10, &err), FC_OK);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(buckets[i], i == 2 ? 0 : 1000 + i);
    }
    fc_selector_release(&sel);
    /* A late profile into it: the window is rebuilt from that profile alone. */
    write_batch(s, profile("p0", BASE + 25, "work", 7));
    flush_all(s);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 20, BASE + 30), 7);
    assert_int_equal(total(s, CPU "{pod=\"p0\"}", BASE + 30, BASE + 40),
                     want_p0(BASE + 30, BASE + 40));
    fc_store_close(s);
}

/* Slots of caches holding a bundle. */
static size_t loaded(const struct bundle_caches *caches)
{
    size_t n = 0;

    for (size_t i = 0; caches->v != NULL && i < caches->n; i++) {
        n += caches->v[i].tenant != NULL;
    }
    return n;
}

/*
 * What a reader's bundle caches hold is counted in the store's total, and
 * the cap (bundle_cache_max_bytes) bounds it: with none, a reader keeps one
 * bundle at a time; with the default, every bundle it read (24 here: 12
 * spans of two pods). Every 10 s window decodes to its total by hand either
 * way, and the count returns to 0 when the reader ends.
 */
static void test_reader_bundle_caches(void **state)
{
    (void)state;
    for (int none = 0; none < 2; none++) {
        char sub[256];
        struct fc_store_options o = {0};
        struct fc_store *s;
        struct fc_error err = {0};
        uint64_t n = 0;
        MDB_txn *txn;
        MDB_cursor *c;
        MDB_val k, v;
        struct bundle_caches caches = {NULL, FC_STORE_READER_BUNDLES, NULL, NULL, 0};
        int64_t sum = 0;
        size_t most = 0;

        snprintf(sub, sizeof(sub), "%s/caches%d", dir, none);
        o.path = sub;
        o.sync = FC_SYNC_NONE;
        o.bundle_cache_max_bytes = none ? -1 : 0;
        assert_int_equal(fc_store_open(&o, &s, &err), FC_OK);
        assert_int_equal(fc_store_bundle_cache_max_bytes(s),
                         none ? 0 : FC_STORE_BUNDLE_CACHE_BYTES);
        write_all(s);
        assert_int_equal(fc_store_bundle_before(s, BASE + 1200, 0, &n, &err), FC_OK);
        assert_int_equal(n, 12 * 17);
        caches.owner = s;
        assert_int_equal(mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn), 0);
        assert_int_equal(mdb_cursor_open(txn, s->db[DB_NODE], &c), 0);
        for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
             g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            size_t tenant_len = 0;
            uint32_t base = 0;
            int level = -1;
            int64_t start = 0;
            struct parts ps = {0};
            assert_true(node_key_split(&k, &tenant_len, &base, &level, &start));
            if (level != 0) {
                continue;
            }
            assert_true(fc_store_bundled_marker(&v));
            assert_true(
                fc_store_window_decode(s, txn, "anonymous", base, &v, &caches, NULL, NULL, &ps));
            for (uint32_t i = 0; i < ps.n; i++) {
                sum += fc_tree_total(&ps.v[i].tree);
            }
            fc_store_parts_release(&ps);
            assert_int_equal(caches.held, fc_store_bundle_cache_bytes(s));
            most = loaded(&caches) > most ? loaded(&caches) : most;
        }
        mdb_cursor_close(c);
        mdb_txn_abort(txn);
        assert_int_equal(sum, want_p0(BASE, BASE + 1200) + want_p1(BASE, BASE + 1200));
        assert_int_equal(most, none ? 1 : 24);
        fc_store_bundle_caches_release(&caches);
        assert_int_equal(fc_store_bundle_cache_bytes(s), 0);
        /* And through the query API, whose readers count the same way. */
        assert_answers(s, 0, 0);
        assert_timeline(s);
        assert_int_equal(fc_store_bundle_cache_bytes(s), 0);
        assert_int_equal(fc_store_corrupt_windows(s), 0);
        fc_store_close(s);
    }
}

/*
 * A pod of real profiles (the corpus' three Go CPU profiles in turn, every
 * 10 s for an hour): bundling keeps every answer and takes fewer pages.
 */
static void test_bundles_shrink_a_pod(void **state)
{
    const char *files[3] = {"go-1s-cpu.pb.gz", "go-3s-cpu.pb.gz", "pyroscope-go-cpu.pb.gz"};
    uint8_t *data[3];
    size_t len[3];
    struct fc_store *s = fc_test_store_open(dir, "shrink");
    struct fc_error err = {0};
    int64_t before[4], aligned[4], used_before, used_after;
    uint64_t n = 0;
    char path[512];

    (void)state;
    for (int k = 0; k < 3; k++) {
        snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), files[k]);
        assert_non_null(data[k] = fc_test_read(path, &len[k]));
    }
    for (int i = 0; i < 360; i++) {
        struct fc_batch *b = fc_batch_new(0);
        struct fc_profile *p = NULL;
        assert_int_equal(fc_pprof_decode(b, data[i % 3], len[i % 3], NULL, &p, &err), FC_OK);
        fc_profile_set_label(b, p, "service_name", "shrink");
        fc_profile_set_label(b, p, "__name__", "process_cpu");
        p->time_ns = (BASE + 10 * i + 1) * 1000000000LL;
        write_batch(s, b);
    }
    flush_all(s);
    for (int r = 0; r < 4; r++) {
        before[r] =
            total(s, CPU "{service_name=\"shrink\"}", BASE + 130 * r + 10, BASE + 3600 - 270 * r);
        assert_true(before[r] > 0);
        aligned[r] =
            total(s, CPU "{service_name=\"shrink\"}", BASE + 100 * r, BASE + 3600 - 100 * r);
    }
    used_before = fc_store_used_bytes(s);
    assert_int_equal(fc_store_bundle_before(s, BASE + 3600, 0, &n, &err), FC_OK);
    assert_int_equal(n, 360 + 36);
    used_after = fc_store_used_bytes(s);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(
            total(s, CPU "{service_name=\"shrink\"}", BASE + 130 * r + 10, BASE + 3600 - 270 * r),
            before[r]);
    }
    print_message("pages in use %lld -> %lld bytes bundled\n", (long long)used_before,
                  (long long)used_after);
    assert_true(used_after * 2 < used_before); /* 0.39x measured; markers put in place: 0.68x */
    /*
     * Compacted: the 100 s windows stored whole again from their bundles
     * (their trees' selfs divided by the sampling period, format 12) answer
     * every 100 s range as before.
     */
    assert_int_equal(fc_store_compact_before(s, BASE + 3600, 0, &n, &err), FC_OK);
    for (int r = 0; r < 4; r++) {
        assert_int_equal(
            total(s, CPU "{service_name=\"shrink\"}", BASE + 100 * r, BASE + 3600 - 100 * r),
            aligned[r]);
    }
    fc_store_close(s);
    for (int k = 0; k < 3; k++) {
        free(data[k]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bundled_windows_answer_as_before),
        cmocka_unit_test(test_late_write_into_a_bundled_window),
        cmocka_unit_test(test_backfill_after_a_pass_is_bundled),
        cmocka_unit_test(test_link_to_a_bundled_window),
        cmocka_unit_test(test_pass_in_steps),
        cmocka_unit_test(test_damaged_bundle_is_skipped),
        cmocka_unit_test(test_marker_of_another_window_is_skipped),
        cmocka_unit_test(test_reader_bundle_caches),
        cmocka_unit_test(test_window_off_the_grid_left_alone),
        cmocka_unit_test(test_bundles_shrink_a_pod),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_bundle", tests, fixture_setup, fixture_teardown);
}
