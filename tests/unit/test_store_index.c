/*
 * The series index: series' labels in buckets of 64 ids (format 18) and
 * buckets damaged, postings in chunks (those of formats 7 and 14 still read,
 * a damaged chunk skipped), and retention forgetting the pods it left
 * without data: their series, own parts, postings and dirty windows.
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
#include <xxhash.h>

#include "storage/store.h"
#include "storage/store_int.h" /* sid buckets read and written by the store's own functions */
#include "tests/unit/fc_test.h"
#include "tests/unit/store_fixture.h"

/* The CPU total of svc-0 at BASE (10 s), and of pod p<pod> alone (pod < 0: every pod). */
static int64_t pods_total(struct fc_store *s2, const char *tenant, int pod)
{
    char text[160];
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t total;

    if (pod < 0) {
        snprintf(text, sizeof(text),
                 "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"svc-0\"}");
    } else {
        snprintf(text, sizeof(text),
                 "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"svc-0\",pod=\"p%d\"}",
                 pod);
    }
    assert_int_equal(fc_selector_parse(text, &sel, &err), FC_OK);
    q.tenant = tenant;
    q.selector = &sel;
    total = range_total(s2, &q, BASE, BASE + 10);
    fc_selector_release(&sel);
    return total;
}

/*
 * The dirty keys (storage/store_int.h: node keys, tenant 0 be32(base) ...)
 * of the closed store sub under the bases whose `bid` labels hold `has`
 * (at most 16 bases, their ids into ids); returns how many keys.
 */
static size_t dirty_of_bases_with(const char *sub, const char *tenant, const char *has,
                                  uint32_t *ids, size_t *n_ids)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi bid, dirty;
    MDB_cursor *c;
    MDB_val k, v;
    size_t n = 0, t = strlen(tenant) + 1;

    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "bid", 0, &bid), 0);
    assert_int_equal(mdb_dbi_open(txn, "dirty", 0, &dirty), 0);
    assert_int_equal(mdb_cursor_open(txn, bid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size == t + 4 && memcmp(k.mv_data, tenant, t) == 0 &&
            holds(v.mv_data, v.mv_size, has) && *n_ids < 16) {
            const uint8_t *b = (const uint8_t *)k.mv_data + t;
            ids[(*n_ids)++] = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | b[2] << 8 | b[3];
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_cursor_open(txn, dirty, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *b = (const uint8_t *)k.mv_data + t;
        uint32_t base;
        if (k.mv_size < t + 4 || memcmp(k.mv_data, tenant, t) != 0) {
            continue;
        }
        base = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | b[2] << 8 | b[3];
        for (size_t i = 0; i < *n_ids; i++) {
            n += ids[i] == base;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return n;
}

/* The CPU total of the pods of svc-0 that pod=~re matches over [from, until) (by series). */
static int64_t pods_matching(struct fc_store *s2, const char *re, int64_t from, int64_t until)
{
    char text[160];
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t total;

    snprintf(text, sizeof(text),
             "process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"svc-0\",pod=~\"%s\"}", re);
    assert_int_equal(fc_selector_parse(text, &sel, &err), FC_OK);
    q.tenant = "f";
    q.selector = &sel;
    total = range_total(s2, &q, from, until);
    fc_selector_release(&sel);
    return total;
}

static size_t postings_layout(const char *sub, size_t *chunks, size_t *short_chunks, size_t *ones,
                              size_t *value_bytes);

static size_t sid_label_pairs(const char *sub);

/*
 * A service aggregate's series key (tenant 0 h128("\0a" service "\0"
 * type)) can start with the four bytes of a pod's base id, as a pod's own
 * `series` keys do: for service s34733535 and the Go CPU profile's samples
 * type they are be32(7) (found by a search over xxh3). Forgetting pod 7 (of
 * service old: its first pod is 1, its aggregate 3) must leave that key,
 * or the whole service's answer loses every pod but its first.
 */
static void test_forget_keeps_an_aggregate_key_that_shares_a_pods_prefix(void **state)
{
    struct fc_store *s2 = open_sub("forget-collide");
    struct fc_error err = {0};
    const int64_t later = BASE + 40 * 86400;
    uint64_t deleted = 0, pods = 0, series = 0;
    struct fc_selector whole, by_pod;
    struct fc_store_query q = {0};
    int64_t one, before, after;

    (void)state;
    for (int i = 0; i < 10; i++) { /* bases 1, 2, 4-11 (the aggregate of old is 3): old data */
        struct fc_batch *b = load_pod(i, BASE + i * 10, "c");
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "service_name", "old"), FC_OK);
        write_batch(s2, b);
    }
    for (int i = 0; i < 2; i++) {
        struct fc_batch *b = load_pod(i, later + i * 10, "c");
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "service_name", "s34733535"),
                         FC_OK);
        write_batch(s2, b);
    }
    assert_int_equal(fc_selector_parse("process_cpu:samples:count:cpu:nanoseconds{service_name="
                                       "\"s34733535\"}",
                                       &whole, &err),
                     FC_OK);
    assert_int_equal(fc_selector_parse("process_cpu:samples:count:cpu:nanoseconds{service_name="
                                       "\"s34733535\",pod=~\".+\"}",
                                       &by_pod, &err),
                     FC_OK);
    fc_store_close(s2);
    {
        /* The case itself: an aggregate's series key (16 bytes after "c\0") starting be32(7). */
        static const uint8_t seven[] = {'c', 0, 0, 0, 0, 7};
        char sub[128];
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi db;
        MDB_cursor *c;
        MDB_val k = {sizeof(seven), (void *)seven}, v;
        bool found = false;
        snprintf(sub, sizeof(sub), "%s/forget-collide", dir);
        lmdb_begin(sub, MDB_RDONLY, &env, &txn);
        assert_int_equal(mdb_dbi_open(txn, "series", 0, &db), 0);
        assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
        for (int g = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
             g == 0 && k.mv_size >= sizeof(seven) && memcmp(k.mv_data, seven, sizeof(seven)) == 0;
             g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
            found |= k.mv_size == 2 + 16;
        }
        mdb_cursor_close(c);
        mdb_txn_abort(txn);
        mdb_env_close(env);
        assert_true(found);
    }
    s2 = open_sub("forget-collide");
    q.tenant = "c";
    q.selector = &by_pod;
    one = range_total(s2, &q, later, later + 10); /* pod p0's samples: one profile's */
    assert_true(one > 0);
    q.selector = &whole;
    before = range_total(s2, &q, later, later + 3600);
    assert_int_equal(before, 2 * one);
    assert_int_equal(fc_store_delete_before(s2, BASE + 35 * 86400, 0, &deleted, &err), FC_OK);
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 9); /* old's pods but its first */
    after = range_total(s2, &q, later, later + 3600);
    assert_int_equal(after, 2 * one);
    q.selector = &by_pod;
    assert_int_equal(range_total(s2, &q, later, later + 3600), 2 * one);
    fc_selector_release(&whole);
    fc_selector_release(&by_pod);
    fc_store_close(s2);
}

