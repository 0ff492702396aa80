/*
 * Service aggregates (storage/store_service.c): a whole-service query (the
 * profile type and service_name only) reads the service's first pod and the
 * aggregate of its other series, and answers exactly the sum over its
 * series; a filtered query goes per series.
 * Expected values are computed by hand from the profiles written here
 * (cpu nanoseconds and sample counts, stacks main;work and main;idle), through
 * dirty windows, a flush, compaction, a write into the compacted past,
 * retention, a reopen, and the upgrade of a store without aggregates
 * (format 4, made here by deleting them in LMDB itself).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <lmdb.h>

#include "core/batch.h"
#include "storage/store.h"
#include "tests/unit/fc_test.h"

#define BASE 1700000000LL /* seconds */
#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define SAMPLES "process_cpu:samples:count:cpu:nanoseconds"

static char dir[64];

static uint32_t str(struct fc_batch *b, const char *s)
{
    uint32_t i;
    assert_int_equal(fc_dict_cstring(b, s, &i), FC_OK);
    return i;
}

static uint32_t stack2(struct fc_batch *b, const char *leaf)
{
    uint32_t locs[2], out;
    const char *names[2] = {leaf, "main"}; /* leaf first, as pprof */

    for (int i = 0; i < 2; i++) {
        struct fc_function f = {0};
        struct fc_line line = {0};
        struct fc_location l = {0};
        f.name = str(b, names[i]);
        assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
        assert_int_equal(fc_dict_location(b, &l, &line, 1, &locs[i]), FC_OK);
    }
    assert_int_equal(fc_dict_stack(b, locs, 2, &out), FC_OK);
    return out;
}

/*
 * One profile of tenant "svc" (service NULL: no service_name label): sample
 * main;work (cpu `work`, 1 sample), and sample main;idle (cpu `idle`, 2
 * samples) with the sample label thread=t1 and, when given, service_name
 * sample_service (its series then has that service).
 */
static struct fc_batch *profile(const char *service, const char *pod, int64_t time_s, int64_t work,
                                int64_t idle, const char *sample_service)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt[2];
    struct fc_sample a = {0}, i = {0};
    uint32_t attrs[2];
    int64_t va[2] = {1, work}, vi[2] = {2, idle};
    struct fc_attr at = {0};

    vt[0].type = str(b, "samples");
    vt[0].unit = str(b, "count");
    vt[1].type = str(b, "cpu");
    vt[1].unit = str(b, "nanoseconds");
    assert_int_equal(fc_profile_set_sample_types(b, p, vt, 2), FC_OK);
    p->period_type.type = str(b, "cpu");
    p->period_type.unit = str(b, "nanoseconds");
    a.stack = stack2(b, "work");
    i.stack = stack2(b, "idle");
    at.kind = FC_ATTR_STR;
    at.key = str(b, "thread");
    at.v.str = str(b, "t1");
    assert_int_equal(fc_dict_attr(b, &at, &attrs[0]), FC_OK);
    if (sample_service != NULL) {
        at.key = str(b, "service_name");
        at.v.str = str(b, sample_service);
        assert_int_equal(fc_dict_attr(b, &at, &attrs[1]), FC_OK);
    }
    assert_int_equal(fc_dict_span(b, attrs, sample_service ? 2 : 1, &i.attrs), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &a, va, 2, NULL, 0), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &i, vi, 2, NULL, 0), FC_OK);
    if (service != NULL) {
        fc_profile_set_label(b, p, "service_name", service);
    }
    fc_profile_set_label(b, p, "pod", pod);
    fc_profile_set_label(b, p, "__name__", "process_cpu");
    p->time_ns = time_s * 1000000000LL;
    fc_batch_set_tenant(b, "svc");
    return b;
}

