/* What the bundles' test programs share: see bundle_fixture.h. */
#include "tests/unit/bundle_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zstd.h>

#include "core/batch.h"
#include "tests/unit/fc_test.h"

static uint32_t str(struct fc_batch *b, const char *s)
{
    uint32_t i;
    assert_int_equal(fc_dict_cstring(b, s, &i), FC_OK);
    return i;
}

struct fc_batch *profile(const char *pod, int64_t time_s, const char *leaf, int64_t value)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt = {0};
    struct fc_sample smp = {0};
    uint32_t locs[2];
    const char *names[2] = {leaf, "main"}; /* leaf first, as pprof */

    vt.type = str(b, "cpu");
    vt.unit = str(b, "nanoseconds");
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    p->period_type = vt;
    for (int i = 0; i < 2; i++) {
        struct fc_function f = {0};
        struct fc_line line = {0};
        struct fc_location l = {0};
        f.name = str(b, names[i]);
        assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
        assert_int_equal(fc_dict_location(b, &l, &line, 1, &locs[i]), FC_OK);
    }
    assert_int_equal(fc_dict_stack(b, locs, 2, &smp.stack), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &smp, &value, 1, NULL, 0), FC_OK);
    fc_profile_set_label(b, p, "pod", pod);
    fc_profile_set_label(b, p, "__name__", "process_cpu");
    p->time_ns = time_s * 1000000000LL;
    return b;
}

void flush_all(struct fc_store *s)
{
    struct fc_error err = {0};

    assert_int_equal(fc_store_flush_before(s, INT64_MAX, &err), FC_OK);
}

void write_all(struct fc_store *s)
{
    for (int i = 0; i < WINDOWS; i++) {
        write_batch(s, profile("p0", BASE + 10 * i + 3, "work", 1000 + i));
        if (i % 2 == 0) {
            write_batch(s, profile("p1", BASE + 10 * i + 3, "idle", 5));
        }
    }
    flush_all(s);
}

struct fc_store *written(const char *name)
{
    struct fc_store *s = fc_test_store_open(dir, name);

    write_all(s);
    return s;
}

int64_t want_p0(int64_t from_s, int64_t until_s)
{
    int64_t sum = 0;

    for (int i = 0; i < WINDOWS; i++) {
        int64_t t = BASE + 10 * i + 3;
        sum += t >= from_s && t < until_s ? 1000 + i : 0;
    }
    return sum;
}

int64_t want_p1(int64_t from_s, int64_t until_s)
{
    int64_t sum = 0;

    for (int i = 0; i < WINDOWS; i += 2) {
        int64_t t = BASE + 10 * i + 3;
        sum += t >= from_s && t < until_s ? 5 : 0;
    }
    return sum;
}

int64_t total(struct fc_store *s, const char *selector, int64_t from_s, int64_t until_s)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct fc_error err = {0};
    int64_t t;

    assert_int_equal(fc_selector_parse(selector, &sel, &err), FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    q.from_ns = from_s * 1000000000LL;
    q.until_ns = until_s * 1000000000LL;
    assert_int_equal(fc_store_select_merge(s, &q, &res, &stats, &err), FC_OK);
    t = fc_tree_total(&res.tree);
    fc_store_result_release(&res);
    fc_selector_release(&sel);
    return t;
}

bool lmdb_open(const char *name, const char *db_name, unsigned flags, MDB_env **env, MDB_txn **txn,
               MDB_dbi *db)
{
    char path[128];

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    assert_int_equal(mdb_env_create(env), 0);
    assert_int_equal(mdb_env_set_maxdbs(*env, 32), 0);
    assert_int_equal(mdb_env_open(*env, path, flags, 0644), 0);
    assert_int_equal(mdb_txn_begin(*env, NULL, flags, txn), 0);
    return mdb_dbi_open(*txn, db_name, 0, db) == 0;
}

size_t entries_in(const char *name, const char *db_name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_stat st = {0};

    if (lmdb_open(name, db_name, MDB_RDONLY, &env, &txn, &db)) {
        assert_int_equal(mdb_stat(txn, db, &st), 0);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return st.ms_entries;
}

size_t lone_parents_in(const char *name)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi db;
    MDB_cursor *c;
    MDB_val k, v;
    size_t lone = 0;

    assert_true(lmdb_open(name, "bundle", MDB_RDONLY, &env, &txn, &db));
    assert_int_equal(mdb_cursor_open(txn, db, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint32_t ilen;
        uint8_t *index;
        size_t got, size;
        memcpy(&ilen, v.mv_data, 4);
        ilen &= 0x7fffffffu;
        size = (size_t)ZSTD_getFrameContentSize((const uint8_t *)v.mv_data + 4, ilen);
        assert_true(size > 0 && size < (1u << 20));
        index = malloc(size);
        got = ZSTD_decompress(index, size, (const uint8_t *)v.mv_data + 4, ilen);
        /* one-byte uvarints here: n = 1, slot 10 */
        lone += !ZSTD_isError(got) && got >= 3 && index[0] == 1 && index[1] == 10;
        free(index);
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return lone;
}
