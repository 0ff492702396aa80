/*
 * Packed windows: a node value packs the window of every series of one base
 * series (the profile's own labels, before its types and sample labels split it).
 * Since format 7, with the top bit of the header length set (PACKED_COLUMNS):
 *   le32 header length | header: uvarint n, n x (uvarint series, uvarint total,
 *   uvarint names length, uvarint selfs length, uvarint counts length) | one
 *   zstd frame: the n trees' name columns, then their self columns, then
 *   their child count columns (fc_tree_encode_columns), each in header order.
 * Format 6 and older (the bit clear), read as they are:
 *   le32 header length | header: uvarint n, n x (uvarint series, uvarint total,
 *   uvarint raw length) | one zstd frame of the n interleaved trees.
 * Format 12 (PACKED_SCALED also set): each tree's selfs column starts with
 * the scale its selfs are divided by (fc_tree_encode_columns); format 11
 * and older columns hold the selfs as they are, and are read so.
 * Format 9 (PACKED_BUNDLED also set): a bundled 10 s window's entry in its
 * 100 s span's bundle (store_bundle.c), the same header followed by uvarint
 * offset, uvarint length: its content (what the frame would decompress to)
 * is that slice of the bundle's contents.
 * Totals are readable without decompressing; similar trees compress together,
 * the more when each column of every tree sits with the same column of the
 * others (about a sixth smaller for a window of 35 small trees than each
 * tree's three columns in turn).
 */
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/mem.h"
#include "formats/pb.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define PACKED_COLUMNS 0x80000000u
/* Format 9: the trees are a slice of the 100 s span's bundle (store_bundle.c), not a frame here. */
#define PACKED_BUNDLED 0x40000000u
/*
 * Format 12: the selfs columns start with their scale (fc_tree_encode_columns).
 * The same bit as FC_STORE_BUNDLED_MARKER, whose le32 is exactly that: a
 * packed value with it always has PACKED_COLUMNS too, and a value with it
 * alone is refused here, so neither is taken for the other.
 */
#define PACKED_SCALED 0x20000000u

struct fc_tree *fc_store_part_of(struct parts *ps, uint32_t series)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (ps->v[i].series == series) {
            return &ps->v[i].tree;
        }
    }
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 8;
        ps->v = fc_xrealloc(ps->v, ps->cap * sizeof(*ps->v));
    }
    ps->v[ps->n].series = series;
    fc_tree_init(&ps->v[ps->n].tree);
    return &ps->v[ps->n++].tree;
}

void fc_store_parts_release(struct parts *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        fc_tree_release(&ps->v[i].tree);
    }
    free(ps->v);
    memset(ps, 0, sizeof(*ps));
}

void fc_store_packed_release(struct packed *p)
{
    free(p->series);
    free(p->totals);
    free(p->raw_lens);
    memset(p, 0, sizeof(*p));
}

bool fc_store_packed_parse(const uint8_t *data, size_t len, struct packed *p)
{
    uint32_t hlen;
    struct fc_pb r;
    uint64_t n;

    memset(p, 0, sizeof(*p));
    if (len < 4) {
        return false;
    }
    memcpy(&hlen, data, 4);
    p->columns = (hlen & PACKED_COLUMNS) != 0;
    p->bundled = (hlen & PACKED_BUNDLED) != 0;
    p->scaled = (hlen & PACKED_SCALED) != 0;
    if (p->scaled && !p->columns) {
        return false; /* only columns are scaled */
    }
    hlen &= ~(PACKED_COLUMNS | PACKED_BUNDLED | PACKED_SCALED);
    if (hlen > len - 4) {
        return false;
    }
    fc_pb_init(&r, data + 4, hlen);
    if (fc_pb_varint(&r, &n) != 0 || n > hlen) {
        return false;
    }
    p->n = (uint32_t)n;
    p->series = fc_xcalloc(n + 1, sizeof(uint32_t));
    p->totals = fc_xcalloc(n + 1, sizeof(int64_t));
    p->raw_lens = fc_xcalloc(3 * (n + 1), sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sid, total;
        uint64_t *lens = p->columns ? &p->raw_lens[3 * i] : &p->raw_lens[i];
        if (fc_pb_varint(&r, &sid) != 0 || fc_pb_varint(&r, &total) != 0 ||
            fc_pb_varint(&r, &lens[0]) != 0 ||
            (p->columns && (fc_pb_varint(&r, &lens[1]) != 0 || fc_pb_varint(&r, &lens[2]) != 0)) ||
            sid > UINT32_MAX) {
            fc_store_packed_release(p);
            return false;
        }
        p->series[i] = (uint32_t)sid;
        p->totals[i] = (int64_t)total;
    }
    p->frame = data + 4 + hlen;
    p->frame_len = len - 4 - hlen;
    if (p->bundled) {
        /* The slice of the bundle: exactly two varints. */
        fc_pb_init(&r, p->frame, p->frame_len);
        if (fc_pb_varint(&r, &p->slice_off) != 0 || fc_pb_varint(&r, &p->slice_len) != 0 ||
            r.p != r.end) {
            fc_store_packed_release(p);
            return false;
        }
    }
    return true;
}

