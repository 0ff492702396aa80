#include "storage/tree.h"

#include "core/mem.h"
#include "formats/pb.h"

#include <stdbool.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

size_t fc_tree_max_raw(size_t compressed)
{
    return compressed < FC_TREE_RAW_FLOOR / FC_TREE_MAX_RATIO ? FC_TREE_RAW_FLOOR
           : compressed > (1u << 30) / FC_TREE_MAX_RATIO      ? (1u << 30)
                                                              : compressed * FC_TREE_MAX_RATIO;
}

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

/*
 * Work lists of the walks below: trees come from outside (one stack of
 * 300,000 frames is one request), so no walk recurses. Small walks use
 * the inline slots and never allocate.
 */
struct work {
    uint64_t *v;
    size_t n, cap;
    uint64_t inline_v[128];
};

static void work_init(struct work *w)
{
    w->v = w->inline_v;
    w->n = 0;
    w->cap = sizeof(w->inline_v) / sizeof(w->inline_v[0]);
}

static void work_push(struct work *w, uint64_t x)
{
    if (w->n == w->cap) {
        w->cap *= 2;
        if (w->v == w->inline_v) {
            w->v = fc_xmalloc(w->cap * sizeof(*w->v));
            memcpy(w->v, w->inline_v, sizeof(w->inline_v));
        } else {
            w->v = fc_xrealloc(w->v, w->cap * sizeof(*w->v));
        }
    }
    w->v[w->n++] = x;
}

static void work_release(struct work *w)
{
    if (w->v != w->inline_v) {
        free(w->v);
    }
}

/*
 * The child of parent named name, made (in sorted place) when missing.
 * *prev is where the scan starts (0: the first child) and is left at the
 * child found: callers asking for names in increasing order walk each
 * sibling list once.
 */
static uint32_t child_from(struct fc_tree *t, uint32_t parent, uint32_t *prev, uint32_t name)
{
    uint32_t p = *prev;
    uint32_t c;
    uint32_t n;

    if (p != 0 && t->nodes[p].name >= name) {
        p = 0; /* out of order: scan from the start */
    }
    c = p != 0 ? t->nodes[p].next : t->nodes[parent].first;
    while (c != 0 && t->nodes[c].name < name) {
        p = c;
        c = t->nodes[c].next;
    }
    if (c != 0 && t->nodes[c].name == name) {
        *prev = c;
        return c;
    }
    n = new_node(t, name); /* may move t->nodes */
    t->nodes[n].next = c;
    if (p == 0) {
        t->nodes[parent].first = n;
    } else {
        t->nodes[p].next = n;
    }
    *prev = n;
    return n;
}

static uint32_t child(struct fc_tree *t, uint32_t parent, uint32_t name)
{
    uint32_t prev = 0;
    return child_from(t, parent, &prev, name);
}

void fc_tree_insert(struct fc_tree *t, const uint32_t *path, uint32_t depth, int64_t value)
{
    uint32_t at = 0;

    t->nodes[0].total = fc_sat_add(t->nodes[0].total, value);
    for (uint32_t i = 0; i < depth; i++) {
        at = child(t, at, path[i]);
        t->nodes[at].total = fc_sat_add(t->nodes[at].total, value);
    }
    t->nodes[at].self = fc_sat_add(t->nodes[at].self, value);
}

static uint64_t pair(uint32_t a, uint32_t b)
{
    return (uint64_t)a << 32 | b;
}

