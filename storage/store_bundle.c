/*
 * Making bundles and packs (their layout: store_bundle.h): the pass that
 * bundles each base's past 100 s spans and packs its closed 10^4 s windows
 * (fc_store_bundle_before), the services' dictionaries of the day, and
 * compaction's rewrite of a bundle to its 100 s window alone
 * (fc_store_bundle_compact). Reading them: store_bundle_read.c.
 */
#include "storage/store_bundle.h"

#include "core/buf.h"
#include "core/mem.h"
#include "core/timeutil.h"
#include "formats/pb.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

/* Spans bundled per write transaction. */
#define BUNDLE_TXN_SPANS 256
/* A new dictionary's samples: bases looked at, and taken (dict_samples). */
#define DICT_PROBES 64
#define DICT_SAMPLES 16
/* bundle_put's answer when it leaves the windows as they are (not an LMDB code). */
#define FC_STORE_NOT_BUNDLED (-1)

void fc_store_bundle_again(struct fc_store *s, int64_t start)
{
    int64_t span = span_of(start), cur = atomic_load(&s->bundled_before);

    while (span < cur && !atomic_compare_exchange_weak(&s->bundled_before, &cur, span)) {
    }
}

/* One window of a span being bundled: where it is, and its entry (its header, marked bundled). */
struct member {
    int level;
    int64_t start;
    struct fc_buf entry;
};

static uint8_t *compress(const struct fc_buf *b, size_t *len)
{
    size_t bound = ZSTD_compressBound(b->len);
    uint8_t *out = fc_xmalloc(bound);

    *len = fc_tree_zstd(out, bound, b->data ? b->data : (const uint8_t *)"", b->len, 3);
    if (ZSTD_isError(*len)) {
        free(out);
        return NULL;
    }
    return out;
}

/*
 * b compressed with dict (a raw-content dictionary, referenced as a prefix)
 * and a checksum, so that a reader given another dictionary refuses it.
 */
static uint8_t *compress_with(const struct fc_buf *b, const struct fc_buf *dict, size_t *len)
{
    ZSTD_CCtx *z = ZSTD_createCCtx();
    size_t bound = ZSTD_compressBound(b->len);
    uint8_t *out = fc_xmalloc(bound);

    *len = z == NULL || ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_compressionLevel, 3)) ||
                   ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1)) ||
                   ZSTD_isError(ZSTD_CCtx_refPrefix(z, dict->data, dict->len))
               ? (size_t)-1
               : ZSTD_compress2(z, out, bound, b->data ? b->data : (const uint8_t *)"", b->len);
    ZSTD_freeCCtx(z);
    if (ZSTD_isError(*len)) {
        free(out);
        return NULL;
    }
    return out;
}

/*
 * The h64 of base's service_name (from its labels in `bid`; of "" when it
 * has none, or none stored: an aggregate, a base made before format 10).
 */
static uint64_t base_service(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base)
{
    struct key k;
    MDB_val kv, v;
    const char *value = "";
    size_t value_len = 0;

    key_tenant(&k, tenant);
    key_be32(&k, base);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_BID], &kv, &v) != 0 ||
        !fc_store_canon_value(v.mv_data, v.mv_size, FC_STORE_SERVICE_LABEL, &value, &value_len)) {
        value = "";
        value_len = 0;
    }
    return XXH3_64bits(value, value_len);
}

/* A node key's parts, its tenant copied into tenant (cap bytes). */
static bool parse_node_key(const MDB_val *kv, char *tenant, size_t cap, uint32_t *base, int *level,
                           int64_t *start)
{
    size_t tl;

    if (!node_key_split(kv, &tl, base, level, start) || tl >= cap) {
        return false;
    }
    memcpy(tenant, kv->mv_data, tl);
    tenant[tl] = '\0';
    return true;
}

/*
 * Samples for a new dictionary of (tenant, service, day), appended to dict
 * until it holds room bytes: the first 10 s window that day of each of the
 * next bases of the service after base (key order: at most DICT_PROBES
 * bases looked at, DICT_SAMPLES taken), as stored (not bundled yet). The
 * first span of one pod can miss what its service's other pods hold (one
 * profile type of several, a new pod with other work): those pods'
 * bundles would otherwise find little in the dictionary (bench_store, 100
 * pods: docs/internals/store.md, Dictionaries).
 */
