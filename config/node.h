/*
 * The config tree: what libyaml read, as nodes that keep their file, line
 * and column so that every error can point at its source. Nodes and their
 * strings live in the config arena and are freed with it.
 */
#ifndef FC_CONFIG_NODE_H
#define FC_CONFIG_NODE_H

#include "core/arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fc_node_kind { FC_NODE_NULL, FC_NODE_SCALAR, FC_NODE_MAP, FC_NODE_SEQ };

struct fc_node;

struct fc_node_pair {
    struct fc_node *key; /* always a scalar */
    struct fc_node *value;
};

struct fc_node {
    enum fc_node_kind kind;
    const char *file; /* in the arena */
    uint32_t line;    /* 1-based */
    uint32_t col;     /* 1-based */
    /* scalar: the text after ${env:...} expansion */
    const char *str;
    bool quoted; /* '...' or "..." in the source: never null, never a bool */
    /* map */
    struct fc_node_pair *pairs;
    size_t n_pairs;
    /* sequence */
    struct fc_node **items;
    size_t n_items;
};

/* The value for key in a map node, or NULL. */
struct fc_node *fc_node_get(const struct fc_node *map, const char *key);
const char *fc_node_kind_name(enum fc_node_kind kind);
struct fc_node *fc_node_new(struct fc_arena *a, enum fc_node_kind kind, const struct fc_node *pos);

#endif
