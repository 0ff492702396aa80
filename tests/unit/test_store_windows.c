/*
 * Coarse windows (100 s to 10^7 s): dirty until a flush rebuilds them from
 * their children, links for one child and sums for two, built once closed,
 * rebuilds within their budget (bytes and time) and while deletion waits,
 * and all of it against a model of random writes, flushes, retention,
 * compaction, bundling, reopens and crashes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <lmdb.h>

#include "core/timeutil.h"
#include "storage/store.h"
#include "storage/store_int.h" /* fc_store_flush_open, a flush of the open windows alone */
#include "tests/unit/fc_test.h"
#include "tests/unit/store_fixture.h"

/*
 * Coarse windows are dirty until a flush rebuilds them from their 10 s
 * windows: before and after, every range and timeline counts each profile
 * once (by hand: GO_CPU_TOTAL per profile), also across a reopen. The open
 * windows' cap is 1 byte, so every write puts its 10 s window into LMDB at
 * once and leaves the coarse windows above it dirty (a cap flush); no timed
 * flush comes.
 */
static void test_dirty_windows_exact_before_and_after_flush(void **state)
{
    struct fc_store_options o = {0};
    struct fc_store *s2;
    char sub[256];
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t buckets[10];

    (void)state;
    snprintf(sub, sizeof(sub), "%s/dirty", dir);
    o.path = sub;
    o.sync = FC_SYNC_NONE;
    o.open_max_bytes = 1;
    o.flush_interval_ns = 1000000LL * 1000000000LL;
    assert_int_equal(fc_store_open(&o, &s2, &err), FC_OK);
    for (int i = 0; i < 30; i++) { /* one profile per 10 s over [BASE, BASE + 300) */
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE + i * 10, "d");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
        /* Past the cap: written into LMDB by the write itself, nothing left open or logged. */
        assert_int_equal(fc_store_open_bytes(s2), 0);
        assert_int_equal(fc_store_log_bytes(s2), 0);
    }
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "d";
    q.selector = &sel;
    for (int pass = 0; pass < 3; pass++) {
        int64_t sum = 0;
        /* Whole coarse windows (up to 10^7 s), and a slice of them. */
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 30 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 30 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE + 100, BASE + 200), 10 * GO_CPU_TOTAL);
        /* A 100 s step reads 100 s windows (dirty ones from their children). */
        q.from_ns = BASE * 1000000000LL;
        q.until_ns = (BASE + 1000) * 1000000000LL;
        assert_int_equal(fc_store_timeline(s2, &q, 100000000000LL, buckets, 10, &err), FC_OK);
        for (int i = 0; i < 10; i++) {
            sum += buckets[i];
        }
        assert_int_equal(sum, 30 * GO_CPU_TOTAL);
        assert_int_equal(buckets[1], 10 * GO_CPU_TOTAL);
        if (pass == 0) {
            /*
             * What a crash leaves here (the directory copied while open):
             * dirty marks and no coarse window built yet. Reopened, the
             * copy reads every coarse window through its children.
             */
            struct fc_store_options oc = o;
            struct fc_store *crash;
            char cmd[1024], copy[300];
            snprintf(cmd, sizeof(cmd), "cp -r %s/dirty %s/dirty-crash", dir, dir);
            assert_int_equal(system(cmd), 0);
            snprintf(copy, sizeof(copy), "%s/dirty-crash", dir);
            oc.path = copy;
            assert_int_equal(fc_store_open(&oc, &crash, &err), FC_OK);
            assert_int_equal(range_total(crash, &q, BASE - 10000000, BASE + 10000000),
                             30 * GO_CPU_TOTAL);
            assert_int_equal(range_total(crash, &q, BASE, BASE + 1000), 30 * GO_CPU_TOTAL);
            fc_store_close(crash);
            assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        } else if (pass == 1) {
            /* Dirty again, then closed and reopened. */
            struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE + 500, "d");
            assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
            fc_batch_unref(b);
            assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 31 * GO_CPU_TOTAL);
            fc_store_close(s2);
            assert_int_equal(fc_store_open(&o, &s2, &err), FC_OK);
            assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 31 * GO_CPU_TOTAL);
            /* Back to 30 for the next pass: [BASE + 500, +10) out of the checked ranges. */
            break;
        }
    }
    fc_selector_release(&sel);
    fc_store_close(s2);
}