static void dict_samples(struct fc_store *s, MDB_txn *txn, const char *tenant, uint64_t service,
                         int64_t day, uint32_t base, size_t room, struct fc_buf *dict)
{
    int64_t from = day * FC_STORE_DAY_SECS, until = from + FC_STORE_DAY_SECS;
    MDB_cursor *c;
    MDB_val kv, v;
    struct key k;
    int samples = 0;

    if (dict->len >= room || base == UINT32_MAX || mdb_cursor_open(txn, s->db[DB_NODE], &c) != 0) {
        return;
    }
    for (int probes = 0; probes < DICT_PROBES && samples < DICT_SAMPLES && dict->len < room;
         probes++) {
        char t[256];
        uint32_t b;
        int level;
        int64_t start;
        struct packed p;
        uint8_t *raw;
        size_t size;

        node_key(&k, tenant, base + 1, 0, from);
        kv = val(k.b, k.n);
        if (mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE) != 0 ||
            !parse_node_key(&kv, t, sizeof(t), &b, &level, &start) || strcmp(t, tenant) != 0) {
            break; /* past the tenant's windows */
        }
        if (b != base + 1) {
            /* base + 1 has no windows (retention took them): b's own that day, past its older. */
            node_key(&k, tenant, b, 0, from);
            kv = val(k.b, k.n);
            if (mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE) != 0 ||
                !parse_node_key(&kv, t, sizeof(t), &b, &level, &start) || strcmp(t, tenant) != 0) {
                break;
            }
        }
        base = b;
        if (level != 0 || start < from || start >= until || fc_store_bundled_marker(&v) ||
            base_service(s, txn, tenant, b) != service) {
            if (b == UINT32_MAX) {
                break;
            }
            continue;
        }
        if (fc_store_packed_parse(v.mv_data, v.mv_size, &p)) {
            if (!p.bundled && (raw = fc_tree_unzstd(p.frame, p.frame_len, &size)) != NULL) {
                fc_buf_append(dict, raw, size < room - dict->len ? size : room - dict->len);
                free(raw);
                samples++;
            }
            fc_store_packed_release(&p);
        }
        if (b == UINT32_MAX) {
            break;
        }
    }
    mdb_cursor_close(c);
}

/*
 * The dictionary of (tenant, service, day) into dict: the one stored, or
 * else a new one, stored now: samples of the service's other bases that
 * day (dict_samples), then content (the span bundled first that day, of
 * base; its 100 s window first), at most FC_STORE_DICT_MAX bytes; content
 * last, where zstd's offsets are shortest, and alone when it fills them.
 * Stored as a zstd frame: raw, a day's dictionary of a service of few pods
 * took more pages than their bundles (found by review: 26 KB of
 * dictionaries for 1.9 KB of bundles). FC_STORE_NOT_BUNDLED when the
 * stored one does not decompress.
 */
static int dict_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                    uint64_t service, int64_t day, const struct fc_buf *content,
                    struct fc_buf *dict)
{
    struct key k;
    MDB_val kv, v;
    uint8_t *raw;
    size_t len;

    fc_buf_reset(dict);
    dict_key(&k, tenant, service, day);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_DICT], &kv, &v) == 0) {
        if ((raw = fc_tree_unzstd(v.mv_data, v.mv_size, &len)) == NULL) {
            return FC_STORE_NOT_BUNDLED;
        }
        fc_buf_append(dict, raw, len);
        free(raw);
        return 0;
    }
    if (content->len < FC_STORE_DICT_MAX) {
        dict_samples(s, txn, tenant, service, day, base, FC_STORE_DICT_MAX - content->len, dict);
    }
    fc_buf_append(dict, content->data,
                  content->len < FC_STORE_DICT_MAX ? content->len : FC_STORE_DICT_MAX);
    if ((raw = compress(dict, &len)) == NULL) {
        return EIO;
    }
    v = val(raw, len);
    int rc = mdb_put(txn, s->db[DB_DICT], &kv, &v, 0);
    free(raw);
    return rc;
}