static void write1(struct fc_store *s, struct fc_batch *b)
{
    struct fc_error err = {0};

    assert_int_equal(fc_store_write(s, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
}

static struct fc_store *open_store(const char *name)
{
    return fc_test_store_open(dir, name);
}

struct answer {
    int64_t total, work, idle; /* the tree's total, self of main;work and main;idle */
    uint32_t merged;           /* windows merged */
};

static struct answer query(struct fc_store *s, const char *selector, int64_t from_s,
                           int64_t until_s)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct fc_error err = {0};
    struct answer a = {0};
    uint32_t main_node;

    assert_int_equal(fc_selector_parse(selector, &sel, &err), FC_OK);
    q.tenant = "svc";
    q.selector = &sel;
    q.from_ns = from_s * 1000000000LL;
    q.until_ns = until_s * 1000000000LL;
    assert_int_equal(fc_store_select_merge(s, &q, &res, &stats, &err), FC_OK);
    a.total = fc_tree_total(&res.tree);
    a.merged = stats.nodes_merged;
    main_node = res.tree.nodes[0].first;
    if (main_node != 0) {
        assert_string_equal(res.names[main_node], "main");
        assert_int_equal(res.tree.nodes[main_node].next, 0);
        for (uint32_t c = res.tree.nodes[main_node].first; c != 0; c = res.tree.nodes[c].next) {
            if (strcmp(res.names[c], "work") == 0) {
                a.work = res.tree.nodes[c].self;
            } else if (strcmp(res.names[c], "idle") == 0) {
                a.idle = res.tree.nodes[c].self;
            } else {
                fail_msg("unexpected frame %s", res.names[c]);
            }
        }
    }
    fc_store_result_release(&res);
    fc_selector_release(&sel);
    return a;
}

/* The sum of a timeline of 100 s steps over [from_s, until_s). */
static int64_t timeline_sum(struct fc_store *s, const char *selector, int64_t from_s,
                            int64_t until_s)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t buckets[128], sum = 0;
    size_t n = (size_t)((until_s - from_s) / 100);

    assert_true(n <= 128);
    assert_int_equal(fc_selector_parse(selector, &sel, &err), FC_OK);
    q.tenant = "svc";
    q.selector = &sel;
    q.from_ns = from_s * 1000000000LL;
    q.until_ns = until_s * 1000000000LL;
    assert_int_equal(fc_store_timeline(s, &q, 100000000000LL, buckets, n, &err), FC_OK);
    for (size_t i = 0; i < n; i++) {
        sum += buckets[i];
    }
    fc_selector_release(&sel);
    return sum;
}

/*
 * SelectSeries of selector over [from_s, from_s + 200 s) in 100 s steps,
 * grouped by group_by (NULL: not grouped): the group whose labels are
 * want_labels must have the two totals want0, want1; returns the groups.
 */
static size_t series2(struct fc_store *s, const char *selector, int64_t from_s,
                      const char *group_by, const char *want_labels, int64_t want0, int64_t want1)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    struct fc_store_timeseries *ts;
    size_t n, found = 0;
    const char *const gb[1] = {group_by};

    assert_int_equal(fc_selector_parse(selector, &sel, &err), FC_OK);
    q.tenant = "svc";
    q.selector = &sel;
    q.from_ns = from_s * 1000000000LL;
    q.until_ns = (from_s + 200) * 1000000000LL;
    assert_int_equal(
        fc_store_select_series(s, &q, 100000000000LL, 2, gb, group_by ? 1 : 0, &ts, &n, &err),
        FC_OK);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(ts[i].labels, want_labels) == 0) {
            assert_int_equal(ts[i].buckets[0], want0);
            assert_int_equal(ts[i].buckets[1], want1);
            found++;
        }
    }
    assert_int_equal(found, 1);
    fc_store_timeseries_free(ts, n);
    fc_selector_release(&sel);
    return n;
}

#define API CPU "{service_name=\"api\"}"

/*
 * The profiles, by hand (cpu of main;work + main;idle, samples 1 + 2):
 *   1 api p1  BASE        100 + 1000
 *   2 api p2  BASE+5      200 + 2000
 *   3 api p3  BASE+150    400 + 4000
 *   4 api p1  BASE+5000   800 + 8000
 *   5 web p1  BASE         16 + 32        (another service)
 *   6 -   p9  BASE      10000 + 3         (no service_name; its idle sample says api)
 */
