#include "config/load.h"

#include "core/buf.h"
#include "core/mem.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

/* Guards against alias bombs ("billion laughs") and runaway nesting. */
#define MAX_NODES 200000
#define MAX_DEPTH 64

struct fc_node *fc_node_new(struct fc_arena *a, enum fc_node_kind kind, const struct fc_node *pos)
{
    struct fc_node *n = fc_arena_calloc(a, 1, sizeof(*n));

    if (n == NULL) {
        return NULL;
    }
    n->kind = kind;
    if (pos != NULL) {
        n->file = pos->file;
        n->line = pos->line;
        n->col = pos->col;
    }
    return n;
}

struct fc_node *fc_node_get(const struct fc_node *map, const char *key)
{
    if (map == NULL || map->kind != FC_NODE_MAP) {
        return NULL;
    }
    for (size_t i = 0; i < map->n_pairs; i++) {
        if (strcmp(map->pairs[i].key->str, key) == 0) {
            return map->pairs[i].value;
        }
    }
    return NULL;
}

const char *fc_node_kind_name(enum fc_node_kind kind)
{
    switch (kind) {
    case FC_NODE_NULL:
        return "null";
    case FC_NODE_SCALAR:
        return "scalar";
    case FC_NODE_MAP:
        return "map";
    case FC_NODE_SEQ:
        return "list";
    }
    return "?";
}

/* ---- ${env:...} expansion ----------------------------------------------------------------- */

static int valid_env_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) {
            return 0;
        }
    }
    return 1;
}

/* Expands one scalar; reports problems at the node and returns NULL on error. */
static const char *expand(struct fc_arena *a, const struct fc_node *pos, const char *in,
                          struct fc_diag *diag)
{
    struct fc_buf out;
    const char *p = in;
    const char *result = NULL;

    if (strchr(in, '$') == NULL) {
        return fc_arena_strdup(a, in); /* libyaml's copy goes away with its document */
    }
    fc_buf_init(&out, 0);
    while (*p != '\0') {
        if (p[0] == '$' && p[1] == '$') {
            fc_buf_append(&out, "$", 1); /* "$$" is a literal "$", so "$${x}" stays "${x}" */
            p += 2;
            continue;
        }
        if (p[0] == '$' && p[1] == '{') {
            const char *start = p + 2;
            const char *close = strchr(start, '}');
            const char *name;
            size_t name_len;
            const char *def = NULL;
            size_t def_len = 0;
            const char *colon;
            const char *value;
            if (close == NULL) {
                fc_diag_error(diag, pos, "unterminated '${' in \"%s\"", in);
                goto out;
            }
            name = start;
            name_len = (size_t)(close - start);
            colon = memchr(start, ':', name_len);
            if (colon != NULL) {
                size_t scheme_len = (size_t)(colon - start);
                if (scheme_len != 3 || strncmp(start, "env", 3) != 0) {
                    fc_diag_error(diag, pos,
                                  "unsupported config provider '%.*s' in \"%s\" (only ${env:NAME} "
                                  "is supported)",
                                  (int)scheme_len, start, in);
                    goto out;
                }
                name = colon + 1;
                name_len = (size_t)(close - name);
                const char *dflt = NULL;
                for (const char *q = name; q + 1 < close; q++) {
                    if (q[0] == ':' && q[1] == '-') {
                        dflt = q;
                        break;
                    }
                }
                if (dflt != NULL) {
                    def = dflt + 2;
                    def_len = (size_t)(close - def);
                    name_len = (size_t)(dflt - name);
                }
            }
            if (!valid_env_name(name, name_len)) {
                fc_diag_error(diag, pos, "invalid environment variable name '%.*s' in \"%s\"",
                              (int)name_len, name, in);
                goto out;
            }
            char *var = fc_xstrndup(name, name_len);
            value = getenv(var);
            if (value != NULL && (value[0] != '\0' || def == NULL)) {
                fc_buf_puts(&out, value);
            } else if (def != NULL) {
                fc_buf_append(&out, def, def_len);
            } else {
                fc_diag_warn(diag, pos, "environment variable %s is not set; using \"\"", var);
            }
            free(var);
            p = close + 1;
            continue;
        }
        fc_buf_append(&out, p, 1);
        p++;
    }
    result = fc_arena_strndup(a, out.data ? (const char *)out.data : "", out.len);
out:
    fc_buf_release(&out);
    return result;
}

/* ---- libyaml document -> node tree -------------------------------------------------------- */