/*
 * Retention forgets the pods it left without data: ten pods of svc-0 at
 * BASE (p1-p4 also labelled gone=x), p5-p9 again 40 days later; after
 * everything 35 days old is deleted, p1-p4 go from the label index and
 * every table of series and bases (by hand: 4 of the 10 pods, which all
 * have the same series), p0 stays (the service's first pod, which
 * whole-service queries read by its listed series) and so do p5-p9. A
 * forgotten pod that comes back is made again: its profile is counted
 * under it, not written under ids that are gone.
 */
static void test_retention_forgets_pods_left_without_data(void **state)
{
    static const char *const dbs[] = {"sid", "series", "bid", "base", "lv", "ln", "post"};
    enum { SID, SERIES, BID, BASE_DB, LV, LN, POST, N };
    struct fc_store *s2;
    struct fc_error err = {0};
    const int64_t later = BASE + 40 * 86400;
    size_t before[N], after[N], n_values = 0, n_names = 0, n_gone = 0;
    uint64_t deleted = 0, pods = 0, series = 0;
    uint32_t gone[16];
    char sub[128], **values = NULL, **names = NULL;

    (void)state;
    /* A flush builds one coarse window: retention and forget flush until none waits. */
    fc_test_rebuild_max = 1;
    s2 = open_sub("forget");
    snprintf(sub, sizeof(sub), "%s/forget", dir);
    for (int pod = 0; pod < 10; pod++) {
        struct fc_batch *b = load_pod(pod, BASE + pod * 10, "f");
        if (pod >= 1 && pod <= 4) {
            assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "gone", "x"), FC_OK);
        }
        write_batch(s2, b);
    }
    for (int pod = 5; pod < 10; pod++) {
        struct fc_batch *b = load_pod(pod, later + pod * 10, "f");
        write_batch(s2, b);
    }
    /* Nothing is empty yet: nothing is forgotten. */
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 0);
    fc_store_close(s2);
    db_entries(sub, dbs, N, before);
    assert_int_equal(before[BID], 10);
    assert_int_equal(before[SID] % 10, 0); /* each pod has the same series */
    /*
     * p1-p4's 10^7 s window (BASE is on its edge) is still open 40 days
     * later: dirty until it closes, 115 days after BASE (store_flush.c).
     */
    assert_int_equal(dirty_of_bases_with(sub, "f", "gone\x01x", gone, &n_gone), 4);
    assert_int_equal(n_gone, 4);

    s2 = open_sub("forget");
    {
        /* p1 once more in the old days: its ids in the writer's cache, as a live pod's are. */
        struct fc_batch *b = load_pod(1, BASE + 5, "f");
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "gone", "x"), FC_OK);
        write_batch(s2, b);
    }
    assert_int_equal(fc_store_delete_before(s2, BASE + 35 * 86400, 0, &deleted, &err), FC_OK);
    assert_true(deleted > 0);
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 4);
    assert_int_equal(series, 4 * before[SID] / 10);
    /* A second pass finds nothing more. */
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 0);

    assert_int_equal(fc_store_label_values(s2, "f", "pod", &values, &n_values, &err), FC_OK);
    assert_int_equal(n_values, 6);
    for (size_t i = 0; i < n_values; i++) {
        assert_true(strcmp(values[i], "p0") == 0 || strcmp(values[i], "p5") >= 0);
    }
    fc_store_strings_free(values, n_values);
    assert_int_equal(fc_store_label_names(s2, "f", &names, &n_names, &err), FC_OK);
    for (size_t i = 0; i < n_names; i++) {
        assert_string_not_equal(names[i], "gone");
    }
    fc_store_strings_free(names, n_names);
    assert_int_equal(pods_matching(s2, "p.*", later, later + 3600), 5 * GO_CPU_TOTAL);

    /* p1 comes back with the same labels (a StatefulSet's pod): made again, counted under them. */
    {
        struct fc_batch *b = load_pod(1, later + 100, "f");
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "gone", "x"), FC_OK);
        write_batch(s2, b);
    }
    assert_int_equal(pods_matching(s2, "p1", later, later + 3600), GO_CPU_TOTAL);
    assert_int_equal(pods_matching(s2, "p.*", later, later + 3600), 6 * GO_CPU_TOTAL);
    assert_int_equal(pods_matching(s2, "p1", BASE, BASE + 3600), 0);
    {
        /* An idle pod (no positive sample) makes no base: nothing would read or forget it. */
        const int64_t zero = 0;
        struct fc_batch *b = stacks_batch("svc-0", later + 200, 2, 2, &zero, 1);
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "pod", "idle"), FC_OK);
        fc_batch_set_tenant(b, "f");
        write_batch(s2, b);
    }
    fc_store_close(s2);
    db_entries(sub, dbs, N, after);
    assert_int_equal(after[BID], 7); /* p0, p5-p9 and p1 made again */
    assert_int_equal(after[BASE_DB], before[BASE_DB] - 3);
    {
        /* The forgotten pods' dirty windows went with them (by their old ids; "\xff" adds none). */
        size_t n = n_gone;
        assert_int_equal(dirty_of_bases_with(sub, "f", "\xff", gone, &n), 0);
        assert_int_equal(n, n_gone);
    }
    {
        /*
         * A base without series as older builds made one for an idle pod
         * (`bid` and `base` by hand, as store_write.c's base_id writes them):
         * forgotten once, and a second pass finds nothing.
         */
        static const char canon[] = "pod\x01idle\x02service_name\x01svc-0\x02";
        XXH128_hash_t h = XXH3_128bits(canon, sizeof(canon) - 1);
        uint8_t bid_key[2 + 4] = {'f', 0, 0x00, 0xff, 0xff, 0xf0};
        uint8_t base_key[2 + 16] = {'f', 0};
        MDB_val k, v;
        MDB_env *env;
        MDB_txn *txn;
        MDB_dbi db;
        for (int i = 0; i < 8; i++) {
            base_key[2 + i] = (uint8_t)(h.high64 >> (56 - 8 * i));
            base_key[10 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
        }
        lmdb_begin(sub, 0, &env, &txn);
        assert_int_equal(mdb_dbi_open(txn, "bid", 0, &db), 0);
        k = (MDB_val){sizeof(bid_key), bid_key};
        v = (MDB_val){sizeof(canon) - 1, (void *)canon};
        assert_int_equal(mdb_put(txn, db, &k, &v, 0), 0);
        assert_int_equal(mdb_dbi_open(txn, "base", 0, &db), 0);
        k = (MDB_val){sizeof(base_key), base_key};
        v = (MDB_val){4, bid_key + 2};
        assert_int_equal(mdb_put(txn, db, &k, &v, 0), 0);
        assert_int_equal(mdb_txn_commit(txn), 0);
        mdb_env_close(env);
    }
    s2 = open_sub("forget");
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 1);
    assert_int_equal(series, 0);
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 0);
    fc_store_close(s2);

    db_entries(sub, dbs, N, after);
    assert_int_equal(after[BID], 7);
    assert_int_equal(after[BASE_DB], before[BASE_DB] - 3);
    assert_int_equal(after[SID], before[SID] / 10 * 7);
    assert_int_equal(after[SERIES], before[SERIES] - 3);
    assert_int_equal(after[LV], before[LV] - 3); /* p2-p4 (p1 and gone=x came back) */
    assert_int_equal(after[LN], before[LN]);
    assert_true(after[POST] < before[POST]);
    {
        /* Every id the postings list has labels in sid, one posting per label: none is left. */
        size_t chunks, short_chunks, ones, value_bytes;
        assert_int_equal(postings_layout(sub, &chunks, &short_chunks, &ones, &value_bytes),
                         sid_label_pairs(sub));
    }
    fc_test_rebuild_max = 0;
}

