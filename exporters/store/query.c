/*
 * The query API on query.endpoint, as Grafana Pyroscope answers it:
 *   GET /pyroscope/render?query=<type>{selector}&from=&until=&maxNodes=&format=json|folded|pprof
 *     (&granularity=lines: frames told apart by file and line; pprof always has them)
 *   GET /pyroscope/label-names, GET /pyroscope/label-values?label=<name>
 *   GET /api/v1/function?query=&from=&until=&name=FUNC: self/total per line, callers, callees
 * Every answer that merges trees says how many in X-Flamecol-Nodes-Merged.
 */
#include "exporters/store/store.h"
#include "exporters/store/function.h"

#include "core/idmap.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "formats/flamebearer.h"
#include "formats/gzip.h"
#include "formats/pprof.h"
#include "formats/pyroscope.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

static void json_error(struct fc_http_response *resp, int status, const char *msg)
{
    resp->status = status;
    resp->content_type = "application/json";
    fc_buf_reset(&resp->body);
    fc_buf_printf(&resp->body, "{\"code\":\"%s\",\"message\":\"",
                  status == 400 ? "invalid_argument" : "internal");
    fc_buf_json_escape(&resp->body, msg, strlen(msg));
    fc_buf_puts(&resp->body, "\"}");
}

/* The parts of a profile type id: name:type:unit:period_type:period_unit. */
static void type_part(const char *id, int index, char *out, size_t size)
{
    const char *p = id;

    for (int i = 0; i < index && p != NULL; i++) {
        p = strchr(p, ':');
        p = p ? p + 1 : NULL;
    }
    if (p == NULL) {
        out[0] = '\0';
        return;
    }
    snprintf(out, size, "%.*s", (int)(strchr(p, ':') ? (size_t)(strchr(p, ':') - p) : strlen(p)),
             p);
}

/* The common part of every query: tenant, selector, range. */
struct query {
    const char *tenant;
    struct fc_selector sel;
    int64_t from_ns, until_ns;
    enum fc_frame_granularity granularity; /* &granularity=functions (default) | lines */
};

static int parse_query_named(struct store_exporter *x, const struct fc_http_request *req,
                             const char *param, const char *from_param, const char *until_param,
                             struct query *q, struct fc_error *err)
{
    const char *text = fc_http_query(req, param);
    const char *from = fc_http_query(req, from_param);
    const char *until = fc_http_query(req, until_param);
    int64_t now = fc_now_ns();
    int64_t span;
    const char *granularity = fc_http_query(req, "granularity");

    memset(q, 0, sizeof(*q));
    if (fc_http_tenant(req, &q->tenant, err) != FC_OK) {
        return FC_EPROTO;
    }
    if (granularity != NULL && strcmp(granularity, "lines") == 0) {
        q->granularity = FC_FRAME_LINES;
    } else if (granularity != NULL && granularity[0] != '\0' &&
               strcmp(granularity, "functions") != 0) {
        return fc_errorf(err, FC_EPROTO, "granularity must be functions or lines");
    }
    if (text == NULL || text[0] == '\0') {
        return fc_errorf(err, FC_EPROTO, "\"%s\" is required", param);
    }
    if (fc_selector_parse(text, &q->sel, err) != FC_OK) {
        return FC_EPROTO;
    }
    if (q->sel.profile_type == NULL) {
        fc_selector_release(&q->sel);
        return fc_errorf(err, FC_EPROTO,
                         "query must contain a profile-type selection, e.g. "
                         "process_cpu:cpu:nanoseconds:cpu:nanoseconds{}");
    }
    if (!store_profile_type_valid(q->sel.profile_type)) {
        fc_selector_release(&q->sel);
        return fc_errorf(err, FC_EPROTO, "failed to parse '%s'", param); /* Pyroscope's */
    }
    q->from_ns = now - 3600LL * 1000000000LL;
    q->until_ns = now;
    if ((from != NULL && fc_pyro_parse_time(from, now, &q->from_ns, err) != FC_OK) ||
        (until != NULL && fc_pyro_parse_time(until, now, &q->until_ns, err) != FC_OK)) {
        fc_selector_release(&q->sel);
        return fc_error_wrap(err, "from/until");
    }
    if (q->from_ns > q->until_ns) {
        fc_selector_release(&q->sel);
        return fc_errorf(err, FC_EPROTO, "from is after until");
    }
    if (__builtin_sub_overflow(q->until_ns, q->from_ns, &span)) {
        fc_selector_release(&q->sel);
        return fc_errorf(err, FC_EPROTO, "from/until: the range is out of bounds");
    }
    if (x->cfg->query.max_query_length > 0 && span > x->cfg->query.max_query_length) {
        fc_selector_release(&q->sel);
        return fc_errorf(err, FC_EPROTO,
                         "the range is longer than query.max_query_length (%" PRId64 " h)",
                         (int64_t)(x->cfg->query.max_query_length / 3600000000000LL));
    }
    return FC_OK;
}