/* The trees in columns of a decompressed frame (raw, size bytes) that `want` accepts. */
static bool decode_columns(const struct packed *p, const uint8_t *raw, size_t size,
                           bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps)
{
    size_t start[3] = {0, 0, 0}, at[3];
    size_t total = 0;

    /* Each column section's length, checked against the frame before any is read. */
    for (int k = 0; k < 3; k++) {
        start[k] = total;
        for (uint32_t i = 0; i < p->n; i++) {
            uint64_t len = p->raw_lens[3 * i + k];
            if (len > size - total) {
                return false;
            }
            total += (size_t)len;
        }
    }
    if (total != size) {
        return false;
    }
    memcpy(at, start, sizeof(at));
    for (uint32_t i = 0; i < p->n; i++) {
        const uint64_t *lens = &p->raw_lens[3 * i];
        if (want == NULL || want(ctx, p->series[i])) {
            struct fc_tree_columns c = {raw + at[0],     raw + at[1],     raw + at[2],
                                        (size_t)lens[0], (size_t)lens[1], (size_t)lens[2],
                                        p->scaled};
            if (fc_tree_decode_columns_merge(fc_store_part_of(ps, p->series[i]), &c) != FC_OK) {
                return false;
            }
        }
        for (int k = 0; k < 3; k++) {
            at[k] += (size_t)lens[k];
        }
    }
    return true;
}

bool fc_store_packed_decode_raw(const struct packed *p, const uint8_t *raw, size_t size,
                                bool (*want)(void *ctx, uint32_t series), void *ctx,
                                struct parts *ps)
{
    size_t off = 0;

    if (p->columns) {
        return decode_columns(p, raw, size, want, ctx, ps);
    }
    for (uint32_t i = 0; i < p->n; i++) {
        if (p->raw_lens[i] > size - off) {
            return false;
        }
        if ((want == NULL || want(ctx, p->series[i])) &&
            fc_tree_decode_raw_merge(fc_store_part_of(ps, p->series[i]), raw + off,
                                     (size_t)p->raw_lens[i]) != FC_OK) {
            return false;
        }
        off += (size_t)p->raw_lens[i];
    }
    return true;
}

bool fc_store_packed_wanted(const struct packed *p, bool (*want)(void *ctx, uint32_t series),
                            void *ctx)
{
    for (uint32_t i = 0; i < p->n; i++) {
        if (want == NULL || want(ctx, p->series[i])) {
            return true;
        }
    }
    return false;
}

bool fc_store_packed_decode(const uint8_t *data, size_t len,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps)
{
    struct packed p;
    size_t size;
    uint8_t *raw;
    bool ok;

    if (!fc_store_packed_parse(data, len, &p)) {
        return false;
    }
    if (p.bundled) {
        fc_store_packed_release(&p);
        return false; /* its trees are in its bundle: fc_store_window_decode */
    }
    if (!fc_store_packed_wanted(&p, want, ctx)) {
        fc_store_packed_release(&p);
        return true; /* nothing wanted here: no decompression */
    }
    if ((raw = fc_tree_unzstd(p.frame, p.frame_len, &size)) == NULL) {
        fc_store_packed_release(&p);
        return false;
    }
    ok = fc_store_packed_decode_raw(&p, raw, size, want, ctx, ps);
    free(raw);
    fc_store_packed_release(&p);
    return ok;
}

int fc_store_packed_whole(const uint8_t *entry, const struct packed *p, const uint8_t *content,
                          size_t len, struct fc_buf *out)
{
    size_t hlen = (size_t)(p->frame - entry) - 4, bound = ZSTD_compressBound(len), n;
    uint32_t flags =
        (uint32_t)hlen | (p->columns ? PACKED_COLUMNS : 0) | (p->scaled ? PACKED_SCALED : 0);
    int rc;

    fc_buf_append(out, &flags, 4);
    fc_buf_append(out, entry + 4, hlen);
    if ((rc = fc_buf_reserve(out, bound)) != FC_OK) {
        return rc;
    }
    n = fc_tree_zstd(out->data + out->len, bound, len ? content : (const uint8_t *)"", len, 3);
    if (ZSTD_isError(n)) {
        return FC_EIO;
    }
    out->len += n;
    return FC_OK;
}

