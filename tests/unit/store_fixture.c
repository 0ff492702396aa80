/* The store's test programs' shared fixture: see store_fixture.h. */
#include "tests/unit/store_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "formats/pprof.h"
#include "tests/unit/fc_test.h"

char dir[64];
int64_t unflushed_rebuild_max, unflushed_rebuild_max_ns;

int fixture_setup(void **state)
{
    (void)state;
    return fc_test_tmpdir(dir, sizeof(dir), "fc-store");
}

int fixture_teardown(void **state)
{
    (void)state;
    return fc_test_rmdir(dir);
}

/* __name__ by hand for the corpus's Go profiles (store_fixture.h). */
static const char *name_of(const char *file)
{
    static const char *const names[][2] = {
        {"go-1s-allocs", "memory"},        {"go-1s-block", "mutex"}, {"go-1s-cpu", "process_cpu"},
        {"go-1s-goroutine", "goroutines"}, {"go-1s-heap", "memory"}, {"go-1s-mutex", "mutex"},
        {"go-3s-cpu", "process_cpu"}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strncmp(file, names[i][0], strlen(names[i][0])) == 0 &&
            strcmp(file + strlen(names[i][0]), ".pb.gz") == 0) {
            return names[i][1];
        }
    }
    fail_msg("no __name__ by hand for %s", file);
    return NULL;
}

struct fc_batch *load(const char *name, int service, int64_t time_s, const char *tenant)
{
    char path[1024], svc[32];
    size_t len;
    uint8_t *data;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};

    snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), name);
    data = fc_test_read(path, &len);
    assert_int_equal(fc_pprof_decode(b, data, len, NULL, &p, &err), FC_OK);
    free(data);
    snprintf(svc, sizeof(svc), "svc-%d", service);
    fc_profile_set_label(b, p, "service_name", svc);
    fc_profile_set_label(b, p, "__name__", name_of(name));
    p->time_ns = time_s * 1000000000LL;
    fc_batch_set_tenant(b, tenant);
    return b;
}

struct fc_batch *load_pod(int pod, int64_t t, const char *tenant)
{
    struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, t, tenant);
    char name[32];

    snprintf(name, sizeof(name), "p%d", pod);
    assert_int_equal(fc_profile_set_label(b, &b->profiles[0], "pod", name), FC_OK);
    return b;
}

struct fc_batch *stacks_batch(const char *svc, int64_t time_s, uint32_t depth, uint32_t n_names,
                              const int64_t *values, size_t n_values)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    uint32_t *locs = calloc(depth ? depth : 1, sizeof(uint32_t));
    uint32_t *name_loc = calloc(n_names, sizeof(uint32_t));
    char name[32];

    assert_non_null(locs);
    assert_non_null(name_loc);
    assert_int_equal(fc_dict_cstring(b, "cpu", &vt.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt.unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "cpu", &p->period_type.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &p->period_type.unit), FC_OK);
    for (uint32_t i = 0; i < n_names; i++) {
        struct fc_function f = {0};
        struct fc_line line = {0};
        struct fc_location l = {0};
        snprintf(name, sizeof(name), "f%u", i);
        assert_int_equal(fc_dict_cstring(b, name, &f.name), FC_OK);
        assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
        assert_int_equal(fc_dict_location(b, &l, &line, 1, &name_loc[i]), FC_OK);
    }
    /* Leaf first, as pprof; the frame k levels below the root is named f((k - 1) % n_names). */
    for (uint32_t i = 0; i < depth; i++) {
        locs[i] = name_loc[(depth - 1 - i) % n_names];
    }
    for (size_t k = 0; k < n_values; k++) {
        struct fc_sample smp = {0};
        assert_int_equal(fc_dict_stack(b, locs, depth, &smp.stack), FC_OK);
        assert_int_equal(fc_profile_add_sample(b, p, &smp, &values[k], 1, NULL, 0), FC_OK);
    }
    fc_profile_set_label(b, p, "service_name", svc);
    fc_profile_set_label(b, p, "__name__", "process_cpu");
    p->time_ns = time_s * 1000000000LL;
    fc_batch_set_tenant(b, "lim");
    free(locs);
    free(name_loc);
    return b;
}

void label_every_sample(struct fc_batch *b, const char *key, const char *value)
{
    struct fc_profile *p = &b->profiles[0];
    struct fc_attr a = {0};
    uint32_t id, idx[64];

    assert_int_equal(fc_dict_cstring(b, key, &a.key), FC_OK);
    assert_int_equal(fc_dict_cstring(b, value, &a.v.str), FC_OK);
    a.kind = FC_ATTR_STR;
    assert_int_equal(fc_dict_attr(b, &a, &id), FC_OK);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_sample *smp = &p->samples[i];
        assert_true(smp->attrs.n < 63);
        memcpy(idx, fc_span_idx(b, smp->attrs), smp->attrs.n * sizeof(uint32_t));
        idx[smp->attrs.n] = id;
        assert_int_equal(fc_dict_span(b, idx, smp->attrs.n + 1, &smp->attrs), FC_OK);
    }
}

struct fc_store *open_sub(const char *name)
{
    return fc_test_store_open(dir, name);
}

