/*
 * The read side of symbols: a merged tree of symbol ids becomes frames
 * (each distinct symbol read once from symid and decoded, storage/frame.h)
 * and a flame graph by display name (fc_tree_collapse).
 */
#include "storage/store_int.h"

#include "core/idmap.h"
#include "core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* Where each distinct symbol's bytes, then each display name, lie in a pool. */
struct span {
    uint32_t off, len;
};

static const char corrupt_name[] = "<corrupt frame>";

/* The symid key of id: tenant 0 be32(id). */
static size_t symid_key(uint8_t *k, size_t size, const char *tenant, uint32_t id)
{
    size_t n = strlen(tenant);

    if (n + 5 > size) {
        return 0;
    }
    memcpy(k, tenant, n);
    k[n] = 0;
    for (int i = 0; i < 4; i++) {
        k[n + 1 + i] = (uint8_t)(id >> (24 - 8 * i));
    }
    return n + 5;
}

/* The frame index of every node: each distinct symbol read once, its bytes into *pool. */
static uint32_t read_symbols(struct fc_store *s, MDB_txn *txn, const char *tenant,
                             struct fc_store_result *out, struct fc_buf *pool, struct span **spans)
{
    const struct fc_tree *t = &out->frames_tree;
    struct fc_idmap index;
    uint32_t n = 1, cap = 64;
    uint8_t k[512];

    fc_idmap_init(&index, 256);
    *spans = fc_xcalloc(cap, sizeof(**spans));
    out->node_frame = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    for (uint32_t i = 1; i < t->n; i++) {
        uint32_t sym = t->nodes[i].name, at;
        MDB_val kv, v;
        size_t kn;
        if (fc_idmap_get(&index, sym, &at)) {
            out->node_frame[i] = at;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            *spans = fc_xrealloc(*spans, cap * sizeof(**spans));
        }
        (*spans)[n].off = (uint32_t)pool->len;
        kn = symid_key(k, sizeof(k), tenant, sym);
        kv = val(k, kn);
        if (kn > 0 && mdb_get(txn, s->db[DB_SYMID], &kv, &v) == 0) {
            fc_buf_append(pool, v.mv_data, v.mv_size);
        } else {
            fc_buf_printf(pool, "<unknown symbol %u>", sym);
        }
        (*spans)[n].len = (uint32_t)(pool->len - (*spans)[n].off);
        fc_idmap_put(&index, sym, n);
        out->node_frame[i] = n++;
    }
    fc_idmap_release(&index);
    return n;
}

/* The id of a display name (pool[spans[id]]), added when new; 0 is "total". */
struct names {
    struct fc_buf pool;
    struct span *v;
    uint32_t n, cap;
    struct fc_idmap index; /* xxh3 of the text (probing on) -> id */
};

static uint32_t name_id(struct names *ns, const char *p, size_t len)
{
    uint64_t h = XXH3_64bits(p, len);
    uint32_t id;

    for (;; h++) {
        if (!fc_idmap_get(&ns->index, h, &id)) {
            break;
        }
        if (ns->v[id].len == len && memcmp(ns->pool.data + ns->v[id].off, p, len) == 0) {
            return id;
        }
    }
    if (ns->n == ns->cap) {
        ns->cap = ns->cap ? ns->cap * 2 : 64;
        ns->v = fc_xrealloc(ns->v, ns->cap * sizeof(*ns->v));
    }
    ns->v[ns->n].off = (uint32_t)ns->pool.len;
    ns->v[ns->n].len = (uint32_t)len;
    fc_buf_append(&ns->pool, p, len);
    fc_buf_append(&ns->pool, "", 1); /* NUL-terminated in the pool */
    fc_idmap_put(&ns->index, h, ns->n);
    return ns->n++;
}

int fc_store_resolve(struct fc_store *s, MDB_txn *txn, const char *tenant,
                     enum fc_frame_granularity g, struct fc_store_result *out, struct fc_error *err)
{
    const struct fc_tree *t = &out->frames_tree;
    struct fc_buf pool, text;
    struct span *spans;
    struct names ns = {0};
    uint32_t *frame_name, *node_key;
    uint32_t n;

    (void)err;
    fc_buf_init(&pool, 0);
    n = read_symbols(s, txn, tenant, out, &pool, &spans);
    out->n_frames = n;
    out->frame_bytes = fc_buf_detach(&pool, NULL);
    out->frames = fc_xcalloc(n, sizeof(*out->frames));
    /* Each frame's display name, as an id shared by every frame with that text. */
    fc_buf_init(&ns.pool, 0);
    fc_buf_init(&text, 0);
    fc_idmap_init(&ns.index, (size_t)n + 1);
    name_id(&ns, "total", 5);
    frame_name = fc_xcalloc(n, sizeof(uint32_t));
    for (uint32_t f = 1; f < n; f++) {
        struct fc_frame *fr = &out->frames[f];
        if (fc_frame_decode(out->frame_bytes + spans[f].off, spans[f].len, fr) != FC_OK) {
            memset(fr, 0, sizeof(*fr));
            fr->name.p = corrupt_name;
            fr->name.n = sizeof(corrupt_name) - 1;
        }
        fc_buf_reset(&text);
        fc_frame_display(fr, g, &text);
        frame_name[f] = name_id(&ns, text.len ? (const char *)text.data : "", text.len);
    }
    /* The flame graph: nodes renamed to their display name, equal siblings merged. */
    node_key = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    for (uint32_t i = 1; i < t->n; i++) {
        node_key[i] = frame_name[out->node_frame[i]];
    }
    fc_tree_init(&out->tree);
    fc_tree_collapse(&out->tree, t, node_key);
    out->name_bytes = (char *)fc_buf_detach(&ns.pool, NULL);
    out->names = fc_xcalloc(out->tree.n + 1, sizeof(char *));
    for (uint32_t i = 0; i < out->tree.n; i++) {
        out->names[i] = out->name_bytes + ns.v[i ? out->tree.nodes[i].name : 0].off;
    }
    free(node_key);
    free(frame_name);
    free(spans);
    free(ns.v);
    fc_idmap_release(&ns.index);
    fc_buf_release(&text);
    return FC_OK;
}
