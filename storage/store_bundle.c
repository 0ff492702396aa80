/*
 * Bundles (format 9): once a 100 s span is past, the 10 s windows one base
 * holds in it are compressed together, one zstd frame in `bundle` under
 * (tenant 0 be32(base) be64(span start)). Each window's node value keeps
 * its header (series, totals, column lengths: what timelines and listings
 * read) and, instead of its own frame, the slice of the bundle its content
 * is (store_pack.c, PACKED_BUNDLED).
 *
 * Why: a 10 s window of one pod is about 2.3 KB compressed, just past what
 * LMDB keeps inside a leaf page, so each took an overflow page of 4 KiB of
 * its own; and neighbouring windows of one pod share most of their shape,
 * which zstd only finds when they are in one frame. Measured on the store
 * benchmark's pod (docs/internals/store.md, Bundles).
 *
 * Readers decode a bundled window through fc_store_window_decode; a write
 * into a bundled window (a late profile) reads it from its bundle and
 * stores it whole again, leaving its slice unused until retention deletes
 * the bundle with its span.
 */
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/mem.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* Spans bundled per write transaction. */
#define BUNDLE_TXN_SPANS 256

static int64_t span_of(int64_t start)
{
    int64_t w = fc_store_level_secs[1];

    return (start >= 0 ? start / w : (start - w + 1) / w) * w;
}

static void bundle_key(struct key *k, const char *tenant, uint32_t base, int64_t span)
{
    key_tenant(k, tenant);
    key_be32(k, base);
    key_be64(k, (uint64_t)span);
}

void fc_store_bundle_cache_release(struct bundle_cache *c)
{
    free(c->tenant);
    free(c->raw);
    memset(c, 0, sizeof(*c));
}

/*
 * The content of the bundle (tenant, base, span): from cache, else read and
 * decompressed, then kept in cache (or, without one, returned in *owned).
 */
static const uint8_t *bundle_raw(struct fc_store *s, MDB_txn *txn, const char *tenant,
                                 uint32_t base, int64_t span, struct bundle_cache *cache,
                                 uint8_t **owned, size_t *size)
{
    struct key k;
    MDB_val kv, v;
    uint8_t *raw;

    if (cache != NULL && cache->raw != NULL && cache->base == base && cache->span == span &&
        strcmp(cache->tenant, tenant) == 0) {
        *size = cache->size;
        return cache->raw;
    }
    bundle_key(&k, tenant, base, span);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_BUNDLE], &kv, &v) != 0 ||
        (raw = fc_tree_unzstd(v.mv_data, v.mv_size, size)) == NULL) {
        return NULL;
    }
    if (cache == NULL) {
        *owned = raw;
        return raw;
    }
    fc_store_bundle_cache_release(cache);
    cache->tenant = fc_xstrdup(tenant);
    cache->base = base;
    cache->span = span;
    cache->raw = raw;
    cache->size = *size;
    return raw;
}

bool fc_store_window_decode(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                            int64_t start, const MDB_val *v, struct bundle_cache *cache,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps)
{
    struct packed p;
    const uint8_t *raw;
    uint8_t *owned = NULL;
    size_t size = 0;
    bool ok;

    if (!fc_store_packed_parse(v->mv_data, v->mv_size, &p)) {
        return false;
    }
    if (!p.bundled) {
        fc_store_packed_release(&p);
        return fc_store_packed_decode(v->mv_data, v->mv_size, want, ctx, ps);
    }
    if (!fc_store_packed_wanted(&p, want, ctx)) {
        fc_store_packed_release(&p);
        return true;
    }
    raw = bundle_raw(s, txn, tenant, base, span_of(start), cache, &owned, &size);
    ok = raw != NULL && p.slice_off <= size && p.slice_len <= size - p.slice_off &&
         fc_store_packed_decode_raw(&p, raw + p.slice_off, (size_t)p.slice_len, want, ctx, ps);
    free(owned);
    fc_store_packed_release(&p);
    return ok;
}

void fc_store_bundle_again(struct fc_store *s, int64_t start)
{
    int64_t span = span_of(start), cur = atomic_load(&s->bundled_before);

    while (span < cur && !atomic_compare_exchange_weak(&s->bundled_before, &cur, span)) {
    }
}

/* One 10 s window of a span being bundled: a copy of its value, and its content. */
struct member {
    int64_t start;
    struct fc_buf value; /* the node value as read (LMDB's pointers die with the first put) */
    uint64_t off, len;   /* its content in the new bundle */
};