/*
 * Writes the bundle of members m[0..n) (their contents in content,
 * compressed with dict, service's of the day; a pack's without one: dict
 * NULL) and their markers, in txn.
 */
static int bundle_put(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                      int64_t span, const struct member *m, size_t n, const struct fc_buf *content,
                      uint64_t service, const struct fc_buf *dict)
{
    struct fc_buf index, value;
    uint8_t *zi, *zc, marker[FC_STORE_MARKER_LEN];
    size_t li = 0, lc = 0;
    uint32_t l32;
    struct key k;
    MDB_val kv, v;
    int rc = 0;

    fc_buf_init(&index, 0);
    fc_pb_put_varint(&index, n);
    for (size_t i = 0; i < n; i++) {
        fc_pb_put_varint(&index, (uint64_t)slot_of(m[i].level, m[i].start));
        fc_pb_put_varint(&index, m[i].entry.len);
    }
    for (size_t i = 0; i < n; i++) {
        fc_buf_append(&index, m[i].entry.data, m[i].entry.len);
    }
    zi = compress(&index, &li);
    zc = dict != NULL ? compress_with(content, dict, &lc) : compress(content, &lc);
    if (zi == NULL || zc == NULL || index.len > fc_tree_max_raw(li) ||
        content->len > fc_tree_max_raw(lc)) {
        /*
         * A frame the readers would refuse as too large for its size (a
         * hostile profile can compress that well): the windows stay as
         * they are.
         */
        fc_buf_release(&index);
        free(zi);
        free(zc);
        return zi == NULL || zc == NULL ? EIO : FC_STORE_NOT_BUNDLED;
    }
    fc_buf_release(&index);
    fc_buf_init(&value, 4 + li + 8 + lc);
    l32 = (uint32_t)li | (dict != NULL ? FC_STORE_BUNDLE_DICT : 0);
    fc_buf_append(&value, &l32, 4);
    fc_buf_append(&value, zi, li);
    if (dict != NULL) {
        uint8_t be[8];
        for (int i = 0; i < 8; i++) {
            be[i] = (uint8_t)(service >> (56 - 8 * i));
        }
        fc_buf_append(&value, be, 8);
    }
    fc_buf_append(&value, zc, lc);
    free(zi);
    free(zc);
    bundle_key(&k, tenant, base, span);
    kv = val(k.b, k.n);
    v = val(value.data, value.len);
    rc = mdb_put(txn, s->db[DB_BUNDLE], &kv, &v, 0);
    fc_buf_release(&value);
    /*
     * Deleted first, then put in order: overwriting each small entry (an
     * overflow page's number) in place left the leaf pages a third full.
     */
    for (size_t i = 0; rc == 0 && i < n; i++) {
        node_key(&k, tenant, base, m[i].level, m[i].start);
        kv = val(k.b, k.n);
        rc = mdb_del(txn, s->db[DB_NODE], &kv, NULL);
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        node_key(&k, tenant, base, m[i].level, m[i].start);
        kv = val(k.b, k.n);
        marker_encode(slot_of(m[i].level, m[i].start), span, marker);
        v = val(marker, sizeof(marker));
        rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
    }
    return rc;
}

/*
 * Adds window (level, start) of the span to m[*got] and its content to
 * content; *loose counts those not bundled yet. False when it does not
 * decode (or is missing).
 */
