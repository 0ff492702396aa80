#include "formats/flamebearer.h"

#include "core/mem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdbool.h>
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

/* A timeline object: {startTime, samples, durationDelta, watermarks}. */
static void write_timeline(const struct fc_flamebearer_meta *meta, const int64_t *samples,
                           struct fc_buf *out)
{
    if (samples == NULL) {
        fc_buf_puts(out, "null");
        return;
    }
    fc_buf_printf(out, "{\"startTime\":%" PRId64 ",\"samples\":[", meta->timeline_start_s);
    for (size_t i = 0; i < meta->timeline_n; i++) {
        fc_buf_printf(out, "%s%" PRId64, i ? "," : "", samples[i]);
    }
    fc_buf_printf(out, "],\"durationDelta\":%" PRId64 ",\"watermarks\":", meta->timeline_step_s);
    if (meta->watermark_100s != 0) {
        fc_buf_printf(out, "{\"1\":%" PRId64 "}}", meta->watermark_100s);
    } else {
        fc_buf_puts(out, "null}");
    }
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
    write_timeline(meta, meta->timeline, out);
    fc_buf_puts(out, ",\"groups\":");
    if (meta->n_groups == 0) {
        fc_buf_puts(out, "null");
    }
    for (size_t g = 0; g < meta->n_groups; g++) {
        fc_buf_puts(out, g ? ",\"" : "{\"");
        fc_buf_json_escape(out, meta->group_names[g], strlen(meta->group_names[g]));
        fc_buf_puts(out, "\":");
        write_timeline(meta, meta->group_timelines[g], out);
        fc_buf_puts(out, g + 1 == meta->n_groups ? "}" : "");
    }
    fc_buf_puts(out, ",\"heatmap\":null}");
    fc_flamegraph_release(&fg);
    return out->limit != 0 && out->len >= out->limit ? FC_ETOOBIG : FC_OK;
}

/* ---- diff --------------------------------------------------------------------------------- */

struct dnode {
    uint32_t name; /* symbol id */
    const char *label;
    int64_t lt, ls, rt, rs;
    uint32_t first, next;
};

struct dtree {
    struct dnode *v;
    uint32_t n, cap;
};