static int parse_query(struct store_exporter *x, const struct fc_http_request *req,
                       const char *param, struct query *q, struct fc_error *err)
{
    return parse_query_named(x, req, param, "from", "until", q, err);
}

/* A "nice" timeline step: about 1,500 points, whole multiples of 10 s. */
static int64_t timeline_step_s(int64_t from_ns, int64_t until_ns)
{
    static const int64_t nice[] = {10,   20,   30,   60,    120,   300,   600,  1200,
                                   1800, 3600, 7200, 10800, 21600, 43200, 86400};
    int64_t want = (until_ns - from_ns) / 1000000000LL / 1500;

    for (size_t i = 0; i < sizeof(nice) / sizeof(nice[0]); i++) {
        if (nice[i] >= want) {
            return nice[i];
        }
    }
    return ((want + 86399) / 86400) * 86400;
}

/* A string of a frame into the profile's dictionary. */
static uint32_t dict_str(struct fc_batch *b, struct fc_frame_str s)
{
    uint32_t i = 0;

    fc_dict_string(b, s.n ? s.p : "", s.n, &i);
    return i;
}

/* Whether a frame is a line of code (a function, a file or a line) rather than a bare address. */
static bool frame_has_line(const struct fc_frame *f)
{
    return f->name.n > 0 || f->system_name.n > 0 || f->file.n > 0 || f->line != 0 ||
           f->start_line != 0;
}

/*
 * The pprof location whose innermost line is frames_tree node i: i and its
 * callers up to the first frame not inlined into its caller (pprof: one
 * location, lines[0] innermost). *top is that outermost node.
 */
static int node_location(struct fc_batch *b, const struct fc_store_result *r,
                         const uint32_t *parent, uint32_t i, struct fc_line **lines, uint32_t *cap,
                         uint32_t *loc_out, uint32_t *top)
{
    struct fc_location l = {0};
    uint32_t n = 0;
    uint32_t x = i;
    int rc = FC_OK;

    for (;;) {
        const struct fc_frame *f = &r->frames[r->node_frame[x]];
        if (f->has_address && !l.address && !l.mapping) {
            l.address = f->address;
            if (f->has_mapping) {
                struct fc_mapping m = {0};
                m.memory_start = f->mapping.start;
                m.memory_limit = f->mapping.limit;
                m.file_offset = f->mapping.offset;
                m.filename = dict_str(b, f->mapping.file);
                m.build_id = dict_str(b, f->mapping.build_id);
                m.flags = f->mapping.flags;
                rc = rc ? rc : fc_dict_mapping(b, &m, &l.mapping);
            }
        }
        if (frame_has_line(f)) {
            struct fc_function fn = {0};
            if (n == *cap) {
                *cap = *cap ? *cap * 2 : 16;
                *lines = fc_xrealloc(*lines, *cap * sizeof(**lines));
            }
            memset(&(*lines)[n], 0, sizeof(**lines));
            fn.name = dict_str(b, f->name);
            fn.system_name = dict_str(b, f->system_name);
            fn.filename = dict_str(b, f->file);
            fn.start_line = f->start_line;
            rc = rc ? rc : fc_dict_function(b, &fn, &(*lines)[n].function);
            (*lines)[n].line = f->line;
            (*lines)[n].column = f->column;
            n++;
        }
        if (!f->is_inline || parent[x] == 0) {
            break;
        }
        x = parent[x];
    }
    *top = x;
    return rc ? rc : fc_dict_location(b, &l, *lines, n, loc_out);
}