/*
 * The ids of posting entry (k, v), read from the layout documented in
 * storage/store_int.h: key tenant 0 h64(name) h64(value) be32(first id),
 * then for format 15 a byte 1 and a value of uvarint differences; for
 * format 8 a value of be32 ids; for format 7 an empty value. Returns how
 * many (at most 256, into ids); *layout 15, 8 or 7; *group_n the length
 * of the key before its id.
 */
static size_t chunk_ids(const MDB_val *k, const MDB_val *v, uint32_t *ids, int *layout,
                        size_t *group_n)
{
    const uint8_t *kb = k->mv_data, *zero = memchr(kb, 0, k->mv_size);
    size_t n = 0;

    assert_non_null(zero);
    *group_n = (size_t)(zero - kb) + 1 + 16;
    assert_true(k->mv_size == *group_n + 4 || k->mv_size == *group_n + 5);
    ids[n++] = be32(kb + *group_n);
    if (k->mv_size == *group_n + 5) {
        const uint8_t *p = v->mv_data, *end = p + v->mv_size;
        assert_int_equal(kb[*group_n + 4], 1);
        *layout = 15;
        while (p < end) {
            uint64_t d = ref_uvarint(&p);
            assert_true(d >= 1 && p <= end && n < 256);
            ids[n] = ids[n - 1] + (uint32_t)d;
            n++;
        }
        return n;
    }
    if (v->mv_size == 0) {
        *layout = 7;
        return n;
    }
    *layout = 8;
    assert_int_equal(v->mv_size % 4, 0);
    assert_true(v->mv_size / 4 <= 64);
    assert_int_equal(be32(v->mv_data), ids[0]);
    for (size_t i = 4; i < v->mv_size; i += 4) {
        ids[n++] = be32((const uint8_t *)v->mv_data + i);
    }
    return n;
}

/*
 * The postings of the store at sub, checked: ids increasing within a chunk
 * and from one chunk of a (name, value) to the next; *chunks entries,
 * *short_chunks chunks not full though another of their layout follows them
 * (format 15: 256 ids, format 8: 64), *ones format 7 entries, *value_bytes
 * the bytes of format 15 values. Returns how many ids.
 */
