/*
 * Reading bundles and packs (their layout: store_bundle.h).
 *
 * Readers parse a window with fc_store_window_parse and decode it with
 * fc_store_window_decode, through a struct bundle_cache: the span's windows
 * are read together, and the index alone is enough for totals. A write
 * into a bundled window (a late profile) reads it from its bundle and
 * stores it whole again, and the flush rebuilds the 100 s window whole;
 * the next pass bundles the span again. Compaction, which deletes the
 * 10 s windows of the spans it compacts, first rewrites their bundles with
 * their 100 s windows alone (fc_store_bundle_compact).
 */
#include "storage/store_bundle.h"

#include "core/buf.h"
#include "core/mem.h"
#include "formats/pb.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

void fc_store_bundle_cache_release(struct bundle_cache *c)
{
    free(c->tenant);
    free(c->index);
    free(c->raw);
    memset(c, 0, sizeof(*c));
}

bool fc_store_bundled_marker(const MDB_val *v)
{
    uint32_t flags;

    if (v->mv_size != FC_STORE_MARKER_LEN) {
        return false;
    }
    memcpy(&flags, v->mv_data, 4);
    return flags == FC_STORE_BUNDLED_MARKER;
}

/* A marker's slot and span; false when the slot is out of range. */
static bool marker_of(const MDB_val *v, int *slot, int64_t *span)
{
    const uint8_t *p = v->mv_data;

    *slot = p[4];
    *span = (int64_t)be64(p + 5);
    return pack_key_span(*span)
               ? *slot < FC_STORE_PARENT_SLOT
               : *slot < FC_STORE_BUNDLE_SLOTS && *span >= 0 && *span % fc_store_level_secs[1] == 0;
}

bool fc_store_marker_fits(const MDB_val *v, int level, int64_t start)
{
    int slot;
    int64_t span;

    if (!fc_store_bundled_marker(v)) {
        return true;
    }
    if (!marker_of(v, &slot, &span) || slot != slot_of(level, start)) {
        return false;
    }
    return level == FC_STORE_PACK_LEVEL ? span == pack_span_of(start) + 1
                                        : level <= 1 && span == span_of(start);
}

/* The index of c (decompressed): where each slot's entry is. */
static bool parse_index(struct bundle_cache *c)
{
    struct fc_pb r;
    uint64_t n, at;

    fc_pb_init(&r, c->index, c->index_len);
    if (fc_pb_varint(&r, &n) != 0 || n > FC_STORE_BUNDLE_SLOTS) {
        return false;
    }
    at = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t slot, len;
        if (fc_pb_varint(&r, &slot) != 0 || fc_pb_varint(&r, &len) != 0 ||
            slot >= FC_STORE_BUNDLE_SLOTS || c->len[slot] != 0 || len == 0 || len > c->index_len) {
            return false;
        }
        c->at[slot] = (uint32_t)at;
        c->len[slot] = (uint32_t)len;
        at += len;
    }
    if (at != (uint64_t)(r.end - r.p)) {
        return false;
    }
    for (int k = 0; k < FC_STORE_BUNDLE_SLOTS; k++) {
        c->at[k] += (uint32_t)(r.p - c->index);
    }
    return true;
}

bool fc_store_bundle_set(struct bundle_cache *c, const uint8_t *value, size_t len)
{
    uint32_t ilen;

    free(c->index);
    free(c->raw);
    c->index = c->raw = NULL;
    c->frame = c->dict_frame = NULL;
    c->size = c->frame_len = c->index_len = c->dict_frame_len = 0;
    c->whole = c->dict = false;
    c->dict_service = 0;
    memset(c->at, 0, sizeof(c->at));
    memset(c->len, 0, sizeof(c->len));
    if (len < 4) {
        return false;
    }
    memcpy(&ilen, value, 4);
    c->dict = (ilen & FC_STORE_BUNDLE_DICT) != 0;
    ilen &= ~FC_STORE_BUNDLE_DICT;
    if (ilen > len - 4 || (c->dict && len - 4 - ilen < 8) ||
        (c->index = fc_tree_unzstd(value + 4, ilen, &c->index_len)) == NULL) {
        return false;
    }
    if (!parse_index(c)) {
        free(c->index);
        c->index = NULL;
        return false;
    }
    /* Borrowed, not copied: timelines load a bundle per span for its headers alone. */
    c->frame = value + 4 + ilen;
    if (c->dict) {
        c->dict_service = be64(c->frame);
        c->frame += 8;
    }
    c->frame_len = (size_t)(value + len - c->frame);
    return true;
}