/* Node values in the store at dir/name (closed): how many, and how many are links. */
static void count_nodes_packed(const char *name, int *nodes, int *links, int *sums, int *packed)
{
    char sub[256];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node;
    MDB_cursor *c;
    MDB_val k, v;

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    *nodes = *links = *sums = *packed = 0;
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 32), 0);
    assert_int_equal(mdb_env_open(env, sub, MDB_RDONLY, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        (*nodes)++;
        /* The link form, by its definition in storage/store_int.h: 0xffffffff, be64 start. */
        *links += v.mv_size == 12 && memcmp(v.mv_data, "\xff\xff\xff\xff", 4) == 0;
        /* A sum (format 16): le32 0xfffffffe alone. */
        *sums += v.mv_size == 4 && memcmp(v.mv_data, "\xfe\xff\xff\xff", 4) == 0;
        /* A packed 10^4 s window (format 17): key level 3, a marker (le32 0x20000000, slot, span).
         */
        *packed += ((const uint8_t *)k.mv_data)[k.mv_size - 9] == 3 && v.mv_size == 13 &&
                   memcmp(v.mv_data, "\x00\x00\x00\x20", 4) == 0;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/*
 * Closes st with every dirty coarse window built, closed or not: a flush
 * builds only those a minute behind the newest profile (store_flush.c),
 * and the tests that count nodes write no newer one.
 */
static void close_built(struct fc_store *st)
{
    struct fc_error err = {0};

    assert_int_equal(fc_store_flush_before(st, INT64_MAX, &err), FC_OK);
    fc_store_close(st);
}

static void count_nodes(const char *name, int *nodes, int *links, int *sums)
{
    int packed;

    count_nodes_packed(name, nodes, links, sums, &packed);
}

/* The sum of a timeline of 10 steps of step_s from BASE, and its bucket i. */
static int64_t timeline_bucket(struct fc_store *st, struct fc_store_query *q, int64_t step_s, int i)
{
    int64_t buckets[10];
    struct fc_error err = {0};

    q->from_ns = BASE * 1000000000LL;
    q->until_ns = (BASE + 10 * step_s) * 1000000000LL;
    assert_int_equal(fc_store_timeline(st, q, step_s * 1000000000LL, buckets, 10, &err), FC_OK);
    return buckets[i];
}

/*
 * Coarse windows whose only stored child is one window link to it (levels
 * 2 and up). One go-1s-cpu profile (GO_CPU_TOTAL by hand) at BASE, which
 * starts a window at every level: its 10 s and 100 s windows hold it, the
 * five above are links, and every range and timeline counts it once. A
 * second profile at BASE + 1000 gives the 10^4 s window two children: a
 * copy again, linked from above. Retention deleting the first profile's
 * windows leaves the link above them without a child: it counts nothing,
 * before and after the flush that rebuilds it, and after a reopen.
 */
static void test_single_child_windows_link(void **state)
{
    struct fc_store *s2 = open_unflushed("links");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE, "l");
    uint64_t deleted = 0;
    int nodes, links, sums;

    (void)state;
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    close_built(s2);
    count_nodes("links", &nodes, &links, &sums);
    assert_int_equal(nodes, 7);
    assert_int_equal(links, 5);
    assert_int_equal(sums, 0);
    s2 = open_unflushed("links");
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "l";
    q.selector = &sel;
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 1000, 0), GO_CPU_TOTAL);    /* 10^3 s windows */
    assert_int_equal(timeline_bucket(s2, &q, 100000, 0), GO_CPU_TOTAL);  /* 10^5 s windows */
    assert_int_equal(timeline_bucket(s2, &q, 1000000, 0), GO_CPU_TOTAL); /* 10^6 s windows */

    b = load("go-1s-cpu.pb.gz", 0, BASE + 1000, "l");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 2 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10000), 2 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 1000, 1), GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 10000, 0), 2 * GO_CPU_TOTAL);
    close_built(s2);
    count_nodes("links", &nodes, &links, &sums);
    /*
     * 10 s, 100 s and 10^3 s of each profile (two links), the 10^4 s window
     * a sum of its two children, and above it sums (a link never leads to one).
     */
    assert_int_equal(nodes, 3 + 3 + 1 + 3);
    assert_int_equal(links, 2);
    assert_int_equal(sums, 1 + 3);

    s2 = open_unflushed("links");
    /* Windows ending by BASE + 500 go: the first profile's 10 s and 100 s windows. */
    assert_int_equal(fc_store_delete_before(s2, BASE + 500, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 2);
    for (int pass = 0; pass < 3; pass++) {
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 0);
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), GO_CPU_TOTAL);
        assert_int_equal(timeline_bucket(s2, &q, 1000, 0), 0);
        assert_int_equal(timeline_bucket(s2, &q, 1000, 1), GO_CPU_TOTAL);
        assert_int_equal(timeline_bucket(s2, &q, 10000, 0), GO_CPU_TOTAL);
        if (pass == 0) {
            assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        } else if (pass == 1) {
            fc_store_close(s2);
            s2 = open_unflushed("links");
        }
    }
    /* Compaction deletes the 10 s window under the second profile's 100 s window: a copy. */
    assert_int_equal(fc_store_compact_before(s2, BASE + 1100, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(range_total(s2, &q, BASE + 1000, BASE + 1100), GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), GO_CPU_TOTAL);
    fc_store_close(s2);
    fc_selector_release(&sel);
}

/*
 * Replaces the value of the first node key of level `level` in the closed
 * store at name by v (len bytes); false when there is none.
 */
