#include "formats/flamebearer.h"

#include "core/mem.h"

#include <inttypes.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>

/*
 * Trees come from outside (one stack of 300,000 frames is one request), so
 * no walk here recurses: each keeps its own stack of frames on the heap,
 * owned by the build that made it and freed before it returns. Sums of
 * node values saturate (fc_sat_add) instead of wrapping.
 */

/* Makes room for n + 1 elements of size bytes in *v (capacity *cap). */
static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
    if (n < *cap) {
        return v;
    }
    *cap = *cap ? *cap * 2 : 64;
    return fc_xrealloc(v, *cap * size);
}

/* x - end, saturating (tree.h has the sum; this is its difference). */
static int64_t sat_delta(int64_t x, int64_t end)
{
    int64_t r;
    if (__builtin_sub_overflow(x, end, &r)) {
        return end < 0 ? INT64_MAX : INT64_MIN;
    }
    return r;
}

/*
 * The output names: one index per distinct string, in first-use order,
 * found through an open-addressing table of indices (index + 1; 0 = empty).
 */
struct names {
    const char **v; /* room for every name, allocated by the caller */
    size_t n;
    uint32_t *slots;
    size_t n_slots; /* a power of two, at least twice n */
};

static uint64_t str_hash(const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s != '\0'; s++) {
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    }
    return h;
}

static void names_rehash(struct names *t)
{
    size_t n_slots = t->n_slots ? t->n_slots * 2 : 64;

    free(t->slots);
    t->slots = fc_xcalloc(n_slots, sizeof(uint32_t));
    t->n_slots = n_slots;
    for (size_t i = 0; i < t->n; i++) {
        size_t at = (size_t)str_hash(t->v[i]) & (n_slots - 1);
        while (t->slots[at] != 0) {
            at = (at + 1) & (n_slots - 1);
        }
        t->slots[at] = (uint32_t)i + 1;
    }
}

static uint32_t names_index(struct names *t, const char *s)
{
    size_t at;

    if ((t->n + 1) * 2 > t->n_slots) {
        names_rehash(t);
    }
    at = (size_t)str_hash(s) & (t->n_slots - 1);
    for (; t->slots[at] != 0; at = (at + 1) & (t->n_slots - 1)) {
        if (strcmp(t->v[t->slots[at] - 1], s) == 0) {
            return t->slots[at] - 1;
        }
    }
    t->v[t->n] = s;
    t->slots[at] = (uint32_t)++t->n;
    return (uint32_t)t->n - 1;
}

/* ---- single ------------------------------------------------------------------------------- */

struct item {
    int64_t x; /* absolute left offset, ticks */
    int64_t total;
    int64_t self;
    uint32_t name;  /* index in the output names */
    uint32_t depth; /* level */
};

struct kid {
    uint32_t node;
    const char *name;
};

/* A node being walked: its kept children are kids[kid_base, kid_base + nk). */
struct frame {
    size_t kid_base, nk, i; /* i: the next child to walk */
    int64_t cx;             /* where that child starts */
    int64_t other;          /* the children folded into "other" */
    uint32_t depth;
};

struct ctx {
    const struct fc_tree *t;
    char *const *names;
    int64_t min_total;
    struct names out_names;
    uint32_t other_index;
    /* Every node placed, in the order the levels list them (depth first). */
    struct item *items;
    size_t n_items, cap_items;
    struct frame *frames;
    size_t n_frames, cap_frames;
    struct kid *kids;
    size_t n_kids, cap_kids;
    size_t n_levels;
};

static int by_total_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct kid *)a)->name, ((const struct kid *)b)->name);
}

static void place(struct ctx *c, uint32_t depth, int64_t x, int64_t total, int64_t self,
                  uint32_t name)
{
    c->items = grow(c->items, &c->cap_items, c->n_items, sizeof(*c->items));
    c->items[c->n_items++] = (struct item){x, total, self, name, depth};
    if (depth >= c->n_levels) {
        c->n_levels = (size_t)depth + 1;
    }
}

/*
 * Places node at x and pushes its frame: children sorted by name, those
 * below min_total (and any named "other") summed into one "other" child.
 */
