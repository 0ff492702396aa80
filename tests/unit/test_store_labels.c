/*
 * How the store keeps a series' labels: split from its base's (format 10;
 * the profile type interned since 11), its series found by their base
 * (13), the same labels from two bases, a label value posing as a label;
 * and stores of formats 9, 10 and 12, made here from a store of this build
 * by rewriting LMDB itself, still read.
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
#include "tests/unit/fc_test.h"
#include "tests/unit/store_fixture.h"

/* CPU of the samples of go-1s-cpu.pb.gz labelled task=<task>, from the decoded profile. */
static int64_t task_cpu(const char *task)
{
    struct fc_batch *b = load_pod(0, BASE, "x");
    const struct fc_profile *p = &b->profiles[0];
    int64_t sum = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *smp = &p->samples[i];
        for (uint32_t a = 0; a < smp->attrs.n; a++) {
            const struct fc_attr *at = &b->dict.attrs[fc_span_idx(b, smp->attrs)[a]];
            if (strcmp(fc_str(b, at->key), "task") == 0 && at->v.str != 0 &&
                strcmp(fc_str(b, at->v.str), task) == 0) {
                sum += fc_sample_value(p, smp, 1); /* cpu nanoseconds */
            }
        }
    }
    fc_batch_unref(b);
    return sum;
}

/* Whether canonical labels hold name=value. */
static bool has_label(const char *canon, const char *name, const char *value)
{
    char want[256];
    int n = snprintf(want, sizeof(want), "\x02%s\x01%s\x02", name, value);
    return strncmp(canon, want + 1, (size_t)n - 1) == 0 || strstr(canon, want) != NULL;
}

/* Whether canonical labels are sorted by name, each name once. */
static bool sorted_by_name(const char *canon)
{
    const char *prev = NULL;
    size_t prev_len = 0;

    for (const char *p = canon; *p != '\0';) {
        const char *sep = strchr(p, '\x01'), *end = sep ? strchr(sep, '\x02') : NULL;
        size_t len;
        if (end == NULL) {
            return false;
        }
        len = (size_t)(sep - p);
        if (prev != NULL) {
            int c = memcmp(prev, p, prev_len < len ? prev_len : len);
            if (c > 0 || (c == 0 && prev_len >= len)) {
                return false;
            }
        }
        prev = p;
        prev_len = len;
        p = end + 1;
    }
    return true;
}

/*
 * Format 10: a series' labels are its base's (bid, once per base) and the
 * rest (sid: 0, be32 base, the labels the base lacks); sbase is not
 * written. Every series still lists with all its labels, sorted, and
 * selectors on a base's label (pod) and on a series' own (task) match, with
 * totals taken from the decoded profile.
 */