static bool put_node_value(const char *name, int level, const void *v, size_t len)
{
    char sub[256];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node;
    MDB_cursor *c;
    MDB_val k, old, nv = {len, (void *)v};
    bool done = false;

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 32), 0);
    assert_int_equal(mdb_env_open(env, sub, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    /* Key: tenant 0 be32(base) u8(level) be64(start) (storage/store.h). */
    for (int g = mdb_cursor_get(c, &k, &old, MDB_FIRST); g == 0 && !done;
         g = mdb_cursor_get(c, &k, &old, MDB_NEXT)) {
        if (((const uint8_t *)k.mv_data)[k.mv_size - 9] == level) {
            assert_int_equal(mdb_cursor_put(c, &k, &nv, MDB_CURRENT), 0);
            done = true;
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
    return done;
}

/* Whether db ("node" or "dirty") of the closed store dir/name holds window (tenant, base, level,
 * start). */
static bool window_key_in(const char *name, const char *db, const char *tenant, uint32_t base,
                          int level, int64_t start)
{
    char sub[256];
    uint8_t key[300];
    size_t n = strlen(tenant) + 1;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi dbi;
    MDB_val k = {0, key}, v;
    bool found;

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    /* The layout of storage/store_int.h: tenant 0 be32(base) u8(level) be64(start). */
    memcpy(key, tenant, n);
    for (int i = 0; i < 4; i++) {
        key[n++] = (uint8_t)(base >> (24 - 8 * i));
    }
    key[n++] = (uint8_t)level;
    for (int i = 0; i < 8; i++) {
        key[n++] = (uint8_t)((uint64_t)start >> (56 - 8 * i));
    }
    k.mv_size = n;
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, db, 0, &dbi), 0);
    found = mdb_get(txn, dbi, &k, &v) == 0;
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return found;
}

/*
 * A coarse window is built once it is closed: once the newest 10 s window
 * written, never later than the clock, ends its grace past it
 * (storage/store_int.h: a minute, and by its base up to half the window
 * more, at most an hour). Base 1's grace at 100 s, by hand: 60 + 40503 *
 * 50 / 65536 = 90 s (40503: the top 16 bits of 2654435761, Knuth's
 * multiplicative hash of 1). Until then the window stays dirty (no tree
 * stored) and is read through its children. One go-1s-cpu profile
 * (GO_CPU_TOTAL by hand) at BASE: its 100 s window stays dirty, as after
 * profiles at BASE + 95 and BASE + 175 (whose 10 s window ends 80 s past
 * it); one at BASE + 185 (90 s) closes it, not the 100 s window of its own
 * nor the 10^3 s window; one at BASE + 5 after a reopen dirties it again,
 * and it is rebuilt at the flush (the newest window is kept across
 * restarts). Two profiles a 1000 s apart in
 * the future (a week past the clock) close nothing.
 */
static void test_coarse_windows_built_once_closed(void **state)
{
    struct fc_store *s2 = open_unflushed("closed");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t future = (fc_now_ns() / 1000000000LL + 7 * 86400) / 1000 * 1000;
    uint64_t deleted = 0;
    struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE, "w");

    (void)state;
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "w";
    q.selector = &sel;
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), GO_CPU_TOTAL); /* its children */
    assert_int_equal(timeline_bucket(s2, &q, 100, 0), GO_CPU_TOTAL);
    fc_store_close(s2);
    assert_false(window_key_in("closed", "node", "w", 1, 1, BASE));
    assert_true(window_key_in("closed", "dirty", "w", 1, 1, BASE));
    assert_true(window_key_in("closed", "node", "w", 1, 0, BASE));

    /* Its last 10 s, and one whose 10 s window ends 80 s past it (the grace is 90 s). */
    s2 = open_unflushed("closed");
    for (int i = 0; i < 2; i++) {
        b = load("go-1s-cpu.pb.gz", 0, BASE + (i ? 175 : 95), "w");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    fc_store_close(s2);
    assert_false(window_key_in("closed", "node", "w", 1, 1, BASE));
    assert_true(window_key_in("closed", "dirty", "w", 1, 1, BASE));

    /* 90 s past it: closed. */
    s2 = open_unflushed("closed");
    b = load("go-1s-cpu.pb.gz", 0, BASE + 185, "w");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), 2 * GO_CPU_TOTAL); /* built */
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 4 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 1000, 0), 4 * GO_CPU_TOTAL);
    fc_store_close(s2);
    assert_true(window_key_in("closed", "node", "w", 1, 1, BASE));
    assert_false(window_key_in("closed", "dirty", "w", 1, 1, BASE));
    assert_false(window_key_in("closed", "node", "w", 1, 1, BASE + 100));
    assert_true(window_key_in("closed", "dirty", "w", 1, 1, BASE + 100));
    assert_true(window_key_in("closed", "dirty", "w", 1, 2, BASE));

    /* A late profile dirties the closed window again: rebuilt at once (what closed is kept). */
    s2 = open_unflushed("closed");
    b = load("go-1s-cpu.pb.gz", 0, BASE + 5, "w");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), 3 * GO_CPU_TOTAL);
    fc_store_close(s2);
    assert_true(window_key_in("closed", "node", "w", 1, 1, BASE));
    assert_false(window_key_in("closed", "dirty", "w", 1, 1, BASE));

    s2 = open_unflushed("closed");
    for (int i = 0; i < 2; i++) {
        b = load("go-1s-cpu.pb.gz", 0, future + 1000 * i, "w");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, future, future + 100), GO_CPU_TOTAL);
    fc_store_close(s2);
    assert_true(window_key_in("closed", "dirty", "w", 1, 1, future));
    assert_false(window_key_in("closed", "node", "w", 1, 1, future));
    /* The clock closed the past ones meanwhile: built, none dirty. */
    assert_true(window_key_in("closed", "node", "w", 1, 1, BASE + 100));
    assert_false(window_key_in("closed", "dirty", "w", 1, 2, BASE));

    /*
     * A crash between compaction's cutoff (BASE + 100, put by hand as
     * storage/retention.c writes it) and its flush leaves the 100 s window
     * dirty in the compacted past: a later profile there goes into it, and
     * the next flush builds it first, not a minute later.
     */
    s2 = open_unflushed("closed-cut");
    for (int pod = 0; pod < 2; pod++) {
        b = load_pod(pod, BASE + 50, "w");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    fc_store_close(s2);
    assert_true(window_key_in("closed-cut", "dirty", "w", 1, 1, BASE));
    {
        char sub[256];
        int64_t cut = BASE + 100;
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi meta;
        MDB_val k = {14, (void *)"\0coarse_before"}, v = {8, &cut};
        snprintf(sub, sizeof(sub), "%s/closed-cut", dir);
        lmdb_begin(sub, 0, &env, &txn);
        assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
        assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }
    /* With a budget of one window a flush: the compacted past is built whatever it. */
    unflushed_rebuild_max = 1;
    s2 = open_unflushed("closed-cut");
    for (int pod = 0; pod < 2; pod++) {
        b = load_pod(pod, BASE + 70, "w");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), 4 * GO_CPU_TOTAL); /* open */
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), 4 * GO_CPU_TOTAL);
    assert_int_equal(fc_store_compact_before(s2, BASE + 100, 0, &deleted, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), 4 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 100, 0), 4 * GO_CPU_TOTAL);
    fc_store_close(s2);
    unflushed_rebuild_max = 0;

    /* Compaction past a 100 s window not closed yet builds it before its 10 s windows go. */
    s2 = open_unflushed("closed-compact");
    b = load("go-1s-cpu.pb.gz", 0, BASE + 30, "w");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(fc_store_compact_before(s2, BASE + 1000, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 1);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 100, 0), GO_CPU_TOTAL);
    fc_store_close(s2);
    fc_selector_release(&sel);
}

/*
 * A coarse window of two stored children is a sum (format 16), read through
 * them: profiles at BASE and BASE + 200 (two 100 s windows in one 1000 s
 * window) store their 10 s and 100 s windows and five sums above; a third
 * at BASE + 500 makes the 1000 s window a merge, linked to from above;
 * retention of the first two makes it a link. Every answer by hand from
 * GO_CPU_TOTAL (go-1s-cpu.top.txt). A link to a sum, or a sum in a 100 s
 * window (neither ever written), is skipped and counted.
 */