static bool gather(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base, int level,
                   int64_t start, struct bundle_cache *old, struct member *m, size_t *got,
                   size_t *loose, struct fc_buf *content)
{
    struct key k;
    MDB_val kv, v;
    struct packed p;
    const uint8_t *raw;
    uint8_t *owned = NULL;
    size_t size = 0, off = content->len;
    bool ok;

    node_key(&k, tenant, base, level, start);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_NODE], &kv, &v) != 0 || !fc_store_marker_fits(&v, level, start) ||
        !fc_store_window_parse(s, txn, tenant, base, &v, &(struct bundle_caches){old, 1}, &p)) {
        return false; /* missing, corrupt, or a marker for another window */
    }
    if (p.bundled) {
        raw = fc_store_bundle_contents(old, SIZE_MAX, &size);
        ok = raw != NULL && p.slice_off <= size && p.slice_len <= size - p.slice_off;
        if (ok) {
            fc_buf_append(content, raw + p.slice_off, (size_t)p.slice_len);
        }
    } else {
        ok = (owned = fc_tree_unzstd(p.frame, p.frame_len, &size)) != NULL;
        if (ok) {
            fc_buf_append(content, owned, size);
        }
        free(owned);
        (*loose)++;
    }
    if (ok) {
        /* Its entry: the header it has, its frame replaced by its slice of the contents. */
        m[*got].level = level;
        m[*got].start = start;
        fc_buf_init(&m[*got].entry, 0);
        fc_store_packed_entry(p.bundled ? old->index + old->at[slot_of(level, start)]
                                        : (const uint8_t *)v.mv_data,
                              &p, off, content->len - off, &m[*got].entry);
        (*got)++;
    }
    fc_store_packed_release(&p);
    return ok;
}

/*
 * Bundles the span's 100 s window of (tenant, base) (when stored and not
 * dirty: a rebuild would replace it) and its 10 s windows starts[0..n)
 * (level 0), or packs its closed 10^4 s windows starts[0..n) (level
 * FC_STORE_PACK_LEVEL; span: their 10^5 s span), in txn, unless all of
 * them are bundled already or there is one window alone. Any of them that
 * does not decode leaves the span as it is.
 */
static int bundle_span(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                       int level, int64_t span, const int64_t *starts, size_t n, uint64_t *bundled)
{
    const int64_t width = fc_store_level_secs[level], span_width = fc_store_level_secs[level + 1];
    const bool pack = level == FC_STORE_PACK_LEVEL;
    struct member m[FC_STORE_BUNDLE_SLOTS];
    struct fc_buf content;
    struct bundle_cache old = {0};
    struct key k;
    MDB_val kv, v;
    size_t loose = 0, got = 0;
    bool ok = true, parent = false;
    int rc = 0;

    /*
     * Off the grid (a damaged key): left as it is. Then, before anything
     * is decompressed: nothing to do when every window is bundled already
     * (a pass after a reopen, or after a late write elsewhere, looks at every
     * span since its watermark).
     */
    for (size_t i = 0; i < n; i++) {
        if (starts[i] % width != 0 || starts[i] < span || starts[i] >= span + span_width) {
            return 0;
        }
        node_key(&k, tenant, base, level, starts[i]);
        kv = val(k.b, k.n);
        loose += mdb_get(txn, s->db[DB_NODE], &kv, &v) == 0 && !fc_store_bundled_marker(&v);
    }
    if (!pack) {
        node_key(&k, tenant, base, 1, span);
        kv = val(k.b, k.n);
        parent = mdb_get(txn, s->db[DB_NODE], &kv, &v) == 0 &&
                 !window_dirty(s, txn, tenant, base, 1, span);
        loose += parent && !fc_store_bundled_marker(&v);
    }
    if (loose == 0 || n + parent < 2) {
        return 0;
    }
    loose = 0;
    fc_buf_init(&content, 0);
    if (parent) {
        ok = gather(s, txn, tenant, base, 1, span, &old, m, &got, &loose, &content);
    }
    for (size_t i = 0; i < n && ok; i++) {
        ok = gather(s, txn, tenant, base, level, starts[i], &old, m, &got, &loose, &content);
    }
    if (ok && loose > 0 && got >= 2 && pack) {
        /* No dictionary: a pack outlives the day its dictionary goes with. */
        rc = bundle_put(s, txn, tenant, base, span + 1, m, got, &content, 0, NULL);
    } else if (ok && loose > 0 && got >= 2) {
        /* The base's service's dictionary of the day: pods of one service share their stacks. */
        uint64_t service = base_service(s, txn, tenant, base);
        struct fc_buf dict;
        fc_buf_init(&dict, 0);
        rc = dict_get(s, txn, tenant, base, service, day_of(span), &content, &dict);
        rc = rc ? rc : bundle_put(s, txn, tenant, base, span, m, got, &content, service, &dict);
        fc_buf_release(&dict);
    }
    if (ok && loose > 0 && got >= 2) {
        *bundled += rc == 0 ? got : 0;
        rc = rc == FC_STORE_NOT_BUNDLED ? 0 : rc;
    }
    for (size_t i = 0; i < got; i++) {
        fc_buf_release(&m[i].entry);
    }
    fc_store_bundle_cache_release(&old);
    fc_buf_release(&content);
    return rc;
}