static size_t postings_layout(const char *sub, size_t *chunks, size_t *short_chunks, size_t *ones,
                              size_t *value_bytes)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi post;
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t group[512] = {0}; /* the key without its id: tenant 0 h64(name) h64(value) */
    size_t group_n = 0;
    uint32_t last = 0, got[256];
    size_t ids = 0, prev_n = 0;
    int prev_layout = 0;
    bool have = false;

    *chunks = *short_chunks = *ones = *value_bytes = 0;
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "post", 0, &post), 0);
    assert_int_equal(mdb_cursor_open(txn, post, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        int layout;
        size_t gn, n = chunk_ids(&k, &v, got, &layout, &gn);
        bool same = have && group_n == gn && memcmp(group, k.mv_data, gn) == 0;
        if (same && layout == prev_layout &&
            ((layout == 15 && prev_n < 256) || (layout == 8 && prev_n < 64))) {
            (*short_chunks)++; /* the previous chunk was not the last: it should have been full */
        }
        if (!same) {
            group_n = gn;
            memcpy(group, k.mv_data, gn);
            have = true;
        } else {
            assert_true(got[0] > last);
        }
        for (size_t i = 1; i < n; i++) {
            assert_true(got[i] > got[i - 1]);
        }
        last = got[n - 1];
        ids += n;
        *ones += layout == 7;
        *value_bytes += layout == 15 ? v.mv_size : 0;
        prev_n = n;
        prev_layout = layout;
        (*chunks)++;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return ids;
}

/* Every (name, value) pair of every series, from sid: one posting each. */
static size_t sid_label_pairs(const char *sub)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, bid;
    MDB_cursor *c;
    MDB_val k, v, b;
    size_t pairs = 0;

    fc_test_sids_as_format_17(sub); /* a key per series: counted by hand */
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "bid", 0, &bid), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        bool split = v.mv_size >= 5 && ((const uint8_t *)v.mv_data)[0] == 0;
        for (size_t i = split ? 5 : 0; i < v.mv_size; i++) {
            pairs += ((const char *)v.mv_data)[i] == '\x02'; /* the end of a value */
        }
        if (split) {
            /* Split (format 10): 0, be32(base), the rest; the base's labels in bid. */
            uint8_t key[64];
            assert_true(k.mv_size <= sizeof(key));
            memcpy(key, k.mv_data, k.mv_size);
            memcpy(key + k.mv_size - 4, (const uint8_t *)v.mv_data + 1, 4);
            b = (MDB_val){k.mv_size, key};
            assert_int_equal(mdb_get(txn, bid, &b, &b), 0);
            for (size_t i = 0; i < b.mv_size; i++) {
                pairs += ((const char *)b.mv_data)[i] == '\x02';
            }
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return pairs;
}

/*
 * Postings in chunks (format 8): 150 pods of one service, written in groups;
 * every pod's series are found alone and all of them together, and the
 * postings are chunks of up to 64 ids, full but for the last of each value.
 */
static void test_postings_in_chunks(void **state)
{
    struct fc_store *s2 = open_sub("postings");
    char sub[128];
    size_t chunks, short_chunks, ones, ids, pairs, bytes;
    int64_t one;

    (void)state;
    write_pods(s2, 0, 150, "pp");
    one = pods_total(s2, "pp", 0);
    assert_int_equal(one, GO_CPU_TOTAL);
    for (int pod = 1; pod < 150; pod += 37) {
        assert_int_equal(pods_total(s2, "pp", pod), one);
    }
    assert_int_equal(pods_total(s2, "pp", 63), one);
    assert_int_equal(pods_total(s2, "pp", 64), one);
    assert_int_equal(pods_total(s2, "pp", 149), one);
    assert_int_equal(pods_total(s2, "pp", 150), 0);
    assert_int_equal(pods_total(s2, "pp", -1), 150 * one);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/postings", dir);
    ids = postings_layout(sub, &chunks, &short_chunks, &ones, &bytes);
    pairs = sid_label_pairs(sub);
    print_message("%zu ids in %zu chunks, %zu bytes of differences\n", ids, chunks, bytes);
    assert_true(pairs > 150 * 3);
    assert_int_equal(ids, pairs);
    assert_int_equal(ones, 0);
    assert_int_equal(short_chunks, 0);
    /*
     * A pod's value holds its ~35 series in one chunk and the others fill
     * chunks of 256 (288 chunks for 40,800 ids measured; chunks of 64 would
     * be about 700). Series of one pod take consecutive ids and those of one
     * label value are a pod's series apart, so nearly every difference
     * takes one byte (40,512 bytes for 40,512 differences measured; format
     * 8 took four bytes an id).
     */
    assert_true(chunks < pairs / 100);
    assert_true(bytes < (ids - chunks) * 9 / 8);
}

/* Entries of one db of the closed store at sub (as db_entries counts them). */
static size_t entries_of(const char *sub, const char *db_name)
{
    size_t n;

    db_entries(sub, &db_name, 1, &n);
    return n;
}

/* Keys of `sid` in the closed store at sub: *own those of a series' own (4 bytes after the tenant).
 */
static size_t sid_keys(const char *sub, size_t *own)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v;
    size_t n = 0;

    *own = 0;
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &db), 0);
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *zero = memchr(k.mv_data, 0, k.mv_size);
        n++;
        *own += zero != NULL && (size_t)(zero - (const uint8_t *)k.mv_data) + 5 == k.mv_size;
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return n;
}

/* Pods p<from>..p<to - 1> of tenant each list per_pod series and, with cpu, total GO_CPU_TOTAL. */
static void pods_whole(struct fc_store *s2, const char *tenant, int from, int to, size_t per_pod,
                       bool cpu)
{
    char sel[32], **v = NULL;
    size_t n;

    for (int pod = from; pod < to; pod++) {
        snprintf(sel, sizeof(sel), "{pod=\"p%d\"}", pod);
        n = listed(s2, tenant, sel, &v);
        free_listed(v, n);
        assert_int_equal(n, per_pod);
        snprintf(sel, sizeof(sel), "pod=\"p%d\"", pod);
        assert_true(!cpu || cpu_of(s2, tenant, sel) == GO_CPU_TOTAL);
    }
}

#define BUCKET_TEST_IDS 4096

#define BASE_NONE_CHECKED BUCKET_TEST_IDS

#define BASE_NONE UINT32_MAX

/* The base of every series id under n as the store reads it (BASE_NONE: not read). */
static void series_bases(struct fc_store *s2, const char *tenant, uint32_t *bases, uint32_t n)
{
    MDB_txn *txn;

    assert_int_equal(mdb_txn_begin(s2->env, NULL, MDB_RDONLY, &txn), 0);
    for (uint32_t id = 0; id < n; id++) {
        struct series_labels l;
        bases[id] = fc_store_sid_get(s2, txn, tenant, id, NULL, &l) ? l.base_id : BASE_NONE;
    }
    mdb_txn_abort(txn);
}

/* Flips a bit of the first entry's bytes (past the check): damage the check must find. */
static void flip_a_bit(uint8_t *value, size_t *len)
{
    assert_true(*len > FC_STORE_SID_CHECK + 1);
    value[FC_STORE_SID_CHECK + 1] ^= 0x04;
}