int store_tree_to_pprof(const struct fc_store_result *r, const char *type_id, struct fc_buf *out,
                        struct fc_error *err)
{
    const struct fc_tree *t = &r->frames_tree;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    char part[128];
    uint32_t *parent = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    uint32_t *loc = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    uint32_t *top = fc_xcalloc(t->n + 1, sizeof(uint32_t));
    bool *has_loc = fc_xcalloc(t->n + 1, sizeof(bool));
    uint32_t *stack = NULL;
    uint32_t stack_cap = 0, lines_cap = 0;
    struct fc_line *lines = NULL;
    int rc = FC_OK;

    type_part(type_id, 1, part, sizeof(part));
    fc_dict_cstring(b, part, &vt.type);
    type_part(type_id, 2, part, sizeof(part));
    fc_dict_cstring(b, part, &vt.unit);
    fc_profile_set_sample_types(b, p, &vt, 1);
    type_part(type_id, 3, part, sizeof(part));
    fc_dict_cstring(b, part, &p->period_type.type);
    type_part(type_id, 4, part, sizeof(part));
    fc_dict_cstring(b, part, &p->period_type.unit);
    for (uint32_t i = 0; i < t->n; i++) {
        for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
            parent[c] = i;
        }
    }
    /* One sample per node with a self value: its stack, leaf first, location by location. */
    for (uint32_t i = 1; rc == FC_OK && i < t->n; i++) {
        struct fc_sample s = {0};
        uint32_t depth = 0;
        int64_t v = t->nodes[i].self;
        if (v <= 0) {
            continue;
        }
        for (uint32_t at = i; rc == FC_OK && at != 0; at = parent[top[at]]) {
            if (!has_loc[at]) {
                rc = node_location(b, r, parent, at, &lines, &lines_cap, &loc[at], &top[at]);
                has_loc[at] = true;
            }
            if (depth == stack_cap) {
                stack_cap = stack_cap ? stack_cap * 2 : 64;
                stack = fc_xrealloc(stack, stack_cap * sizeof(uint32_t));
            }
            stack[depth++] = loc[at];
        }
        rc = rc ? rc : fc_dict_stack(b, stack, depth, &s.stack);
        rc = rc ? rc : fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0);
    }
    if (rc == FC_OK) {
        rc = fc_pprof_encode(b, p, out, err);
    } else {
        rc = fc_errorf(err, rc, "pprof: out of memory building the profile");
    }
    free(parent);
    free(loc);
    free(top);
    free(has_loc);
    free(stack);
    free(lines);
    fc_batch_unref(b);
    return rc;
}

/* Appends the children of node to w, reversed so that popping visits them in order. */
static void push_children(const struct fc_store_result *r, uint32_t node, uint64_t tag,
                          struct fc_u64s *w)
{
    size_t first = w->n;

    for (uint32_t c = r->tree.nodes[node].first; c != 0; c = r->tree.nodes[c].next) {
        fc_u64s_push(w, tag | c);
    }
    for (size_t a = first, b = w->n; a + 1 < b; a++, b--) {
        uint64_t x = w->v[a];
        w->v[a] = w->v[b - 1];
        w->v[b - 1] = x;
    }
}