static void test_series_labels_split_from_their_base(void **state)
{
    struct fc_store *s2 = open_sub("split");
    char sub[128], pod[16], **v = NULL;
    size_t n, per_pod, split = 0, whole = 0, sbases = 0;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, sbase;
    MDB_cursor *c;
    MDB_val k, val_;
    MDB_stat st;

    (void)state;
    write_pods(s2, 0, 3, "sp");
    per_pod = listed(s2, "sp", "{pod=\"p0\"}", &v);
    assert_true(per_pod > 2); /* two types, and task/worker groups */
    for (size_t i = 0; i < per_pod; i++) {
        assert_true(sorted_by_name(v[i]));
        assert_true(has_label(v[i], "pod", "p0"));
        assert_true(has_label(v[i], "service_name", "svc-0"));
        assert_true(has_label(v[i], "__name__", "process_cpu"));
        assert_non_null(strstr(v[i], "__profile_type__\x01"));
    }
    free_listed(v, per_pod);
    for (int i = 1; i < 3; i++) {
        snprintf(pod, sizeof(pod), "{pod=\"p%d\"}", i);
        n = listed(s2, "sp", pod, &v);
        assert_int_equal(n, per_pod);
        free_listed(v, n);
    }
    assert_int_equal(cpu_of(s2, "sp", "pod=\"p1\""), GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "sp", "task=\"map\""), 3 * task_cpu("map"));
    assert_int_equal(cpu_of(s2, "sp", "pod=\"p2\",task=\"gzip\""), task_cpu("gzip"));
    assert_true(task_cpu("map") > 0 && task_cpu("gzip") > 0);
    fc_store_close(s2);
    /* On disk: every sid split and in a bucket (format 18), no sbase. */
    snprintf(sub, sizeof(sub), "%s/split", dir);
    assert_int_equal(fc_test_sids_as_format_17(sub), 3 * per_pod);
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "sbase", 0, &sbase), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &val_, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &val_, MDB_NEXT)) {
        bool is_split = val_.mv_size >= 5 && ((const uint8_t *)val_.mv_data)[0] == 0;
        split += is_split;
        whole += !is_split;
        /* The rest alone: never the base's labels, and the type interned (format 11). */
        assert_true(!is_split || !holds(val_.mv_data, val_.mv_size, "pod\x01"));
        assert_true(!is_split || (val_.mv_size > 5 && ((const char *)val_.mv_data)[5] == '\x01' &&
                                  !holds(val_.mv_data, val_.mv_size, "__profile_type__")));
    }
    mdb_cursor_close(c);
    assert_int_equal(mdb_stat(txn, sbase, &st), 0);
    sbases = st.ms_entries;
    mdb_txn_abort(txn);
    mdb_env_close(env);
    assert_int_equal(split, 3 * per_pod);
    assert_int_equal(whole, 0);
    assert_int_equal(sbases, 0);
}

/*
 * A sample label whose value holds 0x02 name 0x01 (labels are stored
 * unescaped, so it reads as one more label, here pod=p9) sorting after the
 * pod's own labels: the series is stored whole, never split (split, its
 * "pod" would be found before its base's and the pod's series would vanish
 * from {pod="p0"}).
 */
static void test_label_value_posing_as_a_label_not_split(void **state)
{
    struct fc_store *s2 = open_sub("posing");
    struct fc_batch *b = load_pod(0, BASE, "ps");
    struct fc_error err = {0};

    (void)state;
    label_every_sample(b, "zz", "x\x02pod\x01p9");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    assert_int_equal(cpu_of(s2, "ps", "pod=\"p0\""), GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "ps", "pod=\"p9\""), 0);
    fc_store_close(s2);
}

/* One label of canonical labels, for sorting by name: its bytes and its name's length. */
struct one_label {
    const char *p;
    size_t len, name_len;
};

static int by_name(const void *a, const void *b)
{
    const struct one_label *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->name_len < y->name_len ? x->name_len : y->name_len);
    return c ? c : (x->name_len > y->name_len) - (x->name_len < y->name_len);
}

/* Appends the labels of a and b (canonical each) to out, sorted by name: whole labels. */
static void whole_labels(const void *a, size_t a_len, const void *b, size_t b_len,
                         struct fc_buf *out)
{
    struct one_label l[64];
    size_t n = 0;
    const void *parts[2] = {a, b};
    size_t lens[2] = {a_len, b_len};

    for (int k = 0; k < 2; k++) {
        const char *p = parts[k], *end = p + lens[k];
        while (p < end) {
            const char *sep = memchr(p, '\x01', (size_t)(end - p));
            const char *vend = memchr(sep, '\x02', (size_t)(end - sep));
            assert_true(n < 64);
            l[n++] = (struct one_label){p, (size_t)(vend + 1 - p), (size_t)(sep - p)};
            p = vend + 1;
        }
    }
    qsort(l, n, sizeof(*l), by_name);
    for (size_t i = 0; i < n; i++) {
        fc_buf_append(out, l[i].p, l[i].len);
    }
}

/*
 * Turns a store of this build into one of format 10: every split sid's
 * interned type (an empty-named label first, its value the symbol id in
 * hex) becomes the label __profile_type__ with the symbol's value again,
 * among the others in name order (whole_labels sorts them), and the
 * version 10. Returns how many sids it rewrote.
 */
