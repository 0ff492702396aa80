#include "config/schema.h"

#include "config/units.h"
#include "core/buf.h"
#include "core/mem.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct bind {
    struct fc_arena *arena;
    struct fc_diag *diag;
};

static const char *type_name(const struct fc_field *f)
{
    switch (f->type) {
    case FC_FIELD_STR:
        return "string";
    case FC_FIELD_INT:
        return "int";
    case FC_FIELD_BOOL:
        return "bool";
    case FC_FIELD_FLOAT:
        return "float";
    case FC_FIELD_DURATION:
        return "duration";
    case FC_FIELD_SIZE:
        return "size";
    case FC_FIELD_ENUM:
        return "enum";
    case FC_FIELD_STR_LIST:
        return "list of strings";
    case FC_FIELD_STR_MAP:
        return "map of strings";
    case FC_FIELD_OBJECT:
        return "map";
    case FC_FIELD_OBJECT_LIST:
        return "list of maps";
    case FC_FIELD_NODE:
        return "yaml";
    }
    return "?";
}

static int enum_index(const char *choices, const char *value)
{
    const char *p = choices;
    size_t n = strlen(value);

    for (int i = 0;; i++) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, value, n) == 0) {
            return i;
        }
        if (bar == NULL) {
            return -1;
        }
        p = bar + 1;
    }
}

static int parse_bool(const char *s, bool *v)
{
    if (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0) {
        *v = true;
        return 0;
    }
    if (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0) {
        *v = false;
        return 0;
    }
    return -1;
}

/* Parses one scalar into the field's slot; pos may be NULL for defaults. */
static int set_scalar(struct bind *b, const struct fc_field *f, const char *s,
                      const struct fc_node *pos, void *slot, const char *path)
{
    const char *why = NULL;

    switch (f->type) {
    case FC_FIELD_STR:
        *(const char **)slot = fc_arena_strdup(b->arena, s);
        return 0;
    case FC_FIELD_INT:
        if (fc_parse_int64(s, (int64_t *)slot) != 0) {
            fc_diag_error(b->diag, pos, "%s: expected an integer, got \"%s\"", path, s);
            return -1;
        }
        return 0;
    case FC_FIELD_BOOL:
        if (parse_bool(s, (bool *)slot) != 0) {
            fc_diag_error(b->diag, pos, "%s: expected true or false, got \"%s\"", path, s);
            return -1;
        }
        return 0;
    case FC_FIELD_FLOAT: {
        char *end;
        double d = strtod(s, &end);
        if (*s == '\0' || *end != '\0') {
            fc_diag_error(b->diag, pos, "%s: expected a number, got \"%s\"", path, s);
            return -1;
        }
        *(double *)slot = d;
        return 0;
    }
    case FC_FIELD_DURATION:
        if (fc_parse_duration(s, (int64_t *)slot, &why) != 0) {
            fc_diag_error(b->diag, pos, "%s: invalid duration \"%s\": %s", path, s, why);
            return -1;
        }
        return 0;
    case FC_FIELD_SIZE:
        if (fc_parse_size(s, (int64_t *)slot, &why) != 0) {
            fc_diag_error(b->diag, pos, "%s: invalid size \"%s\": %s", path, s, why);
            return -1;
        }
        return 0;
    case FC_FIELD_ENUM: {
        int i = enum_index(f->choices, s);
        if (i < 0) {
            fc_diag_error(b->diag, pos, "%s: \"%s\" is not one of %s", path, s, f->choices);
            return -1;
        }
        *(int *)slot = i;
        return 0;
    }
    default:
        break;
    }
    return -1;
}

static int bind_fields(struct bind *b, const struct fc_field *fields, const struct fc_node *node,
                       void *out, const char *path);

static void apply_defaults(struct bind *b, const struct fc_field *fields, void *out,
                           const char *path)
{
    for (const struct fc_field *f = fields; f->name != NULL; f++) {
        void *slot = (char *)out + f->offset;
        if (f->type == FC_FIELD_OBJECT) {
            apply_defaults(b, f->sub, slot, path);
            if (f->flags & FC_FIELD_PRESENCE) {
                *(bool *)slot = false;
            }
        } else if (f->default_value != NULL && f->type <= FC_FIELD_ENUM) {
            if (set_scalar(b, f, f->default_value, NULL, slot, f->name) != 0) {
                fc_diag_error(b->diag, NULL, "bug: bad default for %s.%s", path, f->name);
            }
        } else if (f->type == FC_FIELD_STR_LIST && f->default_value != NULL) {
            /* Defaults of lists are comma-separated. */
            struct fc_str_list *l = slot;
            char *copy = fc_arena_strdup(b->arena, f->default_value);
            size_t n = 1;
            for (const char *p = copy; *p; p++) {
                n += *p == ',';
            }
            l->items = fc_arena_calloc(b->arena, n, sizeof(char *));
            l->n = 0;
            for (char *tok = copy, *next; tok != NULL; tok = next) {
                next = strchr(tok, ',');
                if (next != NULL) {
                    *next++ = '\0';
                }
                if (*tok != '\0') {
                    l->items[l->n++] = tok;
                }
            }
        }
    }
}