static void write_profiles(struct fc_store *s)
{
    write1(s, profile("api", "p1", BASE, 100, 1000, NULL));
    write1(s, profile("api", "p2", BASE + 5, 200, 2000, NULL));
    write1(s, profile("api", "p3", BASE + 150, 400, 4000, NULL));
    write1(s, profile("api", "p1", BASE + 5000, 800, 8000, NULL));
    write1(s, profile("web", "p1", BASE, 16, 32, NULL));
    write1(s, profile(NULL, "p9", BASE, 10000, 3, "api"));
}

/* The hand values before compaction, whole service and filtered. */
static void check_all(struct fc_store *s)
{
    struct answer a = query(s, API, BASE, BASE + 3600);

    assert_int_equal(a.total, 100 + 1000 + 200 + 2000 + 400 + 4000 + 3);
    assert_int_equal(a.work, 100 + 200 + 400);
    assert_int_equal(a.idle, 1000 + 2000 + 4000 + 3);
    assert_int_equal(query(s, API, BASE, BASE + 10000).total, 7703 + 800 + 8000);
    assert_int_equal(query(s, SAMPLES "{service_name=\"api\"}", BASE, BASE + 3600).total,
                     3 + 3 + 3 + 2);
    assert_int_equal(query(s, CPU "{service_name=\"web\"}", BASE, BASE + 3600).total, 48);
    assert_int_equal(query(s, CPU "{service_name=\"none\"}", BASE, BASE + 3600).total, 0);
    /* One 10 s window: the first pod's (p1) and the aggregate's (p2, p9) for the service... */
    a = query(s, API, BASE, BASE + 10);
    assert_int_equal(a.total, 100 + 1000 + 200 + 2000 + 3);
    assert_int_equal(a.merged, 2);
    /* ...and per series (one base per pod) when anything else filters. */
    a = query(s, CPU "{service_name=\"api\",pod=~\"p.*\"}", BASE, BASE + 10);
    assert_int_equal(a.total, 3303);
    assert_int_equal(a.merged, 3); /* p1, p2, p9 */
    assert_int_equal(query(s, CPU "{service_name=\"api\",pod=\"p1\"}", BASE, BASE + 10000).total,
                     100 + 1000 + 800 + 8000);
    a = query(s, CPU "{service_name=\"api\",thread=\"t1\"}", BASE, BASE + 3600);
    assert_int_equal(a.total, 1000 + 2000 + 4000 + 3);
    assert_int_equal(a.work, 0);
    assert_int_equal(query(s, CPU "{service_name=~\"api\"}", BASE, BASE + 3600).total, 7703);
    assert_int_equal(timeline_sum(s, API, BASE, BASE + 3600), 7703);
    /* SelectSeries: [BASE, +100) holds p1 1100, p2 2200 and p9's api sample 3; [+100, +200) p3. */
    assert_int_equal(series2(s, API, BASE, NULL, "", 3303, 4400), 1);
    assert_int_equal(series2(s, API, BASE, "service_name",
                             "service_name\x01"
                             "api\x02",
                             3303, 4400),
                     1);
    assert_int_equal(series2(s, API, BASE, "pod", "pod\x01p2\x02", 2200, 0), 4);
    series2(s, API, BASE, "pod", "pod\x01p3\x02", 0, 4400);
    series2(s, API, BASE, "pod", "pod\x01p9\x02", 3, 0);
    series2(s, CPU "{service_name=\"web\"}", BASE, NULL, "", 48, 0);
}