/* One entry: slot 0, "the base of the entry before" (there is none), symbol 1; check right. */
static void first_says_same_base(uint8_t *value, size_t *len)
{
    uint32_t check;

    value[4] = 0 << 1 | 1;
    value[5] = 1;
    check = (uint32_t)XXH3_64bits(value + 4, 2); /* by hand: xxh3 of the entries, low 32 bits */
    for (int i = 0; i < 4; i++) {
        value[i] = (uint8_t)(check >> (24 - 8 * i));
    }
    *len = 6;
}

/*
 * Rewrites one sid bucket of the closed store at sub (the first when first,
 * else the last): its raw value through raw, or its entries through
 * entries (decoded and encoded again by the store's own functions, which
 * makes a value whose check holds).
 */
static void rewrite_bucket(const char *sub, bool first, void (*raw)(uint8_t *value, size_t *len),
                           void (*entries)(struct sid_entry *e, size_t *n))
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid;
    MDB_cursor *c;
    MDB_val k, v;
    uint8_t value[2048];
    size_t len;
    int g;

    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (g = mdb_cursor_get(c, &k, &v, first ? MDB_FIRST : MDB_LAST); g == 0;
         g = mdb_cursor_get(c, &k, &v, first ? MDB_NEXT : MDB_PREV)) {
        const uint8_t *zero = memchr(k.mv_data, 0, k.mv_size);
        if (zero != NULL && (size_t)(zero - (const uint8_t *)k.mv_data) + 6 == k.mv_size) {
            break; /* a bucket's key: tenant 0 be32 1 */
        }
    }
    assert_int_equal(g, 0);
    assert_true(v.mv_size <= sizeof(value));
    memcpy(value, v.mv_data, v.mv_size);
    len = v.mv_size;
    if (raw != NULL) {
        raw(value, &len);
        v = (MDB_val){len, value};
        assert_int_equal(mdb_cursor_put(c, &k, &v, MDB_CURRENT), 0);
    } else {
        struct sid_entry e[FC_STORE_SID_SLOTS];
        struct fc_buf out;
        size_t n;
        assert_true(fc_store_sid_bucket_decode(&v, e, &n));
        entries(e, &n);
        fc_buf_init(&out, 0);
        fc_store_sid_bucket_encode(e, n, &out);
        v = (MDB_val){out.len, out.data};
        assert_int_equal(mdb_cursor_put(c, &k, &v, MDB_CURRENT), 0);
        fc_buf_release(&out);
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

/*
 * Format 18: series' labels in buckets of 64 ids, own parts interned as
 * symbols. 20 pods of one profile: every series is in a bucket, at least 8
 * a key; the pods after the first intern no symbol (their own parts and
 * frames are the first's); every pod lists and totals as written. Then one
 * bit of the first bucket is flipped: its check refuses it, its series are
 * lost and counted as corrupt, and no series is read with another base.
 * Then the last bucket is replaced by one entry that passes its check but
 * says "the base of the entry before": refused too, and a pod written after
 * it, whose ids fall in it, gets keys of its own and reads whole.
 */
static void test_series_in_buckets_of_64(void **state)
{
    struct fc_store *s2 = open_sub("bucket");
    char sub[128], labels[32], **v = NULL;
    size_t per_pod, symbols, keys, own, n, missing = 0;
    int64_t sum = 0;
    static uint32_t bases_before[BUCKET_TEST_IDS], bases_after[BUCKET_TEST_IDS];

    (void)state;
    snprintf(sub, sizeof(sub), "%s/bucket", dir);
    write_pods(s2, 0, 1, "bk");
    per_pod = listed(s2, "bk", "{pod=\"p0\"}", &v);
    free_listed(v, per_pod);
    assert_true(per_pod > 2);
    fc_store_close(s2);
    symbols = entries_of(sub, "symid");
    s2 = open_sub("bucket");
    write_pods(s2, 1, 20, "bk");
    pods_whole(s2, "bk", 0, 20, per_pod, true);
    /* Nothing to narrow by: every series of the tenant, read from the buckets. */
    n = listed(s2, "bk", "{pod=~\"p1.*\"}", &v); /* p1, p10-p19 */
    assert_int_equal(n, 11 * per_pod);
    free_listed(v, n);
    assert_int_equal(fc_store_corrupt_windows(s2), 0);
    fc_store_close(s2);
    assert_int_equal(entries_of(sub, "symid"), symbols);
    assert_int_equal(fc_test_sid_series(sub), 20 * per_pod);
    keys = sid_keys(sub, &own);
    assert_int_equal(own, 0);
    assert_true(keys >= 2 && keys * 8 <= 20 * per_pod);

    /* One bit of the first bucket flipped: the check refuses it, nothing is misread. */
    s2 = open_sub("bucket");
    series_bases(s2, "bk", bases_before, BUCKET_TEST_IDS);
    fc_store_close(s2);
    rewrite_bucket(sub, true, flip_a_bit, NULL);
    s2 = open_sub("bucket");
    series_bases(s2, "bk", bases_after, BUCKET_TEST_IDS);
    for (uint32_t id = 0; id < BASE_NONE_CHECKED; id++) {
        missing += bases_after[id] == BASE_NONE && bases_before[id] != BASE_NONE;
        assert_true(bases_after[id] == BASE_NONE || bases_after[id] == bases_before[id]);
    }
    assert_true(missing > 0 && missing <= FC_STORE_SID_SLOTS);
    assert_true(fc_store_corrupt_windows(s2) > 0);
    for (int pod = 0; pod < 20; pod++) {
        snprintf(labels, sizeof(labels), "pod=\"p%d\"", pod);
        assert_true(cpu_of(s2, "bk", labels) <= GO_CPU_TOTAL);
    }
    fc_store_close(s2);

    /*
     * The last bucket replaced by one entry that passes the check but says
     * "the base of the entry before" (there is none): refused too, and a pod
     * written after it, whose first ids fall in it, gets keys of their own.
     */
    rewrite_bucket(sub, false, first_says_same_base, NULL);
    s2 = open_sub("bucket");
    for (int pod = 0; pod < 20; pod++) {
        snprintf(labels, sizeof(labels), "pod=\"p%d\"", pod);
        sum += cpu_of(s2, "bk", labels);
    }
    assert_true(sum < 20 * GO_CPU_TOTAL);
    assert_true(fc_store_corrupt_windows(s2) > 0);
    write_pods(s2, 20, 21, "bk");
    assert_int_equal(cpu_of(s2, "bk", "pod=\"p20\""), GO_CPU_TOTAL);
    n = listed(s2, "bk", "{pod=\"p20\"}", &v);
    assert_int_equal(n, per_pod);
    free_listed(v, n);
    fc_store_close(s2);
    sid_keys(sub, &own);
    assert_true(own > 0); /* p20's first series, in the damaged bucket's range */
}

/*
 * Every series with a key of its own (split) reads back, through
 * fc_store_sid_get and fc_store_series_base, as that key says. Returns how
 * many do not.
 */
static size_t own_keys_misread(struct fc_store *s2, const char *tenant)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val k, v;
    struct key t;
    size_t bad = 0;

    assert_int_equal(mdb_txn_begin(s2->env, NULL, MDB_RDONLY, &txn), 0);
    assert_int_equal(mdb_cursor_open(txn, s2->db[DB_SID], &c), 0);
    key_tenant(&t, tenant);
    k = (MDB_val){t.n, t.b};
    for (int g = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
         g == 0 && k.mv_size >= t.n + 4 && memcmp(k.mv_data, t.b, t.n) == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint32_t id = be32((const uint8_t *)k.mv_data + t.n), type, base = 0;
        struct series_labels want, got;
        if (k.mv_size != t.n + 4 || !fc_store_sid_parse(v.mv_data, v.mv_size, &want, &type)) {
            continue;
        }
        if (!fc_store_sid_get(s2, txn, tenant, id, NULL, &got) || got.base_id != want.base_id ||
            got.own_len != want.own_len || memcmp(got.own, want.own, got.own_len) != 0 ||
            !fc_store_series_base(s2, txn, tenant, id, NULL, &base) || base != want.base_id) {
            bad++;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    return bad;
}

/*
 * A bucket damaged so that it still decodes, check and all: its last
 * entry's slot moved to 63, an id never given out. The writer drops that
 * entry (counted) when the next pod's series come into its range, so those
 * series are read as written, never as the damaged entry (found by review:
 * they got keys of their own, which readers never reached).
 */
static void move_last_slot_to_63(struct sid_entry *e, size_t *n)
{
    assert_true(*n > 0 && e[*n - 1].slot < 63);
    e[*n - 1].slot = 63;
}

static void test_damaged_bucket_that_decodes_never_misread(void **state)
{
    struct fc_store *s2 = open_sub("bucket63");
    char sub[128], **v = NULL;
    size_t per_pod;

    (void)state;
    snprintf(sub, sizeof(sub), "%s/bucket63", dir);
    write_pods(s2, 0, 1, "b6");
    per_pod = listed(s2, "b6", "{pod=\"p0\"}", &v);
    free_listed(v, per_pod);
    assert_true(per_pod < 63);
    fc_store_close(s2);
    rewrite_bucket(sub, false, NULL, move_last_slot_to_63);
    s2 = open_sub("bucket63");
    write_pods(s2, 1, 3, "b6");
    assert_int_equal(own_keys_misread(s2, "b6"), 0);
    pods_whole(s2, "b6", 1, 3, per_pod, true);
    assert_int_equal(fc_store_corrupt_windows(s2), 1); /* the entry dropped */
    fc_store_close(s2);
}

/*
 * A format 17 store (a key per series), then new pods in buckets whose
 * ranges hold the old keys too: every series reads as written, listings
 * are whole (also with nothing to narrow by); retention forgets an old pod
 * (keys) and a new one (bucket entries), the label index and sid agree,
 * another tenant is untouched and a forgotten pod comes back (a test
 * written by review).
 */
static void test_format_17_series_mixed_with_buckets_then_forgotten(void **state)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    const int64_t later = BASE + 40 * 86400;
    uint64_t deleted = 0, pods = 0, series = 0;
    char sub[128], **v = NULL;
    size_t per_pod, n, chunks, short_chunks, ones, value_bytes;

    (void)state;
    fc_test_rebuild_max = 1;
    s2 = open_sub("mixed17");
    snprintf(sub, sizeof(sub), "%s/mixed17", dir);
    write_batch(s2, load_pod(0, later, "f"));     /* the service's first pod: kept */
    write_batch(s2, load_pod(1, BASE + 10, "f")); /* old: forgotten */
    write_batch(s2, load_pod(0, later, "g"));     /* another tenant */
    per_pod = listed(s2, "f", "{pod=\"p0\"}", &v);
    free_listed(v, per_pod);
    fc_store_close(s2);
    assert_int_equal(fc_test_sids_as_format_17(sub), 3 * per_pod);
    s2 = open_sub("mixed17");
    write_batch(s2, load_pod(2, BASE + 20, "f")); /* old, in buckets: forgotten */
    write_batch(s2, load_pod(3, later + 10, "f"));
    write_batch(s2, load_pod(1, later + 20, "g"));
    assert_int_equal(own_keys_misread(s2, "f"), 0);
    pods_whole(s2, "f", 0, 4, per_pod, false);
    n = listed(s2, "f", "{pod=~\"p.*\"}", &v);
    free_listed(v, n);
    assert_int_equal(n, 4 * per_pod);
    assert_int_equal(pods_matching(s2, "p.*", BASE, later + 3600), 4 * GO_CPU_TOTAL);
    assert_int_equal(fc_store_delete_before(s2, BASE + 35 * 86400, 0, &deleted, &err), FC_OK);
    assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
    assert_int_equal(pods, 2);
    assert_int_equal(series, 2 * per_pod);
    n = listed(s2, "f", "{pod=~\"p.*\"}", &v);
    free_listed(v, n);
    assert_int_equal(n, 2 * per_pod);
    assert_int_equal(pods_matching(s2, "p.*", later, later + 3600), 2 * GO_CPU_TOTAL);
    n = listed(s2, "g", "{pod=~\"p.*\"}", &v);
    free_listed(v, n);
    assert_int_equal(n, 2 * per_pod);
    write_batch(s2, load_pod(2, later + 30, "f")); /* p2 back: made again, in a bucket */
    assert_int_equal(pods_matching(s2, "p2", later, later + 3600), GO_CPU_TOTAL);
    assert_int_equal(fc_store_corrupt_windows(s2), 0);
    fc_store_close(s2);
    assert_int_equal(fc_test_sid_series(sub), 3 * per_pod + 2 * per_pod);
    assert_int_equal(postings_layout(sub, &chunks, &short_chunks, &ones, &value_bytes),
                     sid_label_pairs(sub));
    fc_test_rebuild_max = 0;
}

/*
 * A series' own part is a counted symbol (format 18): 20 pods whose every
 * sample has a label value of its own (req=r<pod>) intern 20 own parts a
 * type; once retention has deleted their data and forget their series,
 * `sym` and `symid` hold exactly what they held before them (the frames
 * and own parts of p0, which stays). Twice, so that what is freed is not
 * made again by the next round's ids (found by review: they stayed).
 */
static void test_forgotten_own_parts_deleted_with_their_last_series(void **state)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    const int64_t later = BASE + 40 * 86400;
    uint64_t deleted = 0, pods = 0, series = 0;
    char sub[128], req[16];
    size_t sym0, symid0, per_pod;
    char **v = NULL;

    (void)state;
    s2 = open_sub("ownsym");
    snprintf(sub, sizeof(sub), "%s/ownsym", dir);
    write_batch(s2, load_pod(0, later, "f")); /* the service's first pod: kept */
    per_pod = listed(s2, "f", "{pod=\"p0\"}", &v);
    free_listed(v, per_pod);
    fc_store_close(s2);
    sym0 = entries_of(sub, "sym");
    symid0 = entries_of(sub, "symid");
    for (int round = 0; round < 2; round++) {
        s2 = open_sub("ownsym");
        for (int pod = 1; pod <= 20; pod++) {
            struct fc_batch *b = load_pod(pod + 100 * round, BASE + 10 * pod, "f");
            snprintf(req, sizeof(req), "r%d", pod + 100 * round);
            label_every_sample(b, "req", req);
            write_batch(s2, b);
        }
        fc_store_close(s2);
        assert_true(entries_of(sub, "symid") >= symid0 + 20);
        s2 = open_sub("ownsym");
        assert_int_equal(fc_store_delete_before(s2, BASE + 35 * 86400, 0, &deleted, &err), FC_OK);
        assert_int_equal(fc_store_forget_empty(s2, 0, &pods, &series, &err), FC_OK);
        assert_int_equal(pods, 20);
        assert_int_equal(pods_matching(s2, "p0", later, later + 10), GO_CPU_TOTAL);
        pods_whole(s2, "f", 0, 1, per_pod, false);
        fc_store_close(s2);
        assert_int_equal(entries_of(sub, "sym"), sym0);
        assert_int_equal(entries_of(sub, "symid"), symid0);
    }
}