/* Folded stacks, depth first; iterative since a tree may be any depth. */
static void folded(const struct fc_store_result *r, struct fc_buf *path, struct fc_buf *out)
{
    struct fc_u64s w = {0};

    push_children(r, 0, 0, &w); /* each entry: path length before the node << 32 | node */
    while (w.n > 0) {
        uint64_t e = w.v[--w.n];
        uint32_t node = (uint32_t)e;
        const struct fc_tree_node *n = &r->tree.nodes[node];
        path->len = (size_t)(e >> 32);
        if (path->len > 0) {
            fc_buf_append(path, ";", 1);
        }
        fc_buf_puts(path, r->names[node]);
        if (n->self > 0) {
            fc_buf_append(out, path->data, path->len);
            fc_buf_printf(out, " %" PRId64 "\n", n->self);
        }
        push_children(r, node, (uint64_t)path->len << 32, &w);
    }
    free(w.v);
}

static void metadata_of(const char *type_id, char *name, size_t nsize, char *units, size_t usize,
                        struct fc_flamebearer_meta *meta)
{
    type_part(type_id, 1, name, nsize);
    type_part(type_id, 2, units, usize);
    /* Pyroscope's metadata: objects for counts of objects, samples for cpu. */
    if (strcmp(name, "inuse_objects") == 0 || strcmp(name, "alloc_objects") == 0 ||
        strcmp(name, "goroutine") == 0 || strcmp(name, "samples") == 0) {
        snprintf(units, usize, "objects");
    } else if (strcmp(name, "cpu") == 0) {
        snprintf(units, usize, "samples");
    }
    meta->name = name;
    meta->units = units;
    meta->sample_rate = strcmp(name, "cpu") == 0 ? 1000000000 : 100;
}

/*
 * maxNodes (or max-nodes): 0 or absent = query.max_nodes, at most 1,048,576
 * (Pyroscope's limit). Answers 400 and returns false when it is not that.
 */
static bool max_nodes_of(struct store_exporter *x, const struct fc_http_request *req,
                         struct fc_http_response *resp, int64_t *out)
{
    const char *s = fc_http_query(req, "maxNodes");
    char *end;

    *out = x->cfg->query.max_nodes;
    s = s ? s : fc_http_query(req, "max-nodes");
    if (s == NULL) {
        return true;
    }
    *out = strtoll(s, &end, 10);
    if (*end != '\0' || *out < 0 || *out > 1048576) {
        json_error(resp, 400, "maxNodes must be an integer between 0 and 1048576");
        return false;
    }
    *out = *out ? *out : x->cfg->query.max_nodes;
    return true;
}

/*
 * Merges the selection q into res and counts it (nodes merged added to
 * *merged). Answers 400/500 and returns false when the store refuses.
 */
static bool select_merge(struct store_exporter *x, const struct query *q,
                         struct fc_store_result *res, uint32_t *merged,
                         struct fc_http_response *resp)
{
    struct fc_store_query sq = {q->tenant, &q->sel, q->from_ns, q->until_ns, false};
    struct fc_store_stats stats;
    struct fc_error err = {0};

    sq.granularity = q->granularity;
    if (fc_store_select_merge(x->store, &sq, res, &stats, &err) != FC_OK) {
        json_error(resp, err.code == FC_EPROTO ? 400 : 500, err.msg);
        return false;
    }
    fc_metric_add(x->nodes_merged, stats.nodes_merged);
    fc_metric_set(x->corrupt, (int64_t)fc_store_corrupt_windows(x->store));
    *merged += stats.nodes_merged;
    return true;
}

/* One answered query: the counter and the X-Flamecol-Nodes-Merged header. */
static void count_query(struct store_exporter *x, uint32_t merged, struct fc_http_response *resp)
{
    char text[32];

    fc_metric_add(x->queries, 1);
    snprintf(text, sizeof(text), "%u", merged);
    fc_http_response_header(resp, "X-Flamecol-Nodes-Merged", text);
}