static uint32_t make_format_10(const char *sub)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, symid, meta;
    MDB_cursor *c;
    MDB_val k, v, t;
    struct fc_buf puts;
    uint32_t n = 0;

    fc_test_sids_as_format_17(sub); /* format 17 kept a key per series */
    fc_buf_init(&puts, 0);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "symid", 0, &symid), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const char *own = (const char *)v.mv_data + 5, *end = (const char *)v.mv_data + v.mv_size;
        const char *hex_end;
        uint8_t key[64];
        uint32_t sym;
        struct fc_buf type, rest;
        if (v.mv_size < 6 || ((const uint8_t *)v.mv_data)[0] != 0 || own[0] != '\x01') {
            continue;
        }
        sym = (uint32_t)strtoul(own + 1, NULL, 16); /* hex up to the 0x02 */
        hex_end = memchr(own, '\x02', (size_t)(end - own));
        assert_non_null(hex_end);
        memcpy(key, k.mv_data, k.mv_size);
        key[k.mv_size - 4] = (uint8_t)(sym >> 24);
        key[k.mv_size - 3] = (uint8_t)(sym >> 16);
        key[k.mv_size - 2] = (uint8_t)(sym >> 8);
        key[k.mv_size - 1] = (uint8_t)sym;
        t = (MDB_val){k.mv_size, key};
        assert_int_equal(mdb_get(txn, symid, &t, &t), 0);
        fc_buf_init(&type, 0);
        fc_buf_init(&rest, 0);
        fc_buf_append(&type, "__profile_type__\x01", 17);
        fc_buf_append(&type, t.mv_data, t.mv_size);
        fc_buf_append(&type, "\x02", 1);
        fc_buf_append(&rest, v.mv_data, 5);
        whole_labels(type.data, type.len, hex_end + 1, (size_t)(end - hex_end - 1), &rest);
        keep_put(&puts, &k, rest.data, rest.len);
        fc_buf_release(&type);
        fc_buf_release(&rest);
        n++;
    }
    mdb_cursor_close(c);
    put_kept(txn, sid, &puts);
    lmdb_commit_format(env, txn, meta, 10);
    return n;
}

/*
 * Turns a store of this build into one of format 9: every split sid whole
 * again (its base's labels and its own, sorted here), its base in sbase,
 * no bid table, and the version 9. Returns the highest series id.
 */
static uint32_t make_format_9(const char *sub)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, sbase, bid, meta;
    MDB_cursor *c;
    MDB_val k, v, b;
    struct fc_buf puts;
    uint32_t top = 0;

    make_format_10(sub); /* the type as a label again */
    fc_buf_init(&puts, 0);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "sbase", 0, &sbase), 0);
    assert_int_equal(mdb_dbi_open(txn, "bid", 0, &bid), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint8_t key[64];
        const uint8_t *id = (const uint8_t *)k.mv_data + k.mv_size - 4;
        struct fc_buf whole;
        uint32_t klen = (uint32_t)k.mv_size, wlen;
        top = (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 | (uint32_t)id[2] << 8 | id[3];
        assert_true(v.mv_size >= 5 && ((const uint8_t *)v.mv_data)[0] == 0 && k.mv_size <= 64);
        memcpy(key, k.mv_data, k.mv_size);
        memcpy(key + k.mv_size - 4, (const uint8_t *)v.mv_data + 1, 4); /* the base's key */
        b = (MDB_val){k.mv_size, key};
        assert_int_equal(mdb_get(txn, bid, &b, &b), 0);
        fc_buf_init(&whole, 0);
        whole_labels(b.mv_data, b.mv_size, (const uint8_t *)v.mv_data + 5, v.mv_size - 5, &whole);
        /* Kept as: key length, key, base id, whole length, whole labels. */
        wlen = (uint32_t)whole.len;
        fc_buf_append(&puts, &klen, 4);
        fc_buf_append(&puts, k.mv_data, k.mv_size);
        fc_buf_append(&puts, (const uint8_t *)v.mv_data + 1, 4);
        fc_buf_append(&puts, &wlen, 4);
        fc_buf_append(&puts, whole.data, whole.len);
        fc_buf_release(&whole);
    }
    mdb_cursor_close(c);
    for (size_t at = 0; at < puts.len;) {
        uint32_t klen, wlen;
        memcpy(&klen, puts.data + at, 4);
        k = (MDB_val){klen, puts.data + at + 4};
        v = (MDB_val){4, puts.data + at + 4 + klen};
        assert_int_equal(mdb_put(txn, sbase, &k, &v, 0), 0);
        memcpy(&wlen, puts.data + at + 8 + klen, 4);
        v = (MDB_val){wlen, puts.data + at + 12 + klen};
        assert_int_equal(mdb_put(txn, sid, &k, &v, 0), 0);
        at += 12 + klen + wlen;
    }
    assert_int_equal(mdb_drop(txn, bid, 1), 0);
    fc_buf_release(&puts);
    lmdb_commit_format(env, txn, meta, 9);
    return top;
}