static void test_two_child_windows_are_sums(void **state)
{
    struct fc_store *s2 = open_unflushed("sums");
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    uint64_t deleted = 0;
    int nodes, links, sums;
    const int64_t at[3] = {BASE, BASE + 200, BASE + 500};

    (void)state;
    for (int i = 0; i < 2; i++) {
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, at[i], "s");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    close_built(s2);
    count_nodes("sums", &nodes, &links, &sums);
    /* Two 10 s and two 100 s windows; 10^3 s a sum of two, 10^4 to 10^7 s sums of a sum. */
    assert_int_equal(nodes, 4 + 5);
    assert_int_equal(links, 0);
    assert_int_equal(sums, 5);
    s2 = open_unflushed("sums");
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "s";
    q.selector = &sel;
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 2 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 2 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100), GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE + 100, BASE + 100000), GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 1000, 0), 2 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 10000, 0), 2 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 1000000, 0), 2 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 100, 2), GO_CPU_TOTAL);
    assert_int_equal(fc_store_corrupt_windows(s2), 0);

    {
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, at[2], "s");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 3 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 3 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 10000, 0), 3 * GO_CPU_TOTAL);
    close_built(s2);
    count_nodes("sums", &nodes, &links, &sums);
    /* Three 10 s and 100 s windows, the 10^3 s merge and four links to it and above. */
    assert_int_equal(nodes, 6 + 1 + 4);
    assert_int_equal(links, 4);
    assert_int_equal(sums, 0);

    s2 = open_unflushed("sums");
    /* Windows ending by BASE + 300 go: the first two profiles' 10 s and 100 s windows. */
    assert_int_equal(fc_store_delete_before(s2, BASE + 300, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 4);
    for (int pass = 0; pass < 3; pass++) {
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), GO_CPU_TOTAL);
        assert_int_equal(timeline_bucket(s2, &q, 1000, 0), GO_CPU_TOTAL);
        if (pass == 0) {
            assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        } else if (pass == 1) {
            fc_store_close(s2);
            s2 = open_unflushed("sums");
        }
    }
    close_built(s2);
    count_nodes("sums", &nodes, &links, &sums);
    assert_int_equal(nodes, 2 + 5); /* the third's 10 s, 100 s; links from 10^3 s up */
    assert_int_equal(links, 5);

    /*
     * Made by hand: the 10^3 s window a sum (of its one child: read through
     * it), so the links above it lead to a sum, which no flush writes.
     */
    assert_true(put_node_value("sums", 2, "\xfe\xff\xff\xff", 4));
    s2 = open_unflushed("sums");
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), GO_CPU_TOTAL); /* its child */
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), 0); /* a link to a sum: refused */
    assert_true(fc_store_corrupt_windows(s2) > 0);
    fc_store_close(s2);
    /* A sum at 100 s: its 10 s children are not read for it; refused and counted. */
    assert_true(put_node_value("sums", 1, "\xfe\xff\xff\xff", 4));
    s2 = open_unflushed("sums");
    assert_int_equal(range_total(s2, &q, BASE + 500, BASE + 600), 0);
    assert_true(fc_store_corrupt_windows(s2) > 0);
    fc_store_close(s2);

    /*
     * A merge of a sum: profiles at BASE and BASE + 200 (10^3 s window 0 a
     * sum), BASE + 1000 and BASE + 2000 (windows 1 and 2 links): the 10^4 s
     * window merges three children, the sum through its two.
     */
    s2 = open_unflushed("sums2");
    for (int i = 0; i < 4; i++) {
        static const int64_t when[4] = {0, 200, 1000, 2000};
        struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE + when[i], "s");
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    close_built(s2);
    count_nodes("sums2", &nodes, &links, &sums);
    assert_int_equal(sums, 1);      /* the first 10^3 s window */
    assert_int_equal(links, 2 + 3); /* the other two; 10^5 s and above to the 10^4 s merge */
    s2 = open_unflushed("sums2");
    assert_int_equal(range_total(s2, &q, BASE, BASE + 10000), 4 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 4 * GO_CPU_TOTAL);
    assert_int_equal(timeline_bucket(s2, &q, 10000, 0), 4 * GO_CPU_TOTAL);
    assert_int_equal(fc_store_corrupt_windows(s2), 0);
    fc_store_close(s2);
    fc_selector_release(&sel);
}

/*
 * What a closed store holds of coarse windows: every node key of level 1
 * and up with its value, then every dirty key, each as (le32 length, bytes)
 * into out; *nodes: how many node keys. Fails when a dirty window's parent
 * (the window of the level above holding it) is not dirty too: a parent
 * built while a child of it was still dirty was built from a stale child.
 */