static int bind_value(struct bind *b, const struct fc_field *f, const struct fc_node *v, void *slot,
                      const char *path)
{
    switch (f->type) {
    case FC_FIELD_STR_LIST: {
        struct fc_str_list *l = slot;
        int rc = 0;
        if (v->kind == FC_NODE_NULL) {
            l->n = 0;
            return 0;
        }
        if (v->kind != FC_NODE_SEQ) {
            fc_diag_error(b->diag, v, "%s: expected a list of strings, got a %s", path,
                          fc_node_kind_name(v->kind));
            return -1;
        }
        l->items = fc_arena_calloc(b->arena, v->n_items + 1, sizeof(char *));
        l->n = v->n_items;
        for (size_t i = 0; i < v->n_items; i++) {
            if (v->items[i]->kind != FC_NODE_SCALAR) {
                fc_diag_error(b->diag, v->items[i], "%s[%zu]: expected a string, got a %s", path, i,
                              fc_node_kind_name(v->items[i]->kind));
                rc = -1;
                continue;
            }
            l->items[i] = v->items[i]->str;
        }
        return rc;
    }
    case FC_FIELD_STR_MAP: {
        struct fc_str_map *m = slot;
        int rc = 0;
        if (v->kind == FC_NODE_NULL) {
            m->n = 0;
            return 0;
        }
        if (v->kind != FC_NODE_MAP) {
            fc_diag_error(b->diag, v, "%s: expected a map of strings, got a %s", path,
                          fc_node_kind_name(v->kind));
            return -1;
        }
        m->keys = fc_arena_calloc(b->arena, v->n_pairs + 1, sizeof(char *));
        m->values = fc_arena_calloc(b->arena, v->n_pairs + 1, sizeof(char *));
        m->n = v->n_pairs;
        for (size_t i = 0; i < v->n_pairs; i++) {
            const struct fc_node *val = v->pairs[i].value;
            m->keys[i] = v->pairs[i].key->str;
            if (val->kind == FC_NODE_NULL) {
                m->values[i] = "";
            } else if (val->kind != FC_NODE_SCALAR) {
                fc_diag_error(b->diag, val, "%s.%s: expected a string, got a %s", path, m->keys[i],
                              fc_node_kind_name(val->kind));
                rc = -1;
            } else {
                m->values[i] = val->str;
            }
        }
        return rc;
    }
    case FC_FIELD_OBJECT:
        if (f->flags & FC_FIELD_PRESENCE) {
            *(bool *)slot = true;
        }
        return bind_fields(b, f->sub, v, slot, path);
    case FC_FIELD_OBJECT_LIST: {
        struct fc_obj_list *l = slot;
        int rc = 0;
        if (v->kind == FC_NODE_NULL) {
            l->n = 0;
            return 0;
        }
        if (v->kind != FC_NODE_SEQ) {
            fc_diag_error(b->diag, v, "%s: expected a list, got a %s", path,
                          fc_node_kind_name(v->kind));
            return -1;
        }
        l->items = fc_arena_calloc(b->arena, v->n_items + 1, f->elem_size);
        l->n = v->n_items;
        for (size_t i = 0; i < v->n_items; i++) {
            char sub[256];
            void *elem = (char *)l->items + i * f->elem_size;
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            apply_defaults(b, f->sub, elem, sub);
            if (bind_fields(b, f->sub, v->items[i], elem, sub) != 0) {
                rc = -1;
            }
        }
        return rc;
    }
    case FC_FIELD_NODE:
        *(const struct fc_node **)slot = v;
        return 0;
    default:
        if (v->kind == FC_NODE_NULL && f->type == FC_FIELD_STR) {
            *(const char **)slot = "";
            return 0;
        }
        if (v->kind != FC_NODE_SCALAR) {
            fc_diag_error(b->diag, v, "%s: expected a %s, got a %s", path, type_name(f),
                          fc_node_kind_name(v->kind));
            return -1;
        }
        return set_scalar(b, f, v->str, v, slot, path);
    }
}

