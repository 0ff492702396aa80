#include "storage/tree.h"

#include "core/mem.h"
#include "formats/pb.h"

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

void fc_tree_init(struct fc_tree *t)
{
    t->cap = 64;
    t->nodes = fc_xcalloc(t->cap, sizeof(*t->nodes));
    t->n = 1; /* the root */
}

void fc_tree_release(struct fc_tree *t)
{
    free(t->nodes);
    t->nodes = NULL;
    t->n = t->cap = 0;
}

static uint32_t new_node(struct fc_tree *t, uint32_t name)
{
    if (t->n == t->cap) {
        t->cap *= 2;
        t->nodes = fc_xrealloc(t->nodes, t->cap * sizeof(*t->nodes));
    }
    memset(&t->nodes[t->n], 0, sizeof(t->nodes[0]));
    t->nodes[t->n].name = name;
    return t->n++;
}

/* The child of parent named name, made (in sorted place) when missing. */
static uint32_t child(struct fc_tree *t, uint32_t parent, uint32_t name)
{
    uint32_t prev = 0;
    uint32_t c = t->nodes[parent].first;
    uint32_t n;

    while (c != 0 && t->nodes[c].name < name) {
        prev = c;
        c = t->nodes[c].next;
    }
    if (c != 0 && t->nodes[c].name == name) {
        return c;
    }
    n = new_node(t, name); /* may move t->nodes */
    t->nodes[n].next = c;
    if (prev == 0) {
        t->nodes[parent].first = n;
    } else {
        t->nodes[prev].next = n;
    }
    return n;
}

void fc_tree_insert(struct fc_tree *t, const uint32_t *path, uint32_t depth, int64_t value)
{
    uint32_t at = 0;

    t->nodes[0].total += value;
    for (uint32_t i = 0; i < depth; i++) {
        at = child(t, at, path[i]);
        t->nodes[at].total += value;
    }
    t->nodes[at].self += value;
}

static void merge_node(struct fc_tree *dst, uint32_t d, const struct fc_tree *src, uint32_t s)
{
    dst->nodes[d].self += src->nodes[s].self;
    dst->nodes[d].total += src->nodes[s].total;
    for (uint32_t c = src->nodes[s].first; c != 0; c = src->nodes[c].next) {
        uint32_t dc = child(dst, d, src->nodes[c].name);
        merge_node(dst, dc, src, c);
    }
}

void fc_tree_merge(struct fc_tree *dst, const struct fc_tree *src)
{
    if (src->n > 0) {
        merge_node(dst, 0, src, 0);
    }
}

/* Pre-order: uvarint(name) uvarint(self) uvarint(children), children follow. */
static void encode_node(const struct fc_tree *t, uint32_t i, struct fc_buf *out)
{
    uint32_t n = 0;

    for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
        n++;
    }
    fc_pb_put_varint(out, t->nodes[i].name);
    fc_pb_put_varint(out, (uint64_t)t->nodes[i].self);
    fc_pb_put_varint(out, n);
    for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
        encode_node(t, c, out);
    }
}

void fc_tree_encode_raw(const struct fc_tree *t, struct fc_buf *out)
{
    encode_node(t, 0, out);
}

int fc_tree_encode(const struct fc_tree *t, struct fc_buf *out)
{
    struct fc_buf raw;
    size_t bound;
    size_t n;
    int rc;

    fc_buf_init(&raw, 0);
    encode_node(t, 0, &raw);
    bound = ZSTD_compressBound(raw.len);
    rc = fc_buf_reserve(out, bound);
    if (rc == FC_OK) {
        n = ZSTD_compress(out->data + out->len, bound, raw.data, raw.len, 1);
        if (ZSTD_isError(n)) {
            rc = FC_EIO;
        } else {
            out->len += n;
        }
    }
    fc_buf_release(&raw);
    return rc;
}

struct reader {
    struct fc_pb r;
    uint32_t depth;
};

static int decode_into(struct fc_tree *t, uint32_t at, struct reader *rd, int64_t *total_out)
{
    uint64_t self, n;
    int64_t total;

    if (fc_pb_varint(&rd->r, &self) != 0 || fc_pb_varint(&rd->r, &n) != 0 || ++rd->depth > 4096) {
        return FC_EPROTO;
    }
    total = (int64_t)self;
    t->nodes[at].self += (int64_t)self;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t name;
        int64_t sub = 0;
        uint32_t c;
        if (fc_pb_varint(&rd->r, &name) != 0 || name > UINT32_MAX) {
            return FC_EPROTO;
        }
        c = child(t, at, (uint32_t)name);
        if (decode_into(t, c, rd, &sub) != FC_OK) {
            return FC_EPROTO;
        }
        total += sub;
    }
    rd->depth--;
    t->nodes[at].total += total;
    *total_out = total;
    return FC_OK;
}

int fc_tree_decode_raw_merge(struct fc_tree *t, const uint8_t *data, size_t len)
{
    struct reader rd;
    uint64_t root_name;
    int64_t total;

    fc_pb_init(&rd.r, data, len);
    rd.depth = 0;
    return fc_pb_varint(&rd.r, &root_name) == 0 ? decode_into(t, 0, &rd, &total) : FC_EPROTO;
}

int fc_tree_decode_merge(struct fc_tree *t, const uint8_t *data, size_t len, struct fc_error *err)
{
    unsigned long long size = ZSTD_getFrameContentSize(data, len);
    uint8_t *raw;
    size_t n;
    struct reader rd;
    uint64_t root_name;
    int64_t total;
    int rc;

    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1u << 30)) {
        return fc_errorf(err, FC_EPROTO, "store: corrupt tree (bad zstd frame)");
    }
    raw = fc_xmalloc(size ? size : 1);
    n = ZSTD_decompress(raw, size, data, len);
    if (ZSTD_isError(n)) {
        free(raw);
        return fc_errorf(err, FC_EPROTO, "store: corrupt tree (%s)", ZSTD_getErrorName(n));
    }
    fc_pb_init(&rd.r, raw, n);
    rd.depth = 0;
    rc = fc_pb_varint(&rd.r, &root_name) == 0 ? decode_into(t, 0, &rd, &total) : FC_EPROTO;
    free(raw);
    return rc == FC_OK ? FC_OK : fc_errorf(err, FC_EPROTO, "store: corrupt tree");
}