/*
 * Bundles the 10 s windows starts[0..n) of (tenant, base) in span, in txn,
 * unless they already are (all of them) or there is one alone. A window or
 * old bundle that does not decode leaves the span as it is.
 */
static int bundle_span(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                       int64_t span, const int64_t *starts, size_t n, uint64_t *bundled)
{
    struct member m[10];
    struct fc_buf content;
    struct bundle_cache old = {0};
    struct key k;
    MDB_val kv, v;
    size_t loose = 0, got = 0;
    bool ok = true;
    int rc = 0;

    fc_buf_init(&content, 0);
    for (size_t i = 0; i < n && ok; i++) {
        struct packed p;
        node_key(&k, tenant, base, 0, starts[i]);
        kv = val(k.b, k.n);
        if (mdb_get(txn, s->db[DB_NODE], &kv, &v) != 0 ||
            !fc_store_packed_parse(v.mv_data, v.mv_size, &p)) {
            ok = false;
            break;
        }
        m[got].start = starts[i];
        m[got].off = content.len;
        fc_buf_init(&m[got].value, 0);
        fc_buf_append(&m[got].value, v.mv_data, v.mv_size);
        got++;
        if (p.bundled) {
            size_t size;
            uint8_t *unused = NULL;
            const uint8_t *raw = bundle_raw(s, txn, tenant, base, span, &old, &unused, &size);
            ok = raw != NULL && p.slice_off <= size && p.slice_len <= size - p.slice_off;
            if (ok) {
                fc_buf_append(&content, raw + p.slice_off, (size_t)p.slice_len);
            }
        } else {
            size_t size;
            uint8_t *raw = fc_tree_unzstd(p.frame, p.frame_len, &size);
            ok = raw != NULL;
            if (ok) {
                fc_buf_append(&content, raw, size);
            }
            free(raw);
            loose++;
        }
        m[got - 1].len = content.len - m[got - 1].off;
        fc_store_packed_release(&p);
    }
    if (ok && loose > 0 && n >= 2) {
        size_t bound = ZSTD_compressBound(content.len);
        uint8_t *frame = fc_xmalloc(bound);
        size_t z = ZSTD_compress(frame, bound, content.data ? content.data : (const uint8_t *)"",
                                 content.len, 3);
        if (ZSTD_isError(z)) {
            rc = EIO;
        } else {
            bundle_key(&k, tenant, base, span);
            kv = val(k.b, k.n);
            v = val(frame, z);
            rc = mdb_put(txn, s->db[DB_BUNDLE], &kv, &v, 0);
        }
        free(frame);
        /*
         * Deleted first, then put in order: growing each small entry (an
         * overflow page's number) into its header in place split the leaf
         * pages into thirds (measured: 1,946 leaf pages against 1,201).
         */
        for (size_t i = 0; rc == 0 && i < got; i++) {
            node_key(&k, tenant, base, 0, m[i].start);
            kv = val(k.b, k.n);
            rc = mdb_del(txn, s->db[DB_NODE], &kv, NULL);
        }
        for (size_t i = 0; rc == 0 && i < got; i++) {
            struct packed p;
            struct fc_buf stub;
            fc_buf_init(&stub, 0);
            fc_store_packed_parse(m[i].value.data, m[i].value.len, &p); /* parsed above */
            fc_store_packed_stub(m[i].value.data, &p, m[i].off, m[i].len, &stub);
            fc_store_packed_release(&p);
            node_key(&k, tenant, base, 0, m[i].start);
            kv = val(k.b, k.n);
            v = val(stub.data, stub.len);
            rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
            fc_buf_release(&stub);
        }
        *bundled += rc == 0 ? got : 0;
    }
    for (size_t i = 0; i < got; i++) {
        fc_buf_release(&m[i].value);
    }
    fc_store_bundle_cache_release(&old);
    fc_buf_release(&content);
    return rc;
}

/* Node keys: tenant 0 be32(base) u8(level) be64(window). */
static bool parse_node_key(const MDB_val *kv, char *tenant, size_t cap, uint32_t *base, int *level,
                           int64_t *start)
{
    const uint8_t *p = kv->mv_data;
    const uint8_t *zero = memchr(p, 0, kv->mv_size);
    size_t tl;

    if (zero == NULL || (size_t)(zero - p) + 1 + 13 != kv->mv_size ||
        (tl = (size_t)(zero - p)) >= cap) {
        return false;
    }
    memcpy(tenant, p, tl + 1);
    *base = be32(zero + 1);
    *level = zero[5];
    *start = (int64_t)be64(zero + 6);
    return true;
}