void fc_tree_merge(struct fc_tree *dst, const struct fc_tree *src)
{
    struct work w;

    if (src->n == 0) {
        return;
    }
    if (dst->n <= 1 && (dst->n == 0 || (dst->nodes[0].first == 0 && dst->nodes[0].self == 0 &&
                                        dst->nodes[0].total == 0))) {
        /* Into an empty tree: a copy (node links are indices into the array). */
        if (dst->cap < src->n) {
            free(dst->nodes);
            dst->cap = src->n;
            dst->nodes = fc_xmalloc(dst->cap * sizeof(*dst->nodes));
        }
        memcpy(dst->nodes, src->nodes, src->n * sizeof(*src->nodes));
        dst->n = src->n;
        return;
    }
    work_init(&w);
    work_push(&w, pair(0, 0)); /* (dst node, src node) */
    while (w.n > 0) {
        uint64_t top = w.v[--w.n];
        uint32_t d = (uint32_t)(top >> 32), s = (uint32_t)top;
        uint32_t prev = 0;
        dst->nodes[d].self = fc_sat_add(dst->nodes[d].self, src->nodes[s].self);
        dst->nodes[d].total = fc_sat_add(dst->nodes[d].total, src->nodes[s].total);
        /* Source children are sorted by name: one pass over dst's children. */
        for (uint32_t c = src->nodes[s].first; c != 0; c = src->nodes[c].next) {
            work_push(&w, pair(child_from(dst, d, &prev, src->nodes[c].name), c));
        }
    }
    work_release(&w);
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void fc_tree_collapse(struct fc_tree *dst, const struct fc_tree *src, const uint32_t *key)
{
    struct work w, kids;

    if (src->n == 0) {
        return;
    }
    work_init(&w);
    work_init(&kids);
    work_push(&w, pair(0, 0)); /* (dst node, src node) */
    while (w.n > 0) {
        uint64_t top = w.v[--w.n];
        uint32_t d = (uint32_t)(top >> 32), s = (uint32_t)top;
        uint32_t prev = 0;
        bool sorted = true;
        dst->nodes[d].self = fc_sat_add(dst->nodes[d].self, src->nodes[s].self);
        dst->nodes[d].total = fc_sat_add(dst->nodes[d].total, src->nodes[s].total);
        /* The children by key, so that one pass over dst's children places them all. */
        kids.n = 0;
        for (uint32_t c = src->nodes[s].first; c != 0; c = src->nodes[c].next) {
            uint64_t k = pair(key[c], c);
            sorted = sorted && (kids.n == 0 || kids.v[kids.n - 1] < k);
            work_push(&kids, k);
        }
        if (!sorted) {
            qsort(kids.v, kids.n, sizeof(uint64_t), by_u64);
        }
        for (size_t i = 0; i < kids.n; i++) {
            uint32_t name = (uint32_t)(kids.v[i] >> 32);
            /* Equal keys are adjacent: the child found for the first serves the rest. */
            if (i == 0 || name != (uint32_t)(kids.v[i - 1] >> 32)) {
                child_from(dst, d, &prev, name);
            }
            work_push(&w, pair(prev, (uint32_t)kids.v[i]));
        }
    }
    work_release(&kids);
    work_release(&w);
}

/*
 * Pre-order, each node uvarint(name) uvarint(self) uvarint(children), its
 * children after it. Interleaved (fc_tree_encode_raw): one stream, node by
 * node. Columns (fc_tree_encode_columns): the same three numbers as three
 * streams, names first, then selfs, then child counts, each name the
 * difference (mod 2^32) from its previous sibling's (children are sorted by
 * name, so small) and the first child's from 0. Similar trees repeat long
 * runs of names and counts that values would break if interleaved: zstd
 * packs a window about a quarter smaller (docs/internals/store.md).
 * Since format 12 the selfs column starts with the greatest common divisor
 * of the tree's selfs and holds each self divided by it: CPU time comes in
 * multiples of the sampling period (10 ms: a 4-byte varint, 1 byte
 * divided), and a window took 8-29 % fewer bytes after zstd.
 */
static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Where each column is written (interleaved: all at names, the others unused). */
struct columns_out {
    uint8_t *names, *selfs, *counts;
};

/*
 * Walks t in pre-order and writes its numbers: interleaved at o->names, or
 * in columns with names as differences from the previous sibling's. A work
 * item is a node index and, in its high 32 bits, its previous sibling's name.
 */
static void walk_encode(const struct fc_tree *t, struct columns_out *o, bool columns,
                        uint64_t scale)
{
    struct work w;

    work_init(&w);
    work_push(&w, 0);
    while (w.n > 0) {
        uint64_t item = w.v[--w.n];
        uint32_t i = (uint32_t)item, prev_name = (uint32_t)(item >> 32);
        size_t first = w.n;
        uint32_t n = 0, last = 0;
        for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
            work_push(&w, (uint64_t)last << 32 | c);
            last = t->nodes[c].name;
            n++;
        }
        /* Children were pushed in order: reverse them so the first is written first. */
        for (size_t a = first, b = w.n; a + 1 < b; a++, b--) {
            uint64_t x = w.v[a];
            w.v[a] = w.v[b - 1];
            w.v[b - 1] = x;
        }
        {
            uint32_t name = t->nodes[i].name;
            if (columns) {
                o->names = put_varint(o->names, name - prev_name);
                o->selfs = put_varint(o->selfs, (uint64_t)t->nodes[i].self / scale);
                o->counts = put_varint(o->counts, n);
            } else {
                o->names = put_varint(
                    put_varint(put_varint(o->names, name), (uint64_t)t->nodes[i].self), n);
            }
        }
    }
    work_release(&w);
}

