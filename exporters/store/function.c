#include "exporters/store/function.h"

#include "core/idmap.h"
#include "core/mem.h"
#include "core/sat.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* A row of the answer: a source line (file, line) or a caller/callee (name). */
struct row {
    const char *p;
    size_t n;
    int64_t line;
    int64_t self, total;
    uint32_t on_path; /* times its key is on the current path (once per stack) */
};

struct rows {
    struct row *v;
    uint32_t n, cap;
    struct fc_idmap index; /* hash of (text, line), probing on -> row */
};

static uint32_t row_of(struct rows *t, const char *p, size_t n, int64_t line)
{
    uint64_t h = XXH3_64bits_withSeed(p, n, (uint64_t)line);
    uint32_t i;

    for (;; h++) {
        if (!fc_idmap_get(&t->index, h, &i)) {
            break;
        }
        if (t->v[i].n == n && t->v[i].line == line && memcmp(t->v[i].p, p, n) == 0) {
            return i;
        }
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 16;
        t->v = fc_xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    t->v[t->n] = (struct row){p, n, line, 0, 0, 0};
    fc_idmap_put(&t->index, h, t->n);
    return t->n++;
}

struct walk {
    const struct fc_store_result *r;
    const char *name;
    char **display;   /* per frame, by function; made on first use */
    int8_t *matches;  /* per frame: -1 unknown, 0, 1 */
    uint32_t on_path; /* the function on the current path */
    int64_t self, total;
    struct rows lines, callers, callees;
};

static const char *display_of(struct walk *w, uint32_t node)
{
    uint32_t f = w->r->node_frame[node];

    if (w->display[f] == NULL) {
        struct fc_buf b;
        fc_buf_init(&b, 0);
        fc_frame_display(&w->r->frames[f], FC_FRAME_FUNCTIONS, &b);
        w->display[f] = b.len > 0 ? (char *)fc_buf_detach(&b, NULL) : fc_xstrdup("");
        fc_buf_release(&b);
    }
    return w->display[f];
}

static bool matches(struct walk *w, uint32_t node)
{
    uint32_t f;

    if (node == 0) {
        return false;
    }
    f = w->r->node_frame[node];
    if (w->matches[f] < 0) {
        w->matches[f] = strcmp(display_of(w, node), w->name) == 0;
    }
    return w->matches[f] == 1;
}

static uint32_t line_row(struct walk *w, uint32_t node)
{
    const struct fc_frame *f = &w->r->frames[w->r->node_frame[node]];
    return row_of(&w->lines, f->file.n ? f->file.p : "", f->file.n, f->line);
}

static uint32_t name_row(struct walk *w, struct rows *t, uint32_t node)
{
    const char *s = display_of(w, node);
    return row_of(t, s, strlen(s), 0);
}

/* Entering (+1) or leaving (-1) node below parent: the on-path counters; sums on entering. */
static void visit(struct walk *w, uint32_t node, uint32_t parent, int dir)
{
    const struct fc_tree_node *n = &w->r->frames_tree.nodes[node];
    struct row *row;
    uint32_t i;

    if (matches(w, node)) {
        if (dir > 0) {
            w->self = fc_sat_add(w->self, n->self);
            w->total = w->on_path == 0 ? fc_sat_add(w->total, n->total) : w->total;
        }
        w->on_path += (uint32_t)dir;
        i = line_row(w, node); /* may move lines.v */
        row = &w->lines.v[i];
        if (dir > 0) {
            row->self = fc_sat_add(row->self, n->self);
            row->total = row->on_path == 0 ? fc_sat_add(row->total, n->total) : row->total;
        }
        row->on_path += (uint32_t)dir;
        if (parent != 0) {
            i = name_row(w, &w->callers, parent);
            row = &w->callers.v[i];
            row->total =
                dir > 0 && row->on_path == 0 ? fc_sat_add(row->total, n->total) : row->total;
            row->on_path += (uint32_t)dir;
        }
    }
    if (matches(w, parent)) {
        i = name_row(w, &w->callees, node);
        row = &w->callees.v[i];
        row->total = dir > 0 && row->on_path == 0 ? fc_sat_add(row->total, n->total) : row->total;
        row->on_path += (uint32_t)dir;
    }
}

#define EXIT (1ULL << 63)

/* Depth first over the full-detail tree; an entry is (parent << 32 | node), EXIT to leave. */
static void walk_tree(struct walk *w)
{
    const struct fc_tree *t = &w->r->frames_tree;
    uint64_t *stack = NULL;
    size_t n = 0, cap = 0;

    for (uint32_t c = t->n ? t->nodes[0].first : 0;; c = t->nodes[c].next) {
        if (c == 0) {
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            stack = fc_xrealloc(stack, cap * sizeof(*stack));
        }
        stack[n++] = c;
    }
    while (n > 0) {
        uint64_t e = stack[--n];
        uint32_t node = (uint32_t)e, parent = (uint32_t)((e & ~EXIT) >> 32);
        if (e & EXIT) {
            visit(w, node, parent, -1);
            continue;
        }
        visit(w, node, parent, +1);
        if (n + 1 >= cap) {
            cap = cap ? cap * 2 : 256;
            stack = fc_xrealloc(stack, cap * sizeof(*stack));
        }
        stack[n++] = e | EXIT;
        for (uint32_t c = t->nodes[node].first; c != 0; c = t->nodes[c].next) {
            if (n == cap) {
                cap *= 2;
                stack = fc_xrealloc(stack, cap * sizeof(*stack));
            }
            stack[n++] = (uint64_t)node << 32 | c;
        }
    }
    free(stack);
}

static int by_file_line(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    size_t n = x->n < y->n ? x->n : y->n;
    int c = memcmp(x->p, y->p, n);

    if (c != 0 || x->n != y->n) {
        return c != 0 ? c : x->n < y->n ? -1 : 1;
    }
    return x->line < y->line ? -1 : x->line > y->line;
}

static int by_total_then_name(const void *a, const void *b)
{
    const struct row *x = a, *y = b;

    if (x->total != y->total) {
        return x->total > y->total ? -1 : 1;
    }
    return strcmp(x->p, y->p);
}

static void rows_json(struct fc_buf *out, const char *key, struct rows *t, bool lines)
{
    bool first = true;

    if (t->n > 1) {
        qsort(t->v, t->n, sizeof(*t->v), lines ? by_file_line : by_total_then_name);
    }
    fc_buf_printf(out, ",\"%s\":[", key);
    for (uint32_t i = 0; i < t->n; i++) {
        if (t->v[i].total == 0 && t->v[i].self == 0) {
            continue;
        }
        fc_buf_puts(out, first ? "{" : ",{");
        first = false;
        fc_buf_puts(out, lines ? "\"file\":\"" : "\"name\":\"");
        fc_buf_json_escape(out, t->v[i].p, t->v[i].n);
        if (lines) {
            fc_buf_printf(out,
                          "\",\"line\":%" PRId64 ",\"self\":%" PRId64 ",\"total\":%" PRId64 "}",
                          t->v[i].line, t->v[i].self, t->v[i].total);
        } else {
            fc_buf_printf(out, "\",\"total\":%" PRId64 "}", t->v[i].total);
        }
    }
    fc_buf_puts(out, "]");
}

bool store_function_json(const struct fc_store_result *r, const char *name, const char *type_id,
                         const char *unit, struct fc_buf *out)
{
    struct walk w = {0};
    bool found = false;

    w.r = r;
    w.name = name;
    w.display = fc_xcalloc(r->n_frames + 1, sizeof(char *));
    w.matches = fc_xmalloc(r->n_frames + 1);
    memset(w.matches, -1, r->n_frames + 1);
    fc_idmap_init(&w.lines.index, 64);
    fc_idmap_init(&w.callers.index, 64);
    fc_idmap_init(&w.callees.index, 64);
    walk_tree(&w);
    for (uint32_t f = 1; f < r->n_frames; f++) {
        found = found || w.matches[f] == 1;
    }
    if (found) {
        int64_t all = fc_tree_total(&r->frames_tree);
        fc_buf_puts(out, "{\"function\":\"");
        fc_buf_json_escape(out, name, strlen(name));
        fc_buf_puts(out, "\",\"profile_type\":\"");
        fc_buf_json_escape(out, type_id, strlen(type_id));
        fc_buf_puts(out, "\",\"unit\":\"");
        fc_buf_json_escape(out, unit, strlen(unit));
        fc_buf_printf(out,
                      "\",\"selection_total\":%" PRId64 ",\"self\":%" PRId64 ",\"total\":%" PRId64,
                      all, w.self, w.total);
        rows_json(out, "lines", &w.lines, true);
        rows_json(out, "callers", &w.callers, false);
        rows_json(out, "callees", &w.callees, false);
        fc_buf_puts(out, "}");
    }
    for (uint32_t f = 0; f <= r->n_frames; f++) {
        free(w.display[f]);
    }
    free(w.display);
    free(w.matches);
    free(w.lines.v);
    free(w.callers.v);
    free(w.callees.v);
    fc_idmap_release(&w.lines.index);
    fc_idmap_release(&w.callers.index);
    fc_idmap_release(&w.callees.index);
    return found;
}
