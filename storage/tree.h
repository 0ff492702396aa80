/*
 * Stack trees: a trie of function-name ids (root first) with self and total
 * values, as Pyroscope keeps them. Children are sorted by name id so merges
 * walk two sorted lists. Serialized depth first with varints
 * (name, self, child count) and compressed with zstd; totals are derived on
 * load. Nodes live in one growable array owned by the tree.
 */
#ifndef FC_STORAGE_TREE_H
#define FC_STORAGE_TREE_H

#include "core/buf.h"
#include "core/err.h"
#include "core/sat.h"

#include <stddef.h>
#include <stdint.h>

struct fc_tree_node {
    uint32_t name;  /* symbol id; 0 for the root */
    uint32_t first; /* index of the first child, 0 = none */
    uint32_t next;  /* next sibling (sorted by name), 0 = none */
    int64_t self;
    int64_t total;
};

struct fc_tree {
    struct fc_tree_node *nodes; /* [0] is the root */
    uint32_t n;
    uint32_t cap;
};

void fc_tree_init(struct fc_tree *t);
void fc_tree_release(struct fc_tree *t);
/* Adds value along path (root-most first); the last frame gets the self value. */
void fc_tree_insert(struct fc_tree *t, const uint32_t *path, uint32_t depth, int64_t value);
/* dst += src, node by node (iterative: any depth). */
void fc_tree_merge(struct fc_tree *dst, const struct fc_tree *src);
static inline int64_t fc_tree_total(const struct fc_tree *t)
{
    return t->n ? t->nodes[0].total : 0;
}

/*
 * dst += src with every src node n renamed to key[n] (key[0], the root's,
 * is ignored): siblings that get the same key become one node, their
 * subtrees merged. dst's children stay sorted by key. Iterative.
 */
void fc_tree_collapse(struct fc_tree *dst, const struct fc_tree *src, const uint32_t *key);

/* The serialization without compression (for packing several trees in one frame). */
void fc_tree_encode_raw(const struct fc_tree *t, struct fc_buf *out);
int fc_tree_decode_raw_merge(struct fc_tree *t, const uint8_t *data, size_t len);
/*
 * The same numbers as three columns, appended to three buffers: names (each
 * the difference from the previous sibling's), selfs, child counts. What
 * packed windows hold since format 7, every tree's names together, then
 * every tree's selfs and counts: it compresses better (tree.c).
 */
struct fc_tree_columns {
    const uint8_t *names, *selfs, *counts;
    size_t n_names, n_selfs, n_counts;
    bool scaled; /* selfs start with a uvarint scale (>= 1) every self is a multiple of */
};
/* Scaled columns: the selfs column starts with their greatest common divisor. */
void fc_tree_encode_columns(const struct fc_tree *t, struct fc_buf *names, struct fc_buf *selfs,
                            struct fc_buf *counts);
int fc_tree_decode_columns_merge(struct fc_tree *t, const struct fc_tree_columns *c);

/*
 * The most bytes a stored tree (or packed window) of `compressed` bytes may
 * decompress to: FC_TREE_MAX_RATIO times, at least FC_TREE_RAW_FLOOR, at
 * most 1 GiB. Trees compress about 3-5x; a few bytes of hostile zstd can
 * claim a gigabyte of one-child nodes (32 bytes of memory each for 3 bytes
 * of input), so a frame claiming more is corrupt.
 */
#define FC_TREE_MAX_RATIO 1024
#define FC_TREE_RAW_FLOOR (1u << 20)
size_t fc_tree_max_raw(size_t compressed);
/*
 * The content of a stored zstd frame of len bytes, malloc'd (*size bytes);
 * NULL when the frame is corrupt or claims more than fc_tree_max_raw(len).
 */
uint8_t *fc_tree_unzstd(const uint8_t *frame, size_t len, size_t *size);
/* The same, for a frame compressed with prefix (a raw-content dictionary) referenced. */
uint8_t *fc_tree_unzstd_prefix(const uint8_t *frame, size_t len, const uint8_t *prefix,
                               size_t prefix_len, size_t *size);

/*
 * ZSTD_compress(dst, cap, src, len, level) with a context the thread keeps
 * (the same frame; ZSTD_compress makes and frees one per call). Returns
 * what ZSTD_compress returns.
 */
size_t fc_tree_zstd(void *dst, size_t cap, const void *src, size_t len, int level);

/* Appends the zstd-compressed serialization. */
int fc_tree_encode(const struct fc_tree *t, struct fc_buf *out);
/* Decodes (and merges into t, which may hold data already). */
int fc_tree_decode_merge(struct fc_tree *t, const uint8_t *data, size_t len, struct fc_error *err);

#endif