/*
 * Two pods written into store `name` (tenant), the store rewritten by
 * rewrite (into an older format), then reopened: marked as this build's format and listing
 * every series as before. *rewritten: what rewrite returned.
 */
static struct fc_store *reopened_as_before(const char *name, const char *tenant,
                                           uint32_t (*rewrite)(const char *sub),
                                           uint32_t *rewritten)
{
    struct fc_store *s2 = open_sub(name);
    char sub[128], **before = NULL, **after = NULL;
    size_t n, n_after;

    write_pods(s2, 0, 2, tenant);
    n = listed(s2, tenant, "{service_name=\"svc-0\"}", &before);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    *rewritten = rewrite(sub);
    s2 = open_sub(name);
    assert_int_equal(fc_test_store_format(sub), 18);
    n_after = listed(s2, tenant, "{service_name=\"svc-0\"}", &after);
    assert_int_equal(n_after, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(after[i], before[i]);
        assert_non_null(strstr(after[i], "__profile_type__\x01"));
    }
    free_listed(after, n_after);
    free_listed(before, n);
    return s2;
}

/*
 * Format 10 (a split series' __profile_type__ kept as a label in sid) is
 * read as it was and marked as this build's format: every listing equal, selectors on the type
 * (cpu_of selects process_cpu) and on labels give the decoded totals; the
 * series written after it have their type interned.
 */
static void test_split_labels_of_format_10_still_read(void **state)
{
    uint32_t rewritten;
    struct fc_store *s2 = reopened_as_before("split10", "s10", make_format_10, &rewritten);
    char sub[128];
    size_t typed = 0, untyped = 0;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid;
    MDB_cursor *c;
    MDB_val k, v;

    (void)state;
    snprintf(sub, sizeof(sub), "%s/split10", dir);
    assert_true(rewritten > 2); /* two pods, two types */
    assert_int_equal(cpu_of(s2, "s10", "pod=\"p1\""), GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "s10", "task=\"map\""), 2 * task_cpu("map"));
    write_pods(s2, 2, 3, "s10"); /* a new base, written by this format */
    assert_int_equal(cpu_of(s2, "s10", "pod=\"p2\""), GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "s10", "task=\"map\""), 3 * task_cpu("map"));
    fc_store_close(s2);
    assert_true(fc_test_sids_as_format_17(sub) > 0); /* p2's, in buckets: here a key each */
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        bool is_typed = v.mv_size > 5 && ((const char *)v.mv_data)[5] == '\x01';
        typed += is_typed;
        untyped += !is_typed;
        assert_true(is_typed != holds(v.mv_data, v.mv_size, "__profile_type__\x01"));
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    assert_int_equal(untyped, rewritten); /* the format 10 series as they were */
    assert_true(typed > 0);               /* p2's */
}

/*
 * A format 10 split series whose first own label's name starts with 0x01
 * (only an empty sample key is dropped): its own part starts with the byte
 * that marks an interned type since format 11, but is no type (its text up
 * to the first 0x02 holds the name's separator). Read as it was, never
 * counted as corrupt (found by review: such a series vanished).
 */