struct convert {
    struct fc_arena *arena;
    yaml_document_t *doc;
    const char *file;
    struct fc_diag *diag;
    size_t count;
};

static int is_null_scalar(const yaml_node_t *n)
{
    const char *s = (const char *)n->data.scalar.value;

    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) {
        return 0;
    }
    return s[0] == '\0' || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 ||
           strcmp(s, "Null") == 0 || strcmp(s, "NULL") == 0;
}

static struct fc_node *convert(struct convert *c, yaml_node_t *yn, int depth)
{
    struct fc_node *n;

    if (yn == NULL) {
        return NULL;
    }
    if (++c->count > MAX_NODES || depth > MAX_DEPTH) {
        fc_diag_at(c->diag, FC_DIAG_ERROR, c->file, (uint32_t)yn->start_mark.line + 1,
                   (uint32_t)yn->start_mark.column + 1,
                   "document too large or too deeply nested (aliases expand to over %d nodes)",
                   MAX_NODES);
        return NULL;
    }
    n = fc_arena_calloc(c->arena, 1, sizeof(*n));
    if (n == NULL) {
        return NULL;
    }
    n->file = c->file;
    n->line = (uint32_t)yn->start_mark.line + 1;
    n->col = (uint32_t)yn->start_mark.column + 1;
    switch (yn->type) {
    case YAML_SCALAR_NODE:
        if (is_null_scalar(yn)) {
            n->kind = FC_NODE_NULL;
            n->str = "";
            break;
        }
        n->kind = FC_NODE_SCALAR;
        n->quoted = yn->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
                    yn->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
        n->str = expand(c->arena, n, (const char *)yn->data.scalar.value, c->diag);
        if (n->str == NULL) {
            n->str = "";
        }
        break;
    case YAML_SEQUENCE_NODE: {
        size_t count = (size_t)(yn->data.sequence.items.top - yn->data.sequence.items.start);
        n->kind = FC_NODE_SEQ;
        n->items = fc_arena_calloc(c->arena, count ? count : 1, sizeof(*n->items));
        if (n->items == NULL) {
            return NULL;
        }
        for (size_t i = 0; i < count; i++) {
            yaml_node_t *child = yaml_document_get_node(c->doc, yn->data.sequence.items.start[i]);
            n->items[i] = convert(c, child, depth + 1);
            if (n->items[i] == NULL) {
                return NULL;
            }
        }
        n->n_items = count;
        break;
    }
    case YAML_MAPPING_NODE: {
        size_t count = (size_t)(yn->data.mapping.pairs.top - yn->data.mapping.pairs.start);
        n->kind = FC_NODE_MAP;
        n->pairs = fc_arena_calloc(c->arena, count ? count : 1, sizeof(*n->pairs));
        if (n->pairs == NULL) {
            return NULL;
        }
        for (size_t i = 0; i < count; i++) {
            yaml_node_pair_t *yp = &yn->data.mapping.pairs.start[i];
            struct fc_node *k = convert(c, yaml_document_get_node(c->doc, yp->key), depth + 1);
            struct fc_node *v;
            if (k == NULL) {
                return NULL;
            }
            if (k->kind != FC_NODE_SCALAR) {
                fc_diag_error(c->diag, k, "a map key must be a plain string, not a %s",
                              fc_node_kind_name(k->kind));
                k->kind = FC_NODE_SCALAR;
                k->str = "";
            }
            for (size_t j = 0; j < n->n_pairs; j++) {
                if (strcmp(n->pairs[j].key->str, k->str) == 0) {
                    fc_diag_error(c->diag, k, "duplicate key '%s' (first at line %u)", k->str,
                                  n->pairs[j].key->line);
                }
            }
            v = convert(c, yaml_document_get_node(c->doc, yp->value), depth + 1);
            if (v == NULL) {
                return NULL;
            }
            n->pairs[n->n_pairs].key = k;
            n->pairs[n->n_pairs].value = v;
            n->n_pairs++;
        }
        break;
    }
    default:
        n->kind = FC_NODE_NULL;
        n->str = "";
        break;
    }
    return n;
}