static int seek(MDB_cursor *c, const char *tenant, uint32_t base, int64_t start, MDB_val *kv,
                MDB_val *v)
{
    struct key k;

    node_key(&k, tenant, base, 0, start);
    *kv = val(k.b, k.n);
    return mdb_cursor_get(c, kv, v, MDB_SET_RANGE);
}

/*
 * One write transaction: bundles spans in [from, cutoff) from the key at
 * (tenant, base, 0, at) on, at most BUNDLE_TXN_SPANS; *done when it reached
 * the end of the table, else (tenant, base, at) is where to go on.
 */
static int bundle_txn(struct fc_store *s, int64_t from, int64_t cutoff, char *tenant, size_t cap,
                      uint32_t *base, int64_t *at, bool *done, uint64_t *bundled)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val kv, v;
    int spans = 0, rc = mdb_txn_begin(s->env, NULL, 0, &txn), g;

    *done = false;
    if (rc != 0) {
        return rc;
    }
    if ((rc = mdb_cursor_open(txn, s->db[DB_NODE], &c)) != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    g = seek(c, tenant, *base, *at, &kv, &v);
    while (rc == 0 && g == 0) {
        char t[256];
        uint32_t b;
        int level;
        int64_t start, span, starts[10];
        size_t n = 0;

        if (!parse_node_key(&kv, t, sizeof(t), &b, &level, &start)) {
            g = mdb_cursor_get(c, &kv, &v, MDB_NEXT);
            continue;
        }
        if (level != 0 || start >= cutoff || start < 0) {
            /* Past this base's 10 s windows in range: on to the next base. */
            if (b == UINT32_MAX) {
                g = mdb_cursor_get(c, &kv, &v, MDB_NEXT);
            } else {
                g = seek(c, t, b + 1, from, &kv, &v);
            }
            continue;
        }
        if (start < from) {
            g = seek(c, t, b, from, &kv, &v);
            continue;
        }
        if (spans == BUNDLE_TXN_SPANS) {
            memcpy(tenant, t, strlen(t) + 1 < cap ? strlen(t) + 1 : cap);
            *base = b;
            *at = start;
            break;
        }
        span = span_of(start);
        while (g == 0 && n < 10) {
            char t2[256];
            uint32_t b2;
            int l2;
            int64_t s2;
            if (!parse_node_key(&kv, t2, sizeof(t2), &b2, &l2, &s2) || strcmp(t2, t) != 0 ||
                b2 != b || l2 != 0 || s2 < span || s2 >= span + fc_store_level_secs[1] ||
                s2 >= cutoff) {
                break;
            }
            starts[n++] = s2;
            g = mdb_cursor_get(c, &kv, &v, MDB_NEXT);
        }
        rc = bundle_span(s, txn, t, b, span, starts, n, bundled);
        spans++;
        /* Puts may have moved the cursor's page: found again by key. */
        g = seek(c, t, b, span + fc_store_level_secs[1], &kv, &v);
    }
    if (rc == 0 && g != 0 && g != MDB_NOTFOUND) {
        rc = g;
    }
    *done = rc == 0 && g != 0;
    mdb_cursor_close(c);
    if (rc != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    return mdb_txn_commit(txn);
}

int fc_store_bundle_before(struct fc_store *s, int64_t cutoff_s, uint64_t *bundled,
                           struct fc_error *err)
{
    int64_t cutoff = span_of(cutoff_s);
    int64_t from = atomic_load(&s->bundled_before), coarse = atomic_load(&s->coarse_before);
    char tenant[256] = "";
    uint32_t base = 0;
    int64_t at;
    bool done = false;
    int rc = 0;

    *bundled = 0;
    from = from > coarse ? from : coarse; /* no 10 s windows left before it */
    from = from > 0 ? from : 0;           /* windows before 1970 are left as they are */
    if (cutoff <= from) {
        return FC_OK;
    }
    at = from;
    while (rc == 0 && !done) {
        rc = bundle_txn(s, from, cutoff, tenant, sizeof(tenant), &base, &at, &done, bundled);
    }
    fc_store_refresh_used(s);
    if (rc != 0) {
        return fc_store_lmdb_error(err, rc, "bundle");
    }
    atomic_store(&s->bundled_before, cutoff);
    return FC_OK;
}