/* A bundle key's parts, its tenant copied into tenant (cap bytes). */
static bool parse_bundle_key(const MDB_val *kv, char *tenant, size_t cap, uint32_t *base,
                             int64_t *span)
{
    size_t tl;

    if (!bundle_key_split(kv, &tl, base, span) || tl >= cap) {
        return false;
    }
    memcpy(tenant, kv->mv_data, tl);
    tenant[tl] = '\0';
    return true;
}

/* Stores the bundled 100 s window of (tenant, base, span) whole again, in txn. */
static int release_parent(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                          int64_t span, struct bundle_cache *c)
{
    struct key k;
    MDB_val kv, v;
    struct packed p;
    struct fc_buf whole;
    const uint8_t *raw;
    size_t size = 0;
    int rc = 0;

    node_key(&k, tenant, base, 1, span);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_NODE], &kv, &v) != 0 || !fc_store_bundled_marker(&v) ||
        !fc_store_marker_fits(&v, 1, span)) {
        return 0; /* not bundled */
    }
    if (!fc_store_window_parse(s, txn, tenant, base, &v, &(struct bundle_caches){c, 1}, &p)) {
        atomic_fetch_add(&s->corrupt, 1);
        return mdb_del(txn, s->db[DB_NODE], &kv, NULL); /* it could not be read anyway */
    }
    fc_buf_init(&whole, 0);
    if (p.slice_len > SIZE_MAX - p.slice_off ||
        (raw = fc_store_bundle_contents(c, (size_t)(p.slice_off + p.slice_len), &size)) == NULL ||
        p.slice_off > size || p.slice_len > size - p.slice_off ||
        fc_store_packed_whole(c->index + c->at[FC_STORE_PARENT_SLOT], &p, raw + p.slice_off,
                              (size_t)p.slice_len, &whole) != FC_OK) {
        atomic_fetch_add(&s->corrupt, 1);
        rc = mdb_del(txn, s->db[DB_NODE], &kv, NULL);
    } else {
        v = val(whole.data, whole.len);
        rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
    }
    fc_buf_release(&whole);
    fc_store_packed_release(&p);
    return rc;
}

/*
 * Compaction of bundled span (tenant, base, span), whose 10 s windows go:
 * its bundle is rewritten with its 100 s window alone, still compressed
 * with its service's dictionary of the day (stored whole, a compacted
 * 100 s window took the pages a lone window does: the 4-series day 8.4 %
 * of the raw .pb.gz compacted against 5.5 % bundled); a bundle without its
 * 100 s window goes with its 10 s windows. When that window cannot be
 * bundled again (a format 13 bundle whose day's dictionary does not
 * decompress, a frame too large), it is stored whole and the bundle goes;
 * when it does not decode, it is counted corrupt and goes too.
 */