static void coarse_state(const char *name, struct fc_buf *out, int *nodes)
{
    static const char *const dbs[] = {"node", "dirty"};
    char sub[256];
    MDB_env *env;
    MDB_txn *txn;

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    *nodes = 0;
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    for (int d = 0; d < 2; d++) {
        MDB_dbi dbi;
        MDB_cursor *c;
        MDB_val k, v;
        assert_int_equal(mdb_dbi_open(txn, dbs[d], 0, &dbi), 0);
        assert_int_equal(mdb_cursor_open(txn, dbi, &c), 0);
        for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
             g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            /* tenant 0 be32(base) u8(level) be64(start), as storage/store_int.h lays it out */
            size_t tn = strnlen(k.mv_data, k.mv_size);
            const uint8_t *kb = k.mv_data;
            int level;
            if (k.mv_size != tn + 14 || strcmp(k.mv_data, "aside") == 0) {
                continue; /* not a window (meta-like keys), or a test's writes aside */
            }
            level = kb[tn + 5];
            if (level < 1) {
                continue;
            }
            if (d == 0) {
                (*nodes)++;
            } else if (level < 6) {
                uint8_t parent[300];
                uint64_t start = 0, width = 100;
                MDB_val pk = {k.mv_size, parent}, pv;
                for (int i = 0; i < 8; i++) {
                    start = start << 8 | kb[tn + 6 + i];
                }
                for (int l = 1; l <= level; l++) {
                    width *= 10; /* the parent's width: 100 s x 10^level */
                }
                start -= start % width;
                memcpy(parent, kb, tn + 5);
                parent[tn + 5] = (uint8_t)(level + 1);
                for (int i = 0; i < 8; i++) {
                    parent[tn + 6 + i] = (uint8_t)(start >> (56 - 8 * i));
                }
                if (mdb_get(txn, dbi, &pk, &pv) != 0) {
                    fail_msg("%s: a dirty level %d window whose parent is not dirty", name, level);
                }
            }
            for (int part = 0; part < 2; part++) {
                const MDB_val *x = part ? &v : &k;
                uint32_t n = (uint32_t)x->mv_size;
                fc_buf_append(out, &n, sizeof(n));
                fc_buf_append(out, x->mv_data, x->mv_size);
            }
        }
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/*
 * rebuild_max_bytes: three pods' profile at BASE and a fourth pod's 200,000 s
 * later close the first three's windows of 100 s to 10^5 s (and their
 * service's). With a budget of 1 byte each flush builds one of them (the
 * first; every later one waits, and every one above a waiting one), says how
 * many wait, and stays due; queries count each profile once (GO_CPU_TOTAL
 * by hand) after every flush; once none waits, the windows and dirty keys
 * are byte for byte those of the same writes flushed once without a budget.
 * fc_store_flush_before flushes until none waits (here: the same windows).
 * rebuild_max_ns of 1 ns does the same as the byte budget (one window a
 * flush, the clock checked after each); fc_store_rebuild_deferred builds
 * them one a call too and leaves the open windows open (a profile of
 * tenant "aside" written meanwhile stays open, answered from there).
 */
static void test_rebuilds_past_their_budget_wait(void **state)
{
    static const char *const names[] = {"budget-none",    "budget-1",    "budget-before",
                                        "budget-compact", "budget-time", "rebuild-only"};
    struct fc_buf want, got;
    int want_nodes = 0;
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "w";
    q.selector = &sel;
    fc_buf_init(&want, 0);
    for (int run = 0; run < 6; run++) {
        struct fc_store *s2;
        int64_t deferred, flushes = 1;
        int nodes;
        unflushed_rebuild_max = run == 0 || run >= 4 ? -1 : 1;
        unflushed_rebuild_max_ns = run >= 4 ? 1 : 0;
        s2 = open_unflushed(names[run]);
        for (int pod = 0; pod < 4; pod++) {
            struct fc_batch *b = load_pod(pod, pod < 3 ? BASE + 5 : BASE + 200000, "w");
            assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
            fc_batch_unref(b);
        }
        if (run == 2) {
            /* What ends by BASE + 10^5 s: the closed windows. */
            assert_int_equal(fc_store_flush_before(s2, BASE + 100000, &err), FC_OK);
            assert_int_equal(fc_store_rebuilds_deferred(s2), 0);
        } else if (run == 3) {
            /*
             * Compaction to BASE + 10^5 s builds them too, one a flush,
             * not in the flush after its cutoff moved (which builds the
             * compacted past's 100 s windows whatever the budget).
             */
            uint64_t deleted;
            assert_int_equal(fc_store_compact_before(s2, BASE + 100000, 0, &deleted, &err), FC_OK);
            assert_int_equal(fc_store_rebuilds_deferred(s2), 0);
            assert_true(fc_store_rebuild_peak_bytes(s2) > 4096);
            /*
             * One window a flush: its page and its tree (a go-1s-cpu
             * profile's, about 1.3 KB), under two pages; two windows (the
             * four 100 s windows of the compacted past built at once after
             * the cutoff moved) take two pages and their trees.
             */
            assert_true(fc_store_rebuild_peak_bytes(s2) < 2 * 4096);
            assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 4 * GO_CPU_TOTAL);
        } else {
            assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        }
        deferred = fc_store_rebuilds_deferred(s2);
        if (run == 0) {
            assert_int_equal(deferred, 0);
            assert_true(fc_store_rebuild_peak_bytes(s2) >= 12 * 4096); /* all in one */
            fc_store_close(s2);
            unflushed_rebuild_max = 0;
            coarse_state(names[run], &want, &want_nodes);
            assert_true(want_nodes >= 12); /* 3 pods x levels 1-4, their service's too */
            continue;
        }
        if (run == 5) {
            struct fc_batch *b = load_pod(9, BASE + 5, "aside");
            int64_t open;
            assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
            fc_batch_unref(b);
            open = fc_store_open_bytes(s2);
            assert_true(open > 0);
            assert_true(deferred >= 11);
            for (; deferred > 0; deferred--) {
                int want_rc = deferred > 1 ? FC_EAGAIN : FC_OK;
                assert_int_equal(fc_store_rebuild_deferred(s2, INT64_MAX, &err), want_rc);
                assert_int_equal(fc_store_rebuilds_deferred(s2), deferred - 1);
                assert_int_equal(fc_store_open_bytes(s2), open); /* left open */
                assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), 3 * GO_CPU_TOTAL);
                assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 4 * GO_CPU_TOTAL);
                q.tenant = "aside";
                assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), GO_CPU_TOTAL);
                q.tenant = "w";
            }
            assert_int_equal(fc_store_rebuild_deferred(s2, INT64_MAX, &err), FC_OK);
            assert_int_equal(fc_store_flush(s2, &err), FC_OK); /* now "aside" is written */
            assert_int_equal(fc_store_open_bytes(s2), 0);
            for (int more = 0; fc_store_rebuilds_deferred(s2) > 0; more++) {
                assert_true(more < 10); /* its own closed windows, one a flush */
                assert_int_equal(fc_store_flush(s2, &err), FC_OK);
            }
            q.tenant = "aside";
            assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), GO_CPU_TOTAL);
            q.tenant = "w";
        }
        if (run == 1 || run == 4) {
            assert_true(deferred >= 11);
            for (;;) {
                assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 3 * GO_CPU_TOTAL);
                assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), 3 * GO_CPU_TOTAL);
                assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 4 * GO_CPU_TOTAL);
                if (deferred == 0) {
                    break;
                }
                if (flushes == 3) {
                    /* Closed half way (its flush builds one more): no parent built too early. */
                    fc_store_close(s2);
                    fc_buf_init(&got, 0);
                    coarse_state(names[run], &got, &nodes);
                    fc_buf_release(&got);
                    assert_int_equal(nodes, flushes + 1); /* one a flush */
                    s2 = open_unflushed(names[run]);
                    deferred--;
                }
                assert_true(fc_store_flush_in(s2) >= 0); /* the writer flushes again */
                assert_int_equal(fc_store_flush(s2, &err), FC_OK);
                flushes++;
                assert_int_equal(fc_store_rebuilds_deferred(s2), deferred - 1);
                deferred--;
            }
            assert_int_equal(fc_store_flush_in(s2), -1); /* nothing left to do */
        }
        fc_store_close(s2);
        unflushed_rebuild_max = 0;
        fc_buf_init(&got, 0);
        coarse_state(names[run], &got, &nodes);
        assert_int_equal(nodes, want_nodes);
        assert_int_equal(got.len, want.len);
        assert_memory_equal(got.data, want.data, want.len);
        fc_buf_release(&got);
    }
    unflushed_rebuild_max_ns = 0;
    fc_buf_release(&want);
    fc_selector_release(&sel);
}

/*
 * The stores of the tests below: one window a flush (rebuild_max_ns of
 * 1 ns, no byte cap), q reading tenant "w"'s CPU through sel; three pods'
 * profiles at BASE + 5 (and at BASE + 1005 with twice) and a fourth pod's
 * at BASE + 200,000 s, which closes the first three's windows up to 10^5 s.
 * one_a_flush_done closes it and puts the options back.
 */