/*
 * Rewrites every posting chunk of the closed store at sub into chunks of
 * at most per_chunk ids in an older layout (storage/store_int.h): per_chunk
 * 1, format 7 (one key per id, an empty value); else format 8's (be32 ids,
 * the first the key's); and its version into `version`. Returns the
 * entries written.
 */
static size_t rewrite_postings(const char *sub, size_t per_chunk, uint32_t version)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi post, meta;
    MDB_cursor *c;
    MDB_val k, v;
    struct fc_buf entries; /* u32 key length, key, u32 value length, value */
    size_t n_entries = 0;

    fc_buf_init(&entries, 0);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "post", 0, &post), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, post, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint32_t got[256];
        int layout;
        size_t gn, n = chunk_ids(&k, &v, got, &layout, &gn);
        assert_int_equal(layout, 15);
        for (size_t at = 0; at < n; at += per_chunk) {
            size_t m = n - at < per_chunk ? n - at : per_chunk;
            uint32_t klen = (uint32_t)gn + 4, vlen = per_chunk == 1 ? 0 : 4 * (uint32_t)m;
            uint8_t be[4];
            fc_buf_append(&entries, &klen, 4);
            fc_buf_append(&entries, k.mv_data, gn);
            for (size_t i = 0; i <= (per_chunk == 1 ? 0 : m); i++) {
                uint32_t id = got[at + (i == 0 ? 0 : i - 1)]; /* the key's id, then the value's */
                be[0] = (uint8_t)(id >> 24);
                be[1] = (uint8_t)(id >> 16);
                be[2] = (uint8_t)(id >> 8);
                be[3] = (uint8_t)id;
                if (i == 1) {
                    fc_buf_append(&entries, &vlen, 4);
                }
                fc_buf_append(&entries, be, 4);
            }
            if (per_chunk == 1) {
                fc_buf_append(&entries, &vlen, 4);
            }
            n_entries++;
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_drop(txn, post, 0), 0);
    for (size_t at = 0; at < entries.len;) {
        uint32_t klen, vlen;
        memcpy(&klen, entries.data + at, 4);
        memcpy(&vlen, entries.data + at + 4 + klen, 4);
        k = (MDB_val){klen, entries.data + at + 4};
        v = (MDB_val){vlen, vlen ? entries.data + at + 4 + klen + 4 : NULL};
        assert_int_equal(mdb_put(txn, post, &k, &v, 0), 0);
        at += 4 + klen + 4 + vlen;
    }
    lmdb_commit_format(env, txn, meta, version);
    fc_buf_release(&entries);
    return n_entries;
}