struct fc_node *fc_config_load_string(struct fc_arena *a, const char *name, const char *text,
                                      size_t len, struct fc_diag *diag)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    struct fc_node *root = NULL;
    const char *file = fc_arena_strdup(a, name);
    size_t errors_before = diag->n_errors;

    if (!yaml_parser_initialize(&parser)) {
        fc_diag_at(diag, FC_DIAG_ERROR, file, 0, 0, "cannot initialise the YAML parser");
        return NULL;
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        fc_diag_at(diag, FC_DIAG_ERROR, file, (uint32_t)parser.problem_mark.line + 1,
                   (uint32_t)parser.problem_mark.column + 1, "yaml: %s%s%s",
                   parser.problem ? parser.problem : "syntax error", parser.context ? " " : "",
                   parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return NULL;
    }
    {
        struct convert c = {a, &doc, file, diag, 0};
        yaml_node_t *top = yaml_document_get_root_node(&doc);
        if (top == NULL) {
            /* An empty file is an empty map. */
            root = fc_arena_calloc(a, 1, sizeof(*root));
            if (root != NULL) {
                root->kind = FC_NODE_MAP;
                root->file = file;
                root->line = 1;
                root->col = 1;
            }
        } else {
            root = convert(&c, top, 0);
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (root != NULL && root->kind == FC_NODE_NULL) {
        root->kind = FC_NODE_MAP;
    }
    if (root != NULL && root->kind != FC_NODE_MAP) {
        fc_diag_error(diag, root, "the top level must be a map (receivers:, exporters:, service:)");
        return NULL;
    }
    if (root == NULL && diag->n_errors == errors_before) {
        fc_diag_at(diag, FC_DIAG_ERROR, file, 0, 0, "out of memory while loading");
    }
    return root;
}

static char *read_file(const char *path, size_t *len, struct fc_diag *diag)
{
    FILE *f = fopen(path, "rb");
    struct fc_buf b;
    char chunk[8192];
    size_t n;

    if (f == NULL) {
        fc_diag_at(diag, FC_DIAG_ERROR, path, 0, 0, "cannot open: %s", strerror(errno));
        return NULL;
    }
    fc_buf_init(&b, 64u * 1024 * 1024);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (fc_buf_append(&b, chunk, n) != 0) {
            fc_diag_at(diag, FC_DIAG_ERROR, path, 0, 0, "file larger than 64 MiB");
            fclose(f);
            fc_buf_release(&b);
            return NULL;
        }
    }
    fclose(f);
    if (fc_buf_reserve(&b, 0) != 0) {
        fc_buf_release(&b);
        return NULL;
    }
    return (char *)fc_buf_detach(&b, len);
}

struct fc_node *fc_config_load_files(struct fc_arena *a, const char *const *paths, size_t n,
                                     struct fc_diag *diag)
{
    struct fc_node *root = NULL;

    for (size_t i = 0; i < n; i++) {
        size_t len = 0;
        char *text = read_file(paths[i], &len, diag);
        struct fc_node *one;
        if (text == NULL) {
            continue;
        }
        one = fc_config_load_string(a, paths[i], text, len, diag);
        free(text);
        if (one != NULL) {
            root = root ? fc_config_merge(a, root, one) : one;
        }
    }
    return fc_diag_has_errors(diag) ? NULL : root;
}

struct fc_node *fc_config_merge(struct fc_arena *a, struct fc_node *dst, struct fc_node *src)
{
    struct fc_node *m;

    if (dst == NULL || dst->kind != FC_NODE_MAP || src->kind != FC_NODE_MAP) {
        return src;
    }
    /* A new node, so neither input changes: maps merge, everything else replaces. */
    m = fc_arena_calloc(a, 1, sizeof(*m));
    if (m == NULL) {
        return src;
    }
    *m = *dst;
    m->pairs = fc_arena_calloc(a, dst->n_pairs + src->n_pairs + 1, sizeof(*m->pairs));
    if (m->pairs == NULL) {
        return src;
    }
    memcpy(m->pairs, dst->pairs, dst->n_pairs * sizeof(*m->pairs));
    m->n_pairs = dst->n_pairs;
    for (size_t i = 0; i < src->n_pairs; i++) {
        size_t j;
        for (j = 0; j < m->n_pairs; j++) {
            if (strcmp(m->pairs[j].key->str, src->pairs[i].key->str) == 0) {
                break;
            }
        }
        if (j < m->n_pairs) {
            m->pairs[j].value = fc_config_merge(a, m->pairs[j].value, src->pairs[i].value);
        } else {
            m->pairs[m->n_pairs++] = src->pairs[i];
        }
    }
    return m;
}

/* ---- dump --------------------------------------------------------------------------------- */

static int needs_quotes(const char *s)
{
    if (*s == '\0' || isspace((unsigned char)s[0]) || isspace((unsigned char)s[strlen(s) - 1])) {
        return 1;
    }
    if (strchr("!&*-?{}[],#|>@`\"'%:", s[0]) != NULL) {
        return 1;
    }
    for (const char *p = s; *p != '\0'; p++) {
        if ((*p == ':' && (p[1] == ' ' || p[1] == '\0')) || (*p == ' ' && p[1] == '#') ||
            (unsigned char)*p < 0x20) {
            return 1;
        }
    }
    return strcmp(s, "null") == 0 || strcmp(s, "~") == 0 || strcmp(s, "true") == 0 ||
           strcmp(s, "false") == 0;
}

static void dump_scalar(const struct fc_node *n, struct fc_buf *out)
{
    if (n->kind == FC_NODE_NULL) {
        return;
    }
    if (n->quoted || needs_quotes(n->str)) {
        fc_buf_puts(out, "\"");
        fc_buf_json_escape(out, n->str, strlen(n->str));
        fc_buf_puts(out, "\"");
    } else {
        fc_buf_puts(out, n->str);
    }
}

/*
 * Keys whose values are secrets once ${env:...} is expanded: printed as
 * "[REDACTED]", as the Collector prints its opaque strings. Any case: a
 * header name (Authorization, authorization) is case-insensitive.
 */
static bool secret_key(const struct fc_node *key)
{
    static const char *const names[] = {"token", "bearer_token", "password", "authorization"};

    for (size_t i = 0; key->kind == FC_NODE_SCALAR && i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(key->str, names[i]) == 0) {
            return true;
        }
    }
    return false;
}