static struct fc_store *one_a_flush(const char *name, bool twice, struct fc_selector *sel,
                                    struct fc_store_query *q)
{
    struct fc_error err = {0};
    struct fc_store *s2;

    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", sel, &err),
                     FC_OK);
    *q = (struct fc_store_query){.tenant = "w", .selector = sel};
    unflushed_rebuild_max = -1;
    unflushed_rebuild_max_ns = 1;
    s2 = open_unflushed(name);
    for (int pod = 0; pod < 4; pod++) {
        for (int i = 0; i < (pod < 3 && twice ? 2 : 1); i++) {
            struct fc_batch *b = load_pod(pod, pod < 3 ? BASE + 5 + 1000 * i : BASE + 200000, "w");
            assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
            fc_batch_unref(b);
        }
    }
    return s2;
}

static void one_a_flush_done(struct fc_store *s2, struct fc_selector *sel)
{
    fc_store_close(s2);
    unflushed_rebuild_max = 0;
    unflushed_rebuild_max_ns = 0;
    fc_selector_release(sel);
}

/*
 * one_a_flush with twice, compacted to BASE + 10^5 s (everything built),
 * reopened (the rebuild peak counts from the open), then deletion by age
 * before BASE + 500: the first three pods' 100 s windows at BASE and their
 * service's go, and the windows above them are left dirty.
 */
static struct fc_store *one_a_flush_deleted(const char *name, struct fc_selector *sel,
                                            struct fc_store_query *q)
{
    struct fc_error err = {0};
    struct fc_store *s2 = one_a_flush(name, true, sel, q);
    uint64_t deleted;

    assert_int_equal(fc_store_compact_before(s2, BASE + 100000, 0, &deleted, &err), FC_OK);
    assert_int_equal(fc_store_rebuilds_deferred(s2), 0);
    fc_store_close(s2);
    s2 = open_unflushed(name);
    assert_int_equal(fc_store_delete_before(s2, BASE + 500, 0, &deleted, &err), FC_OK);
    assert_int_equal(deleted, 3 + 1); /* three pods' 100 s windows and their service's */
    return s2;
}

/*
 * Deletion by age in slices does not wait for every closed window to be
 * built: once its first slice has written the open windows, the next
 * deletes, the rebuilds still waiting (with rebuild_max_ns of 1 ns, one a
 * flush: a backlog that writes between slices could keep up for good).
 * Three pods' profiles at BASE + 5 and BASE + 1005 and a fourth's at
 * BASE + 200,000 s; before BASE + 500 go the first three's 10 s windows
 * and their service's, and what is built of their 100 s windows; the
 * answers, by hand, exact throughout.
 */
static void test_deletion_does_not_wait_for_rebuilds(void **state)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    struct fc_store *s2;
    uint64_t deleted, all = 0;
    int rc, calls = 0;

    (void)state;
    s2 = one_a_flush("delete-waiting", true, &sel, &q);
    do {
        rc = fc_store_delete_before(s2, BASE + 500, 1, &deleted, &err);
        assert_true(rc == FC_OK || rc == FC_EAGAIN);
        all += deleted;
        calls++;
        assert_int_equal(range_total(s2, &q, BASE + 1000, BASE + 2000), 3 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000),
                         (all > 0 ? 4 : 7) * GO_CPU_TOTAL);
    } while (rc == FC_EAGAIN);
    /*
     * The 10 s windows at BASE (three pods, their service) and the one
     * 100 s window built so far (the first call's one flush, one window:
     * the first dirty key, level 1 at BASE); the others, unbuilt, are
     * rebuilt empty from their deleted children.
     */
    assert_int_equal(all, 4 + 1);
    assert_true(fc_store_rebuilds_deferred(s2) > 0); /* deleted while they wait */
    for (int flushes = 0; fc_store_rebuilds_deferred(s2) > 0; flushes++) {
        assert_true(flushes < 100);
        assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 0);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 10000), 3 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 4 * GO_CPU_TOTAL);
    }
    one_a_flush_done(s2, &sel);
}

/*
 * Deletion by age in the compacted past marks the windows above what it
 * deleted dirty (10^3 s to 10^6 s); their rebuilds keep the flush's budget
 * like any other (only compacted 100 s windows are built whatever it), so
 * one flush never builds them all at once. Three pods' profiles at BASE + 5
 * and BASE + 1005, compacted to BASE + 10^5 s; deleting before BASE + 500
 * takes the first three: GO_CPU_TOTAL by hand for each left.
 */
static void test_deleted_past_rebuilt_within_budget(void **state)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    struct fc_store *s2;

    (void)state;
    s2 = one_a_flush_deleted("deleted-past", &sel, &q);
    /*
     * Dirty above each of the four: 10^3 s to 10^7 s. Closed (the newest
     * profile at BASE + 200,000 s): 10^3 s to 10^5 s. One a flush, the rest
     * wait, the answers exact throughout.
     */
    for (int64_t waiting = 3 * 4 - 1; waiting >= 0; waiting--) {
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 0);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 10000), 3 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 4 * GO_CPU_TOTAL);
        assert_int_equal(timeline_bucket(s2, &q, 1000, 0), 0);
        assert_int_equal(timeline_bucket(s2, &q, 1000, 1), 3 * GO_CPU_TOTAL);
        assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        assert_int_equal(fc_store_rebuilds_deferred(s2), waiting);
        /* A page and one window's tree at most (under 8 pages), never all of them at once. */
        assert_true(fc_store_rebuild_peak_bytes(s2) > 0);
        assert_true(fc_store_rebuild_peak_bytes(s2) < 8 * 4096);
    }
    assert_int_equal(timeline_bucket(s2, &q, 1000000, 0), 4 * GO_CPU_TOTAL);
    one_a_flush_done(s2, &sel);
}

/*
 * A flush of the open windows (fc_store_flush_open: past their cap) becomes
 * a whole flush when one of them is a compacted 100 s window, which is
 * merged only after the rebuilds: it keeps rebuild_max_ns like any flush.
 * As in test_deleted_past_rebuilt_within_budget, deletion by age leaves
 * 3 x 4 closed windows dirty in the compacted past (10^3 s to 10^5 s);
 * then pod 0 writes at BASE + 50 (compacted: into its open 100 s window,
 * whose dirty ancestors are among the twelve). With 1 ns, the flush builds
 * one window and 11 wait; the profile is counted once throughout.
 */