static void test_whole_service_is_the_sum_of_its_series(void **state)
{
    struct fc_store *s = open_store("sum");
    struct fc_error err = {0};
    uint64_t deleted = 0;
    char **v;
    size_t n;

    (void)state;
    write_profiles(s);
    check_all(s); /* coarse windows dirty */
    assert_int_equal(fc_store_flush(s, &err), FC_OK);
    check_all(s);
    /* Label names and values list no aggregate. */
    assert_int_equal(fc_store_label_values(s, "svc", "service_name", &v, &n, &err), FC_OK);
    assert_int_equal(n, 2);
    assert_string_equal(v[0], "api");
    assert_string_equal(v[1], "web");
    fc_store_strings_free(v, n);
    assert_int_equal(fc_store_series_labels(s, "svc", NULL, 0, 0, 0, &v, &n, &err), FC_OK);
    /* 5 label sets (api p1..p3, web p1, p9) x (work; idle with thread) x 2 types, no more. */
    assert_int_equal(n, 20);
    fc_store_strings_free(v, n);

    /* Compaction: the 10 s windows before BASE + 200 go; a slice rounds out to 100 s. */
    assert_int_equal(fc_store_compact_before(s, BASE + 200, 0, &deleted, &err), FC_OK);
    assert_int_equal(query(s, API, BASE, BASE + 3600).total, 7703);
    assert_int_equal(query(s, API, BASE + 100, BASE + 110).total, 4400);
    /* A write into the compacted past: merged into the 100 s window at once. */
    write1(s, profile("api", "p2", BASE + 20, 50, 500, NULL));
    assert_int_equal(query(s, API, BASE, BASE + 3600).total, 7703 + 550);
    assert_int_equal(query(s, API, BASE + 10, BASE + 20).total, 3303 + 550);
    assert_int_equal(timeline_sum(s, API, BASE, BASE + 3600), 8253);
    /*
     * A third 100 s window under the aggregate's first 1000 s window (p3 at
     * BASE + 500: cpu 60 + 600, samples 1 + 2), so that window is a merge,
     * not a sum of two read through them (format 16), and must be rebuilt.
     */
    write1(s, profile("api", "p3", BASE + 500, 60, 600, NULL));
    /* Retention: windows ending by BASE + 100 go, p3's and p1's later ones stay. */
    assert_int_equal(fc_store_delete_before(s, BASE + 100, 0, &deleted, &err), FC_OK);
    fc_store_close(s);
    s = open_store("sum");
    assert_int_equal(query(s, API, BASE, BASE + 3600).total, 4400 + 660);
    assert_int_equal(query(s, API, BASE, BASE + 10000).total, 4400 + 660 + 8800);
    assert_int_equal(query(s, SAMPLES "{service_name=\"api\"}", BASE, BASE + 10000).total, 9);
    assert_int_equal(query(s, CPU "{service_name=\"api\",pod=\"p1\"}", BASE, BASE + 10000).total,
                     8800);
    assert_int_equal(timeline_sum(s, API, BASE, BASE + 3600), 4400 + 660);
    fc_store_close(s);
}

/* The ids that are values of db (be32), or keys after the tenant "svc" 0 (sid: series). */
static bool in_db(MDB_txn *txn, MDB_dbi db, bool as_key, const uint8_t id[4])
{
    MDB_cursor *c;
    MDB_val k, v;
    bool found = false;

    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0 && !found;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        found = as_key ? k.mv_size == 8 && memcmp((uint8_t *)k.mv_data + 4, id, 4) == 0
                       : v.mv_size == 4 && memcmp(v.mv_data, id, 4) == 0;
    }
    mdb_cursor_close(c);
    return found;
}

/* Deletes the entries of db whose key (after "svc" 0) starts with an id of ids. */
static void delete_bases(MDB_txn *txn, MDB_dbi db, uint8_t (*ids)[4], size_t n)
{
    MDB_cursor *c;
    MDB_val k, v;

    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        for (size_t i = 0; i < n; i++) {
            if (k.mv_size > 8 && memcmp((uint8_t *)k.mv_data + 4, ids[i], 4) == 0) {
                assert_int_equal(mdb_cursor_del(c, 0), 0);
                break;
            }
        }
    }
    mdb_cursor_close(c);
}

/*
 * A store of format 4 has no aggregates: made from this build's store by
 * deleting, in LMDB itself, every base no series is packed under (sbase),
 * its windows and dirty marks, every series id without labels (sid), and
 * the services' first bases and lists (meta).
 * Opened, it is built its aggregates and marked 5: whole-service answers
 * equal the hand values and read the aggregate.
 */