static void test_format_10_label_starting_with_0x01_still_read(void **state)
{
    struct fc_store *s2 = open_sub("mark10");
    struct fc_batch *b = load_pod(0, BASE, "m10");
    struct fc_error err = {0};
    char sub[128], **before = NULL, **after = NULL;
    size_t n, n_after;

    (void)state;
    label_every_sample(b, "\x01k", "v");
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
    n = listed(s2, "m10", "{pod=\"p0\"}", &before);
    assert_true(n > 0);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/mark10", dir);
    assert_int_equal(make_format_10(sub), n); /* each own part now starts with "\x01k\x01v\x02" */
    s2 = open_sub("mark10");
    n_after = listed(s2, "m10", "{pod=\"p0\"}", &after);
    assert_int_equal(n_after, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(after[i], before[i]);
    }
    free_listed(after, n_after);
    free_listed(before, n);
    assert_int_equal(cpu_of(s2, "m10", "pod=\"p0\""), GO_CPU_TOTAL);
    assert_int_equal(fc_store_corrupt_windows(s2), 0);
    fc_store_close(s2);
}

/* Checks that series id (be32 at p) names base (be32 at b) in its sid. */
static void series_in_base(MDB_txn *txn, MDB_dbi sid, const MDB_val *k, size_t tenant_len,
                           const uint8_t *p)
{
    uint8_t id_key[64];
    MDB_val ik, iv;

    memcpy(id_key, k->mv_data, tenant_len + 1);
    memcpy(id_key + tenant_len + 1, p, 4);
    ik = (MDB_val){tenant_len + 5, id_key};
    assert_int_equal(mdb_get(txn, sid, &ik, &iv), 0);
    assert_true(iv.mv_size >= 5 && ((const uint8_t *)iv.mv_data)[0] == 0);
    assert_memory_equal((const uint8_t *)iv.mv_data + 1,
                        (const uint8_t *)k->mv_data + tenant_len + 1, 4);
}

/*
 * The `series` entries of the closed store at sub (docs/internals/store.md,
 * format 13): *in_values, the series in bases' values (key: be32 base;
 * value: be64 hash, be32 id, sorted by hash), *most the most a value holds;
 * *own_keys, series keyed (be32 base, be64 hash); *by_h128, keys of h128
 * alone (series made before, and the service aggregates'). Every series
 * found by base is checked to be of that base.
 */
static void series_keys(const char *sub, size_t tenant_len, size_t *in_values, size_t *most,
                        size_t *own_keys, size_t *by_h128)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi series, sid;
    MDB_cursor *c;
    MDB_val k, v;

    *in_values = *most = *own_keys = *by_h128 = 0;
    fc_test_sids_as_format_17(sub); /* a key per series: looked up by hand */
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "series", 0, &series), 0);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_cursor_open(txn, series, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size == tenant_len + 1 + 4) {
            const uint8_t *p = v.mv_data;
            size_t n = v.mv_size / 12;
            assert_int_equal(v.mv_size % 12, 0);
            for (size_t i = 0; i < n; i++) {
                if (i > 0) {
                    assert_true(memcmp(p + 12 * (i - 1), p + 12 * i, 8) < 0); /* sorted */
                }
                series_in_base(txn, sid, &k, tenant_len, p + 12 * i + 8);
            }
            *in_values += n;
            *most = n > *most ? n : *most;
        } else if (k.mv_size == tenant_len + 1 + 12) {
            assert_int_equal(v.mv_size, 4);
            series_in_base(txn, sid, &k, tenant_len, v.mv_data);
            (*own_keys)++;
        } else {
            assert_int_equal(k.mv_size, tenant_len + 1 + 16);
            (*by_h128)++;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
}

/* How many series the closed store at sub holds (its sid entries). */
static size_t sid_count(const char *sub)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid;
    MDB_stat st;

    fc_test_sids_as_format_17(sub); /* a key per series: counted by LMDB */
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_stat(txn, sid, &st), 0);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return st.ms_entries;
}

