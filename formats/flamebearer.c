#include "formats/flamebearer.h"

#include "core/mem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

struct item {
    uint32_t node; /* tree node, or UINT32_MAX for a synthetic "other" */
    int64_t x;     /* absolute left offset, ticks */
    int64_t total;
    int64_t self;
    uint32_t name; /* index in the names array */
};

struct level {
    struct item *v;
    size_t n, cap;
};

struct ctx {
    const struct fc_tree *t;
    char *const *names;
    int64_t min_total;
    /* Output name table: tree node -> index, first visit order. */
    uint32_t *name_index;
    const char **out_names;
    size_t n_names;
    uint32_t other_index;
    struct level *levels;
    size_t n_levels;
};

static int by_total_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void push(struct ctx *c, size_t depth, struct item it)
{
    struct level *l;

    if (depth >= c->n_levels) {
        c->levels = fc_xrealloc(c->levels, (depth + 1) * sizeof(*c->levels));
        memset(c->levels + c->n_levels, 0, (depth + 1 - c->n_levels) * sizeof(*c->levels));
        c->n_levels = depth + 1;
    }
    l = &c->levels[depth];
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = fc_xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = it;
}

/* Names are shared by string: one index per distinct name, in first-visit order. */
static uint32_t name_of(struct ctx *c, uint32_t node)
{
    const char *s = c->names[node];

    if (c->name_index[node] != 0) {
        return c->name_index[node] - 1;
    }
    for (size_t i = 0; i < c->n_names; i++) {
        if (strcmp(c->out_names[i], s) == 0) {
            c->name_index[node] = (uint32_t)i + 1;
            return (uint32_t)i;
        }
    }
    c->out_names[c->n_names] = s;
    c->name_index[node] = (uint32_t)++c->n_names;
    return c->name_index[node] - 1;
}

struct kid {
    uint32_t node;
    const char *name;
};

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct kid *)a)->name, ((const struct kid *)b)->name);
}

static void walk(struct ctx *c, uint32_t node, size_t depth, int64_t x)
{
    const struct fc_tree_node *n = &c->t->nodes[node];
    struct kid *kids;
    size_t nk = 0;
    int64_t other = 0;
    int64_t cx = x + n->self;
    struct item it = {node, x, n->total, n->self, name_of(c, node)};

    push(c, depth, it);
    for (uint32_t k = n->first; k != 0; k = c->t->nodes[k].next) {
        nk++;
    }
    kids = fc_xcalloc(nk + 1, sizeof(*kids));
    nk = 0;
    for (uint32_t k = n->first; k != 0; k = c->t->nodes[k].next) {
        if (c->t->nodes[k].total < c->min_total || strcmp(c->names[k], "other") == 0) {
            other += c->t->nodes[k].total;
        } else {
            kids[nk].node = k;
            kids[nk].name = c->names[k];
            nk++;
        }
    }
    qsort(kids, nk, sizeof(*kids), by_name);
    for (size_t i = 0; i < nk; i++) {
        walk(c, kids[i].node, depth + 1, cx);
        cx += c->t->nodes[kids[i].node].total;
    }
    if (other > 0) {
        struct item o = {UINT32_MAX, cx, other, other, c->other_index};
        if (c->other_index == UINT32_MAX) {
            c->out_names[c->n_names] = "other";
            c->other_index = (uint32_t)c->n_names++;
            o.name = c->other_index;
        }
        push(c, depth + 1, o);
    }
    free(kids);
}

void fc_flamegraph_build(const struct fc_tree *t, char *const *names, uint32_t max_nodes,
                         struct fc_flamegraph *out)
{
    struct ctx c = {0};