/* Loads bundle (tenant, base, span) into c, unless it holds it already; false when corrupt. */
bool fc_store_bundle_load(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                          int64_t span, struct bundle_cache *c)
{
    struct key k;
    MDB_val kv, v;

    if (c->tenant != NULL && c->base == base && c->span == span && strcmp(c->tenant, tenant) == 0) {
        return c->index != NULL;
    }
    fc_store_bundle_cache_release(c);
    c->tenant = fc_xstrdup(tenant);
    c->base = base;
    c->span = span;
    bundle_key(&k, tenant, base, span);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_BUNDLE], &kv, &v) != 0 ||
        !fc_store_bundle_set(c, v.mv_data, v.mv_size)) {
        return false;
    }
    if (c->dict) {
        /* Not found: the index (totals) still reads, the contents do not. */
        dict_key(&k, tenant, c->dict_service, day_of(span));
        kv = val(k.b, k.n);
        if (mdb_get(txn, s->db[DB_DICT], &kv, &v) == 0) {
            c->dict_frame = v.mv_data;
            c->dict_frame_len = v.mv_size;
        }
    }
    return true;
}

/*
 * The last dictionary a thread decompressed, by the h64 and length of its
 * stored frame: a compacted day's 100 s windows are read one bundle after
 * another with the same dictionary, which would otherwise be decompressed
 * for each (up to 64 KiB; found by review). At most one a thread. A
 * collision gives another dictionary, which the contents' checksum refuses.
 */
struct dict_memo {
    uint64_t hash;
    size_t frame_len;
    uint8_t *raw; /* owned; NULL: none */
    size_t len;
};

static pthread_key_t dict_memo_key;
static pthread_once_t dict_memo_once = PTHREAD_ONCE_INIT;

static void dict_memo_free(void *p)
{
    struct dict_memo *m = p;

    free(m->raw);
    free(m);
}

static void dict_memo_init(void)
{
    if (pthread_key_create(&dict_memo_key, dict_memo_free) != 0) {
        abort();
    }
}

/* The dictionary of a stored frame, decompressed (the thread's, until its next call); NULL:
 * corrupt. */
static const uint8_t *dict_raw(const uint8_t *frame, size_t frame_len, size_t *len)
{
    struct dict_memo *m;
    uint64_t hash = XXH3_64bits(frame, frame_len);

    pthread_once(&dict_memo_once, dict_memo_init);
    if ((m = pthread_getspecific(dict_memo_key)) == NULL) {
        m = fc_xcalloc(1, sizeof(*m));
        pthread_setspecific(dict_memo_key, m);
    }
    if (m->raw == NULL || m->hash != hash || m->frame_len != frame_len) {
        free(m->raw);
        m->raw = fc_tree_unzstd(frame, frame_len, &m->len);
        m->hash = hash;
        m->frame_len = frame_len;
    }
    *len = m->len;
    return m->raw;
}

/*
 * The contents of a loaded bundle, at least their first `need` bytes
 * (SIZE_MAX: all), decompressed on first use; NULL when corrupt. A prefix
 * is what reading the 100 s window (first in the contents) takes, except
 * with a dictionary: only the whole frame is checked against its checksum,
 * which is what tells contents decoded with another dictionary (or a
 * damaged one) apart.
 */