static int keep_parent_alone(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                             int64_t span, struct bundle_cache *c)
{
    struct member m[1];
    struct fc_buf content, dict;
    size_t got = 0, loose = 0, slots = 0;
    uint64_t service;
    struct key k;
    MDB_val kv, v;
    int rc;

    node_key(&k, tenant, base, 1, span);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_NODE], &kv, &v) != 0 || !fc_store_bundled_marker(&v) ||
        !fc_store_marker_fits(&v, 1, span)) {
        bundle_key(&k, tenant, base, span);
        kv = val(k.b, k.n);
        rc = mdb_del(txn, s->db[DB_BUNDLE], &kv, NULL);
        return rc == MDB_NOTFOUND ? 0 : rc;
    }
    if (fc_store_bundle_load(s, txn, tenant, base, span, c)) {
        for (int i = 0; i < FC_STORE_BUNDLE_SLOTS; i++) {
            slots += c->len[i] != 0;
        }
        if (slots == 1 && c->len[FC_STORE_PARENT_SLOT] != 0) {
            return 0; /* alone already (an earlier compaction) */
        }
    }
    fc_buf_init(&content, 0);
    fc_buf_init(&dict, 0);
    rc = FC_STORE_NOT_BUNDLED;
    if (gather(s, txn, tenant, base, 1, span, c, m, &got, &loose, &content)) {
        service = c->dict ? c->dict_service : base_service(s, txn, tenant, base);
        rc = dict_get(s, txn, tenant, base, service, day_of(span), &content, &dict);
        rc = rc ? rc : bundle_put(s, txn, tenant, base, span, m, 1, &content, service, &dict);
    }
    for (size_t i = 0; i < got; i++) {
        fc_buf_release(&m[i].entry);
    }
    fc_buf_release(&content);
    fc_buf_release(&dict);
    if (rc == FC_STORE_NOT_BUNDLED) {
        rc = release_parent(s, txn, tenant, base, span, c);
        bundle_key(&k, tenant, base, span);
        kv = val(k.b, k.n);
        rc = rc ? rc : mdb_del(txn, s->db[DB_BUNDLE], &kv, NULL);
        rc = rc == MDB_NOTFOUND ? 0 : rc;
    }
    return rc;
}

/*
 * Moves cur (at kv) to the first key at or after k, or to the next key when
 * k does not sort after kv (a tenant cut to the key's 200 bytes): a seek
 * never goes back, so a pass always ends.
 */
static int seek_after(MDB_cursor *cur, MDB_val *kv, MDB_val *v, const struct key *k)
{
    size_t n = kv->mv_size < k->n ? kv->mv_size : k->n;
    int order = memcmp(k->b, kv->mv_data, n);

    if (order < 0 || (order == 0 && k->n <= kv->mv_size)) {
        return mdb_cursor_get(cur, kv, v, MDB_NEXT);
    }
    *kv = val(k->b, k->n);
    return mdb_cursor_get(cur, kv, v, MDB_SET_RANGE);
}

int fc_store_bundle_compact(struct fc_store *s, int64_t from_s, int64_t cutoff_s, int64_t until_ns,
                            struct resume_key *at, struct fc_error *err)
{
    bool more = true;
    int rc = 0;

    if (from_s >= cutoff_s) {
        return FC_OK; /* every span ending by the cutoff was done by the pass that set it */
    }
    while (rc == 0 && more) {
        MDB_txn *txn;
        MDB_cursor *cur;
        MDB_val kv = val(at->b, at->n), v;
        struct bundle_cache c = {0};
        int n = 0, g;
        more = false;
        if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
            break;
        }
        if ((rc = mdb_cursor_open(txn, s->db[DB_BUNDLE], &cur)) != 0) {
            mdb_txn_abort(txn);
            break;
        }
        g = mdb_cursor_get(cur, &kv, &v, at->n ? MDB_SET_RANGE : MDB_FIRST);
        while (rc == 0 && g == 0) {
            char t[256];
            uint32_t b;
            int64_t span;
            struct key k;
            if (!parse_bundle_key(&kv, t, sizeof(t), &b, &span)) {
                g = mdb_cursor_get(cur, &kv, &v, MDB_NEXT);
                continue;
            }
            if (span >= 0 && from_s > 0 && span <= from_s - fc_store_level_secs[1]) {
                /* Compacted by an earlier pass: on to this base's first span after it. */
                bundle_key(&k, t, b, from_s);
                g = seek_after(cur, &kv, &v, &k);
                continue;
            }
            if (span < 0 || span > cutoff_s - fc_store_level_secs[1]) {
                /*
                 * Not compacted yet, nor its later spans (a negative span,
                 * never bundled, sorts after them): on to the next base.
                 */
                key_tenant(&k, t);
                key_be32(&k, b + 1);
                g = b == UINT32_MAX ? mdb_cursor_get(cur, &kv, &v, MDB_NEXT)
                                    : seek_after(cur, &kv, &v, &k);
                continue;
            }
            if (pack_key_span(span)) {
                g = mdb_cursor_get(cur, &kv, &v, MDB_NEXT); /* a pack: compaction leaves it */
                continue;
            }
            if (n == BUNDLE_TXN_SPANS || (n > 0 && fc_now_mono_ns() >= until_ns)) {
                resume_at(at, &kv); /* as walk_txn: none begun past the budget after the first */
                more = true;
                break;
            }
            rc = keep_parent_alone(s, txn, t, b, span, &c);
            fc_store_bundle_cache_release(&c); /* it points into the bundle, and a put came */
            n++;
            g = rc ? g : mdb_cursor_get(cur, &kv, &v, MDB_NEXT);
        }
        if (rc == 0 && g != 0 && g != MDB_NOTFOUND) {
            rc = g;
        }
        mdb_cursor_close(cur);
        fc_store_bundle_cache_release(&c);
        if (rc != 0) {
            mdb_txn_abort(txn);
        } else {
            rc = mdb_txn_commit(txn);
        }
        if (rc == 0 && more && fc_now_mono_ns() >= until_ns) {
            return FC_EAGAIN; /* committed: the next call goes on from *at */
        }
    }
    at->n = 0;
    return rc ? fc_store_lmdb_error(err, rc, "compaction") : FC_OK;
}

