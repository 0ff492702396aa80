#include "tests/unit/fc_test.h"

#include "config/load.h"
#include "storage/store.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <lmdb.h>
#include <xxhash.h>

void fc_test_filter_from_env(void)
{
    const char *only = getenv("FC_TEST_FILTER");

    if (only != NULL && only[0] != '\0') {
        cmocka_set_test_filter(only);
    }
}

uint8_t *fc_test_read(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf;
    long n;

    if (f == NULL) {
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (buf == NULL || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(buf);
        return NULL;
    }
    fclose(f);
    buf[n] = '\0';
    *len = (size_t)n;
    return buf;
}

const char *fc_test_corpus(void)
{
    const char *dir = getenv("FLAMECOL_CORPUS");
    return dir ? dir : "../shared/corpus";
}

struct fc_node *fc_test_yaml(struct fc_arena *a, const char *text, struct fc_diag *diag)
{
    return fc_config_load_string(a, "test.yaml", text, strlen(text), diag);
}

int fc_test_diag_has(const struct fc_diag *d, const char *needle)
{
    for (size_t i = 0; i < d->n; i++) {
        if (strstr(d->entries[i].text, needle) != NULL) {
            return 1;
        }
    }
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

size_t fc_test_corpus_files(char (*names)[256], size_t max)
{
    DIR *d = opendir(fc_test_corpus());
    struct dirent *e;
    size_t n = 0;

    while (d != NULL && (e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);
        if (len > 6 && len < 256 && strcmp(e->d_name + len - 6, ".pb.gz") == 0) {
            memcpy(names[n++], e->d_name, len + 1);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    qsort(names, n, sizeof(names[0]), by_name);
    return n;
}

int64_t fc_test_rebuild_max;

struct fc_store *fc_test_store_open(const char *dir, const char *name)
{
    char sub[256];
    struct fc_store_options o = {0};
    struct fc_store *s;
    struct fc_error err = {0};

    snprintf(sub, sizeof(sub), "%s/%s", dir, name);
    o.path = sub;
    o.sync = FC_SYNC_NONE;
    o.rebuild_max_bytes = fc_test_rebuild_max;
    if (fc_store_open(&o, &s, &err) != FC_OK) {
        fprintf(stderr, "cannot open the store %s: %s\n", sub, err.msg);
        abort();
    }
    return s;
}

uint32_t fc_test_store_format(const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi meta;
    static char format_key[] = "\0format";
    MDB_val k = {7, format_key}, v;
    uint32_t version = 0;

    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 32) != 0 ||
        mdb_env_open(env, path, MDB_RDONLY, 0644) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0) {
        fprintf(stderr, "cannot read the store %s\n", path);
        abort();
    }
    if (mdb_dbi_open(txn, "meta", 0, &meta) == 0 && mdb_get(txn, meta, &k, &v) == 0 &&
        v.mv_size == 4) {
        memcpy(&version, v.mv_data, 4);
    }
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return version;
}

static uint64_t uvarint_by_hand(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;

    for (int shift = 0; *p < end && shift < 64; shift += 7) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            return v;
        }
    }
    fprintf(stderr, "a sid bucket's varint runs past its value\n");
    abort();
}

static void be32_by_hand(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (24 - 8 * i));
    }
}

/* The next entry of a sid bucket at *p (format 18), decoded by hand; *base carries over. */
static void bucket_entry_by_hand(const uint8_t **p, const uint8_t *end, uint32_t *slot,
                                 uint32_t *base, uint32_t *own)
{
    uint8_t head = *(*p)++;

    *slot = head >> 1;
    if (!(head & 1)) {
        *base = (uint32_t)uvarint_by_hand(p, end);
    }
    *own = (uint32_t)uvarint_by_hand(p, end);
}

/*
 * The entries of sid bucket value v, past its check (be32 of the low 32
 * bits of xxh3 of the entries), which must hold.
 */
static const uint8_t *bucket_entries_by_hand(const MDB_val *v)
{
    const uint8_t *p = v->mv_data;
    uint32_t check;

    if (v->mv_size < 4) {
        fprintf(stderr, "a sid bucket of %zu bytes\n", v->mv_size);
        abort();
    }
    check = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
    if (check != (uint32_t)XXH3_64bits(p + 4, v->mv_size - 4)) {
        fprintf(stderr, "a sid bucket whose check fails\n");
        abort();
    }
    return p + 4;
}

/* Whether sid key k is a bucket's (tenant 0 be32(id / 64) 0x01), not a series' own. */
static bool is_bucket_key(const MDB_val *k)
{
    const uint8_t *key = k->mv_data, *zero = memchr(key, 0, k->mv_size);

    return zero != NULL && (size_t)(zero - key) + 6 == k->mv_size && key[k->mv_size - 1] == 1;
}