const uint8_t *fc_store_bundle_contents(struct bundle_cache *c, size_t need, size_t *size)
{
    if (c->index == NULL || (c->dict && c->dict_frame == NULL)) {
        return NULL;
    }
    if (c->dict) {
        need = SIZE_MAX;
    }
    if (c->raw != NULL && (c->whole || need <= c->size)) {
        *size = c->size;
        return c->raw;
    }
    free(c->raw);
    c->raw = NULL;
    c->size = 0;
    if (need != SIZE_MAX && need <= fc_tree_max_raw(c->frame_len)) {
        ZSTD_DCtx *d = ZSTD_createDCtx();
        ZSTD_inBuffer in = {c->frame, c->frame_len, 0};
        ZSTD_outBuffer out = {fc_xmalloc(need + 1), need, 0};
        while (d != NULL && out.pos < out.size) {
            size_t was_in = in.pos, was_out = out.pos;
            size_t r = ZSTD_decompressStream(d, &out, &in);
            if (ZSTD_isError(r) || r == 0 || (in.pos == was_in && out.pos == was_out)) {
                break; /* an error, the frame's end, or no progress: out.pos says how far */
            }
        }
        ZSTD_freeDCtx(d);
        if (out.pos == need) {
            c->raw = out.dst;
            c->size = need;
            *size = c->size;
            return c->raw;
        }
        free(out.dst);
        return NULL;
    }
    if (c->dict) {
        size_t dict_len = 0;
        const uint8_t *dict = dict_raw(c->dict_frame, c->dict_frame_len, &dict_len);
        c->raw = dict == NULL
                     ? NULL
                     : fc_tree_unzstd_prefix(c->frame, c->frame_len, dict, dict_len, &c->size);
    } else {
        c->raw = fc_tree_unzstd(c->frame, c->frame_len, &c->size);
    }
    c->whole = c->raw != NULL;
    *size = c->size;
    return c->raw;
}

/* The header of slot's entry in loaded bundle c (p points into c). */
static bool slot_parse(struct bundle_cache *c, int slot, struct packed *p)
{
    if (c->index == NULL || slot < 0 || slot >= FC_STORE_BUNDLE_SLOTS || c->len[slot] == 0 ||
        !fc_store_packed_parse(c->index + c->at[slot], c->len[slot], p)) {
        return false;
    }
    if (!p->bundled) {
        fc_store_packed_release(p); /* an entry holds a slice, never a frame */
        return false;
    }
    return true;
}

bool fc_store_bundle_slot_decode(struct bundle_cache *c, int slot,
                                 bool (*want)(void *ctx, uint32_t series), void *ctx,
                                 struct parts *ps)
{
    struct packed p;
    const uint8_t *raw;
    size_t size = 0;
    bool ok = true;

    if (!slot_parse(c, slot, &p)) {
        return false;
    }
    if (fc_store_packed_wanted(&p, want, ctx)) {
        ok = p.slice_len <= SIZE_MAX - p.slice_off &&
             (raw = fc_store_bundle_contents(
                  c,
                  slot == FC_STORE_PARENT_SLOT
                      ? (size_t)(p.slice_off + p.slice_len)
                      : SIZE_MAX, /* a span's 10 s windows are read together */
                  &size)) != NULL &&
             p.slice_off <= size && p.slice_len <= size - p.slice_off &&
             fc_store_packed_decode_raw(&p, raw + p.slice_off, (size_t)p.slice_len, want, ctx, ps);
    }
    fc_store_packed_release(&p);
    return ok;
}

/* The bytes c holds: its index and its decompressed contents. */
static int64_t slot_bytes(const struct bundle_cache *c)
{
    return (int64_t)(c->index != NULL ? c->index_len : 0) + (int64_t)(c->raw != NULL ? c->size : 0);
}

/*
 * caches now hold delta bytes more (or fewer). Past the store's cap (every
 * reader's caches together), a reader empties its own but keep (which the
 * caller is reading from): a reader then holds about one bundle, so the sum
 * stays near the cap however many read at once.
 */