static void enter(struct ctx *c, uint32_t node, uint32_t depth, int64_t x)
{
    const struct fc_tree_node *n = &c->t->nodes[node];
    struct frame *f;

    place(c, depth, x, n->total, n->self, names_index(&c->out_names, c->names[node]));
    c->frames = grow(c->frames, &c->cap_frames, c->n_frames, sizeof(*c->frames));
    f = &c->frames[c->n_frames++];
    f->kid_base = c->n_kids;
    f->i = 0;
    f->cx = fc_sat_add(x, n->self);
    f->other = 0;
    f->depth = depth;
    for (uint32_t k = n->first; k != 0; k = c->t->nodes[k].next) {
        if (c->t->nodes[k].total < c->min_total || strcmp(c->names[k], "other") == 0) {
            f->other = fc_sat_add(f->other, c->t->nodes[k].total);
        } else {
            c->kids = grow(c->kids, &c->cap_kids, c->n_kids, sizeof(*c->kids));
            c->kids[c->n_kids].node = k;
            c->kids[c->n_kids].name = c->names[k];
            c->n_kids++;
        }
    }
    f->nk = c->n_kids - f->kid_base;
    if (f->nk > 1) { /* kids may still be NULL */
        qsort(c->kids + f->kid_base, f->nk, sizeof(*c->kids), by_name);
    }
}

/* Pre-order from the root: a node, then each kept child's subtree, then its "other". */
static void walk(struct ctx *c)
{
    enter(c, 0, 0, 0);
    while (c->n_frames > 0) {
        struct frame *f = &c->frames[c->n_frames - 1];
        if (f->i < f->nk) {
            uint32_t k = c->kids[f->kid_base + f->i++].node;
            int64_t x = f->cx;
            f->cx = fc_sat_add(f->cx, c->t->nodes[k].total);
            enter(c, k, f->depth + 1, x); /* may move frames: f is not used after */
            continue;
        }
        if (f->other > 0) {
            if (c->other_index == UINT32_MAX) {
                c->out_names.v[c->out_names.n] = "other";
                c->other_index = (uint32_t)c->out_names.n++;
            }
            place(c, f->depth + 1, f->cx, f->other, f->other, c->other_index);
        }
        c->n_kids = f->kid_base;
        c->n_frames--;
    }
}

void fc_flamegraph_build(const struct fc_tree *t, char *const *names, uint32_t max_nodes,
                         struct fc_flamegraph *out)
{
    struct ctx c = {0};
    size_t *at;
    int64_t *prev_end;

    memset(out, 0, sizeof(*out));
    c.t = t;
    c.names = names;
    c.out_names.v = fc_xcalloc((size_t)t->n + 2, sizeof(char *));
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
    if (t->n > 0) {
        walk(&c);
    }
    free(c.frames);
    free(c.kids);
    free(c.out_names.slots);
    out->names = c.out_names.v;
    out->n_names = c.out_names.n;
    out->n_levels = c.n_levels;
    out->levels = fc_xcalloc(c.n_levels + 1, sizeof(int64_t *));
    out->level_len = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    out->total = fc_tree_total(t);
    /* Levels: the items of each depth in walk order, x delta-encoded. */
    for (size_t i = 0; i < c.n_items; i++) {
        out->level_len[c.items[i].depth] += 4;
    }
    at = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    prev_end = fc_xcalloc(c.n_levels + 1, sizeof(int64_t));
    for (size_t d = 0; d < c.n_levels; d++) {
        out->levels[d] = fc_xmalloc((out->level_len[d] + 1) * sizeof(int64_t));
    }
    for (size_t i = 0; i < c.n_items; i++) {
        const struct item *it = &c.items[i];
        int64_t *v = &out->levels[it->depth][at[it->depth]];
        v[0] = sat_delta(it->x, prev_end[it->depth]); /* against the previous node's end */
        v[1] = it->total;
        v[2] = it->self;
        v[3] = it->name;
        at[it->depth] += 4;
        prev_end[it->depth] = fc_sat_add(it->x, it->total);
        if (it->self > out->max_self) {
            out->max_self = it->self;
        }
    }
    free(at);
    free(prev_end);
    free(c.items);
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
    const char *label; /* siblings sorted by it: the two trees' node ids are their own */
    int64_t lt, ls, rt, rs;
    uint32_t first, next;
};

struct dtree {
    struct dnode *v;
    uint32_t n, cap;
};

static uint32_t dchild(struct dtree *t, uint32_t parent, const char *label)
{
    uint32_t prev = 0, c = t->v[parent].first, n;
    int cmp = 1;

    while (c != 0 && (cmp = strcmp(t->v[c].label, label)) < 0) {
        prev = c;
        c = t->v[c].next;
    }
    if (c != 0 && cmp == 0) {
        return c;
    }
    if (t->n == t->cap) {
        t->cap *= 2;
        t->v = fc_xrealloc(t->v, t->cap * sizeof(*t->v));
    }
    n = t->n++;
    memset(&t->v[n], 0, sizeof(t->v[n]));
    t->v[n].label = label;
    t->v[n].next = c;
    if (prev == 0) {
        t->v[parent].first = n;
    } else {
        t->v[prev].next = n;
    }
    return n;
}