static void test_format_4_gets_its_aggregates(void **state)
{
    struct fc_store *s = open_store("upgrade");
    struct fc_error err = {0};
    uint64_t deleted = 0;
    char sub[256];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi base, sbase, bid, series, sid, node, dirty, meta;
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t aggs[16][4];
    size_t n_aggs = 0;
    uint32_t version = 4;
    static char format_key[] = "\0format";

    (void)state;
    write_profiles(s);
    assert_int_equal(fc_store_compact_before(s, BASE + 200, 0, &deleted, &err), FC_OK);
    write1(s, profile("api", "p2", BASE + 20, 50, 500, NULL)); /* in the compacted past */
    write1(s, profile("api", "p3", BASE + 7000, 3, 30, NULL));
    /*
     * Everything into LMDB first: a format 4 store has no write-ahead log,
     * and the records of this one name the aggregates deleted below. (The
     * upgrade still meets dirty windows: it marks the aggregates' own.)
     */
    assert_int_equal(fc_store_flush(s, &err), FC_OK);
    snprintf(sub, sizeof(sub), "cp -r %s/upgrade %s/upgrade4", dir, dir);
    assert_int_equal(system(sub), 0);
    fc_store_close(s);

    snprintf(sub, sizeof(sub), "%s/upgrade4", dir);
    fc_test_sids_as_format_17(sub); /* format 4 kept a key per series */
    assert_int_equal(mdb_env_create(&env), 0);
    assert_int_equal(mdb_env_set_maxdbs(env, 32), 0);
    assert_int_equal(mdb_env_open(env, sub, 0, 0644), 0);
    assert_int_equal(mdb_txn_begin(env, NULL, 0, &txn), 0);
    assert_int_equal(mdb_dbi_open(txn, "base", 0, &base), 0);
    assert_int_equal(mdb_dbi_open(txn, "sbase", 0, &sbase), 0);
    assert_int_equal(mdb_dbi_open(txn, "bid", 0, &bid), 0);
    assert_int_equal(mdb_dbi_open(txn, "series", 0, &series), 0);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_dbi_open(txn, "dirty", 0, &dirty), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, base, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        assert_int_equal(v.mv_size, 4);
        /* An aggregate's base: no labels of its own (bid), no series naming it (sbase). */
        if (!in_db(txn, bid, true, v.mv_data) && !in_db(txn, sbase, false, v.mv_data)) {
            assert_true(n_aggs < 16);
            memcpy(aggs[n_aggs++], v.mv_data, 4);
            assert_int_equal(mdb_cursor_del(c, 0), 0);
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(n_aggs, 1); /* api's (web has one pod: its first base answers) */
    delete_bases(txn, node, aggs, n_aggs);
    delete_bases(txn, dirty, aggs, n_aggs);
    assert_int_equal(mdb_cursor_open(txn, series, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (!in_db(txn, sid, true, v.mv_data)) {
            assert_int_equal(mdb_cursor_del(c, 0), 0);
        }
    }
    mdb_cursor_close(c);
    /* The services' first bases and their lists: meta keys "svc" 0 0 h128. */
    assert_int_equal(mdb_cursor_open(txn, meta, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size == 4 + 1 + 16 && memcmp(k.mv_data, "svc\0\0", 5) == 0) {
            assert_int_equal(mdb_cursor_del(c, 0), 0);
            n_aggs++;
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(n_aggs, 1 + 2 + 2 * 2); /* first bases of api and web, 2 types each */
    k.mv_data = format_key;
    k.mv_size = 7;
    v.mv_data = &version;
    v.mv_size = 4;
    assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);

    s = open_store("upgrade4");
    for (int pass = 0; pass < 2; pass++) {
        struct answer a = query(s, API, BASE, BASE + 3600);
        assert_int_equal(a.total, 7703 + 550);
        assert_int_equal(a.work, 700 + 50);
        assert_int_equal(query(s, API, BASE, BASE + 86400).total, 8253 + 8800 + 33);
        assert_int_equal(query(s, API, BASE + 100, BASE + 110).total, 4400);
        assert_int_equal(query(s, SAMPLES "{service_name=\"api\"}", BASE, BASE + 86400).total,
                         6 * 3 + 2);
        assert_int_equal(query(s, CPU "{service_name=\"web\"}", BASE, BASE + 3600).total, 48);
        assert_int_equal(timeline_sum(s, API, BASE, BASE + 3600), 8253);
        a = query(s, API, BASE, BASE + 10); /* rounded out to the compacted 100 s window */
        assert_int_equal(a.total, 3303 + 550);
        assert_int_equal(a.merged, 2); /* p1's and the aggregate's (per series: p1, p2, p9) */
        assert_int_equal(fc_store_flush(s, &err), FC_OK); /* the built coarse windows */
    }
    fc_store_close(s);
    /* Marked format 8 at open. */
    assert_int_equal(fc_test_store_format(sub), 18);
}

/*
 * One pod among 600 of a service: series are found from the shortest
 * equality's postings (storage/store_read.c), whatever the order of the
 * matchers, so lists longer than the first caps (64, 512) must still be
 * read whole. Pod q<i> has work i + 1 and idle 1000 (cpu), 1 + 2 samples;
 * every ninth pod also has zone=z (67 pods: i = 0, 9, ..., 594).
 */
static void test_one_pod_among_many(void **state)
{
    struct fc_store *s = open_store("many");

    (void)state;
    for (int i = 0; i < 600; i++) {
        char pod[16];
        struct fc_batch *b;
        snprintf(pod, sizeof(pod), "q%d", i);
        b = profile("big", pod, BASE + i % 300, i + 1, 1000, NULL);
        if (i % 9 == 0) {
            fc_profile_set_label(b, &b->profiles[0], "zone", "z");
        }
        write1(s, b);
    }
    assert_int_equal(query(s, CPU "{service_name=\"big\",pod=\"q137\"}", BASE, BASE + 3600).total,
                     138 + 1000);
    assert_int_equal(query(s, CPU "{pod=\"q137\",service_name=\"big\"}", BASE, BASE + 3600).total,
                     138 + 1000);
    /* The type is checked on each candidate: pod q5's postings hold both types' series. */
    assert_int_equal(query(s, CPU "{pod=\"q5\"}", BASE, BASE + 3600).total, 6 + 1000);
    assert_int_equal(query(s, SAMPLES "{pod=\"q5\"}", BASE, BASE + 3600).total, 3);
    /* 67 pods: past the first cap. 9 * (0 + 1 + ... + 66) + 67 * 1001. */
    assert_int_equal(query(s, CPU "{service_name=\"big\",zone=\"z\"}", BASE, BASE + 3600).total,
                     9 * 66 * 67 / 2 + 67 * 1001);
    /* q100..q199 (anchored), narrowed by service_name alone: past the second cap. */
    assert_int_equal(query(s, CPU "{service_name=\"big\",pod=~\"q1..\"}", BASE, BASE + 3600).total,
                     (100 + 199) * 100 / 2 + 100 * 1001);
    /* The whole service (its aggregate): 0 + 1 + ... + 599 + 600 * 1001. */
    assert_int_equal(query(s, CPU "{service_name=\"big\"}", BASE, BASE + 3600).total,
                     599 * 600 / 2 + 600 * 1001);
    assert_int_equal(query(s, CPU "{service_name=\"big\",pod=\"q600\"}", BASE, BASE + 3600).total,
                     0);
    fc_store_close(s);
}

static int setup(void **state)
{
    (void)state;
    return fc_test_tmpdir(dir, sizeof(dir), "flamecol-svcagg");
}

static int teardown(void **state)
{
    (void)state;
    return fc_test_rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_service_is_the_sum_of_its_series),
        cmocka_unit_test(test_format_4_gets_its_aggregates),
        cmocka_unit_test(test_one_pod_among_many),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