static void encode_tree(const struct fc_tree *t, struct fc_buf *out)
{
    struct columns_out o;

    /* At most 5 + 10 + 5 bytes a node: reserved once, written in place. */
    if (fc_buf_reserve(out, (size_t)t->n * 20 + 1) != FC_OK) {
        return; /* the buffer's limit: the caller sees no bytes added */
    }
    o.names = out->data + out->len;
    o.selfs = o.counts = NULL;
    walk_encode(t, &o, false, 1);
    out->len = (size_t)(o.names - out->data);
    out->data[out->len] = '\0';
}

void fc_tree_encode_columns(const struct fc_tree *t, struct fc_buf *names, struct fc_buf *selfs,
                            struct fc_buf *counts)
{
    struct columns_out o;
    uint64_t scale = 0;

    for (uint32_t i = 0; i < t->n; i++) {
        uint64_t a = (uint64_t)t->nodes[i].self, b = scale;
        while (a != 0) { /* scale = gcd(scale, self) */
            uint64_t r = b % a;
            b = a;
            a = r;
        }
        scale = b;
    }
    if (scale == 0) {
        scale = 1; /* every self 0 */
    }
    /* At most 5, 10 (and the scale) and 5 bytes a node: reserved once, written in place. */
    if (fc_buf_reserve(names, (size_t)t->n * 5 + 1) != FC_OK ||
        fc_buf_reserve(selfs, (size_t)t->n * 10 + 11) != FC_OK ||
        fc_buf_reserve(counts, (size_t)t->n * 5 + 1) != FC_OK) {
        return;
    }
    o.names = names->data + names->len;
    o.selfs = put_varint(selfs->data + selfs->len, scale);
    o.counts = counts->data + counts->len;
    walk_encode(t, &o, true, scale);
    names->len = (size_t)(o.names - names->data);
    selfs->len = (size_t)(o.selfs - selfs->data);
    counts->len = (size_t)(o.counts - counts->data);
}

void fc_tree_encode_raw(const struct fc_tree *t, struct fc_buf *out)
{
    encode_tree(t, out);
}

int fc_tree_encode(const struct fc_tree *t, struct fc_buf *out)
{
    struct fc_buf raw;
    size_t bound;
    size_t n;
    int rc;

    fc_buf_init(&raw, 0);
    encode_tree(t, &raw);
    bound = ZSTD_compressBound(raw.len);
    rc = fc_buf_reserve(out, bound);
    if (rc == FC_OK) {
        n = fc_tree_zstd(out->data + out->len, bound, raw.data, raw.len, 1);
        if (ZSTD_isError(n)) {
            rc = FC_EIO;
        } else {
            out->len += n;
        }
    }
    fc_buf_release(&raw);
    return rc;
}

/* A node being decoded: children still to read and the total so far. */
struct open_node {
    uint32_t at;
    uint32_t prev; /* the child last merged into: children come sorted, one pass per sibling list */
    uint32_t last_name; /* the name of the child last read (columns: names are differences) */
    bool named;         /* a child was read: the next one's name must be above last_name */
    uint64_t left;
    int64_t total;
};