static void test_flush_open_keeps_rebuild_max_time(void **state)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    struct fc_store *s2;
    struct fc_batch *b;

    (void)state;
    s2 = one_a_flush_deleted("open-past-budget", &sel, &q);
    b = load_pod(0, BASE + 50, "w");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_true(fc_store_open_bytes(s2) > 0);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), GO_CPU_TOTAL); /* open */
    assert_int_equal(fc_store_flush_open(s2, &err), FC_OK);
    assert_int_equal(fc_store_open_bytes(s2), 0); /* written: a whole flush */
    assert_int_equal(fc_store_rebuilds_deferred(s2), 3 * 4 - 1);
    assert_true(fc_store_rebuild_peak_bytes(s2) < 8 * 4096);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE - 10000000, BASE + 10000000), 5 * GO_CPU_TOTAL);
    one_a_flush_done(s2, &sel);
}

/*
 * fc_store_rebuild_deferred while the open windows hold a profile under the
 * very windows it rebuilds (pod 0 again at BASE + 5, tenant "w"): the
 * windows are built from LMDB alone, the profile stays open and is counted
 * once, before and after the flush that writes it (GO_CPU_TOTAL by hand:
 * four at BASE + 5, one at BASE + 200,000).
 */
static void test_rebuild_deferred_under_open_profiles(void **state)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    struct fc_store *s2;
    struct fc_batch *b;
    int64_t deferred, open;

    (void)state;
    s2 = one_a_flush("rebuild-under-open", false, &sel, &q);
    assert_int_equal(fc_store_flush(s2, &err), FC_OK);
    deferred = fc_store_rebuilds_deferred(s2);
    assert_true(deferred >= 11);
    b = load_pod(0, BASE + 5, "w");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    open = fc_store_open_bytes(s2);
    assert_true(open > 0);
    for (; deferred > 0; deferred--) {
        assert_int_equal(fc_store_rebuild_deferred(s2, INT64_MAX, &err),
                         deferred > 1 ? FC_EAGAIN : FC_OK);
        assert_int_equal(fc_store_rebuilds_deferred(s2), deferred - 1);
        assert_int_equal(fc_store_open_bytes(s2), open);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 10), 4 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 4 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), 4 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 5 * GO_CPU_TOTAL);
        assert_int_equal(timeline_bucket(s2, &q, 100000, 0), 4 * GO_CPU_TOTAL);
    }
    for (int more = 0;; more++) {
        assert_true(more < 20);
        assert_int_equal(fc_store_flush(s2, &err), FC_OK);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 1000), 4 * GO_CPU_TOTAL);
        assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 5 * GO_CPU_TOTAL);
        if (fc_store_rebuilds_deferred(s2) == 0) {
            break;
        }
    }
    assert_int_equal(fc_store_open_bytes(s2), 0);
    assert_int_equal(timeline_bucket(s2, &q, 100000, 0), 4 * GO_CPU_TOTAL);
    fc_store_close(s2);
    s2 = open_unflushed("rebuild-under-open");
    assert_int_equal(range_total(s2, &q, BASE, BASE + 100000), 4 * GO_CPU_TOTAL);
    assert_int_equal(range_total(s2, &q, BASE, BASE + 300000), 5 * GO_CPU_TOTAL);
    one_a_flush_done(s2, &sel);
}

/*
 * The coarse windows' every form against a model: random writes of the
 * go-1s-cpu profile (GO_CPU_TOTAL each, by hand) around six random points
 * over 46 days, by three pods of one service, mixed with timed flushes, cap
 * flushes (coarse windows left dirty), retention, compaction, bundling and
 * packing, reopens, and crashes (a child that writes, cap-flushes and
 * _exits: the log replays its writes); at random moments, ranges aligned to
 * 100 s and timelines of 100 s to 10^6 s steps, for all series and for the
 * service (its aggregate), must equal the count of profiles written in them
 * (since the retention cutoff), with no window counted corrupt. Links, sums,
 * packs and bundles all form here (written by review for sums, format 16).
 */
static uint64_t model_state;

static uint64_t model_next(void)
{
    model_state ^= model_state << 13;
    model_state ^= model_state >> 7;
    model_state ^= model_state << 17;
    return model_state;
}

static void model_pod(struct fc_batch *b)
{
    char pod[16];
    snprintf(pod, sizeof(pod), "p%d", (int)(model_next() % 3));
    fc_profile_set_label(b, &b->profiles[0], "pod", pod);
}