/* Pod p7 with a sample label "grp" of its own on every sample (round r: "r<r>-<sample>"). */
static struct fc_batch *pod_of_many_series(int round)
{
    struct fc_batch *b = load_pod(7, BASE, "kb");
    struct fc_profile *p = &b->profiles[0];

    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_sample *smp = &p->samples[i];
        struct fc_attr a = {0};
        uint32_t id, idx[64];
        char value[32];
        snprintf(value, sizeof(value), "r%d-%u", round, i);
        assert_int_equal(fc_dict_cstring(b, "grp", &a.key), FC_OK);
        assert_int_equal(fc_dict_cstring(b, value, &a.v.str), FC_OK);
        a.kind = FC_ATTR_STR;
        assert_int_equal(fc_dict_attr(b, &a, &id), FC_OK);
        assert_true(smp->attrs.n < 63);
        memcpy(idx, fc_span_idx(b, smp->attrs), smp->attrs.n * sizeof(uint32_t));
        idx[smp->attrs.n] = id;
        assert_int_equal(fc_dict_span(b, idx, smp->attrs.n + 1, &smp->attrs), FC_OK);
    }
    return b;
}

/*
 * Format 13: a base's series are one `series` value (their hashes and ids),
 * up to 256 of them; past that a series has a key of its own (base, hash).
 * Pod p7, written with a sample label of its own on every sample, becomes
 * more than 256 series; each is found again (written again: no series made
 * twice), and the service aggregates keep their h128 keys.
 */
static void test_series_kept_by_their_base(void **state)
{
    struct fc_store *s2 = open_sub("bybase");
    struct fc_batch *many[4];
    struct fc_error err = {0};
    char sub[128];
    size_t in_values, most, own_keys, by_h128, n;

    (void)state;
    write_pods(s2, 0, 3, "kb");
    for (int r = 0; r < 4; r++) {
        many[r] = pod_of_many_series(r); /* 4 rounds x samples x 2 types: past 256 */
    }
    assert_int_equal(fc_store_write(s2, many, 4, &err), FC_OK);
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/bybase", dir);
    n = sid_count(sub);
    series_keys(sub, strlen("kb"), &in_values, &most, &own_keys, &by_h128);
    assert_int_equal(in_values + own_keys, n);
    assert_int_equal(most, 256);
    assert_true(own_keys > 0);
    assert_int_equal(by_h128, 2); /* the service aggregate's series: one per type */
    /* Everything again: every series found where it is. */
    s2 = open_sub("bybase");
    write_pods(s2, 0, 3, "kb");
    assert_int_equal(fc_store_write(s2, many, 4, &err), FC_OK);
    assert_int_equal(cpu_of(s2, "kb", "pod=\"p7\""), 8 * GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "kb", "pod=\"p1\""), 2 * GO_CPU_TOTAL);
    fc_store_close(s2);
    assert_int_equal(sid_count(sub), n);
    for (int r = 0; r < 4; r++) {
        fc_batch_unref(many[r]);
    }
}

/*
 * Format 12 keyed a series by h128 of its labels alone. Made here from a
 * store of this build (the labels whole again: make_format_10, then each
 * series' base labels and its own merged, hashed as XXH3-128 of the
 * canonical bytes, big-endian high then low): every series is found again
 * by its old key, none is made twice, and what is written adds to them.
 */