struct fc_store *open_unflushed(const char *name)
{
    struct fc_store_options o = {0};
    struct fc_store *s;
    struct fc_error err = {0};
    char sub[256];

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    o.path = sub;
    o.sync = FC_SYNC_NONE;
    o.open_max_bytes = 1LL << 30;
    o.flush_interval_ns = 1000000LL * 1000000000LL;
    o.rebuild_max_bytes = unflushed_rebuild_max;
    o.rebuild_max_ns = unflushed_rebuild_max_ns;
    if (fc_store_open(&o, &s, &err) != FC_OK) {
        fail_msg("%s", err.msg);
    }
    return s;
}

void write_batch(struct fc_store *s2, struct fc_batch *b)
{
    struct fc_error err = {0};

    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    fc_batch_unref(b);
}

void write_pods(struct fc_store *s2, int from, int to, const char *tenant)
{
    struct fc_error err = {0};

    for (int i = from; i < to; i += 7) {
        struct fc_batch *group[7];
        size_t n = 0;
        for (int j = i; j < i + 7 && j < to; j++) {
            group[n++] = load_pod(j, BASE, tenant);
        }
        assert_int_equal(fc_store_write(s2, group, n, &err), FC_OK);
        for (size_t g = 0; g < n; g++) {
            fc_batch_unref(group[g]);
        }
    }
}

int64_t range_total(struct fc_store *st, struct fc_store_query *q, int64_t from_s, int64_t until_s)
{
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct fc_error err = {0};
    int64_t total;

    q->from_ns = from_s * 1000000000LL;
    q->until_ns = until_s * 1000000000LL;
    assert_int_equal(fc_store_select_merge(st, q, &res, &stats, &err), FC_OK);
    total = fc_tree_total(&res.tree);
    fc_store_result_release(&res);
    return total;
}

int64_t cpu_of(struct fc_store *s2, const char *tenant, const char *labels)
{
    char text[256];
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_error err = {0};
    int64_t total;

    snprintf(text, sizeof(text), "process_cpu:cpu:nanoseconds:cpu:nanoseconds{%s}", labels);
    assert_int_equal(fc_selector_parse(text, &sel, &err), FC_OK);
    q.tenant = tenant;
    q.selector = &sel;
    total = range_total(s2, &q, BASE, BASE + 10);
    fc_selector_release(&sel);
    return total;
}

static int cmp_strp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

size_t listed(struct fc_store *s2, const char *tenant, const char *selector, char ***out)
{
    struct fc_selector sel;
    struct fc_error err = {0};
    size_t n = 0;

    assert_int_equal(fc_selector_parse(selector, &sel, &err), FC_OK);
    assert_int_equal(fc_store_series_labels(s2, tenant, &sel, 1, 0, 0, out, &n, &err), FC_OK);
    fc_selector_release(&sel);
    qsort(*out, n, sizeof(char *), cmp_strp);
    return n;
}

void free_listed(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

void lmdb_begin(const char *sub, unsigned flags, MDB_env **env, MDB_txn **txn)
{
    assert_int_equal(mdb_env_create(env), 0);
    assert_int_equal(mdb_env_set_maxdbs(*env, 32), 0);
    assert_int_equal(mdb_env_open(*env, sub, flags, 0644), 0);
    assert_int_equal(mdb_txn_begin(*env, NULL, flags, txn), 0);
}

void lmdb_commit_format(MDB_env *env, MDB_txn *txn, MDB_dbi meta, uint32_t version)
{
    static char format_key[] = "\0format";
    MDB_val k = {7, format_key}, v = {4, &version};

    assert_int_equal(mdb_put(txn, meta, &k, &v, 0), 0);
    assert_int_equal(mdb_txn_commit(txn), 0);
    mdb_env_close(env);
}

void keep_put(struct fc_buf *puts, const MDB_val *k, const void *value, size_t len)
{
    uint32_t kl = (uint32_t)k->mv_size, vl = (uint32_t)len;

    fc_buf_append(puts, &kl, 4);
    fc_buf_append(puts, k->mv_data, k->mv_size);
    fc_buf_append(puts, &vl, 4);
    fc_buf_append(puts, value, len);
}

void put_kept(MDB_txn *txn, MDB_dbi db, struct fc_buf *puts)
{
    for (size_t at = 0; at < puts->len;) {
        uint32_t kl, vl;
        MDB_val k, v;
        memcpy(&kl, puts->data + at, 4);
        k = (MDB_val){kl, puts->data + at + 4};
        memcpy(&vl, puts->data + at + 4 + kl, 4);
        v = (MDB_val){vl, puts->data + at + 8 + kl};
        assert_int_equal(mdb_put(txn, db, &k, &v, 0), 0);
        at += 8 + kl + vl;
    }
    fc_buf_release(puts);
}

void db_entries(const char *sub, const char *const *names, size_t n, size_t *out)
{
    MDB_env *env;
    MDB_txn *txn;

    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    for (size_t i = 0; i < n; i++) {
        MDB_dbi db;
        MDB_stat st;
        assert_int_equal(mdb_dbi_open(txn, names[i], 0, &db), 0);
        assert_int_equal(mdb_stat(txn, db, &st), 0);
        out[i] = st.ms_entries;
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], "sid") == 0) {
            out[i] = fc_test_sid_series(sub); /* series, not keys: a bucket holds up to 64 */
        }
    }
}

uint64_t ref_uvarint(const uint8_t **p)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return v;
        }
    }
}

bool holds(const void *p, size_t n, const char *text)
{
    size_t tl = strlen(text);
    for (size_t i = 0; i + tl <= n; i++) {
        if (memcmp((const char *)p + i, text, tl) == 0) {
            return true;
        }
    }
    return false;
}