static void dump(const struct fc_node *n, struct fc_buf *out, int indent)
{
    if (n->kind == FC_NODE_MAP) {
        if (n->n_pairs == 0) {
            fc_buf_puts(out, " {}\n");
            return;
        }
        fc_buf_puts(out, "\n");
        for (size_t i = 0; i < n->n_pairs; i++) {
            const struct fc_node *v = n->pairs[i].value;
            fc_buf_printf(out, "%*s", indent, "");
            dump_scalar(n->pairs[i].key, out);
            fc_buf_puts(out, ":");
            if (v->kind == FC_NODE_SCALAR && v->str[0] != '\0' && secret_key(n->pairs[i].key)) {
                fc_buf_puts(out, " \"[REDACTED]\"\n");
            } else if (v->kind == FC_NODE_SCALAR) {
                fc_buf_puts(out, " ");
                dump_scalar(v, out);
                fc_buf_puts(out, "\n");
            } else if (v->kind == FC_NODE_NULL) {
                fc_buf_puts(out, "\n");
            } else {
                dump(v, out, indent + 2);
            }
        }
    } else if (n->kind == FC_NODE_SEQ) {
        if (n->n_items == 0) {
            fc_buf_puts(out, " []\n");
            return;
        }
        fc_buf_puts(out, "\n");
        for (size_t i = 0; i < n->n_items; i++) {
            const struct fc_node *v = n->items[i];
            fc_buf_printf(out, "%*s-", indent, "");
            if (v->kind == FC_NODE_MAP && v->n_pairs > 0) {
                /* "- key: value" with the rest of the map aligned under it. */
                struct fc_buf inner;
                fc_buf_init(&inner, 0);
                dump(v, &inner, indent + 2);
                fc_buf_puts(out, " ");
                fc_buf_append(out, inner.data + 1 + indent + 2, inner.len - 1 - (size_t)indent - 2);
                fc_buf_release(&inner);
            } else if (v->kind == FC_NODE_SCALAR) {
                fc_buf_puts(out, " ");
                dump_scalar(v, out);
                fc_buf_puts(out, "\n");
            } else if (v->kind == FC_NODE_NULL) {
                fc_buf_puts(out, "\n");
            } else {
                dump(v, out, indent + 2);
            }
        }
    } else {
        fc_buf_puts(out, " ");
        dump_scalar(n, out);
        fc_buf_puts(out, "\n");
    }
}

void fc_config_dump(const struct fc_node *n, struct fc_buf *out)
{
    struct fc_buf tmp;

    fc_buf_init(&tmp, 0);
    dump(n, &tmp, 0);
    /* The top level is a map: drop the leading newline dump() writes after a key. */
    if (tmp.len > 0 && tmp.data[0] == '\n') {
        fc_buf_append(out, tmp.data + 1, tmp.len - 1);
    } else {
        fc_buf_append(out, tmp.data, tmp.len);
    }
    fc_buf_release(&tmp);
}