static int seek(MDB_cursor *c, const char *tenant, uint32_t base, int level, int64_t start,
                MDB_val *kv, MDB_val *v)
{
    struct key k;

    node_key(&k, tenant, base, level, start);
    *kv = val(k.b, k.n);
    return mdb_cursor_get(c, kv, v, MDB_SET_RANGE);
}

/* What a pass does with the windows of one level: bundles (level 0) or packs. */
struct pass_kind {
    int level;       /* the windows gathered, by spans of the next level (bundle_span) */
    bool trees_only; /* leave links, sums and dirty windows out (packs) */
};

static const struct pass_kind bundling = {0, false};
static const struct pass_kind packing = {FC_STORE_PACK_LEVEL, true};

/*
 * One write transaction of a pass: the spans (windows of level + 1) from lo
 * on of the level's windows that ended by cutoff, from the key at (tenant,
 * base, level, at) on, at most BUNDLE_TXN_SPANS and, after the first, none
 * begun past until_ns (a span takes about half a millisecond: 256 of them
 * held the writer up to 190 ms); *done when it reached the end of the
 * table, else (tenant, base, at) is where to go on.
 */
static int walk_txn(struct fc_store *s, const struct pass_kind *kind, int64_t lo, int64_t cutoff,
                    int64_t until_ns, char *tenant, size_t cap, uint32_t *base, int64_t *at,
                    bool *done, uint64_t *count)
{
    const int level = kind->level;
    const int64_t width = fc_store_level_secs[level], span_width = fc_store_level_secs[level + 1];
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
    g = seek(c, tenant, *base, level, *at, &kv, &v);
    while (rc == 0 && g == 0) {
        char t[256];
        uint32_t b;
        int l;
        int64_t start, span, starts[FC_STORE_PARENT_SLOT];
        size_t n = 0;

        if (!parse_node_key(&kv, t, sizeof(t), &b, &l, &start)) {
            g = mdb_cursor_get(c, &kv, &v, MDB_NEXT);
            continue;
        }
        if (l == level && start < 0) {
            /* A damaged key (nothing writes one): it sorts after the base's windows. */
            g = b == UINT32_MAX ? mdb_cursor_get(c, &kv, &v, MDB_NEXT)
                                : seek(c, t, b + 1, level, lo, &kv, &v);
            continue;
        }
        if (l < level || (l == level && start < lo)) {
            g = seek(c, t, b, level, lo, &kv, &v);
            continue;
        }
        if (l > level || start > cutoff - width) {
            /* Past this base's windows in range: on to the next base. */
            g = b == UINT32_MAX ? mdb_cursor_get(c, &kv, &v, MDB_NEXT)
                                : seek(c, t, b + 1, level, lo, &kv, &v);
            continue;
        }
        if (spans == BUNDLE_TXN_SPANS || (spans > 0 && fc_now_mono_ns() >= until_ns)) {
            memcpy(tenant, t, strlen(t) + 1 < cap ? strlen(t) + 1 : cap);
            *base = b;
            *at = start;
            break;
        }
        span = (start / span_width) * span_width; /* start >= lo >= 0 */
        while (g == 0 && n < FC_STORE_PARENT_SLOT) {
            char t2[256];
            uint32_t b2;
            int l2;
            int64_t s2, child;
            if (!parse_node_key(&kv, t2, sizeof(t2), &b2, &l2, &s2) || strcmp(t2, t) != 0 ||
                b2 != b || l2 != level || s2 < span || s2 >= span + span_width ||
                s2 > cutoff - width) {
                break;
            }
            if (!kind->trees_only ||
                (s2 % width == 0 && !fc_store_link_of(&v, &child) && !fc_store_sum_of(&v) &&
                 !window_dirty(s, txn, t, b, level, s2))) {
                starts[n++] = s2;
            }
            g = mdb_cursor_get(c, &kv, &v, MDB_NEXT);
        }
        rc = bundle_span(s, txn, t, b, level, span, starts, n, count);
        spans++;
        /* Puts may have moved the cursor's page: found again by key. */
        g = seek(c, t, b, level, span + span_width, &kv, &v);
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

int fc_store_bundle_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                           uint64_t *bundled, struct fc_error *err)
{
    struct bundle_pass *bp = &s->bundling;
    int64_t until = fc_store_deadline(budget_ns);
    bool done = false;
    int rc = 0;

    *bundled = 0;
    if (!bp->resuming) {
        int64_t coarse = atomic_load(&s->coarse_before);
        bp->seen = atomic_load(&s->bundled_before);
        bp->from = bp->seen > coarse ? bp->seen : coarse; /* no 10 s windows left before it */
        bp->from = bp->from > 0 ? bp->from : 0; /* windows before 1970 are left as they are */
        bp->cutoff = span_of(cutoff_s);
        /*
         * Then packs: the 10^5 s spans of every 10^4 s window that ended
         * since the watermark (seen: 0 after an open, lowered by a rebuild
         * of a packed window, in the compacted past too) by the cutoff.
         */
        bp->pack_lo = pack_span_of(bp->seen - fc_store_level_secs[FC_STORE_PACK_LEVEL]);
        bp->pack_lo = bp->pack_lo > 0 ? bp->pack_lo : 0; /* before 1970: left as they are */
        if (bp->cutoff <= bp->from &&
            bp->pack_lo > bp->cutoff - fc_store_level_secs[FC_STORE_PACK_LEVEL]) {
            return FC_OK;
        }
        bp->tenant[0] = '\0';
        bp->base = 0;
        bp->at = bp->cutoff <= bp->from ? bp->pack_lo : bp->from;
        bp->packing = bp->cutoff <= bp->from; /* no 100 s span to bundle */
        bp->resuming = true;
    }
    while (rc == 0 && !done) {
        if (!bp->packing) {
            rc = walk_txn(s, &bundling, bp->from, bp->cutoff, until, bp->tenant, sizeof(bp->tenant),
                          &bp->base, &bp->at, &done, bundled);
            if (rc == 0 && done) {
                done = false;
                bp->packing = true;
                bp->tenant[0] = '\0';
                bp->base = 0;
                bp->at = bp->pack_lo;
            }
        } else {
            rc = walk_txn(s, &packing, bp->pack_lo, bp->cutoff, until, bp->tenant,
                          sizeof(bp->tenant), &bp->base, &bp->at, &done, bundled);
        }
        if (rc == 0 && !done && fc_now_mono_ns() >= until) {
            fc_store_refresh_used(s);
            return FC_EAGAIN; /* the next call goes on from here, to the same cutoff */
        }
    }
    bp->resuming = false;
    fc_store_refresh_used(s);
    if (rc != 0) {
        return fc_store_lmdb_error(err, rc, "bundle");
    }
    /* Unless a flush brought it back meanwhile: then the next pass goes there. */
    atomic_compare_exchange_strong(&s->bundled_before, &bp->seen, bp->cutoff);
    return FC_OK;
}