static void dvalues(struct dnode *d, const struct fc_tree_node *s, bool right)
{
    if (right) {
        d->rt = fc_sat_add(d->rt, s->total);
        d->rs = fc_sat_add(d->rs, s->self);
    } else {
        d->lt = fc_sat_add(d->lt, s->total);
        d->ls = fc_sat_add(d->ls, s->self);
    }
}

/* Adds src into t's left or right columns, pre-order (a node, then its children in turn). */
static void dadd(struct dtree *t, const struct fc_tree *src, char *const *names, bool right)
{
    struct dadd_frame {
        uint32_t at;   /* the node of t */
        uint32_t next; /* the next child of the src node to add, 0 = done */
    } *st = NULL;
    size_t n = 0, cap = 0;

    dvalues(&t->v[0], &src->nodes[0], right);
    st = grow(st, &cap, n, sizeof(*st));
    st[n++] = (struct dadd_frame){0, src->nodes[0].first};
    while (n > 0) {
        uint32_t s = st[n - 1].next, at;
        if (s == 0) {
            n--;
            continue;
        }
        st[n - 1].next = src->nodes[s].next;
        at = dchild(t, st[n - 1].at, names[s]);
        dvalues(&t->v[at], &src->nodes[s], right);
        st = grow(st, &cap, n, sizeof(*st));
        st[n++] = (struct dadd_frame){at, src->nodes[s].first};
    }
    free(st);
}

struct ditem {
    int64_t lx, rx;
    uint32_t node; /* UINT32_MAX: the synthetic "other" */
    uint32_t depth;
    int64_t lt, ls, rt, rs;
};

struct dkid {
    uint32_t node;
    const char *label;
};

struct dframe {
    size_t kid_base, nk, i;
    int64_t clx, crx; /* where the next child starts, left and right */
    int64_t olt, ort; /* the children folded into "other" */
    uint32_t depth;
};

struct dctx {
    struct dtree *t;
    int64_t min_total;
    struct ditem *items; /* walk order, as in the single graph */
    size_t n_items, cap_items;
    struct dframe *frames;
    size_t n_frames, cap_frames;
    struct dkid *kids;
    size_t n_kids, cap_kids;
    size_t n_levels;
    struct names names;
};

static void dplace(struct dctx *c, struct ditem it)
{
    c->items = grow(c->items, &c->cap_items, c->n_items, sizeof(*c->items));
    c->items[c->n_items++] = it;
    if (it.depth >= c->n_levels) {
        c->n_levels = (size_t)it.depth + 1;
    }
}

static uint32_t dname(struct dctx *c, uint32_t node)
{
    const char *s = node == UINT32_MAX ? "other" : node == 0 ? "total" : c->t->v[node].label;
    return names_index(&c->names, s);
}

static int by_label(const void *a, const void *b)
{
    return strcmp(((const struct dkid *)a)->label, ((const struct dkid *)b)->label);
}

static void denter(struct dctx *c, uint32_t node, uint32_t depth, int64_t lx, int64_t rx)
{
    const struct dnode *n = &c->t->v[node];
    struct dframe *f;

    dplace(c, (struct ditem){lx, rx, node, depth, n->lt, n->ls, n->rt, n->rs});
    c->frames = grow(c->frames, &c->cap_frames, c->n_frames, sizeof(*c->frames));
    f = &c->frames[c->n_frames++];
    f->kid_base = c->n_kids;
    f->i = 0;
    f->clx = fc_sat_add(lx, n->ls);
    f->crx = fc_sat_add(rx, n->rs);
    f->olt = f->ort = 0;
    f->depth = depth;
    for (uint32_t k = n->first; k != 0; k = c->t->v[k].next) {
        if (fc_sat_add(c->t->v[k].lt, c->t->v[k].rt) < c->min_total) {
            f->olt = fc_sat_add(f->olt, c->t->v[k].lt);
            f->ort = fc_sat_add(f->ort, c->t->v[k].rt);
        } else {
            c->kids = grow(c->kids, &c->cap_kids, c->n_kids, sizeof(*c->kids));
            c->kids[c->n_kids].node = k;
            c->kids[c->n_kids].label = c->t->v[k].label;
            c->n_kids++;
        }
    }
    f->nk = c->n_kids - f->kid_base;
    if (f->nk > 1) { /* kids may still be NULL */
        qsort(c->kids + f->kid_base, f->nk, sizeof(*c->kids), by_label);
    }
}