int fc_store_packed_entry(const uint8_t *data, const struct packed *p, uint64_t off, uint64_t len,
                          struct fc_buf *out)
{
    size_t hlen = (size_t)(p->frame - data) - 4;
    uint32_t flags = (uint32_t)hlen | PACKED_BUNDLED | (p->columns ? PACKED_COLUMNS : 0) |
                     (p->scaled ? PACKED_SCALED : 0);

    fc_buf_append(out, &flags, 4);
    fc_buf_append(out, data + 4, hlen);
    fc_pb_put_varint(out, off);
    fc_pb_put_varint(out, len);
    return FC_OK;
}

int fc_store_packed_encode(const struct parts *ps, struct fc_buf *out)
{
    struct fc_buf header, names, selfs, counts;
    uint32_t hlen;
    size_t bound, n;
    int rc;

    fc_buf_init(&header, 0);
    fc_buf_init(&names, 0);
    fc_buf_init(&selfs, 0);
    fc_buf_init(&counts, 0);
    fc_pb_put_varint(&header, ps->n);
    for (uint32_t i = 0; i < ps->n; i++) {
        size_t n0 = names.len, s0 = selfs.len, c0 = counts.len;
        fc_tree_encode_columns(&ps->v[i].tree, &names, &selfs, &counts);
        fc_pb_put_varint(&header, ps->v[i].series);
        fc_pb_put_varint(&header, (uint64_t)fc_tree_total(&ps->v[i].tree));
        fc_pb_put_varint(&header, names.len - n0);
        fc_pb_put_varint(&header, selfs.len - s0);
        fc_pb_put_varint(&header, counts.len - c0);
    }
    /* One frame: the name columns, then the selfs, then the counts. */
    if (selfs.len > 0) {
        fc_buf_append(&names, selfs.data, selfs.len);
    }
    if (counts.len > 0) {
        fc_buf_append(&names, counts.data, counts.len);
    }
    hlen = (uint32_t)header.len | PACKED_COLUMNS | PACKED_SCALED;
    fc_buf_append(out, &hlen, 4);
    fc_buf_append(out, header.data, header.len);
    bound = ZSTD_compressBound(names.len);
    rc = fc_buf_reserve(out, bound);
    if (rc == FC_OK) {
        n = fc_tree_zstd(out->data + out->len, bound, names.data ? names.data : (const uint8_t *)"",
                         names.len, 3);
        if (ZSTD_isError(n)) {
            rc = FC_EIO;
        } else {
            out->len += n;
        }
    }
    fc_buf_release(&header);
    fc_buf_release(&names);
    fc_buf_release(&selfs);
    fc_buf_release(&counts);
    return rc;
}

void fc_store_link_encode(int64_t child_start, uint8_t out[FC_STORE_LINK_LEN])
{
    memset(out, 0xff, 4);
    for (int i = 0; i < 8; i++) {
        out[4 + i] = (uint8_t)((uint64_t)child_start >> (56 - 8 * i));
    }
}

void fc_store_sum_encode(uint8_t out[FC_STORE_SUM_LEN])
{
    memcpy(out, "\xfe\xff\xff\xff", FC_STORE_SUM_LEN);
}

bool fc_store_sum_of(const MDB_val *v)
{
    return v->mv_size == FC_STORE_SUM_LEN && memcmp(v->mv_data, "\xfe\xff\xff\xff", 4) == 0;
}

bool fc_store_link_of(const MDB_val *v, int64_t *child_start)
{
    const uint8_t *p = v->mv_data;

    if (v->mv_size != FC_STORE_LINK_LEN || p[0] != 0xff || p[1] != 0xff || p[2] != 0xff ||
        p[3] != 0xff) {
        return false;
    }
    *child_start = (int64_t)be64(p + 4);
    return true;
}

int fc_store_node_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                      int level, int64_t start, MDB_val *v)
{
    struct key k;
    MDB_val kv;

    /* A link points one level down: at most FC_STORE_LEVELS steps. */
    for (int steps = 0; steps < FC_STORE_LEVELS; steps++) {
        int rc;
        int64_t child;
        node_key(&k, tenant, base, level, start);
        kv = val(k.b, k.n);
        if ((rc = mdb_get(txn, s->db[DB_NODE], &kv, v)) != 0) {
            return rc;
        }
        if (!fc_store_link_of(v, &child)) {
            if (!fc_store_marker_fits(v, level, start) ||
                (fc_store_sum_of(v) && (steps > 0 || level < 2))) {
                /* another window's marker, or a sum this build never writes there */
                atomic_fetch_add(&s->corrupt, 1);
                return MDB_NOTFOUND;
            }
            return 0;
        }
        if (level < 2 || child < start || child >= start + fc_store_level_secs[level]) {
            atomic_fetch_add(&s->corrupt, 1); /* not a link this build writes */
            return MDB_NOTFOUND;
        }
        level--;
        start = child;
    }
    return MDB_NOTFOUND;
}