static void test_series_of_format_12_still_found(void **state)
{
    struct fc_store *s2 = open_sub("h128");
    char sub[128];
    size_t n, in_values, most, own_keys, by_h128;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi series, sid, bid, meta;
    MDB_cursor *c;
    MDB_val k, v;
    struct fc_buf ids;

    (void)state;
    write_pods(s2, 0, 2, "h1");
    fc_store_close(s2);
    snprintf(sub, sizeof(sub), "%s/h128", dir);
    make_format_10(sub);
    n = sid_count(sub);
    fc_buf_init(&ids, 0);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "series", 0, &series), 0);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "bid", 0, &bid), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    /* Every base's value: its series ids kept, the value deleted. */
    assert_int_equal(mdb_cursor_open(txn, series, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        if (k.mv_size == strlen("h1") + 1 + 4) {
            for (size_t i = 0; i < v.mv_size; i += 12) {
                fc_buf_append(&ids, (const uint8_t *)v.mv_data + i + 8, 4);
            }
            assert_int_equal(mdb_cursor_del(c, 0), 0);
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(ids.len / 4, n);
    for (size_t at = 0; at < ids.len; at += 4) {
        uint8_t key[19], id_key[7], base_key[7];
        MDB_val iv, bv, ok = {19, key}, ov = {4, ids.data + at};
        struct fc_buf whole;
        XXH128_hash_t h;
        memcpy(id_key, "h1", 3);
        memcpy(id_key + 3, ids.data + at, 4);
        iv = (MDB_val){7, id_key};
        assert_int_equal(mdb_get(txn, sid, &iv, &iv), 0);
        memcpy(base_key, "h1", 3);
        memcpy(base_key + 3, (const uint8_t *)iv.mv_data + 1, 4);
        bv = (MDB_val){7, base_key};
        assert_int_equal(mdb_get(txn, bid, &bv, &bv), 0);
        fc_buf_init(&whole, 0);
        whole_labels(bv.mv_data, bv.mv_size, (const uint8_t *)iv.mv_data + 5, iv.mv_size - 5,
                     &whole);
        h = XXH3_128bits(whole.data, whole.len);
        memcpy(key, "h1", 3);
        for (int i = 0; i < 8; i++) {
            key[3 + i] = (uint8_t)(h.high64 >> (56 - 8 * i));
            key[11 + i] = (uint8_t)(h.low64 >> (56 - 8 * i));
        }
        assert_int_equal(mdb_put(txn, series, &ok, &ov, 0), 0);
        fc_buf_release(&whole);
    }
    fc_buf_release(&ids);
    lmdb_commit_format(env, txn, meta, 12);
    series_keys(sub, strlen("h1"), &in_values, &most, &own_keys, &by_h128);
    assert_int_equal(in_values + own_keys, 0);
    assert_int_equal(by_h128, n + 2);
    s2 = open_sub("h128");
    assert_int_equal(fc_test_store_format(sub), 18);
    write_pods(s2, 0, 2, "h1"); /* the same pods again: the same series */
    assert_int_equal(cpu_of(s2, "h1", "pod=\"p1\""), 2 * GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "h1", "task=\"map\""), 4 * task_cpu("map"));
    fc_store_close(s2);
    assert_int_equal(sid_count(sub), n);
    series_keys(sub, strlen("h1"), &in_values, &most, &own_keys, &by_h128);
    assert_int_equal(in_values + own_keys, 0);
    /*
     * Labels of an old series reached from another base (task the
     * profile's own: found by review): a series of that base, read by the
     * selectors with the old one's samples.
     */
    s2 = open_sub("h128");
    {
        struct fc_batch *b = load_pod(0, BASE, "h1");
        struct fc_error err = {0};
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "task", "map"), FC_OK);
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    assert_int_equal(cpu_of(s2, "h1", "task=\"map\""), 4 * task_cpu("map") + GO_CPU_TOTAL);
    fc_store_close(s2);
    series_keys(sub, strlen("h1"), &in_values, &most, &own_keys, &by_h128);
    assert_true(in_values > 0);
}

/*
 * The same labels from two bases: "task" a sample label in one push and
 * the profile's own in the other (every sample then has task=map). Each
 * base keeps its own series (format 13), so a selector finds both pushes'
 * samples, and the labels are listed once.
 */
static void test_same_labels_from_two_bases(void **state)
{
    struct fc_store *s2 = open_sub("twobases");
    struct fc_batch *a = load_pod(0, BASE, "tb"), *b = load_pod(0, BASE, "tb");
    struct fc_error err = {0};
    char **v = NULL;
    size_t n;

    (void)state;
    assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "task", "map"), FC_OK);
    assert_int_equal(fc_store_write(s2, &a, 1, &err), FC_OK);
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    assert_int_equal(cpu_of(s2, "tb", "task=\"map\""), task_cpu("map") + GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "tb", "pod=\"p0\""), 2 * GO_CPU_TOTAL);
    n = listed(s2, "tb", "{task=\"map\"}", &v);
    assert_true(n > 0);
    for (size_t i = 1; i < n; i++) {
        assert_true(strcmp(v[i - 1], v[i]) < 0); /* sorted, none twice */
    }
    free_listed(v, n);
    fc_batch_unref(a);
    fc_batch_unref(b);
    fc_store_close(s2);
}