static void dwalk(struct dctx *c)
{
    denter(c, 0, 0, 0, 0);
    while (c->n_frames > 0) {
        struct dframe *f = &c->frames[c->n_frames - 1];
        if (f->i < f->nk) {
            uint32_t k = c->kids[f->kid_base + f->i++].node;
            int64_t lx = f->clx, rx = f->crx;
            f->clx = fc_sat_add(f->clx, c->t->v[k].lt);
            f->crx = fc_sat_add(f->crx, c->t->v[k].rt);
            denter(c, k, f->depth + 1, lx, rx); /* may move frames: f is not used after */
            continue;
        }
        if (fc_sat_add(f->olt, f->ort) > 0) {
            dplace(c, (struct ditem){f->clx, f->crx, UINT32_MAX, f->depth + 1, f->olt, f->olt,
                                     f->ort, f->ort});
        }
        c->n_kids = f->kid_base;
        c->n_frames--;
    }
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
    size_t *at;
    int64_t *lend, *rend;

    memset(out, 0, sizeof(*out));
    t.cap = 64;
    t.v = fc_xcalloc(t.cap, sizeof(*t.v));
    t.n = 1;
    if (left->n > 0) {
        dadd(&t, left, left_names, false);
    }
    if (right->n > 0) {
        dadd(&t, right, right_names, true);
    }
    c.t = &t;
    c.names.v = fc_xcalloc((size_t)t.n + 2, sizeof(char *));
    if (max_nodes > 0 && t.n > max_nodes) {
        int64_t *totals = fc_xmalloc(t.n * sizeof(int64_t));
        for (uint32_t i = 0; i < t.n; i++) {
            totals[i] = fc_sat_add(t.v[i].lt, t.v[i].rt);
        }
        qsort(totals, t.n, sizeof(int64_t), by_i64_desc);
        c.min_total = totals[max_nodes - 1];
        free(totals);
    }
    dwalk(&c);
    free(c.frames);
    free(c.kids);
    out->fg.n_levels = c.n_levels;
    out->fg.levels = fc_xcalloc(c.n_levels + 1, sizeof(int64_t *));
    out->fg.level_len = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    for (size_t i = 0; i < c.n_items; i++) {
        out->fg.level_len[c.items[i].depth] += 7;
    }
    at = fc_xcalloc(c.n_levels + 1, sizeof(size_t));
    lend = fc_xcalloc(c.n_levels + 1, sizeof(int64_t));
    rend = fc_xcalloc(c.n_levels + 1, sizeof(int64_t));
    for (size_t d = 0; d < c.n_levels; d++) {
        out->fg.levels[d] = fc_xmalloc((out->fg.level_len[d] + 1) * sizeof(int64_t));
    }
    for (size_t i = 0; i < c.n_items; i++) {
        const struct ditem *it = &c.items[i];
        int64_t *v = &out->fg.levels[it->depth][at[it->depth]];
        v[0] = sat_delta(it->lx, lend[it->depth]);
        v[1] = it->lt;
        v[2] = it->ls;
        v[3] = sat_delta(it->rx, rend[it->depth]);
        v[4] = it->rt;
        v[5] = it->rs;
        v[6] = it->node; /* named below */
        at[it->depth] += 7;
        lend[it->depth] = fc_sat_add(it->lx, it->lt);
        rend[it->depth] = fc_sat_add(it->rx, it->rt);
        if (fc_sat_add(it->ls, it->rs) > out->fg.max_self) {
            out->fg.max_self = fc_sat_add(it->ls, it->rs);
        }
    }
    /* Name indices are handed out level by level, left to right. */
    for (size_t d = 0; d < c.n_levels; d++) {
        for (size_t i = 6; i < out->fg.level_len[d]; i += 7) {
            out->fg.levels[d][i] = dname(&c, (uint32_t)out->fg.levels[d][i]);
        }
    }
    free(at);
    free(lend);
    free(rend);
    free(c.items);
    free(c.names.slots);
    out->fg.names = c.names.v;
    out->fg.n_names = c.names.n;
    out->left_ticks = t.v[0].lt;
    out->right_ticks = t.v[0].rt;
    out->fg.total = fc_sat_add(out->left_ticks, out->right_ticks);
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