static void known_keys(const struct fc_field *fields, char *out, size_t size)
{
    size_t n = 0;

    out[0] = '\0';
    for (const struct fc_field *f = fields; f->name != NULL && n + 1 < size; f++) {
        int w = snprintf(out + n, size - n, "%s%s", n ? ", " : "", f->name);
        if (w < 0) {
            break;
        }
        n += (size_t)w;
    }
    if (n >= size) {
        out[size - 1] = '\0';
    }
}

static int bind_fields(struct bind *b, const struct fc_field *fields, const struct fc_node *node,
                       void *out, const char *path)
{
    int rc = 0;

    if (node == NULL || node->kind == FC_NODE_NULL) {
        node = NULL;
    } else if (node->kind != FC_NODE_MAP) {
        fc_diag_error(b->diag, node, "%s: expected a map, got a %s", path,
                      fc_node_kind_name(node->kind));
        return -1;
    }
    if (node != NULL) {
        for (size_t i = 0; i < node->n_pairs; i++) {
            const struct fc_node *k = node->pairs[i].key;
            const struct fc_field *f;
            char sub[256];
            for (f = fields; f->name != NULL; f++) {
                if (strcmp(f->name, k->str) == 0) {
                    break;
                }
            }
            if (f->name == NULL) {
                char known[512];
                known_keys(fields, known, sizeof(known));
                fc_diag_error(b->diag, k, "%s: unknown key '%s' (valid keys: %s)", path, k->str,
                              known[0] ? known : "none");
                rc = -1;
                continue;
            }
            snprintf(sub, sizeof(sub), "%s.%s", path, f->name);
            if (bind_value(b, f, node->pairs[i].value, (char *)out + f->offset, sub) != 0) {
                rc = -1;
            }
        }
    }
    for (const struct fc_field *f = fields; f->name != NULL; f++) {
        if ((f->flags & FC_FIELD_REQUIRED) && fc_node_get(node, f->name) == NULL) {
            fc_diag_error(b->diag, node, "%s: missing required key '%s'", path, f->name);
            rc = -1;
        }
    }
    return rc;
}

int fc_schema_bind(struct fc_arena *a, const struct fc_field *fields, const struct fc_node *node,
                   void *out, const char *path, struct fc_diag *diag)
{
    struct bind b = {a, diag};
    size_t before = diag->n_errors;

    apply_defaults(&b, fields, out, path);
    bind_fields(&b, fields, node, out, path);
    return diag->n_errors == before ? 0 : -1;
}

static void markdown(const struct fc_field *fields, const char *prefix, struct fc_buf *out)
{
    for (const struct fc_field *f = fields; f->name != NULL; f++) {
        char key[256];
        snprintf(key, sizeof(key), "%s%s", prefix, f->name);
        if (f->type == FC_FIELD_OBJECT) {
            fc_buf_printf(out, "| `%s` | map | %s | %s |\n", key,
                          (f->flags & FC_FIELD_PRESENCE) ? "absent = off" : "", f->help);
            char sub[260];
            snprintf(sub, sizeof(sub), "%s.", key);
            markdown(f->sub, sub, out);
            continue;
        }
        if (f->type == FC_FIELD_OBJECT_LIST) {
            fc_buf_printf(out, "| `%s` | list of maps | `[]` | %s |\n", key, f->help);
            char sub[260];
            snprintf(sub, sizeof(sub), "%s[].", key);
            markdown(f->sub, sub, out);
            continue;
        }
        fc_buf_printf(out, "| `%s` | %s", key, type_name(f));
        if (f->type == FC_FIELD_ENUM) {
            /* A '|' would end the table cell. */
            fc_buf_puts(out, " (");
            for (const char *c = f->choices; *c; c++) {
                fc_buf_puts(out, *c == '|' ? ", " : (char[]){*c, '\0'});
            }
            fc_buf_puts(out, ")");
        }
        if (f->flags & FC_FIELD_REQUIRED) {
            fc_buf_puts(out, " | required");
        } else if (f->default_value != NULL && f->default_value[0] == '\0') {
            fc_buf_puts(out, " | `\"\"`");
        } else if (f->default_value != NULL) {
            fc_buf_printf(out, " | `%s`", f->default_value);
        } else {
            fc_buf_puts(out, " | ");
        }
        fc_buf_printf(out, " | %s |\n", f->help);
    }
}

void fc_schema_markdown(const struct fc_field *fields, struct fc_buf *out)
{
    if (fields[0].name == NULL) {
        fc_buf_puts(out, "No settings.\n");
        return;
    }
    fc_buf_puts(out, "| key | type | default | description |\n|---|---|---|---|\n");
    markdown(fields, "", out);
}