/* The `query` selection of a request, merged and counted; false once answered with an error. */
static bool merged_query(struct store_exporter *x, const struct fc_http_request *req,
                         struct fc_http_response *resp, struct query *q,
                         struct fc_store_result *res)
{
    struct fc_error err = {0};
    uint32_t merged = 0;

    if (parse_query(x, req, "query", q, &err) != FC_OK) {
        json_error(resp, 400, err.msg);
        return false;
    }
    if (!select_merge(x, q, res, &merged, resp)) {
        fc_selector_release(&q->sel);
        return false;
    }
    count_query(x, merged, resp);
    return true;
}

static void on_render(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    const char *format = fc_http_query(req, "format");
    struct fc_error err = {0};
    struct query q;
    struct fc_store_query sq;
    struct fc_store_result res;
    int64_t max_nodes;

    if (!max_nodes_of(x, req, resp, &max_nodes)) {
        return;
    }
    if (format != NULL && strcmp(format, "json") != 0 && strcmp(format, "folded") != 0 &&
        strcmp(format, "pprof") != 0) {
        json_error(resp, 400, "format must be json, folded or pprof");
        return;
    }
    if (!merged_query(x, req, resp, &q, &res)) {
        return;
    }
    sq = (struct fc_store_query){q.tenant, &q.sel, q.from_ns, q.until_ns, false};
    if (format != NULL && strcmp(format, "folded") == 0) {
        struct fc_buf path;
        fc_buf_init(&path, 0);
        resp->content_type = "text/plain; charset=utf-8";
        folded(&res, &path, &resp->body);
        fc_buf_release(&path);
    } else if (format != NULL && strcmp(format, "pprof") == 0) {
        resp->content_type = "application/octet-stream";
        fc_http_response_header(resp, "Content-Disposition", "attachment; filename=profile.pb.gz");
        struct fc_buf raw;
        fc_buf_init(&raw, 0);
        if (store_tree_to_pprof(&res, q.sel.profile_type, &raw, &err) != FC_OK ||
            fc_gzip(raw.data, raw.len, 6, &resp->body, &err) != FC_OK) {
            json_error(resp, 500, err.msg);
        }
        fc_buf_release(&raw);
    } else {
        struct fc_flamebearer_meta meta = {0};
        char name[64], units[64];
        int64_t step = timeline_step_s(q.from_ns, q.until_ns);
        int64_t start = (q.from_ns / 1000000000LL / step) * step;
        size_t points = (size_t)((q.until_ns / 1000000000LL - start) / step) + 1;
        int64_t *timeline = fc_xcalloc(points, sizeof(int64_t));
        metadata_of(q.sel.profile_type, name, sizeof(name), units, sizeof(units), &meta);
        sq.from_ns = start * 1000000000LL;
        const char *group_by = fc_http_query(req, "groupBy");
        struct fc_store_timeseries *groups = NULL;
        size_t n_groups = 0;
        const char **group_names = NULL;
        const int64_t **group_timelines = NULL;
        if (fc_store_timeline(x->store, &sq, step * 1000000000LL, timeline, points, &err) ==
            FC_OK) {
            meta.timeline = timeline;
            meta.timeline_n = points;
            meta.timeline_start_s = start;
            meta.timeline_step_s = step;
            meta.watermark_100s = fc_store_coarse_before(x->store);
        }
        /* groupBy: a timeline per value of that label (only the first is used, as Pyroscope). */
        if (meta.timeline != NULL && group_by != NULL && group_by[0] != '\0' &&
            fc_store_select_series(x->store, &sq, step * 1000000000LL, points, &group_by, 1,
                                   &groups, &n_groups, &err) == FC_OK) {
            group_names = fc_xcalloc(n_groups + 1, sizeof(char *));
            group_timelines = fc_xcalloc(n_groups + 1, sizeof(int64_t *));
            for (size_t g = 0; g < n_groups; g++) {
                /* labels are "name 0x01 value 0x02": the value, or "*" without the label */
                char *value = strchr(groups[g].labels, '\x01');
                char *end = value ? strchr(value + 1, '\x02') : NULL;
                if (end != NULL) {
                    *end = '\0';
                }
                group_names[g] = value ? value + 1 : "*";
                group_timelines[g] = groups[g].buckets;
            }
            meta.group_names = group_names;
            meta.group_timelines = group_timelines;
            meta.n_groups = n_groups;
        }
        resp->content_type = "application/json";
        fc_flamebearer_write(&res.tree, res.names, (uint32_t)max_nodes, &meta, &resp->body);
        free(group_names);
        free(group_timelines);
        fc_store_timeseries_free(groups, n_groups);
        free(timeline);
    }
    fc_store_result_release(&res);
    fc_selector_release(&q.sel);
}