size_t fc_test_sid_series(const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid;
    MDB_cursor *c;
    MDB_val k, v;
    size_t n = 0;

    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 32) != 0 ||
        mdb_env_open(env, path, MDB_RDONLY, 0644) != 0 ||
        mdb_txn_begin(env, NULL, MDB_RDONLY, &txn) != 0 || mdb_dbi_open(txn, "sid", 0, &sid) != 0 ||
        mdb_cursor_open(txn, sid, &c) != 0) {
        fprintf(stderr, "cannot read the store %s\n", path);
        abort();
    }
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *p, *end = (const uint8_t *)v.mv_data + v.mv_size;
        uint32_t slot, base = 0, own;
        if (!is_bucket_key(&k)) {
            n++;
            continue;
        }
        p = bucket_entries_by_hand(&v);
        while (p < end) {
            bucket_entry_by_hand(&p, end, &slot, &base, &own);
            n++;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return n;
}

uint32_t fc_test_sids_as_format_17(const char *path)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi sid, symid, sym, meta;
    MDB_cursor *c;
    MDB_val k, v;
    static char format_key[] = "\0format";
    uint32_t version = 17, n = 0, base = 0;
    struct put {
        uint8_t key[64], value[512];
        size_t key_len, value_len;
    } *puts = NULL;
    size_t n_puts = 0;

    if (mdb_env_create(&env) != 0 || mdb_env_set_maxdbs(env, 32) != 0 ||
        mdb_env_open(env, path, 0, 0644) != 0 || mdb_txn_begin(env, NULL, 0, &txn) != 0 ||
        mdb_dbi_open(txn, "sid", 0, &sid) != 0 || mdb_dbi_open(txn, "symid", 0, &symid) != 0 ||
        mdb_dbi_open(txn, "meta", 0, &meta) != 0 || mdb_cursor_open(txn, sid, &c) != 0) {
        fprintf(stderr, "cannot open the store %s\n", path);
        abort();
    }
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *key = k.mv_data, *p, *end = (const uint8_t *)v.mv_data + v.mv_size;
        uint32_t bucket;
        if (!is_bucket_key(&k)) {
            continue; /* a key of its own */
        }
        if (k.mv_size > 64) {
            fprintf(stderr, "a tenant too long for this helper\n");
            abort();
        }
        p = bucket_entries_by_hand(&v);
        bucket = (uint32_t)key[k.mv_size - 5] << 24 | (uint32_t)key[k.mv_size - 4] << 16 |
                 (uint32_t)key[k.mv_size - 3] << 8 | key[k.mv_size - 2];
        while (p < end) {
            uint32_t slot, own, id;
            uint8_t sym_key[64];
            MDB_val sk, sv;
            struct put *o;
            bucket_entry_by_hand(&p, end, &slot, &base, &own);
            id = bucket * 64 + slot;
            memcpy(sym_key, key, k.mv_size - 5);
            be32_by_hand(sym_key + k.mv_size - 5, own);
            sk = (MDB_val){k.mv_size - 1, sym_key};
            if (mdb_get(txn, symid, &sk, &sv) != 0 || sv.mv_size + 5 > sizeof(o->value)) {
                fprintf(stderr, "series %u: no own part %u\n", id, own);
                abort();
            }
            puts = realloc(puts, (n_puts + 1) * sizeof(*puts));
            o = &puts[n_puts++];
            memcpy(o->key, sym_key, k.mv_size - 5);
            be32_by_hand(o->key + k.mv_size - 5, id);
            o->key_len = k.mv_size - 1;
            o->value[0] = 0;
            be32_by_hand(o->value + 1, base);
            memcpy(o->value + 5, sv.mv_data, sv.mv_size);
            o->value_len = sv.mv_size + 5;
            n++;
        }
        if (mdb_cursor_del(c, 0) != 0) {
            abort();
        }
    }
    mdb_cursor_close(c);
    for (size_t i = 0; i < n_puts; i++) {
        MDB_val pk = {puts[i].key_len, puts[i].key}, pv = {puts[i].value_len, puts[i].value};
        if (mdb_put(txn, sid, &pk, &pv, 0) != 0) {
            abort();
        }
    }
    free(puts);
    /* Format 17 kept no count beside a symbol's id (format 18: own parts' 8 bytes). */
    if (mdb_dbi_open(txn, "sym", 0, &sym) != 0 || mdb_cursor_open(txn, sym, &c) != 0) {
        abort();
    }
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint8_t id[4];
        if (v.mv_size == 8) {
            memcpy(id, v.mv_data, 4);
            v = (MDB_val){4, id};
            if (mdb_cursor_put(c, &k, &v, MDB_CURRENT) != 0) {
                abort();
            }
        }
    }
    mdb_cursor_close(c);
    k = (MDB_val){7, format_key};
    v = (MDB_val){4, &version};
    if (mdb_put(txn, meta, &k, &v, 0) != 0 || mdb_txn_commit(txn) != 0) {
        abort();
    }
    mdb_env_close(env);
    return n;
}

int fc_test_tmpdir(char *dir, size_t size, const char *prefix)
{
    if ((size_t)snprintf(dir, size, "/tmp/%s-XXXXXX", prefix) >= size) {
        return -1;
    }
    return mkdtemp(dir) == NULL ? -1 : 0;
}

int fc_test_rmdir(const char *dir)
{
    char cmd[512];

    if ((size_t)snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir) >= sizeof(cmd)) {
        return -1;
    }
    return system(cmd) == 0 ? 0 : -1;
}