/*
 * A format 9 store (whole labels in sid, the base in sbase, no bid) is read
 * as it was, and marked as this build's format. New series in its bases are written whole (their
 * base has no bid); a new base's series are split.
 */
static void test_whole_labels_of_format_9_still_read(void **state)
{
    uint32_t top;
    struct fc_store *s2 = reopened_as_before("whole9", "w9", make_format_9, &top);
    char sub[128], **after = NULL;
    size_t n, old_base_new = 0, new_split = 0;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, sbase;
    MDB_cursor *c;
    MDB_val k, v;

    (void)state;
    snprintf(sub, sizeof(sub), "%s/whole9", dir);
    assert_int_equal(cpu_of(s2, "w9", "pod=\"p1\""), GO_CPU_TOTAL);
    assert_int_equal(cpu_of(s2, "w9", "task=\"map\""), 2 * task_cpu("map"));
    /* p0 again with another profile of the same labels: new series in an old base. */
    {
        struct fc_batch *b = load("go-3s-cpu.pb.gz", 0, BASE + 20, "w9");
        struct fc_error err = {0};
        assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "pod", "p0"), FC_OK);
        assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
        fc_batch_unref(b);
    }
    write_pods(s2, 2, 3, "w9"); /* a new base */
    n = listed(s2, "w9", "{pod=\"p0\"}", &after);
    for (size_t i = 0; i < n; i++) {
        assert_true(sorted_by_name(after[i]));
        assert_true(has_label(after[i], "pod", "p0"));
        assert_true(has_label(after[i], "service_name", "svc-0"));
    }
    free_listed(after, n);
    assert_int_equal(cpu_of(s2, "w9", "pod=\"p2\""), GO_CPU_TOTAL);
    fc_store_close(s2);
    /*
     * On disk: the old base's new series whole with an sbase entry, the new
     * base's split, in buckets (format 18; here a key each again).
     */
    assert_true(fc_test_sids_as_format_17(sub) > 0);
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "sid", 0, &sid), 0);
    assert_int_equal(mdb_dbi_open(txn, "sbase", 0, &sbase), 0);
    assert_int_equal(mdb_cursor_open(txn, sid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *id = (const uint8_t *)k.mv_data + k.mv_size - 4;
        uint32_t series =
            (uint32_t)id[0] << 24 | (uint32_t)id[1] << 16 | (uint32_t)id[2] << 8 | id[3];
        bool is_split = v.mv_size >= 5 && ((const uint8_t *)v.mv_data)[0] == 0;
        MDB_val bv;
        if (series <= top) {
            assert_false(is_split);
            continue;
        }
        if (is_split) {
            new_split++;
            /* Format 11: the type interned, first. */
            assert_true(v.mv_size > 5 && ((const char *)v.mv_data)[5] == '\x01');
            assert_false(holds(v.mv_data, v.mv_size, "__profile_type__"));
        } else {
            old_base_new++;
            assert_true(holds(v.mv_data, v.mv_size, "pod\x01p0\x02"));
            assert_int_equal(mdb_get(txn, sbase, &k, &bv), 0);
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    assert_true(old_base_new > 0);
    assert_true(new_split > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series_labels_split_from_their_base),
        cmocka_unit_test(test_whole_labels_of_format_9_still_read),
        cmocka_unit_test(test_split_labels_of_format_10_still_read),
        cmocka_unit_test(test_format_10_label_starting_with_0x01_still_read),
        cmocka_unit_test(test_series_kept_by_their_base),
        cmocka_unit_test(test_series_of_format_12_still_found),
        cmocka_unit_test(test_same_labels_from_two_bases),
        cmocka_unit_test(test_label_value_posing_as_a_label_not_split),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_labels", tests, fixture_setup, fixture_teardown);
}