/*
 * The older store at name (tenant's pods 0-99, each `one`) answers, takes
 * pods 100-179, answers for all of them, and is marked 15.
 */
static void older_postings_answer(const char *name, const char *tenant, int64_t one)
{
    struct fc_store *s2 = open_sub(name);
    char sub[128];

    assert_int_equal(pods_total(s2, tenant, 0), one);
    assert_int_equal(pods_total(s2, tenant, 99), one);
    assert_int_equal(pods_total(s2, tenant, -1), 100 * one);
    write_pods(s2, 100, 180, tenant);
    assert_int_equal(pods_total(s2, tenant, 150), one);
    assert_int_equal(pods_total(s2, tenant, 42), one);
    assert_int_equal(pods_total(s2, tenant, -1), 180 * one);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    assert_int_equal(fc_test_store_format(sub), 18);
}

/*
 * A format 7 store (one posting per id, in the key, an empty value) is read,
 * and new series are added after its postings: made here from a store of this
 * build by rewriting its chunks into one entry per id, and the version into 7.
 */
static void test_one_id_postings_of_format_7_still_read(void **state)
{
    struct fc_store *s2 = open_sub("postings7");
    char sub[128];
    size_t chunks, short_chunks, ones, ids, bytes, n_keys;
    int64_t one;

    (void)state;
    write_pods(s2, 0, 100, "p7");
    one = pods_total(s2, "p7", 0);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/postings7", dir);
    n_keys = rewrite_postings(sub, 1, 7);
    ids = postings_layout(sub, &chunks, &short_chunks, &ones, &bytes);
    assert_int_equal(ones, n_keys);
    assert_int_equal(ids, n_keys);
    /* New pods go after the one-id postings, in chunks. */
    older_postings_answer("postings7", "p7", one);
    ids = postings_layout(sub, &chunks, &short_chunks, &ones, &bytes);
    assert_int_equal(ones, n_keys);
    assert_int_equal(ids, sid_label_pairs(sub));
    assert_true(chunks - ones > 0);
}