struct open_nodes {
    struct open_node *v;
    size_t n, cap;
};

static void open_push(struct open_nodes *s, struct fc_tree *t, uint32_t at, int64_t self,
                      uint64_t children)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = fc_xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    t->nodes[at].self = fc_sat_add(t->nodes[at].self, self);
    s->v[s->n].at = at;
    s->v[s->n].prev = 0;
    s->v[s->n].last_name = 0;
    s->v[s->n].named = false;
    s->v[s->n].left = children;
    s->v[s->n].total = self;
    s->n++;
}

/* Where each column is read from: the three are the same reader when interleaved. */
struct columns_in {
    struct fc_pb *names, *selfs, *counts;
    bool delta;     /* names are differences from the previous sibling's */
    uint64_t scale; /* every self is multiplied by it (1 unless scaled) */
};

/* The next self: false when missing, or when scaled past INT64_MAX (damaged). */
static bool read_self(const struct columns_in *in, uint64_t *self)
{
    if (fc_pb_varint(in->selfs, self) != 0 || *self > (uint64_t)INT64_MAX / in->scale) {
        return false;
    }
    *self *= in->scale;
    return true;
}

/*
 * Merges a serialization into t (the root's name already read). Iterative:
 * the depth is bounded only by the input's length (three bytes a node).
 */
static int decode_into(struct fc_tree *t, const struct columns_in *in)
{
    struct open_nodes open = {0};
    uint64_t self, n, name;
    int rc = FC_OK;

    if (!read_self(in, &self) || fc_pb_varint(in->counts, &n) != 0) {
        return FC_EPROTO;
    }
    open_push(&open, t, 0, (int64_t)self, n);
    while (open.n > 0) {
        struct open_node *top = &open.v[open.n - 1];
        uint32_t c;
        if (top->left == 0) {
            uint32_t at = top->at;
            int64_t total = top->total;
            t->nodes[at].total = fc_sat_add(t->nodes[at].total, total);
            if (--open.n > 0) {
                open.v[open.n - 1].total = fc_sat_add(open.v[open.n - 1].total, total);
            }
            continue;
        }
        top->left--;
        if (fc_pb_varint(in->names, &name) != 0 || name > UINT32_MAX || !read_self(in, &self) ||
            fc_pb_varint(in->counts, &n) != 0) {
            rc = FC_EPROTO;
            break;
        }
        if (in->delta) {
            name = (uint32_t)(top->last_name + (uint32_t)name);
        }
        /*
         * Siblings are written in increasing name order (children are kept
         * sorted): any other order is corrupt, and would make each child's
         * place a scan from the first sibling, quadratic in a hostile list.
         */
        if (top->named && name <= top->last_name) {
            rc = FC_EPROTO;
            break;
        }
        top->named = true;
        top->last_name = (uint32_t)name;
        /* top may move with open_push below, not here */
        c = child_from(t, top->at, &top->prev, (uint32_t)name);
        open_push(&open, t, c, (int64_t)self, n);
    }
    free(open.v);
    return rc;
}

/* Decodes the interleaved serialization in r. */
static int decode_interleaved(struct fc_tree *t, struct fc_pb *r)
{
    struct columns_in in = {r, r, r, false, 1};
    uint64_t root_name;

    return fc_pb_varint(r, &root_name) == 0 ? decode_into(t, &in) : FC_EPROTO;
}

int fc_tree_decode_raw_merge(struct fc_tree *t, const uint8_t *data, size_t len)
{
    struct fc_pb r;

    fc_pb_init(&r, data, len);
    return decode_interleaved(t, &r);
}

int fc_tree_decode_columns_merge(struct fc_tree *t, const struct fc_tree_columns *c)
{
    struct fc_pb names, selfs, counts;
    struct columns_in in = {&names, &selfs, &counts, true, 1};
    uint64_t root_name;

    fc_pb_init(&names, c->names, c->n_names);
    fc_pb_init(&selfs, c->selfs, c->n_selfs);
    fc_pb_init(&counts, c->counts, c->n_counts);
    if (c->scaled && (fc_pb_varint(&selfs, &in.scale) != 0 || in.scale == 0)) {
        return FC_EPROTO;
    }
    return fc_pb_varint(&names, &root_name) == 0 ? decode_into(t, &in) : FC_EPROTO;
}