struct fn_stat {
    const char *name;
    int64_t self;
    int64_t total; /* cumulative, counted once per stack even when recursive */
};

static int by_self(const void *a, const void *b)
{
    int64_t x = ((const struct fn_stat *)a)->self, y = ((const struct fn_stat *)b)->self;
    return x < y   ? 1
           : x > y ? -1
                   : strcmp(((const struct fn_stat *)a)->name, ((const struct fn_stat *)b)->name);
}

struct fn_table {
    struct fn_stat *v;
    size_t n, cap;
    struct fc_idmap index; /* xxh3(name) -> slot */
    uint32_t *on_path;     /* per slot: how many times the name is on the current path */
};

static uint32_t fn_slot(struct fn_table *t, const char *name)
{
    uint64_t h = XXH3_64bits(name, strlen(name));
    uint32_t slot;

    if (fc_idmap_get(&t->index, h, &slot) && strcmp(t->v[slot].name, name) == 0) {
        return slot;
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 256;
        t->v = fc_xrealloc(t->v, t->cap * sizeof(*t->v));
        t->on_path = fc_xrealloc(t->on_path, t->cap * sizeof(uint32_t));
    }
    t->v[t->n].name = name;
    t->v[t->n].self = 0;
    t->v[t->n].total = 0;
    t->on_path[t->n] = 0;
    fc_idmap_put(&t->index, h, (uint32_t)t->n);
    return (uint32_t)t->n++;
}

#define FN_EXIT (1ULL << 63)

/*
 * Self and total per function over the tree, depth first. Iterative: an
 * entry is a node to enter, or (FN_EXIT | slot) to leave one.
 */
static void fn_walk(struct fn_table *t, const struct fc_store_result *r)
{
    struct fc_u64s w = {0};

    push_children(r, 0, 0, &w);
    while (w.n > 0) {
        uint64_t e = w.v[--w.n];
        const struct fc_tree_node *n;
        uint32_t slot;
        if (e & FN_EXIT) {
            t->on_path[(uint32_t)e]--;
            continue;
        }
        n = &r->tree.nodes[(uint32_t)e];
        slot = fn_slot(t, r->names[(uint32_t)e]);
        t->v[slot].self = fc_sat_add(t->v[slot].self, n->self);
        if (t->on_path[slot]++ == 0) {
            t->v[slot].total = fc_sat_add(t->v[slot].total, n->total); /* recursion once */
        }
        fc_u64s_push(&w, FN_EXIT | slot);
        push_children(r, (uint32_t)e, 0, &w);
    }
    free(w.v);
}

/*
 * The findings of a selection: the top functions by self value with their
 * share of the total, and the hottest path (from the root, the heaviest
 * child each time).
 */
static void findings_json(const struct fc_store_result *r, size_t top, const char *type_id,
                          struct fc_buf *out)
{
    struct fn_table t = {0};
    int64_t total = fc_tree_total(&r->tree);
    char unit[64];