/*
 * A format 14 store (postings of be32 ids, up to 64 a chunk) is read, and
 * new series are added after its chunks as differences: made here from a
 * store of this build by rewriting its chunks from the layout in
 * storage/store_int.h, and the version into 14.
 */
static void test_be32_postings_of_format_14_still_read(void **state)
{
    struct fc_store *s2 = open_sub("postings14");
    char sub[128];
    size_t chunks, short_chunks, ones, ids, bytes, old_chunks;
    int64_t one;

    (void)state;
    write_pods(s2, 0, 100, "p14");
    one = pods_total(s2, "p14", 0);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/postings14", dir);
    old_chunks = rewrite_postings(sub, 64, 14);
    ids = postings_layout(sub, &chunks, &short_chunks, &ones, &bytes);
    assert_int_equal(chunks, old_chunks);
    assert_int_equal(bytes, 0);
    assert_int_equal(ids, sid_label_pairs(sub));
    /* New pods go after the be32 chunks, as differences. */
    older_postings_answer("postings14", "p14", one);
    ids = postings_layout(sub, &chunks, &short_chunks, &ones, &bytes);
    assert_int_equal(ids, sid_label_pairs(sub));
    assert_int_equal(short_chunks, 0);
    assert_true(chunks > old_chunks && bytes > 0);
}

/*
 * A posting chunk that does not decode (here a difference of 0) is skipped
 * and counted: its pod is not found by its label, every other pod is.
 */
static void test_damaged_posting_chunk_skipped(void **state)
{
    struct fc_store *s2 = open_sub("postdamage");
    char sub[128];
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi post, meta;
    uint8_t key[64];
    uint64_t h;
    MDB_cursor *c;
    MDB_val k, v, zero = {1, (void *)"\0"};
    size_t n = 0;
    int64_t one;

    (void)state;
    write_pods(s2, 0, 20, "pd");
    one = pods_total(s2, "pd", 3);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/postdamage", dir);
    /* pod="p3": tenant 0 h64("pod") h64("p3"), then its one chunk's id. */
    memcpy(key, "pd", 3);
    h = XXH3_64bits("pod", 3);
    for (int i = 0; i < 8; i++) {
        key[3 + i] = (uint8_t)(h >> (56 - 8 * i));
    }
    h = XXH3_64bits("p3", 2);
    for (int i = 0; i < 8; i++) {
        key[11 + i] = (uint8_t)(h >> (56 - 8 * i));
    }
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "post", 0, &post), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, post, &c), 0);
    k = (MDB_val){19, key};
    for (int g = mdb_cursor_get(c, &k, &v, MDB_SET_RANGE);
         g == 0 && k.mv_size > 19 && memcmp(k.mv_data, key, 19) == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        assert_int_equal(mdb_cursor_put(c, &k, &zero, MDB_CURRENT), 0);
        n++;
    }
    mdb_cursor_close(c);
    assert_int_equal(n, 1);
    lmdb_commit_format(env, txn, meta, 15);
    s2 = open_sub("postdamage");
    assert_int_equal(pods_total(s2, "pd", 3), 0);
    assert_true(fc_store_corrupt_windows(s2) > 0);
    assert_int_equal(pods_total(s2, "pd", 4), one);
    assert_int_equal(pods_total(s2, "pd", 19), one);
    fc_store_close(s2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_postings_in_chunks),
        cmocka_unit_test(test_one_id_postings_of_format_7_still_read),
        cmocka_unit_test(test_be32_postings_of_format_14_still_read),
        cmocka_unit_test(test_damaged_posting_chunk_skipped),
        cmocka_unit_test(test_series_in_buckets_of_64),
        cmocka_unit_test(test_forgotten_own_parts_deleted_with_their_last_series),
        cmocka_unit_test(test_damaged_bucket_that_decodes_never_misread),
        cmocka_unit_test(test_format_17_series_mixed_with_buckets_then_forgotten),
        cmocka_unit_test(test_retention_forgets_pods_left_without_data),
        cmocka_unit_test(test_forget_keeps_an_aggregate_key_that_shares_a_pods_prefix),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_index", tests, fixture_setup, fixture_teardown);
}