    memset(out, 0, sizeof(*out));
    c.t = t;
    c.names = names;
    c.name_index = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    c.out_names = fc_xcalloc(t->n + 2, sizeof(char *));
    c.other_index = UINT32_MAX;
    /* minVal: the max_nodes-th largest total; 0 keeps everything. */
    if (max_nodes > 0 && t->n > max_nodes) {
        int64_t *totals = fc_xmalloc(t->n * sizeof(int64_t));
        for (uint32_t i = 0; i < t->n; i++) {
            totals[i] = t->nodes[i].total;
        }
        qsort(totals, t->n, sizeof(int64_t), by_total_desc);
        c.min_total = totals[max_nodes - 1];
        free(totals);
    }
    walk(&c, 0, 0, 0);
    out->names = c.out_names;
    out->n_names = c.n_names;
    out->n_levels = c.n_levels;
    out->levels = fc_xcalloc(c.n_levels + 1, sizeof(int64_t *));
    out->level_len = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    out->total = fc_tree_total(t);
    for (size_t d = 0; d < c.n_levels; d++) {
        int64_t prev_end = 0;
        out->levels[d] = fc_xmalloc((c.levels[d].n * 4 + 1) * sizeof(int64_t));
        for (size_t i = 0; i < c.levels[d].n; i++) {
            const struct item *it = &c.levels[d].v[i];
            int64_t *v = &out->levels[d][i * 4];
            v[0] = it->x - prev_end; /* delta against the previous node's end */
            v[1] = it->total;
            v[2] = it->self;
            v[3] = it->name;
            prev_end = it->x + it->total;
            if (it->self > out->max_self) {
                out->max_self = it->self;
            }
        }
        out->level_len[d] = c.levels[d].n * 4;
        free(c.levels[d].v);
    }
    free(c.levels);
    free(c.name_index);
}

void fc_flamegraph_release(struct fc_flamegraph *fg)
{
    for (size_t d = 0; d < fg->n_levels; d++) {
        free(fg->levels[d]);
    }
    free(fg->levels);
    free(fg->level_len);
    free((void *)fg->names);
    memset(fg, 0, sizeof(*fg));
}

int fc_flamebearer_write(const struct fc_tree *t, char *const *names, uint32_t max_nodes,
                         const struct fc_flamebearer_meta *meta, struct fc_buf *out)
{
    struct fc_flamegraph fg;

    fc_flamegraph_build(t, names, max_nodes, &fg);
    fc_buf_puts(out, "{\"version\":1,\"flamebearer\":{\"names\":[");
    for (size_t i = 0; i < fg.n_names; i++) {
        fc_buf_puts(out, i ? ",\"" : "\"");
        fc_buf_json_escape(out, fg.names[i], strlen(fg.names[i]));
        fc_buf_puts(out, "\"");
    }
    fc_buf_puts(out, "],\"levels\":[");
    for (size_t d = 0; d < fg.n_levels; d++) {
        fc_buf_puts(out, d ? ",[" : "[");
        for (size_t i = 0; i < fg.level_len[d]; i++) {
            fc_buf_printf(out, "%s%" PRId64, i ? "," : "", fg.levels[d][i]);
        }
        fc_buf_puts(out, "]");
    }
    fc_buf_printf(out, "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64 "},", fg.total,
                  fg.max_self);
    fc_buf_puts(out, "\"metadata\":{\"format\":\"single\",\"spyName\":\"\",\"sampleRate\":");
    fc_buf_printf(out, "%" PRId64 ",\"units\":\"", meta->sample_rate);
    fc_buf_json_escape(out, meta->units, strlen(meta->units));
    fc_buf_puts(out, "\",\"name\":\"");
    fc_buf_json_escape(out, meta->name, strlen(meta->name));
    fc_buf_puts(out, "\"},\"timeline\":");
    if (meta->timeline == NULL) {
        fc_buf_puts(out, "null");
    } else {
        fc_buf_printf(out, "{\"startTime\":%" PRId64 ",\"samples\":[", meta->timeline_start_s);
        for (size_t i = 0; i < meta->timeline_n; i++) {
            fc_buf_printf(out, "%s%" PRId64, i ? "," : "", meta->timeline[i]);
        }
        fc_buf_printf(out, "],\"durationDelta\":%" PRId64 ",\"watermarks\":null}",
                      meta->timeline_step_s);
    }
    fc_buf_puts(out, ",\"groups\":null,\"heatmap\":null}");
    fc_flamegraph_release(&fg);
    return out->limit != 0 && out->len >= out->limit ? FC_ETOOBIG : FC_OK;
}
