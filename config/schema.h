/*
 * A component's configuration schema: one table of fields declared once.
 * The same table validates the YAML (unknown keys, wrong types -> errors
 * with line:col), fills the component's config struct through `offset`,
 * supplies defaults, and prints the config reference (`flamecol components
 * --markdown`, which the README's reference section must match).
 *
 * Storage per type, at `offset` in the config struct:
 *   STR -> const char *          INT, DURATION (ns), SIZE (bytes) -> int64_t
 *   BOOL -> bool                 FLOAT -> double      ENUM -> int (index in choices)
 *   STR_LIST -> struct fc_str_list   STR_MAP -> struct fc_str_map
 *   OBJECT -> the nested struct (sub fields); with FC_FIELD_PRESENCE its first
 *             member is `bool enabled`, true when the key is present
 *   OBJECT_LIST -> struct fc_obj_list of elem_size-byte structs (sub fields)
 *   NODE -> const struct fc_node *: the value as written (NULL when absent), for
 *           a component to read itself (relabel rules); default_value is only shown
 * Strings live in the config arena, which outlives every component.
 */
#ifndef FC_CONFIG_SCHEMA_H
#define FC_CONFIG_SCHEMA_H

#include "config/diag.h"
#include "config/node.h"
#include "core/arena.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fc_field_type {
    FC_FIELD_STR,
    FC_FIELD_INT,
    FC_FIELD_BOOL,
    FC_FIELD_FLOAT,
    FC_FIELD_DURATION,
    FC_FIELD_SIZE,
    FC_FIELD_ENUM,
    FC_FIELD_STR_LIST,
    FC_FIELD_STR_MAP,
    FC_FIELD_OBJECT,
    FC_FIELD_OBJECT_LIST,
    FC_FIELD_NODE,
};

enum fc_field_flags {
    FC_FIELD_REQUIRED = 1 << 0, /* the key must be given */
    FC_FIELD_PRESENCE = 1 << 1, /* OBJECT: `bool enabled` first, set when the key is present */
};

struct fc_field {
    const char *name;
    enum fc_field_type type;
    const char *default_value; /* parsed like user input; NULL = zero / empty */
    size_t offset;
    const char *help;
    const struct fc_field *sub; /* OBJECT, OBJECT_LIST: terminated by {NULL} */
    size_t elem_size;           /* OBJECT_LIST */
    const char *choices;        /* ENUM: "basic|detailed" */
    unsigned flags;
};

struct fc_str_list {
    const char **items;
    size_t n;
};

struct fc_str_map {
    const char **keys;
    const char **values;
    size_t n;
};

struct fc_obj_list {
    void *items; /* n structs of the field's elem_size */
    size_t n;
};

/*
 * Applies defaults, then the values in `node` (a map, or NULL/null for "all
 * defaults"), to the struct at `out`. `path` prefixes messages
 * ("exporters.debug"). Every problem goes to diag; returns 0 when none.
 */
int fc_schema_bind(struct fc_arena *a, const struct fc_field *fields, const struct fc_node *node,
                   void *out, const char *path, struct fc_diag *diag);

/* Appends "| key | type | default | description |" rows, nested keys dotted. */
struct fc_buf;
void fc_schema_markdown(const struct fc_field *fields, struct fc_buf *out);

#endif