/*
 * One decompression context per thread, kept: ZSTD_decompress allocates one
 * of about 100 KB per call, which cost more than decompressing a window's
 * small frame (a timeline reads one per bundle, a query one per window).
 * The same for compression: a flush compresses every window it writes (at
 * 10,000 pods about one per profile), most of them a few KB, for which the
 * context ZSTD_compress makes, clears and frees at each call costs more
 * than the compression itself.
 */
static pthread_key_t dctx_key, cctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;

static void dctx_free(void *d)
{
    ZSTD_freeDCtx(d);
}

static void cctx_free(void *c)
{
    ZSTD_freeCCtx(c);
}

static void dctx_key_init(void)
{
    if (pthread_key_create(&dctx_key, dctx_free) != 0 ||
        pthread_key_create(&cctx_key, cctx_free) != 0) {
        abort();
    }
}

size_t fc_tree_zstd(void *dst, size_t cap, const void *src, size_t len, int level)
{
    ZSTD_CCtx *c;

    pthread_once(&dctx_once, dctx_key_init);
    if ((c = pthread_getspecific(cctx_key)) == NULL && (c = ZSTD_createCCtx()) != NULL) {
        pthread_setspecific(cctx_key, c);
    }
    if (c == NULL) {
        return ZSTD_compress(dst, cap, src, len, level);
    }
    return ZSTD_compressCCtx(c, dst, cap, src, len, level);
}

static ZSTD_DCtx *thread_dctx(void)
{
    ZSTD_DCtx *d;

    pthread_once(&dctx_once, dctx_key_init);
    if ((d = pthread_getspecific(dctx_key)) == NULL && (d = ZSTD_createDCtx()) != NULL) {
        pthread_setspecific(dctx_key, d);
    }
    return d;
}

uint8_t *fc_tree_unzstd(const uint8_t *frame, size_t len, size_t *size)
{
    return fc_tree_unzstd_prefix(frame, len, NULL, 0, size);
}

uint8_t *fc_tree_unzstd_prefix(const uint8_t *frame, size_t len, const uint8_t *prefix,
                               size_t prefix_len, size_t *size)
{
    ZSTD_DCtx *d = thread_dctx();
    unsigned long long claimed = ZSTD_getFrameContentSize(frame, len);
    uint8_t *raw;

    if (claimed == ZSTD_CONTENTSIZE_ERROR || claimed == ZSTD_CONTENTSIZE_UNKNOWN ||
        claimed > fc_tree_max_raw(len)) {
        return NULL;
    }
    raw = fc_xmalloc(claimed ? claimed : 1);
    /* A prefix is referenced for the next frame only: the thread's context stays plain. */
    if (d == NULL || (prefix != NULL && ZSTD_isError(ZSTD_DCtx_refPrefix(d, prefix, prefix_len))) ||
        ZSTD_isError(ZSTD_decompressDCtx(d, raw, claimed, frame, len))) {
        if (d != NULL && prefix != NULL) {
            ZSTD_DCtx_reset(d, ZSTD_reset_session_and_parameters);
        }
        free(raw);
        return NULL;
    }
    *size = (size_t)claimed;
    return raw;
}

int fc_tree_decode_merge(struct fc_tree *t, const uint8_t *data, size_t len, struct fc_error *err)
{
    size_t size;
    uint8_t *raw = fc_tree_unzstd(data, len, &size);
    struct fc_pb r;
    int rc;

    if (raw == NULL) {
        return fc_errorf(err, FC_EPROTO, "store: corrupt tree (bad zstd frame)");
    }
    fc_pb_init(&r, raw, size);
    rc = decode_interleaved(t, &r);
    free(raw);
    return rc == FC_OK ? FC_OK : fc_errorf(err, FC_EPROTO, "store: corrupt tree");
}