static void test_coarse_windows_against_a_model(void **state)
{
    /* FC_MODEL_SEEDS: more seeds (250 passed when it was written). */
    uint64_t seeds = getenv("FC_MODEL_SEEDS") ? strtoull(getenv("FC_MODEL_SEEDS"), NULL, 10) : 12;

    (void)state;
    for (uint64_t seed = 1; seed <= seeds; seed++) {
        char name[32];
        struct fc_error err = {0};
        struct fc_selector sel;
        struct fc_store_query q = {0};
        int64_t times[400];
        int n = 0;
        int64_t del_cut = BASE, comp_cut = BASE;
        int64_t centers[6];
        struct fc_store *s2;

        model_state = seed * 0x9e3779b97f4a7c15ULL + 1;
        snprintf(name, sizeof(name), "model%llu", (unsigned long long)seed);
        /* Even seeds: a flush builds one closed coarse window, the rest wait (rebuild_max). */
        unflushed_rebuild_max = seed % 2 == 0 ? 1 : 0;
        s2 = open_unflushed(name);
        assert_int_equal(
            fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err), FC_OK);
        q.tenant = "s";
        q.selector = &sel;
        for (int c = 0; c < 6; c++) {
            centers[c] = BASE + (int64_t)(model_next() % 3000000);
        }
        for (int op = 0; op < 160; op++) {
            int what = (int)(model_next() % 20);
            if (what < 9 && n < 400 - 8) {
                /* One profile, or (what 8) a pod's burst of eight 2,500 s apart: packs form. */
                int64_t t;
                uint64_t pod = model_next() % 3;
                do {
                    int64_t c = centers[model_next() % 6];
                    int64_t spread = (int64_t[]){50, 500, 5000, 50000, 500000}[model_next() % 5];
                    t = c + (int64_t)(model_next() % (uint64_t)spread);
                } while (t < del_cut || t >= BASE + 4000000 - 8 * 2500);
                for (int k = 0; k < (what == 8 ? 8 : 1); k++) {
                    struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, t + 2500 * k, "s");
                    char name_of_pod[16];
                    snprintf(name_of_pod, sizeof(name_of_pod), "p%d", (int)pod);
                    fc_profile_set_label(b, &b->profiles[0], "pod", name_of_pod);
                    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
                    fc_batch_unref(b);
                    times[n++] = t + 2500 * k;
                }
            } else if (what < 11) {
                assert_int_equal(fc_store_flush(s2, &err), FC_OK);
            } else if (what < 13) {
                assert_int_equal(fc_store_flush_open(s2, &err), FC_OK);
            } else if (what == 13) {
                uint64_t deleted;
                del_cut += (int64_t)(model_next() % 200000) / 100 * 100;
                assert_int_equal(fc_store_delete_before(s2, del_cut, 0, &deleted, &err), FC_OK);
            } else if (what == 14) {
                uint64_t deleted;
                int64_t c = comp_cut + (int64_t)(model_next() % 400000) / 100 * 100;
                comp_cut = c;
                assert_int_equal(fc_store_compact_before(s2, c, 0, &deleted, &err), FC_OK);
            } else if (what == 15) {
                uint64_t bundled;
                assert_int_equal(fc_store_bundle_before(s2, BASE + 4000000, 0, &bundled, &err),
                                 FC_OK);
            } else if (what == 16) {
                fc_store_close(s2);
                s2 = open_unflushed(name);
            } else if (what == 17) {
                /* A crash after a cap flush: dirty keys left, log kept. */
                pid_t pid;
                int st;
                fc_store_close(s2);
                pid = fork();
                if (pid == 0) {
                    struct fc_store *c = open_unflushed(name);
                    for (int k = 0; k < 3 && n < 400; k++) {
                        int64_t t = centers[model_next() % 6] + (int64_t)(model_next() % 5000);
                        struct fc_batch *b;
                        if (t < del_cut) {
                            continue;
                        }
                        b = load("go-1s-cpu.pb.gz", 0, t, "s");
                        model_pod(b);
                        fc_store_write(c, &b, 1, &err);
                        fc_batch_unref(b);
                        if (k == 1) {
                            fc_store_flush_open(c, &err);
                        }
                    }
                    _exit(0);
                }
                assert_true(waitpid(pid, &st, 0) == pid);
                /* the child's writes: replayed from the log, the same random stream */
                for (int k = 0; k < 3 && n < 400; k++) {
                    int64_t t = centers[model_next() % 6] + (int64_t)(model_next() % 5000);
                    if (t < del_cut) {
                        continue;
                    }
                    times[n++] = t;
                    (void)model_next(); /* the child's pod */
                }
                s2 = open_unflushed(name);
            } else {
                /* check */
                for (int which = 0; which < 2; which++) {
                    struct fc_selector sel2;
                    assert_int_equal(
                        fc_selector_parse(which ? "process_cpu:cpu:nanoseconds:cpu:nanoseconds{"
                                                  "service_name=\"svc-0\"}"
                                                : "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}",
                                          &sel2, &err),
                        FC_OK);
                    q.selector = &sel2;
                    for (int r = 0; r < 6; r++) {
                        int64_t a = BASE + (int64_t)(model_next() % 4000000) / 100 * 100;
                        int64_t len = (int64_t[]){
                            100, 1000, 10000, 100000, 1000000, 4000000}[model_next() % 6];
                        int64_t b2 = a + (int64_t)(model_next() % (uint64_t)len) / 100 * 100 + 100;
                        int64_t want = 0;
                        for (int i = 0; i < n; i++) {
                            want += times[i] >= del_cut && times[i] >= a && times[i] < b2;
                        }
                        if (range_total(s2, &q, a, b2) != want * GO_CPU_TOTAL) {
                            fail_msg("which %d seed %llu op %d range [%lld,%lld): %lld want %lld",
                                     which, (unsigned long long)seed, op, (long long)(a - BASE),
                                     (long long)(b2 - BASE),
                                     (long long)(range_total(s2, &q, a, b2) / GO_CPU_TOTAL),
                                     (long long)want);
                        }
                    }
                    for (int64_t step = 100; step <= 1000000; step *= 10) {
                        int64_t buckets[50];
                        int64_t want[50] = {0};
                        q.from_ns = BASE * 1000000000LL;
                        q.until_ns = (BASE + 50 * step) * 1000000000LL;
                        assert_int_equal(
                            fc_store_timeline(s2, &q, step * 1000000000LL, buckets, 50, &err),
                            FC_OK);
                        for (int i = 0; i < n; i++) {
                            int64_t at = (times[i] - BASE) / step;
                            if (times[i] >= del_cut && at < 50) {
                                want[at] += GO_CPU_TOTAL;
                            }
                        }
                        for (int i = 0; i < 50; i++) {
                            if (buckets[i] != want[i]) {
                                fail_msg("which %d seed %llu op %d timeline step %lld bucket %d: "
                                         "%lld want %lld",
                                         which, (unsigned long long)seed, op, (long long)step, i,
                                         (long long)(buckets[i] / GO_CPU_TOTAL),
                                         (long long)(want[i] / GO_CPU_TOTAL));
                            }
                        }
                    }
                    q.selector = &sel;
                    fc_selector_release(&sel2);
                }
                if (fc_store_corrupt_windows(s2) != 0) {
                    fail_msg("seed %llu op %d: %llu corrupt", (unsigned long long)seed, op,
                             (unsigned long long)fc_store_corrupt_windows(s2));
                }
            }
        }
        fc_store_close(s2);
        {
            int nodes, links, sums, packed;
            count_nodes_packed(name, &nodes, &links, &sums, &packed);
            print_message("seed %llu: %d profiles, %d nodes, %d links, %d sums, %d packed\n",
                          (unsigned long long)seed, n, nodes, links, sums, packed);
        }
        fc_selector_release(&sel);
    }
    unflushed_rebuild_max = 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dirty_windows_exact_before_and_after_flush),
        cmocka_unit_test(test_single_child_windows_link),
        cmocka_unit_test(test_two_child_windows_are_sums),
        cmocka_unit_test(test_coarse_windows_built_once_closed),
        cmocka_unit_test(test_rebuilds_past_their_budget_wait),
        cmocka_unit_test(test_deleted_past_rebuilt_within_budget),
        cmocka_unit_test(test_deletion_does_not_wait_for_rebuilds),
        cmocka_unit_test(test_flush_open_keeps_rebuild_max_time),
        cmocka_unit_test(test_rebuild_deferred_under_open_profiles),
        cmocka_unit_test(test_coarse_windows_against_a_model),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_windows", tests, fixture_setup, fixture_teardown);
}