    fc_idmap_init(&t.index, 256);
    fn_walk(&t, r);
    if (t.n > 1) {
        qsort(t.v, t.n, sizeof(*t.v), by_self);
    }
    type_part(type_id, 2, unit, sizeof(unit));
    fc_buf_puts(out, "{\"profile_type\":\"");
    fc_buf_json_escape(out, type_id, strlen(type_id));
    fc_buf_printf(out, "\",\"unit\":\"%s\",\"total\":%" PRId64 ",\"top\":[", unit, total);
    for (size_t i = 0; i < t.n && i < top; i++) {
        fc_buf_puts(out, i ? ",{\"name\":\"" : "{\"name\":\"");
        fc_buf_json_escape(out, t.v[i].name, strlen(t.v[i].name));
        fc_buf_printf(out,
                      "\",\"self\":%" PRId64 ",\"self_share\":%.6f,\"total\":%" PRId64
                      ",\"total_share\":%.6f}",
                      t.v[i].self, total ? (double)t.v[i].self / (double)total : 0.0, t.v[i].total,
                      total ? (double)t.v[i].total / (double)total : 0.0);
    }
    fc_buf_puts(out, "],\"hottest_path\":[");
    for (uint32_t node = r->tree.nodes[0].first, first = 1; node != 0; first = 0) {
        uint32_t best = node;
        for (uint32_t c = node; c != 0; c = r->tree.nodes[c].next) {
            if (r->tree.nodes[c].total > r->tree.nodes[best].total) {
                best = c;
            }
        }
        fc_buf_puts(out, first ? "{\"name\":\"" : ",{\"name\":\"");
        fc_buf_json_escape(out, r->names[best], strlen(r->names[best]));
        fc_buf_printf(out, "\",\"total\":%" PRId64 ",\"share\":%.6f,\"self\":%" PRId64 "}",
                      r->tree.nodes[best].total,
                      total ? (double)r->tree.nodes[best].total / (double)total : 0.0,
                      r->tree.nodes[best].self);
        node = r->tree.nodes[best].first;
    }
    fc_buf_puts(out, "]}");
    fc_idmap_release(&t.index);
    free(t.v);
    free(t.on_path);
}

static void on_findings(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    const char *top_s = fc_http_query(req, "top");
    struct query q;
    struct fc_store_result res;
    long top = top_s ? strtol(top_s, NULL, 10) : 10;

    if (top <= 0 || top > 10000) {
        json_error(resp, 400, "top must be between 1 and 10000");
        return;
    }
    if (!merged_query(x, req, resp, &q, &res)) {
        return;
    }
    resp->content_type = "application/json";
    findings_json(&res, (size_t)top, q.sel.profile_type, &resp->body);
    fc_store_result_release(&res);
    fc_selector_release(&q.sel);
}

/* GET /api/v1/function?query=&from=&until=&name=: one function of the selection. */
static void on_function(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    const char *name = fc_http_query(req, "name");
    struct query q;
    struct fc_store_result res;
    char unit[64];

    if (name == NULL || name[0] == '\0') {
        json_error(resp, 400, "\"name\" is required");
        return;
    }
    if (!merged_query(x, req, resp, &q, &res)) {
        return;
    }
    type_part(q.sel.profile_type, 2, unit, sizeof(unit));
    resp->content_type = "application/json";
    if (!store_function_json(&res, name, q.sel.profile_type, unit, &resp->body)) {
        resp->status = 404;
        fc_buf_puts(&resp->body, "{\"code\":\"not_found\",\"message\":\"no function ");
        fc_buf_json_escape(&resp->body, name, strlen(name));
        fc_buf_puts(&resp->body, " in the selection\"}");
    }
    fc_store_result_release(&res);
    fc_selector_release(&q.sel);
}