static uint32_t dchild(struct dtree *t, uint32_t parent, uint32_t name, const char *label)
{
    uint32_t prev = 0, c = t->v[parent].first, n;

    while (c != 0 && t->v[c].name < name) {
        prev = c;
        c = t->v[c].next;
    }
    if (c != 0 && t->v[c].name == name) {
        return c;
    }
    if (t->n == t->cap) {
        t->cap *= 2;
        t->v = fc_xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    n = t->n++;
    memset(&t->v[n], 0, sizeof(t->v[n]));
    t->v[n].name = name;
    t->v[n].label = label;
    t->v[n].next = c;
    if (prev == 0) {
        t->v[parent].first = n;
    } else {
        t->v[prev].next = n;
    }
    return n;
}

static void dadd(struct dtree *t, uint32_t at, const struct fc_tree *src, char *const *names,
                 uint32_t s, bool right)
{
    if (right) {
        t->v[at].rt += src->nodes[s].total;
        t->v[at].rs += src->nodes[s].self;
    } else {
        t->v[at].lt += src->nodes[s].total;
        t->v[at].ls += src->nodes[s].self;
    }
    for (uint32_t c = src->nodes[s].first; c != 0; c = src->nodes[c].next) {
        dadd(t, dchild(t, at, src->nodes[c].name, names[c]), src, names, c, right);
    }
}

struct ditem {
    int64_t lx, rx;
    uint32_t node; /* UINT32_MAX: the synthetic "other" */
    int64_t lt, ls, rt, rs;
};

struct dctx {
    struct dtree *t;
    int64_t min_total;
    struct ditem **levels;
    size_t *n, *cap;
    size_t n_levels;
    const char **names;
    size_t n_names;
    uint32_t *name_index;
    uint32_t other;
};

static void dpush(struct dctx *c, size_t depth, struct ditem it)
{
    if (depth >= c->n_levels) {
        size_t nl = depth + 1;
        c->levels = fc_xrealloc(c->levels, nl * sizeof(*c->levels));
        c->n = fc_xrealloc(c->n, nl * sizeof(size_t));
        c->cap = fc_xrealloc(c->cap, nl * sizeof(size_t));
        for (size_t d = c->n_levels; d < nl; d++) {
            c->levels[d] = NULL;
            c->n[d] = c->cap[d] = 0;
        }
        c->n_levels = nl;
    }
    if (c->n[depth] == c->cap[depth]) {
        c->cap[depth] = c->cap[depth] ? c->cap[depth] * 2 : 64;
        c->levels[depth] = fc_xrealloc(c->levels[depth], c->cap[depth] * sizeof(struct ditem));
    }
    c->levels[depth][c->n[depth]++] = it;
}

static uint32_t dname(struct dctx *c, uint32_t node)
{
    const char *s = node == UINT32_MAX ? "other" : node == 0 ? "total" : c->t->v[node].label;

    for (size_t i = 0; i < c->n_names; i++) {
        if (strcmp(c->names[i], s) == 0) {
            return (uint32_t)i;
        }
    }
    c->names[c->n_names] = s;
    return (uint32_t)c->n_names++;
}

struct dkid {
    uint32_t node;
    const char *label;
};

static int by_label(const void *a, const void *b)
{
    return strcmp(((const struct dkid *)a)->label, ((const struct dkid *)b)->label);
}

static void dwalk(struct dctx *c, uint32_t node, size_t depth, int64_t lx, int64_t rx)
{
    const struct dnode *n = &c->t->v[node];
    struct ditem it = {lx, rx, node, n->lt, n->ls, n->rt, n->rs};
    struct dkid *kids;
    size_t nk = 0;
    int64_t olt = 0, ort = 0;
    int64_t clx = lx + n->ls, crx = rx + n->rs;

    dpush(c, depth, it);
    for (uint32_t k = n->first; k != 0; k = c->t->v[k].next) {
        nk++;
    }
    kids = fc_xcalloc(nk + 1, sizeof(*kids));
    nk = 0;
    for (uint32_t k = n->first; k != 0; k = c->t->v[k].next) {
        if (c->t->v[k].lt + c->t->v[k].rt < c->min_total) {
            olt += c->t->v[k].lt;
            ort += c->t->v[k].rt;
        } else {
            kids[nk].node = k;
            kids[nk].label = c->t->v[k].label;
            nk++;
        }
    }
    qsort(kids, nk, sizeof(*kids), by_label);
    for (size_t i = 0; i < nk; i++) {
        dwalk(c, kids[i].node, depth + 1, clx, crx);
        clx += c->t->v[kids[i].node].lt;
        crx += c->t->v[kids[i].node].rt;
    }
    if (olt + ort > 0) {
        struct ditem o = {clx, crx, UINT32_MAX, olt, olt, ort, ort};
        dpush(c, depth + 1, o);
    }
    free(kids);
}

static int by_i64_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

void fc_flamegraph_diff_build(const struct fc_tree *left, char *const *left_names,
                              const struct fc_tree *right, char *const *right_names,
                              uint32_t max_nodes, struct fc_flamegraph_diff *out)
{
    struct dtree t = {0};
    struct dctx c = {0};

    memset(out, 0, sizeof(*out));
    t.cap = 64;
    t.v = fc_xcalloc(t.cap, sizeof(*t.v));
    t.n = 1;
    if (left->n > 0) {
        dadd(&t, 0, left, left_names, 0, false);
    }
    if (right->n > 0) {
        dadd(&t, 0, right, right_names, 0, true);
    }
    c.t = &t;
    c.names = fc_xcalloc(t.n + 2, sizeof(char *));
    if (max_nodes > 0 && t.n > max_nodes) {
        int64_t *totals = fc_xmalloc(t.n * sizeof(int64_t));
        for (uint32_t i = 0; i < t.n; i++) {
            totals[i] = t.v[i].lt + t.v[i].rt;
        }
        qsort(totals, t.n, sizeof(int64_t), by_i64_desc);
        c.min_total = totals[max_nodes - 1];
        free(totals);
    }
    dwalk(&c, 0, 0, 0, 0);
    out->fg.n_levels = c.n_levels;
    out->fg.levels = fc_xcalloc(c.n_levels + 1, sizeof(int64_t *));
    out->fg.level_len = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    for (size_t d = 0; d < c.n_levels; d++) {
        int64_t lend = 0, rend = 0;
        out->fg.levels[d] = fc_xmalloc((c.n[d] * 7 + 1) * sizeof(int64_t));
        for (size_t i = 0; i < c.n[d]; i++) {
            const struct ditem *it = &c.levels[d][i];
            int64_t *v = &out->fg.levels[d][i * 7];
            v[0] = it->lx - lend;
            v[1] = it->lt;
            v[2] = it->ls;
            v[3] = it->rx - rend;
            v[4] = it->rt;
            v[5] = it->rs;
            v[6] = dname(&c, it->node);
            lend = it->lx + it->lt;
            rend = it->rx + it->rt;
            if (it->ls + it->rs > out->fg.max_self) {
                out->fg.max_self = it->ls + it->rs;
            }
        }
        out->fg.level_len[d] = c.n[d] * 7;
        free(c.levels[d]);
    }
    out->fg.names = c.names;
    out->fg.n_names = c.n_names;
    out->left_ticks = t.v[0].lt;
    out->right_ticks = t.v[0].rt;
    out->fg.total = out->left_ticks + out->right_ticks;
    free(c.levels);
    free(c.n);
    free(c.cap);
    /* Names point into the callers' name arrays, which outlive the result. */
    free(t.v);
}

int fc_flamebearer_diff_write(const struct fc_flamegraph_diff *d,
                              const struct fc_flamebearer_meta *meta, struct fc_buf *out)
{
    const struct fc_flamegraph *fg = &d->fg;

    fc_buf_puts(out, "{\"version\":1,\"flamebearer\":{\"names\":[");
    for (size_t i = 0; i < fg->n_names; i++) {
        fc_buf_puts(out, i ? ",\"" : "\"");
        fc_buf_json_escape(out, fg->names[i], strlen(fg->names[i]));
        fc_buf_puts(out, "\"");
    }
    fc_buf_puts(out, "],\"levels\":[");
    for (size_t l = 0; l < fg->n_levels; l++) {
        fc_buf_puts(out, l ? ",[" : "[");
        for (size_t i = 0; i < fg->level_len[l]; i++) {
            fc_buf_printf(out, "%s%" PRId64, i ? "," : "", fg->levels[l][i]);
        }
        fc_buf_puts(out, "]");
    }
    fc_buf_printf(out, "],\"numTicks\":%" PRId64 ",\"maxSelf\":%" PRId64 "},", fg->total,
                  fg->max_self);
    fc_buf_puts(out, "\"metadata\":{\"format\":\"double\",\"spyName\":\"\",\"sampleRate\":");
    fc_buf_printf(out, "%" PRId64 ",\"units\":\"", meta->sample_rate);
    fc_buf_json_escape(out, meta->units, strlen(meta->units));
    fc_buf_puts(out, "\",\"name\":\"");
    fc_buf_json_escape(out, meta->name, strlen(meta->name));
    fc_buf_printf(out,
                  "\"},\"leftTicks\":%" PRId64 ",\"rightTicks\":%" PRId64
                  ",\"timeline\":null,\"groups\":null,\"heatmap\":null}",
                  d->left_ticks, d->right_ticks);
    return out->limit != 0 && out->len >= out->limit ? FC_ETOOBIG : FC_OK;
}
