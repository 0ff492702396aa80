/*
 * Packed windows: a node value packs the window of every series of one base
 * series (the profile's own labels, before its types and sample labels split it):
 *   le32 header length | header: uvarint n, n x (uvarint series, uvarint total,
 *   uvarint raw length) | one zstd frame of the n raw trees, in header order.
 * Totals are readable without decompressing; similar trees compress together.
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
    p->raw_lens = fc_xcalloc(n + 1, sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sid, total;
        if (fc_pb_varint(&r, &sid) != 0 || fc_pb_varint(&r, &total) != 0 ||
            fc_pb_varint(&r, &p->raw_lens[i]) != 0 || sid > UINT32_MAX) {
            fc_store_packed_release(p);
            return false;
        }
        p->series[i] = (uint32_t)sid;
        p->totals[i] = (int64_t)total;
    }
    p->frame = data + 4 + hlen;
    p->frame_len = len - 4 - hlen;
    return true;
}

/*
 * Decodes the trees of a packed value whose series `want` accepts (NULL =
 * all) into ps. Returns false when the value is corrupt.
 */
bool fc_store_packed_decode(const uint8_t *data, size_t len,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps)
{
    struct packed p;
    unsigned long long size;
    uint8_t *raw;
    size_t off = 0;
    bool ok = true;
    bool any = false;

    if (!fc_store_packed_parse(data, len, &p)) {
        return false;
    }
    for (uint32_t i = 0; i < p.n && !any; i++) {
        any = want == NULL || want(ctx, p.series[i]);
    }
    if (!any) {
        fc_store_packed_release(&p);
        return true; /* nothing wanted here: no decompression */
    }
    size = ZSTD_getFrameContentSize(p.frame, p.frame_len);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1u << 30)) {
        fc_store_packed_release(&p);
        return false;
    }
    raw = fc_xmalloc(size ? size : 1);
    if (ZSTD_isError(ZSTD_decompress(raw, size, p.frame, p.frame_len))) {
        free(raw);
        fc_store_packed_release(&p);
        return false;
    }
    for (uint32_t i = 0; i < p.n && ok; i++) {
        if (p.raw_lens[i] > size - off) {
            ok = false;
            break;
        }
        if (want == NULL || want(ctx, p.series[i])) {
            ok = fc_tree_decode_raw_merge(fc_store_part_of(ps, p.series[i]), raw + off,
                                          (size_t)p.raw_lens[i]) == FC_OK;
        }
        off += (size_t)p.raw_lens[i];
    }
    free(raw);
    fc_store_packed_release(&p);
    return ok;
}

int fc_store_packed_encode(const struct parts *ps, struct fc_buf *out)
{
    struct fc_buf header, raw;
    uint32_t hlen;
    size_t bound, n;
    int rc;

    fc_buf_init(&header, 0);
    fc_buf_init(&raw, 0);
    fc_pb_put_varint(&header, ps->n);
    for (uint32_t i = 0; i < ps->n; i++) {
        size_t before = raw.len;
        fc_tree_encode_raw(&ps->v[i].tree, &raw);
        fc_pb_put_varint(&header, ps->v[i].series);
        fc_pb_put_varint(&header, (uint64_t)fc_tree_total(&ps->v[i].tree));
        fc_pb_put_varint(&header, raw.len - before);
    }
    hlen = (uint32_t)header.len;
    fc_buf_append(out, &hlen, 4);
    fc_buf_append(out, header.data, header.len);
    bound = ZSTD_compressBound(raw.len);
    rc = fc_buf_reserve(out, bound);
    if (rc == FC_OK) {
        n = ZSTD_compress(out->data + out->len, bound, raw.data ? raw.data : (const uint8_t *)"",
                          raw.len, 3);
        if (ZSTD_isError(n)) {
            rc = FC_EIO;
        } else {
            out->len += n;
        }
    }
    fc_buf_release(&header);
    fc_buf_release(&raw);
    return rc;
}

void fc_store_link_encode(int64_t child_start, uint8_t out[FC_STORE_LINK_LEN])
{
    memset(out, 0xff, 4);
    for (int i = 0; i < 8; i++) {
        out[4 + i] = (uint8_t)((uint64_t)child_start >> (56 - 8 * i));
    }
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