static void on_render_diff(void *ctx, const struct fc_http_request *req,
                           struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    struct fc_error err = {0};
    struct query left, right;
    struct fc_store_result rl, rr;
    struct fc_flamegraph_diff diff;
    struct fc_flamebearer_meta meta = {0};
    char name[64], units[64];
    int64_t max_nodes;
    uint32_t merged = 0;

    if (!max_nodes_of(x, req, resp, &max_nodes)) {
        return;
    }
    if (parse_query_named(x, req, "leftQuery", "leftFrom", "leftUntil", &left, &err) != FC_OK) {
        json_error(resp, 400, err.msg);
        return;
    }
    if (parse_query_named(x, req, "rightQuery", "rightFrom", "rightUntil", &right, &err) != FC_OK) {
        fc_selector_release(&left.sel);
        json_error(resp, 400, err.msg);
        return;
    }
    if (strcmp(left.sel.profile_type, right.sel.profile_type) != 0) {
        json_error(resp, 400, "profile types must match");
        goto out;
    }
    if (!select_merge(x, &left, &rl, &merged, resp)) {
        goto out;
    }
    if (!select_merge(x, &right, &rr, &merged, resp)) {
        fc_store_result_release(&rl);
        goto out;
    }
    count_query(x, merged, resp); /* both sides' windows */
    fc_flamegraph_diff_build(&rl.tree, rl.names, &rr.tree, rr.names, (uint32_t)max_nodes, &diff);
    metadata_of(left.sel.profile_type, name, sizeof(name), units, sizeof(units), &meta);
    resp->content_type = "application/json";
    fc_flamebearer_diff_write(&diff, &meta, &resp->body);
    fc_flamegraph_release(&diff.fg);
    fc_store_result_release(&rl);
    fc_store_result_release(&rr);
out:
    fc_selector_release(&left.sel);
    fc_selector_release(&right.sel);
}

static void string_array(struct fc_http_response *resp, char **v, size_t n)
{
    resp->content_type = "application/json";
    fc_buf_puts(&resp->body, "[");
    for (size_t i = 0; i < n; i++) {
        fc_buf_puts(&resp->body, i ? ",\"" : "\"");
        fc_buf_json_escape(&resp->body, v[i], strlen(v[i]));
        fc_buf_puts(&resp->body, "\"");
    }
    fc_buf_puts(&resp->body, "]");
}

static void on_label_names(void *ctx, const struct fc_http_request *req,
                           struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    struct fc_error err = {0};
    const char *tenant;
    char **v;
    size_t n;

    if (fc_http_tenant(req, &tenant, &err) != FC_OK) {
        json_error(resp, 400, err.msg);
        return;
    }
    if (fc_store_label_names(x->store, tenant, &v, &n, &err) != FC_OK) {
        json_error(resp, 500, err.msg);
        return;
    }
    string_array(resp, v, n);
    fc_store_strings_free(v, n);
}

static void on_label_values(void *ctx, const struct fc_http_request *req,
                            struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    struct fc_error err = {0};
    const char *label = fc_http_query(req, "label");
    const char *tenant;
    char **v;
    size_t n;

    if (fc_http_tenant(req, &tenant, &err) != FC_OK) {
        json_error(resp, 400, err.msg);
        return;
    }
    if (label == NULL || label[0] == '\0') {
        json_error(resp, 400, "\"label\" is required");
        return;
    }
    if (fc_store_label_values(x->store, tenant, label, &v, &n, &err) != FC_OK) {
        json_error(resp, 500, err.msg);
        return;
    }
    string_array(resp, v, n);
    fc_store_strings_free(v, n);
}

int store_query_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err)
{
    const char *id = x->self->id;

    if (fc_http_route(srv, "GET", "/pyroscope/render", 0, on_render, x, id, err) ||
        fc_http_route(srv, "GET", "/pyroscope/label-names", 0, on_label_names, x, id, err) ||
        fc_http_route(srv, "GET", "/pyroscope/label-values", 0, on_label_values, x, id, err) ||
        fc_http_route(srv, "GET", "/api/v1/findings", 0, on_findings, x, id, err) ||
        fc_http_route(srv, "GET", "/api/v1/function", 0, on_function, x, id, err) ||
        fc_http_route(srv, "GET", "/pyroscope/render-diff", 0, on_render_diff, x, id, err) ||
        store_connect_routes(x, srv, err)) {
        return err->code;
    }
    return FC_OK;
}