static void caches_count(struct bundle_caches *caches, int64_t delta, struct bundle_cache *keep)
{
    struct fc_store *s = caches->owner;
    int64_t freed = 0;

    if (s == NULL) {
        return;
    }
    caches->held += delta;
    if (atomic_fetch_add(&s->bundle_cache_bytes, delta) + delta <= s->bundle_cache_max) {
        return;
    }
    for (size_t i = 0; caches->v != NULL && i < caches->n; i++) {
        struct bundle_cache *c = &caches->v[i];
        if (c != keep && c->tenant != NULL) {
            freed += slot_bytes(c);
            fc_store_bundle_cache_release(c);
        }
    }
    if (caches->contents != keep) {
        caches->contents = NULL;
    }
    caches->held -= freed;
    atomic_fetch_sub(&s->bundle_cache_bytes, freed);
}

void fc_store_bundle_caches_release(struct bundle_caches *caches)
{
    for (size_t i = 0; caches->v != NULL && i < caches->n; i++) {
        fc_store_bundle_cache_release(&caches->v[i]);
    }
    free(caches->v);
    if (caches->owner != NULL) {
        atomic_fetch_sub(&caches->owner->bundle_cache_bytes, caches->held);
    }
    caches->v = caches->contents = NULL;
    caches->held = 0;
}

/* Where caches keeps bundle (base, span). */
static struct bundle_cache *pick(struct bundle_caches *caches, uint32_t base, int64_t span)
{
    uint64_t h = ((uint64_t)base * 0x9E3779B97F4A7C15ull) ^ (uint64_t)(span / 100);

    if (caches->v == NULL) {
        /* The slots themselves (about 170 KB) are not counted: no eviction frees them. */
        caches->v = fc_xcalloc(caches->n, sizeof(*caches->v));
    }
    return &caches->v[(h ^ (h >> 29)) % caches->n];
}

bool fc_store_window_parse(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                           const MDB_val *v, struct bundle_caches *caches, struct packed *p)
{
    struct bundle_cache *cache;
    int slot;
    int64_t span, before;
    bool ok;

    if (!fc_store_bundled_marker(v)) {
        if (!fc_store_packed_parse(v->mv_data, v->mv_size, p)) {
            return false;
        }
        if (p->bundled) {
            fc_store_packed_release(p); /* a slice outside a bundle: never written so */
            return false;
        }
        return true;
    }
    if (!marker_of(v, &slot, &span)) {
        return false;
    }
    cache = pick(caches, base, span);
    before = slot_bytes(cache);
    ok = fc_store_bundle_load(s, txn, tenant, base, span, cache) && slot_parse(cache, slot, p);
    caches_count(caches, slot_bytes(cache) - before, cache);
    return ok;
}

bool fc_store_window_decode(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                            const MDB_val *v, struct bundle_caches *caches,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps)
{
    struct bundle_cache local = {0};
    struct bundle_cache *c;
    int slot;
    int64_t span, before;
    bool ok;

    if (!fc_store_bundled_marker(v)) {
        return fc_store_packed_decode(v->mv_data, v->mv_size, want, ctx, ps);
    }
    if (!marker_of(v, &slot, &span)) {
        return false;
    }
    c = caches != NULL ? pick(caches, base, span) : &local;
    before = slot_bytes(c);
    ok = fc_store_bundle_load(s, txn, tenant, base, span, c) &&
         fc_store_bundle_slot_decode(c, slot, want, ctx, ps);
    if (caches != NULL) {
        caches_count(caches, slot_bytes(c) - before, c);
    }
    if (caches != NULL && c->raw != NULL && caches->contents != c) {
        /* The indexes stay; one bundle's contents at a time (up to ~100 KB each). */
        if (caches->contents != NULL) {
            int64_t gone = slot_bytes(caches->contents);
            free(caches->contents->raw);
            caches->contents->raw = NULL;
            caches->contents->size = 0;
            caches->contents->whole = false;
            caches_count(caches, slot_bytes(caches->contents) - gone, c);
        }
        caches->contents = c;
    }
    fc_store_bundle_cache_release(&local);
    return ok;
}
