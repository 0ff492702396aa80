/*
 * The store against an oracle: corpus profiles ingested at random times
 * over three days; for random selectors and ranges, the merged flame graph
 * equals a brute-force merge of exactly the profiles (and samples) in range,
 * and the number of windows merged stays within 2*9*levels + 2 per series.
 *
 * The oracle shares no code with the store's query path: the profile type,
 * the matchers and the folded stacks are small references written here from
 * the specification (README), not flamecol's fc_pyro_stored_type,
 * fc_matcher_match or fc_folded_stack. Totals are checked against the
 * corpus's `pprof -top` figures.
 *
 * Also the trees' codec (selfs divided by their scale, hostile trees
 * refused, a stack of 300,000 frames, sums that saturate), stores whose
 * trees and frames older formats wrote (3, 6 and 11) still read, tenants,
 * selectors and SelectSeries' step.
 */
#include <math.h>
#include <regex.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <lmdb.h>
#include <zstd.h>

#include "core/buf.h"
#include "exporters/store/store.h"
#include "storage/store.h"
#include "storage/store_int.h" /* fc_store_packed_decode (test_hostile_trees_refused) */
#include "tests/unit/fc_test.h"
#include "tests/unit/store_fixture.h"

#define N_PROFILES 90
#define SPAN (3 * 86400)

struct stored {
    struct fc_batch *b;
    int64_t time_s;
    int service;
};

static struct stored stored[N_PROFILES];
static struct fc_store *store;

static int setup(void **state)
{
    char names[64][256];
    size_t n = fc_test_corpus_files(names, 64);
    struct fc_store_options o = {0};
    struct fc_error err = {0};

    if (fixture_setup(state) != 0) {
        return -1;
    }
    o.path = dir;
    o.sync = FC_SYNC_NONE;
    /*
     * An id cache of at most 256 slots (24 bytes a slot): it grows from 64,
     * then is emptied whenever it passes 192 ids, many times over these
     * profiles, so the oracle below also checks that no id is lost or
     * misplaced through it.
     */
    o.id_cache_max_bytes = 256 * 24;
    if (fc_store_open(&o, &store, &err) != FC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return -1;
    }
    srand(42);
    /* Three go profiles per kind, so every type has several series and many windows. */
    for (int i = 0; i < N_PROFILES; i++) {
        const char *file = NULL;
        int k = 0;
        for (size_t j = 0; j < n; j++) {
            if (strncmp(names[j], "go-1s-", 6) == 0 && k++ == i % 5) {
                file = names[j];
            }
        }
        stored[i].service = i % 3;
        stored[i].time_s = BASE + rand() % SPAN;
        stored[i].b = load(file, stored[i].service, stored[i].time_s, "tenant-a");
        if (fc_store_write(store, &stored[i].b, 1, &err) != FC_OK) {
            fprintf(stderr, "%s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **state)
{
    for (int i = 0; i < N_PROFILES; i++) {
        fc_batch_unref(stored[i].b);
    }
    fc_store_close(store);
    return fixture_teardown(state);
}

/* folded line -> value, kept as a sorted text "stack value\n" list. */
struct folded {
    char **lines;
    int64_t *values;
    size_t n, cap;
};

static void add(struct folded *f, const char *line, int64_t v)
{
    for (size_t i = 0; i < f->n; i++) {
        if (strcmp(f->lines[i], line) == 0) {
            f->values[i] += v;
            return;
        }
    }
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 256;
        f->lines = realloc(f->lines, f->cap * sizeof(char *));
        f->values = realloc(f->values, f->cap * sizeof(int64_t));
    }
    f->lines[f->n] = strdup(line);
    f->values[f->n++] = v;
}

static void release(struct folded *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->lines[i]);
    }
    free(f->lines);
    free(f->values);
}

static void tree_to_folded(const struct fc_store_result *r, uint32_t node, char *prefix,
                           struct folded *out)
{
    const struct fc_tree_node *n = &r->tree.nodes[node];
    size_t len = strlen(prefix);

    if (node != 0) {
        if (len > 0) {
            strcat(prefix, ";");
        }
        strcat(prefix, r->names[node]);
        if (n->self > 0) {
            add(out, prefix, n->self);
        }
    }
    for (uint32_t c = n->first; c != 0; c = r->tree.nodes[c].next) {
        tree_to_folded(r, c, prefix, out);
    }
    prefix[len] = '\0';
}

static const char *sample_label(const struct fc_batch *b, const struct fc_sample *s,
                                const char *name)
{
    const struct fc_attr *a = fc_attrs_find(b, s->attrs, name);
    return a != NULL && a->kind == FC_ATTR_STR ? fc_str(b, a->v.str) : NULL;
}

/* One matcher of a query, kept apart from the selector text it is printed into. */
struct ref_matcher {
    const char *name, *op, *value; /* op: "=", "!=", "=~", "!~" */
};

/* PromQL matcher semantics, with POSIX regexes (the store uses PCRE2): fully anchored. */
static bool ref_match(const struct ref_matcher *m, const char *value)
{
    bool eq;

    if (strcmp(m->op, "=") == 0 || strcmp(m->op, "!=") == 0) {
        eq = strcmp(value, m->value) == 0;
    } else {
        char *anchored = malloc(strlen(m->value) + 8);
        regex_t re;
        sprintf(anchored, "^(%s)$", m->value);
        assert_int_equal(regcomp(&re, anchored, REG_EXTENDED | REG_NOSUB), 0);
        eq = regexec(&re, value, 0, NULL, 0) == 0;
        regfree(&re);
        free(anchored);
    }
    return m->op[0] == '!' ? !eq : eq;
}

/*
 * The profile type a pprof sample type is stored under (README): the profile's
 * __name__, then sample type:unit and period type:unit. Only an OTLP profile
 * (origin != 0) of samples:count with a cpu:nanoseconds period is stored as
 * process_cpu:cpu:nanoseconds with values x period; pprof values as they are.
 */
static void ref_stored_type(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                            char *out, size_t size, int64_t *scale)
{
    const char *type = fc_str(b, p->sample_types[t].type),
               *unit = fc_str(b, p->sample_types[t].unit);
    const char *ptype = fc_str(b, p->period_type.type), *punit = fc_str(b, p->period_type.unit);
    const char *name = NULL;

    *scale = 1;
    if (p->origin != 0 && strcmp(type, "samples") == 0 && strcmp(unit, "count") == 0 &&
        strcmp(ptype, "cpu") == 0 && strcmp(punit, "nanoseconds") == 0 && p->period > 0) {
        snprintf(out, size, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
        *scale = p->period;
        return;
    }
    for (uint32_t i = 0; i < p->n_labels; i++) {
        if (strcmp(fc_str(b, p->labels[i].name), "__name__") == 0) {
            name = fc_str(b, p->labels[i].value);
        }
    }
    snprintf(out, size, "%s:%s:%s:%s:%s", name ? name : "", type, unit, ptype, punit);
}

/*
 * How the oracle names a frame: by function (the flame graph), by line
 * (pprof's "name file:line", FC_FRAME_LINES) or with every field the store
 * keeps (compared with the full-detail tree, frames_text below).
 */
enum ref_mode { REF_FUNCTIONS, REF_LINES, REF_FULL };

static enum ref_mode ref_mode;

static size_t ref_frame(const struct fc_batch *b, const struct fc_location *loc, uint32_t j,
                        char *out, size_t size)
{
    const struct fc_line *ln = &b->dict.lines[loc->lines_off + j];
    const struct fc_function *f = &b->dict.functions[ln->function];
    const char *file = fc_str(b, f->filename);

    if (ref_mode == REF_FUNCTIONS) {
        return (size_t)snprintf(out, size, "%s", fc_str(b, f->name));
    }
    if (ref_mode == REF_LINES) {
        return ln->line  ? (size_t)snprintf(out, size, "%s %s:%lld", fc_str(b, f->name), file,
                                            (long long)ln->line)
               : file[0] ? (size_t)snprintf(out, size, "%s %s", fc_str(b, f->name), file)
                         : (size_t)snprintf(out, size, "%s", fc_str(b, f->name));
    }
    /* Lines of a location are innermost first: all but the last are inlined into the next. */
    return (size_t)snprintf(out, size, "%s|%s|%s|%lld|%lld|%lld|%s", fc_str(b, f->name),
                            fc_str(b, f->system_name), file, (long long)f->start_line,
                            (long long)ln->line, (long long)ln->column,
                            j + 1 < loc->n_lines ? "inline" : "");
}

/* A folded stack: frames root first, joined by ';' (inlined frames caller first). */
static void ref_stack(const struct fc_batch *b, const struct fc_sample *smp, char *out, size_t size)
{
    const struct fc_stack *st = &b->dict.stacks[smp->stack];
    const uint32_t *locs = fc_span_idx(b, st->locations); /* leaf first */
    size_t len = 0;

    out[0] = '\0';
    for (uint32_t i = st->locations.n; i-- > 0;) {
        const struct fc_location *loc = &b->dict.locations[locs[i]];
        assert_true(loc->n_lines > 0);              /* every corpus location names its functions */
        for (uint32_t j = loc->n_lines; j-- > 0;) { /* lines: callee first, caller last */
            if (len > 0) {
                out[len++] = ';';
            }
            len += ref_frame(b, loc, j, out + len, size - len);
            assert_true(len < size);
        }
    }
}

/* The full-detail tree of a result as folded lines, frames written as ref_frame's REF_FULL. */
static void frames_to_folded(const struct fc_store_result *r, uint32_t node, char *prefix,
                             struct folded *out)
{
    const struct fc_tree_node *n = &r->frames_tree.nodes[node];
    size_t len = strlen(prefix);

    if (node != 0) {
        const struct fc_frame *f = &r->frames[r->node_frame[node]];
        sprintf(prefix + len, "%s%.*s|%.*s|%.*s|%lld|%lld|%lld|%s", len ? ";" : "", (int)f->name.n,
                f->name.p, (int)f->system_name.n, f->system_name.p, (int)f->file.n, f->file.p,
                (long long)f->start_line, (long long)f->line, (long long)f->column,
                f->is_inline ? "inline" : "");
        if (n->self > 0) {
            add(out, prefix, n->self);
        }
    }
    for (uint32_t c = n->first; c != 0; c = r->frames_tree.nodes[c].next) {
        frames_to_folded(r, c, prefix, out);
    }
    prefix[len] = '\0';
}

/* The oracle: every sample of every stored profile in range whose labels match. */
static void brute_force(const char *type_id, const struct ref_matcher *ms, size_t n_ms,
                        int64_t from_s, int64_t until_s, struct folded *out)
{
    static char line[1 << 16];

    for (int i = 0; i < N_PROFILES; i++) {
        const struct fc_batch *b = stored[i].b;
        const struct fc_profile *p = &b->profiles[0];
        if (stored[i].time_s < from_s || stored[i].time_s >= until_s) {
            continue;
        }
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            char id[256];
            int64_t scale;
            ref_stored_type(b, p, t, id, sizeof(id), &scale);
            if (strcmp(id, type_id) != 0) {
                continue;
            }
            for (uint32_t s = 0; s < p->n_samples; s++) {
                const struct fc_sample *smp = &p->samples[s];
                int64_t v = fc_sample_value(p, smp, t);
                bool ok = v > 0;
                for (size_t m = 0; ok && m < n_ms; m++) {
                    /* Series labels, then the sample's own; a missing label is "". */
                    const char *value = NULL;
                    for (uint32_t l = 0; l < p->n_labels; l++) {
                        if (strcmp(fc_str(b, p->labels[l].name), ms[m].name) == 0) {
                            value = fc_str(b, p->labels[l].value);
                        }
                    }
                    if (value == NULL) {
                        value = sample_label(b, smp, ms[m].name);
                    }
                    ok = ref_match(&ms[m], value ? value : "");
                }
                if (!ok) {
                    continue;
                }
                ref_stack(b, smp, line, sizeof(line));
                add(out, line, v * scale);
            }
        }
    }
}

static int by_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void assert_same(struct folded *x, struct folded *y, const char *query)
{
    /* Compare as sorted "line value" texts. */
    char **a = calloc(x->n + 1, sizeof(char *)), **b = calloc(y->n + 1, sizeof(char *));
    for (size_t i = 0; i < x->n; i++) {
        a[i] = malloc(strlen(x->lines[i]) + 32);
        sprintf(a[i], "%s %lld", x->lines[i], (long long)x->values[i]);
    }
    for (size_t i = 0; i < y->n; i++) {
        b[i] = malloc(strlen(y->lines[i]) + 32);
        sprintf(b[i], "%s %lld", y->lines[i], (long long)y->values[i]);
    }
    qsort(a, x->n, sizeof(char *), by_line);
    qsort(b, y->n, sizeof(char *), by_line);
    if (x->n != y->n) {
        fail_msg("%s: %zu stacks from the store, %zu from brute force", query, x->n, y->n);
    }
    for (size_t i = 0; i < x->n; i++) {
        if (strcmp(a[i], b[i]) != 0) {
            fail_msg("%s: store has '%s', brute force '%s'", query, a[i], b[i]);
        }
    }
    for (size_t i = 0; i < x->n; i++) {
        free(a[i]);
    }
    for (size_t i = 0; i < y->n; i++) {
        free(b[i]);
    }
    free(a);
    free(b);
}

static void test_oracle(void **state)
{
    static const char *const types[] = {"process_cpu:cpu:nanoseconds:cpu:nanoseconds",
                                        "process_cpu:samples:count:cpu:nanoseconds",
                                        "memory:alloc_space:bytes:space:bytes",
                                        "memory:inuse_objects:count:space:bytes",
                                        "mutex:delay:nanoseconds:contentions:count",
                                        "goroutines:goroutine:count:goroutine:count"};
    /* Each filter: up to two matchers, printed into the selector text below. */
    static const struct ref_matcher filters[][2] = {
        {{NULL, NULL, NULL}},
        {{"service_name", "=", "svc-1"}},
        {{"service_name", "!=", "svc-0"}},
        {{"service_name", "=~", "svc-[12]"}},
        {{"service_name", "=", "svc-2"}, {"worker", "=~", ".+"}},
        {{"nothing", "=", ""}},
        {{"service_name", "=~", "svc"}}, /* anchored: matches no "svc-N" */
        {{"worker", "!~", "[0-2]"}, {"service_name", "!=", "svc-1"}},
        {{"worker", "=", ""}}, /* samples without the label */
        {{"worker", "!=", "3"}, {"nothing", "!~", ".+"}}};
    const size_t n_filters = sizeof(filters) / sizeof(filters[0]);
    char *prefix = malloc(1 << 20);
    int checked = 0;

    (void)state;
    for (int q = 0; q < 90; q++) {
        char text[512], matchers[256];
        const struct ref_matcher *f = filters[(q / 6) % n_filters];
        size_t n_ms = 0;
        struct fc_selector sel;
        struct fc_error err = {0};
        struct fc_store_query query = {0};
        struct fc_store_result res;
        struct fc_store_stats stats;
        struct folded got = {0}, want = {0};
        int64_t a = BASE - 3600 + rand() % (SPAN + 7200);
        int64_t b = a + rand() % (q % 3 == 0 ? SPAN : 7200);
        int64_t nf = a - ((a % 10) + 10) % 10, nu = b + (10 - b % 10) % 10;
        if (nu <= nf) {
            nu = nf + 10;
        }
        matchers[0] = '\0';
        for (; n_ms < 2 && f[n_ms].name != NULL; n_ms++) {
            size_t l = strlen(matchers);
            snprintf(matchers + l, sizeof(matchers) - l, "%s%s%s\"%s\"", n_ms ? "," : "",
                     f[n_ms].name, f[n_ms].op, f[n_ms].value);
        }
        snprintf(text, sizeof(text), "%s{%s}", types[q % 6], matchers);
        assert_int_equal(fc_selector_parse(text, &sel, &err), FC_OK);
        query.tenant = "tenant-a";
        query.selector = &sel;
        query.from_ns = a * 1000000000LL;
        query.until_ns = b * 1000000000LL;
        query.level0_only = q % 5 == 4; /* the tree and the flat scan agree */
        /* By function (the flame graph), by line, and the full detail every time. */
        query.granularity = q % 4 == 1 ? FC_FRAME_LINES : FC_FRAME_FUNCTIONS;
        if (fc_store_select_merge(store, &query, &res, &stats, &err) != FC_OK) {
            fail_msg("%s: %s", text, err.msg);
        }
        prefix[0] = '\0';
        tree_to_folded(&res, 0, prefix, &got);
        ref_mode = q % 4 == 1 ? REF_LINES : REF_FUNCTIONS;
        brute_force(types[q % 6], f, n_ms, nf, nu, &want);
        assert_same(&got, &want, text);
        release(&got);
        release(&want);
        memset(&got, 0, sizeof(got));
        memset(&want, 0, sizeof(want));
        frames_to_folded(&res, 0, prefix, &got);
        ref_mode = REF_FULL;
        brute_force(types[q % 6], f, n_ms, nf, nu, &want);
        assert_same(&got, &want, text);
        ref_mode = REF_FUNCTIONS;
        /* The segment-tree bound: per series, whatever the range. */
        if (!query.level0_only) {
            assert_true(stats.nodes_merged <= stats.series * (2 * 9 * FC_STORE_LEVELS + 2));
        }
        checked += want.n > 0;
        release(&got);
        release(&want);
        fc_store_result_release(&res);
        fc_selector_release(&sel);
    }
    assert_true(checked >= 20); /* most queries found data */
    {
        /* The setup's writes went through the id cache, which was full and emptied. */
        uint64_t hits, misses, emptied;
        fc_store_id_cache_lookups(store, &hits, &misses, &emptied);
        assert_true(hits > 0);
        assert_true(emptied > 0);
        assert_true(fc_store_id_cache_bytes(store) == 256 * 24);
    }
    {
        /* The whole range, by hand: profiles i % 5 == 2 are go-1s-cpu, 18 of 90. */
        struct fc_selector sel;
        struct fc_error err = {0};
        struct fc_store_query query = {"tenant-a", &sel, BASE * 1000000000LL,
                                       (BASE + SPAN) * 1000000000LL, false};
        struct fc_store_result res;
        struct fc_store_stats stats;
        assert_int_equal(
            fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err), FC_OK);
        assert_int_equal(fc_store_select_merge(store, &query, &res, &stats, &err), FC_OK);
        assert_int_equal(fc_tree_total(&res.tree), 18 * GO_CPU_TOTAL);
        fc_store_result_release(&res);
        fc_selector_release(&sel);
    }
    free(prefix);
}

static void test_tenants_do_not_mix(void **state)
{
    struct fc_selector sel;
    struct fc_error err = {0};
    struct fc_store_query q = {"tenant-b", &sel, 0, (BASE + SPAN) * 1000000000LL, false};
    struct fc_store_result res;
    struct fc_store_stats stats;
    char **names;
    size_t n;

    (void)state;
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    assert_int_equal(fc_store_select_merge(store, &q, &res, &stats, &err), FC_OK);
    assert_int_equal(stats.series, 0);
    assert_int_equal(fc_tree_total(&res.tree), 0);
    fc_store_result_release(&res);
    q.tenant = "tenant-a";
    assert_int_equal(fc_store_select_merge(store, &q, &res, &stats, &err), FC_OK);
    assert_true(stats.series >= 3);
    assert_true(fc_tree_total(&res.tree) > 0);
    fc_store_result_release(&res);
    fc_selector_release(&sel);
    assert_int_equal(fc_store_label_values(store, "tenant-a", "service_name", &names, &n, &err),
                     FC_OK);
    assert_int_equal(n, 3);
    assert_string_equal(names[0], "svc-0");
    fc_store_strings_free(names, n);
    assert_int_equal(fc_store_label_names(store, "tenant-b", &names, &n, &err), FC_OK);
    assert_int_equal(n, 0);
    fc_store_strings_free(names, n);
    assert_int_equal(fc_store_label_names(store, "tenant-a", &names, &n, &err), FC_OK);
    assert_true(n >= 3); /* __name__, __profile_type__, service_name, pprof labels */
    fc_store_strings_free(names, n);
}

static void test_selector_errors(void **state)
{
    struct fc_selector sel;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_selector_parse("cpu{service_name=\"x\"", &sel, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "col"));
    assert_int_equal(fc_selector_parse("cpu{a~\"x\"}", &sel, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "expected '='"));
    assert_int_equal(fc_selector_parse("cpu{a=~\"(\"}", &sel, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "bad regex"));
    assert_int_equal(fc_selector_parse("{\"service.name\"=`x\\d`, b!~'y'}", &sel, &err), FC_OK);
    assert_string_equal(sel.matchers[0].name, "service.name");
    assert_string_equal(sel.matchers[0].value, "x\\d");
    fc_selector_release(&sel);
    /* Anchored: =~"svc" does not match "svc-1". */
    assert_int_equal(fc_selector_parse("t{a=~\"svc\"}", &sel, &err) == FC_OK ? 0 : 1, 0);
    assert_false(fc_matcher_match(&sel.matchers[0], "svc-1"));
    assert_true(fc_matcher_match(&sel.matchers[0], "svc"));
    fc_selector_release(&sel);
}

/* The folded stacks of the first profile of b with their CPU time (its sample type 1). */
static void ref_cpu_folded(const struct fc_batch *b, struct folded *want)
{
    static char line[1 << 16];

    for (uint32_t i = 0; i < b->profiles[0].n_samples; i++) {
        const struct fc_sample *smp = &b->profiles[0].samples[i];
        int64_t value = fc_sample_value(&b->profiles[0], smp, 1);
        if (value > 0) {
            ref_stack(b, smp, line, sizeof(line));
            add(want, line, value);
        }
    }
}

/* A store in dir/name holding go-1s-cpu at BASE (tenant anonymous), closed; its batch. */
static struct fc_batch *store_go_cpu(const char *name, char *sub, size_t size,
                                     struct fc_store_options *o)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    struct fc_batch *b = load("go-1s-cpu.pb.gz", 0, BASE, "anonymous");

    snprintf(sub, size, "%s/%s", dir, name);
    o->path = sub;
    o->sync = FC_SYNC_NONE;
    assert_int_equal(fc_store_open(o, &s2, &err), FC_OK);
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    /* Its coarse windows built too, though nothing newer closed them (store_flush.c). */
    assert_int_equal(fc_store_flush_before(s2, INT64_MAX, &err), FC_OK);
    fc_store_close(s2);
    return b;
}

/*
 * A store written by format 3 (symbols were plain names) is read, and marked
 * format 5: made here from a store of this build by rewriting, in LMDB itself,
 * every frame record of symid into the name format 3 wrote for it (the
 * function name: the record's first field) and the version into 3.
 */
static void test_names_of_format_3_still_read(void **state)
{
    char sub[128];
    struct fc_store_options o = {0};
    struct fc_store *s2;
    struct fc_error err = {0};
    struct fc_batch *b;
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct folded got = {0}, want = {0};
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi symid, meta;
    MDB_cursor *c;
    MDB_val k, v;
    uint32_t version = 3, records = 0;
    static struct {
        uint8_t key[64];
        char name[4096];
        size_t key_len, name_len;
    } renamed[4096];
    char *prefix = malloc(1 << 20);

    (void)state;
    b = store_go_cpu("format3", sub, sizeof(sub), &o);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "symid", 0, &symid), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, symid, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *p = v.mv_data;
        uint64_t n;
        if (v.mv_size == 0 || p[0] != 0) {
            continue;
        }
        assert_int_equal(p[1], 1); /* version 1 */
        p += 2;
        ref_uvarint(&p); /* flags */
        n = ref_uvarint(&p);
        assert_true(n > 0 && n < 4096); /* the corpus's frames all have names */
        assert_true(records < sizeof(renamed) / sizeof(renamed[0]));
        memcpy(renamed[records].key, k.mv_data, k.mv_size);
        renamed[records].key_len = k.mv_size;
        memcpy(renamed[records].name, p, n);
        renamed[records].name_len = n;
        records++;
    }
    mdb_cursor_close(c);
    for (uint32_t i = 0; i < records; i++) {
        k.mv_data = renamed[i].key;
        k.mv_size = renamed[i].key_len;
        v.mv_data = renamed[i].name;
        v.mv_size = renamed[i].name_len;
        assert_int_equal(mdb_put(txn, symid, &k, &v, 0), 0);
    }
    assert_true(records > 100); /* Go frames have files and lines: records, not names */
    lmdb_commit_format(env, txn, meta, version);

    assert_int_equal(fc_store_open(&o, &s2, &err), FC_OK);
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    q.from_ns = BASE * 1000000000LL;
    q.until_ns = (BASE + 10) * 1000000000LL;
    assert_int_equal(fc_store_select_merge(s2, &q, &res, &stats, &err), FC_OK);
    prefix[0] = '\0';
    tree_to_folded(&res, 0, prefix, &got);
    ref_cpu_folded(b, &want);
    assert_same(&got, &want, "format 3");
    assert_int_equal(fc_tree_total(&res.tree), GO_CPU_TOTAL);
    /* The frames are names only: no file, no line. */
    for (uint32_t f = 1; f < res.n_frames; f++) {
        assert_true(res.frames[f].name.n > 0);
        assert_int_equal(res.frames[f].file.n, 0);
        assert_int_equal(res.frames[f].line, 0);
    }
    fc_store_result_release(&res);
    fc_store_close(s2);
    /* Marked format 8 at open: reopens, and an older build would refuse it. */
    assert_int_equal(fc_test_store_format(sub), 18);
    release(&got);
    release(&want);
    fc_selector_release(&sel);
    fc_batch_unref(b);
    free(prefix);
}

/* A uvarint, written here from the protobuf rule (7 bits a byte, low first). */
static void ref_put_uvarint(struct fc_buf *b, uint64_t v)
{
    uint8_t x;
    while (v >= 0x80) {
        x = (uint8_t)(v | 0x80);
        fc_buf_append(b, &x, 1);
        v >>= 7;
    }
    x = (uint8_t)v;
    fc_buf_append(b, &x, 1);
}

/* A tree as format 6 wrote it: pre-order, each node uvarint name, self, children. */
static void ref_interleaved(const struct fc_tree *t, struct fc_buf *out)
{
    uint32_t *stack = malloc(((size_t)t->n + 1) * sizeof(uint32_t)), sp = 0;

    stack[sp++] = 0;
    while (sp > 0) {
        uint32_t i = stack[--sp], n = 0, at;
        for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
            n++;
        }
        ref_put_uvarint(out, t->nodes[i].name);
        ref_put_uvarint(out, (uint64_t)t->nodes[i].self);
        ref_put_uvarint(out, n);
        /* Pushed last child first, so the first is written next. */
        at = sp + n;
        sp = at;
        for (uint32_t c = t->nodes[i].first; c != 0; c = t->nodes[c].next) {
            stack[--at] = c;
        }
    }
    free(stack);
}

/*
 * The store at o (holding b, go-1s-cpu, as store_go_cpu wrote it, then
 * rewritten into an older layout) answers b's flame graph exactly from its
 * 10 s window and over a day (the 100 s window and the links above it);
 * b written again is merged with what the windows hold.
 */
static void go_cpu_read_as_written(struct fc_store_options *o, struct fc_batch *b,
                                   const char *label)
{
    struct fc_store *s2;
    struct fc_error err = {0};
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct folded got = {0}, want = {0};
    char *prefix = malloc(1 << 20);

    ref_cpu_folded(b, &want);
    assert_int_equal(fc_store_open(o, &s2, &err), FC_OK);
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "anonymous";
    q.selector = &sel;
    for (int range = 0; range < 2; range++) {
        /* The 10 s window, then a day: the 100 s window and the links above it. */
        q.from_ns = BASE * 1000000000LL;
        q.until_ns = (BASE + (range == 0 ? 10 : 86400)) * 1000000000LL;
        assert_int_equal(fc_store_select_merge(s2, &q, &res, &stats, &err), FC_OK);
        prefix[0] = '\0';
        tree_to_folded(&res, 0, prefix, &got);
        assert_same(&got, &want, label);
        assert_int_equal(fc_tree_total(&res.tree), GO_CPU_TOTAL);
        release(&got);
        memset(&got, 0, sizeof(got));
        fc_store_result_release(&res);
    }
    /* The same profile again, into the old windows: merged at the flush (coarse ones too). */
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    assert_int_equal(fc_store_flush_before(s2, INT64_MAX, &err), FC_OK);
    for (int range = 0; range < 2; range++) {
        q.until_ns = (BASE + (range == 0 ? 10 : 86400)) * 1000000000LL;
        assert_int_equal(fc_store_select_merge(s2, &q, &res, &stats, &err), FC_OK);
        assert_int_equal(fc_tree_total(&res.tree), 2 * GO_CPU_TOTAL);
        fc_store_result_release(&res);
    }
    fc_store_close(s2);
    release(&want);
    fc_selector_release(&sel);
    free(prefix);
}

/*
 * A selfs column of format 12 (its scale, then each self divided by it)
 * rewritten as format 11 wrote it (each self whole), from
 * docs/internals/store.md: appended to out.
 */
static void ref_unscaled_selfs(const uint8_t *col, size_t len, struct fc_buf *out)
{
    const uint8_t *p = col, *end = col + len;
    uint64_t scale = ref_uvarint(&p);

    while (p < end) {
        ref_put_uvarint(out, ref_uvarint(&p) * scale);
    }
}

/*
 * Every packed window of the closed store at sub rewritten with unscaled
 * selfs and without the scaled flag (0x20000000), the version 11. Returns
 * how many windows were scaled.
 */
static uint32_t make_format_11(const char *sub)
{
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node, meta;
    MDB_cursor *c;
    MDB_val k, v;
    uint32_t n = 0;
    struct fc_buf puts;

    fc_test_sids_as_format_17(sub); /* format 17 kept a key per series */
    fc_buf_init(&puts, 0);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *p = v.mv_data, *h;
        uint32_t hlen, count;
        uint64_t series[64], total[64], lens[64][3];
        size_t at = 0, size;
        uint8_t *frame;
        struct fc_buf header, names, selfs, counts, value;
        if (v.mv_size == 12 && memcmp(p, "\xff\xff\xff\xff", 4) == 0) {
            continue; /* a link: no trees */
        }
        memcpy(&hlen, p, 4);
        assert_true((hlen & 0xe0000000u) == 0xa0000000u); /* columns, scaled, not bundled */
        hlen &= 0x1fffffffu;
        h = p + 4;
        count = (uint32_t)ref_uvarint(&h);
        assert_true(count <= 64);
        fc_buf_init(&header, 0);
        ref_put_uvarint(&header, count);
        for (uint32_t i = 0; i < count; i++) {
            series[i] = ref_uvarint(&h);
            total[i] = ref_uvarint(&h);
            for (int col = 0; col < 3; col++) {
                lens[i][col] = ref_uvarint(&h);
            }
        }
        size = ZSTD_getFrameContentSize(p + 4 + hlen, v.mv_size - 4 - hlen);
        frame = malloc(size + 1);
        assert_int_equal(ZSTD_decompress(frame, size, p + 4 + hlen, v.mv_size - 4 - hlen), size);
        fc_buf_init(&names, 0);
        fc_buf_init(&selfs, 0);
        fc_buf_init(&counts, 0);
        /* Every tree's names, then every tree's selfs, then their counts. */
        for (int col = 0; col < 3; col++) {
            for (uint32_t i = 0; i < count; i++) {
                size_t len = (size_t)lens[i][col], before = selfs.len;
                assert_true(at + len <= size);
                if (col == 1) {
                    ref_unscaled_selfs(frame + at, len, &selfs);
                    lens[i][1] = selfs.len - before;
                } else {
                    fc_buf_append(col == 0 ? &names : &counts, frame + at, len);
                }
                at += len;
            }
        }
        assert_int_equal(at, size);
        free(frame);
        for (uint32_t i = 0; i < count; i++) {
            ref_put_uvarint(&header, series[i]);
            ref_put_uvarint(&header, total[i]);
            for (int col = 0; col < 3; col++) {
                ref_put_uvarint(&header, lens[i][col]);
            }
        }
        fc_buf_append(&names, selfs.data, selfs.len);
        fc_buf_append(&names, counts.data, counts.len);
        fc_buf_init(&value, 0);
        hlen = (uint32_t)header.len | 0x80000000u;
        fc_buf_append(&value, &hlen, 4);
        fc_buf_append(&value, header.data, header.len);
        assert_int_equal(fc_buf_reserve(&value, ZSTD_compressBound(names.len)), FC_OK);
        value.len += ZSTD_compress(value.data + value.len, ZSTD_compressBound(names.len),
                                   names.data, names.len, 3);
        keep_put(&puts, &k, value.data, value.len);
        fc_buf_release(&header);
        fc_buf_release(&names);
        fc_buf_release(&selfs);
        fc_buf_release(&counts);
        fc_buf_release(&value);
        n++;
    }
    mdb_cursor_close(c);
    put_kept(txn, node, &puts);
    lmdb_commit_format(env, txn, meta, 11);
    return n;
}

/*
 * A store of format 11 holds its trees' selfs whole (no scale in the selfs
 * column, the flag clear): read exactly and marked as this build's format; a profile written
 * into such a window is merged, and the window is written scaled again.
 */
static void test_unscaled_windows_of_format_11_still_read(void **state)
{
    char sub[128];
    struct fc_store_options o = {0};
    struct fc_batch *b;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node;
    MDB_cursor *c;
    MDB_val k, v;
    uint32_t scaled = 0;

    (void)state;
    b = store_go_cpu("format11", sub, sizeof(sub), &o);
    assert_int_equal(make_format_11(sub), 2); /* the 10 s window and its 100 s window */
    go_cpu_read_as_written(&o, b, "format 11");
    assert_int_equal(fc_test_store_format(sub), 18);
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint32_t hlen;
        if (v.mv_size != 12) {
            memcpy(&hlen, v.mv_data, 4);
            scaled += (hlen & 0x20000000u) != 0;
        }
    }
    mdb_cursor_close(c);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    assert_int_equal(scaled, 2);
    fc_batch_unref(b);
}

/*
 * A store of format 6 holds its packed windows' trees interleaved (node by
 * node: name, self, child count). Made here from a store of this build by
 * rewriting every packed window in that layout (written by this test from
 * docs/internals/store.md) and the version into 6: read exactly, marked 7;
 * a profile written into such a window is merged with what it holds, and
 * the window is then written in columns.
 */
static void test_interleaved_windows_of_format_6_still_read(void **state)
{
    char sub[128];
    struct fc_store_options o = {0};
    struct fc_batch *b;
    MDB_env *env;
    MDB_txn *txn;
    MDB_dbi node, meta;
    MDB_cursor *c;
    MDB_val k, v;
    uint32_t version = 6, n_values = 0, n_columns = 0;
    static struct {
        uint8_t key[128];
        size_t key_len;
        struct fc_buf value;
    } rewritten[512];

    (void)state;
    /* Closed, so flushed: level 0 and level 1 packed, the coarser levels linked. */
    b = store_go_cpu("format6", sub, sizeof(sub), &o);
    lmdb_begin(sub, 0, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    assert_int_equal(mdb_dbi_open(txn, "meta", 0, &meta), 0);
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        const uint8_t *p = v.mv_data, *h;
        uint32_t hlen, count;
        bool scaled;
        struct fc_buf header, raw, *out;
        uint8_t *frame;
        size_t off = 0, size;
        if (v.mv_size == 12 && memcmp(p, "\xff\xff\xff\xff", 4) == 0) {
            continue; /* a link: no trees */
        }
        memcpy(&hlen, p, 4);
        n_columns += (hlen & 0x80000000u) != 0;
        scaled = (hlen & 0x20000000u) != 0;
        hlen &= 0x1fffffffu;
        h = p + 4;
        count = (uint32_t)ref_uvarint(&h);
        size = ZSTD_getFrameContentSize(p + 4 + hlen, v.mv_size - 4 - hlen);
        frame = malloc(size + 1);
        assert_int_equal(ZSTD_decompress(frame, size, p + 4 + hlen, v.mv_size - 4 - hlen), size);
        fc_buf_init(&header, 0);
        fc_buf_init(&raw, 0);
        ref_put_uvarint(&header, count);
        {
            /* Format 7: per tree series, total and its three column lengths; the frame
               holds every tree's names, then every tree's selfs, then their counts. */
            uint64_t series[64], total[64], lens[64][3];
            size_t at[3] = {0, 0, 0};
            assert_true(count <= 64);
            for (uint32_t i = 0; i < count; i++) {
                series[i] = ref_uvarint(&h);
                total[i] = ref_uvarint(&h);
                for (int col = 0; col < 3; col++) {
                    lens[i][col] = ref_uvarint(&h);
                    at[col] += lens[i][col];
                }
            }
            off = at[0] + at[1] + at[2];
            at[2] = at[0] + at[1];
            at[1] = at[0];
            at[0] = 0;
            for (uint32_t i = 0; i < count; i++) {
                struct fc_tree t;
                struct fc_tree_columns cols = {frame + at[0], frame + at[1], frame + at[2],
                                               lens[i][0],    lens[i][1],    lens[i][2],
                                               scaled};
                size_t before = raw.len;
                fc_tree_init(&t);
                assert_int_equal(fc_tree_decode_columns_merge(&t, &cols), FC_OK);
                assert_int_equal((uint64_t)fc_tree_total(&t), total[i]);
                ref_interleaved(&t, &raw);
                ref_put_uvarint(&header, series[i]);
                ref_put_uvarint(&header, total[i]);
                ref_put_uvarint(&header, raw.len - before);
                fc_tree_release(&t);
                for (int col = 0; col < 3; col++) {
                    at[col] += lens[i][col];
                }
            }
        }
        assert_int_equal(off, size);
        assert_true(n_values < 512);
        memcpy(rewritten[n_values].key, k.mv_data, k.mv_size);
        rewritten[n_values].key_len = k.mv_size;
        out = &rewritten[n_values].value;
        fc_buf_init(out, 0);
        hlen = (uint32_t)header.len;
        fc_buf_append(out, &hlen, 4);
        fc_buf_append(out, header.data, header.len);
        assert_int_equal(fc_buf_reserve(out, ZSTD_compressBound(raw.len)), FC_OK);
        out->len +=
            ZSTD_compress(out->data + out->len, ZSTD_compressBound(raw.len), raw.data, raw.len, 3);
        fc_buf_release(&header);
        fc_buf_release(&raw);
        free(frame);
        n_values++;
    }
    mdb_cursor_close(c);
    assert_int_equal(n_values, 2);         /* the 10 s window and its 100 s window */
    assert_int_equal(n_columns, n_values); /* this build writes columns */
    for (uint32_t i = 0; i < n_values; i++) {
        k.mv_data = rewritten[i].key;
        k.mv_size = rewritten[i].key_len;
        v.mv_data = rewritten[i].value.data;
        v.mv_size = rewritten[i].value.len;
        assert_int_equal(mdb_put(txn, node, &k, &v, 0), 0);
        fc_buf_release(&rewritten[i].value);
    }
    lmdb_commit_format(env, txn, meta, version);

    go_cpu_read_as_written(&o, b, "format 6");

    /* Marked again; both windows written again, in columns. */
    assert_int_equal(fc_test_store_format(sub), 18);
    lmdb_begin(sub, MDB_RDONLY, &env, &txn);
    assert_int_equal(mdb_dbi_open(txn, "node", 0, &node), 0);
    n_columns = 0;
    assert_int_equal(mdb_cursor_open(txn, node, &c), 0);
    for (int g = mdb_cursor_get(c, &k, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &k, &v, MDB_NEXT)) {
        uint32_t hlen;
        if (v.mv_size != 12) {
            memcpy(&hlen, v.mv_data, 4);
            n_columns += (hlen & 0x80000000u) != 0;
        }
    }
    mdb_cursor_close(c);
    assert_int_equal(n_columns, 2);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    fc_batch_unref(b);
}

/* The depth of the tree's first-child chain (the stack as built: one child per level). */
static uint32_t chain_depth(const struct fc_tree *t)
{
    uint32_t d = 0;

    for (uint32_t n = t->nodes[0].first; n != 0; n = t->nodes[n].first) {
        assert_int_equal(t->nodes[n].next, 0);
        d++;
    }
    return d;
}

#define DEEP 300000

/*
 * A packed window (format 7, docs/internals/store.md) of one tree that is a
 * chain of `nodes` one-child nodes under the root, written here by hand:
 * header with the columns bit, then one zstd frame of names (the first
 * child's name is a difference from 0: 1 each), selfs (0) and counts.
 */
static void ref_chain_window(uint32_t nodes, struct fc_buf *out)
{
    size_t n = (size_t)nodes + 1; /* and the root */
    uint8_t *raw = calloc(3 * n, 1);
    struct fc_buf header;
    uint32_t hlen;

    for (size_t i = 0; i < n; i++) {
        raw[i] = i == 0 ? 0 : 1;            /* names */
        raw[2 * n + i] = i + 1 < n ? 1 : 0; /* counts; selfs stay 0 */
    }
    fc_buf_init(&header, 0);
    ref_put_uvarint(&header, 1);
    ref_put_uvarint(&header, 7); /* series */
    ref_put_uvarint(&header, 0); /* total */
    for (int col = 0; col < 3; col++) {
        ref_put_uvarint(&header, n);
    }
    hlen = (uint32_t)header.len | 0x80000000u;
    fc_buf_init(out, 0);
    fc_buf_append(out, &hlen, 4);
    fc_buf_append(out, header.data, header.len);
    assert_int_equal(fc_buf_reserve(out, ZSTD_compressBound(3 * n)), FC_OK);
    out->len += ZSTD_compress(out->data + out->len, ZSTD_compressBound(3 * n), raw, 3 * n, 19);
    fc_buf_release(&header);
    free(raw);
}

/*
 * Format 12: a tree's selfs column starts with their greatest common divisor
 * and holds each self divided by it (hand-computed bytes), and reads back
 * multiplied; a scale of 0, or a self that the scale would carry past
 * INT64_MAX, is refused.
 */
static void test_selfs_stored_divided_by_their_scale(void **state)
{
    static const uint32_t a[] = {3}, b[] = {5}, c[] = {5, 9};
    static const uint8_t want_names[] = {0, 3, 2, 9}, want_selfs[] = {10, 0, 3, 0, 2};
    static const uint8_t want_counts[] = {2, 0, 1, 0};
    /* The same shape, scale 2^62 and a self of 4: 2^64, past INT64_MAX. */
    static const uint8_t big[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40, 0, 4, 0, 0};
    static const uint8_t zero[] = {0, 0, 3, 0, 2};
    struct fc_tree t, back;
    struct fc_buf names, selfs, counts;
    struct fc_tree_columns cols;

    (void)state;
    fc_tree_init(&t);
    fc_tree_insert(&t, a, 1, 30);
    fc_tree_insert(&t, c, 2, 20); /* 5 holds no self of its own: 9 under it does */
    fc_tree_insert(&t, b, 1, 0);
    fc_buf_init(&names, 0);
    fc_buf_init(&selfs, 0);
    fc_buf_init(&counts, 0);
    fc_tree_encode_columns(&t, &names, &selfs, &counts);
    assert_int_equal(names.len, sizeof(want_names));
    assert_memory_equal(names.data, want_names, sizeof(want_names));
    assert_int_equal(selfs.len, sizeof(want_selfs));
    assert_memory_equal(selfs.data, want_selfs, sizeof(want_selfs));
    assert_int_equal(counts.len, sizeof(want_counts));
    assert_memory_equal(counts.data, want_counts, sizeof(want_counts));
    cols = (struct fc_tree_columns){names.data, selfs.data, counts.data, names.len,
                                    selfs.len,  counts.len, true};
    fc_tree_init(&back);
    assert_int_equal(fc_tree_decode_columns_merge(&back, &cols), FC_OK);
    assert_int_equal(fc_tree_total(&back), 50);
    assert_int_equal(back.n, t.n);
    for (uint32_t i = 0; i < back.n; i++) {
        assert_int_equal(back.nodes[i].name, t.nodes[i].name);
        assert_int_equal(back.nodes[i].self, t.nodes[i].self);
        assert_int_equal(back.nodes[i].total, t.nodes[i].total);
    }
    fc_tree_release(&back);
    cols.selfs = big;
    cols.n_selfs = sizeof(big);
    fc_tree_init(&back);
    assert_int_equal(fc_tree_decode_columns_merge(&back, &cols), FC_EPROTO);
    fc_tree_release(&back);
    cols.selfs = zero;
    cols.n_selfs = sizeof(zero);
    fc_tree_init(&back);
    assert_int_equal(fc_tree_decode_columns_merge(&back, &cols), FC_EPROTO);
    fc_tree_release(&back);
    /* Selfs with no common divisor above 1 are kept whole: scale 1. */
    fc_tree_insert(&t, a, 1, 7);
    fc_buf_reset(&selfs);
    fc_buf_reset(&names);
    fc_buf_reset(&counts);
    fc_tree_encode_columns(&t, &names, &selfs, &counts);
    assert_int_equal(selfs.len, 5);
    assert_memory_equal(selfs.data, "\x01\x00\x25\x00\x14", 5); /* 1; 0, 37, 0, 20 */
    fc_buf_release(&names);
    fc_buf_release(&selfs);
    fc_buf_release(&counts);
    fc_tree_release(&t);
}

/*
 * Stored trees that no encoder writes are refused, not decoded at any cost:
 * siblings out of order or repeated (both layouts: each would make a merge
 * a scan from the first sibling, quadratic in a hostile list), and a frame
 * that decompresses past FC_TREE_MAX_RATIO times its size (a few hundred
 * bytes claiming millions of nodes). A deep chain within the floor decodes.
 */
static void test_hostile_trees_refused(void **state)
{
    /* Interleaved: root (name, self, children), then each child (name 3/5, self 1, none). */
    static const uint8_t sorted[] = {0, 0, 2, 3, 1, 0, 5, 1, 0};
    static const uint8_t unsorted[] = {0, 0, 2, 5, 1, 0, 3, 1, 0};
    static const uint8_t repeated[] = {0, 0, 2, 3, 1, 0, 3, 1, 0};
    /* Columns: names (root, then differences 3 and 0: the same name twice), selfs, counts. */
    static const uint8_t names[] = {0, 3, 0}, selfs[] = {0, 1, 1}, counts[] = {2, 0, 0};
    struct fc_tree_columns dup = {names, selfs, counts, 3, 3, 3};
    struct fc_tree t;
    struct fc_buf v;
    struct parts ps = {0};

    (void)state;
    fc_tree_init(&t);
    assert_int_equal(fc_tree_decode_raw_merge(&t, sorted, sizeof(sorted)), FC_OK);
    assert_int_equal(fc_tree_total(&t), 2);
    assert_int_equal(fc_tree_decode_raw_merge(&t, unsorted, sizeof(unsorted)), FC_EPROTO);
    assert_int_equal(fc_tree_decode_raw_merge(&t, repeated, sizeof(repeated)), FC_EPROTO);
    assert_int_equal(fc_tree_decode_columns_merge(&t, &dup), FC_EPROTO);
    fc_tree_release(&t);

    /* 3,000,001 nodes: 9 MB of columns in a few hundred bytes of zstd. */
    ref_chain_window(3000000, &v);
    assert_true(v.len * FC_TREE_MAX_RATIO < 9000003);
    assert_false(fc_store_packed_decode(v.data, v.len, NULL, NULL, &ps));
    fc_store_parts_release(&ps);
    fc_buf_release(&v);
    /* 100,000 nodes deep: 300 KB, within the 1 MiB floor. */
    ref_chain_window(100000, &v);
    assert_true(fc_store_packed_decode(v.data, v.len, NULL, NULL, &ps));
    assert_int_equal(ps.n, 1);
    assert_int_equal(ps.v[0].series, 7);
    assert_int_equal(ps.v[0].tree.n, 100001);
    fc_store_parts_release(&ps);
    fc_buf_release(&v);
}

/* One stack of 300,000 frames: written, merged (7 levels), encoded, decoded, queried. */
static void test_deep_stack_round_trips(void **state)
{
    struct fc_store *s2 = open_sub("deep");
    struct fc_error err = {0};
    const int64_t v = 7;
    struct fc_batch *b = stacks_batch("deep", BASE, DEEP, 1000, &v, 1);
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct fc_tree copy;
    struct fc_buf enc;

    (void)state;
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK); /* merged into what is stored */
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "lim";
    q.selector = &sel;
    q.from_ns = (BASE - 3600) * 1000000000LL;
    q.until_ns = (BASE + 3600) * 1000000000LL; /* coarse windows in the middle, fine at the edges */
    assert_int_equal(fc_store_select_merge(s2, &q, &res, &stats, &err), FC_OK);
    assert_int_equal(fc_tree_total(&res.tree), 14);
    assert_int_equal(chain_depth(&res.tree), DEEP);
    assert_string_equal(res.names[res.tree.nodes[0].first], "f0"); /* the root-most frame */
    {
        uint32_t leaf = 0;
        while (res.tree.nodes[leaf].first != 0) {
            leaf = res.tree.nodes[leaf].first;
        }
        assert_string_equal(res.names[leaf], "f999"); /* (DEEP - 1) % 1000 */
        assert_int_equal(res.tree.nodes[leaf].self, 14);
    }
    /* The codec and the merge on their own, at that depth. */
    fc_buf_init(&enc, 0);
    assert_int_equal(fc_tree_encode(&res.tree, &enc), FC_OK);
    fc_tree_init(&copy);
    assert_int_equal(fc_tree_decode_merge(&copy, enc.data, enc.len, &err), FC_OK);
    fc_tree_merge(&copy, &res.tree);
    assert_int_equal(fc_tree_total(&copy), 28);
    assert_int_equal(chain_depth(&copy), DEEP);
    assert_int_equal(copy.n, DEEP + 1);
    fc_tree_release(&copy);
    fc_buf_release(&enc);
    fc_store_result_release(&res);
    fc_selector_release(&sel);
    fc_batch_unref(b);
    fc_store_close(s2);
}

/* Sums of outside values saturate at INT64_MAX and INT64_MIN instead of wrapping. */
static void test_sums_saturate(void **state)
{
    struct fc_tree a, b2, c;
    const uint32_t path[2] = {1, 2};
    struct fc_buf enc;
    struct fc_error err = {0};
    struct fc_store *s2 = open_sub("saturate");
    const int64_t big[3] = {INT64_MAX, INT64_MAX, 5};
    struct fc_batch *b = stacks_batch("sat", BASE, 3, 3, big, 3);
    struct fc_selector sel;
    struct fc_store_query q = {0};
    int64_t buckets[4];

    (void)state;
    fc_tree_init(&a);
    fc_tree_insert(&a, path, 2, INT64_MAX);
    fc_tree_insert(&a, path, 2, INT64_MAX);
    fc_tree_insert(&a, path, 1, 3);
    assert_int_equal(fc_tree_total(&a), INT64_MAX);
    fc_tree_init(&b2);
    fc_tree_insert(&b2, path, 2, INT64_MIN);
    fc_tree_insert(&b2, path, 2, -1); /* diffs: negative values saturate too */
    assert_int_equal(fc_tree_total(&b2), INT64_MIN);
    fc_tree_init(&c);
    fc_tree_insert(&c, path, 2, INT64_MIN);
    fc_tree_merge(&b2, &c); /* INT64_MIN + INT64_MIN */
    assert_int_equal(fc_tree_total(&b2), INT64_MIN);
    assert_int_equal(b2.nodes[b2.nodes[b2.nodes[0].first].first].self, INT64_MIN);
    fc_tree_release(&c);
    fc_tree_init(&c);
    fc_tree_insert(&c, path, 2, 1);
    fc_tree_merge(&a, &c); /* INT64_MAX + 1 */
    assert_int_equal(fc_tree_total(&a), INT64_MAX);
    fc_tree_release(&c);
    /* Decoding sums again: stays saturated. */
    fc_buf_init(&enc, 0);
    assert_int_equal(fc_tree_encode(&a, &enc), FC_OK);
    fc_tree_init(&c);
    assert_int_equal(fc_tree_decode_merge(&c, enc.data, enc.len, &err), FC_OK);
    assert_int_equal(fc_tree_decode_merge(&c, enc.data, enc.len, &err), FC_OK);
    assert_int_equal(fc_tree_total(&c), INT64_MAX);
    assert_int_equal(fc_sat_add(INT64_MIN, -5), INT64_MIN);
    assert_int_equal(fc_sat_add(INT64_MAX, -5), INT64_MAX - 5);
    assert_int_equal(fc_sat_mul(INT64_MAX / 2, 3), INT64_MAX);
    assert_int_equal(fc_sat_mul(INT64_MAX / 2, -3), INT64_MIN);
    fc_tree_release(&a);
    fc_tree_release(&b2);
    fc_tree_release(&c);
    fc_buf_release(&enc);
    /* Through the store: two profiles of INT64_MAX + INT64_MAX + 5 in one window. */
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    assert_int_equal(fc_store_write(s2, &b, 1, &err), FC_OK);
    assert_int_equal(fc_selector_parse("process_cpu:cpu:nanoseconds:cpu:nanoseconds{}", &sel, &err),
                     FC_OK);
    q.tenant = "lim";
    q.selector = &sel;
    assert_int_equal(range_total(s2, &q, BASE - 1000, BASE + 1000), INT64_MAX);
    q.from_ns = (BASE - 20) * 1000000000LL;
    q.until_ns = (BASE + 20) * 1000000000LL;
    assert_int_equal(fc_store_timeline(s2, &q, 10000000000LL, buckets, 4, &err), FC_OK);
    assert_int_equal(buckets[2], INT64_MAX);
    fc_selector_release(&sel);
    fc_batch_unref(b);
    fc_store_close(s2);
}

/* SelectSeries' step: what Prometheus refuses, and no division by a zero step. */
static void test_series_step(void **state)
{
    struct fc_error err = {0};
    int64_t step_ms = -1;
    size_t points = 0;
    const int64_t hour = 3600000, now = 1700000000000LL;

    (void)state;
    assert_int_equal(store_series_step(15, now - hour, now, &step_ms, &points, &err), FC_OK);
    assert_int_equal(step_ms, 20000); /* 15 s rounded up to whole 10 s windows */
    assert_int_equal(points, 181);    /* (now - floor(now - 1 h, 20 s)) / 20 s + 1 */
    assert_int_equal(store_series_step(0, now - hour, now, &step_ms, &points, &err), FC_OK);
    assert_int_equal(step_ms, 20000); /* 0 = the default, 15 s */
    /* 1e-300 s: 3.6e302 points. */
    err.code = FC_OK;
    assert_int_equal(store_series_step(1e-300, now - hour, now, &step_ms, &points, &err),
                     FC_EPROTO);
    assert_non_null(strstr(err.msg, "step: exceeded maximum resolution of 11,000 points"));
    /* 1 h / 11,000 points: 0.3273 s is 11,000.x points and refused, 0.3274 s is 10,996.9 + 1. */
    assert_int_equal(store_series_step(0.3272, now - hour, now, &step_ms, &points, &err),
                     FC_EPROTO);
    assert_int_equal(store_series_step(0.3274, now - hour, now, &step_ms, &points, &err), FC_OK);
    assert_int_equal(step_ms, 10000);
    assert_int_equal(points, 361);
    /* An empty range takes any step. */
    assert_int_equal(store_series_step(1e-300, now, now, &step_ms, &points, &err), FC_OK);
    assert_int_equal(points, 1);
    assert_int_equal(store_series_step(1e300, now - hour, now, &step_ms, &points, &err), FC_OK);
    assert_int_equal(points, 1);
    assert_true(step_ms > 0 && step_ms <= 4000000000000LL);
    assert_int_equal(store_series_step(-1, now - hour, now, &step_ms, &points, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "step"));
    assert_int_equal(store_series_step(NAN, now - hour, now, &step_ms, &points, &err), FC_EPROTO);
    assert_int_equal(store_series_step(INFINITY, now - hour, now, &step_ms, &points, &err),
                     FC_EPROTO);
    assert_int_equal(store_series_step(15, INT64_MIN, now, &step_ms, &points, &err), FC_EPROTO);
    assert_int_equal(store_series_step(15, 0, INT64_MAX, &step_ms, &points, &err), FC_EPROTO);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oracle),
        cmocka_unit_test(test_names_of_format_3_still_read),
        cmocka_unit_test(test_interleaved_windows_of_format_6_still_read),
        cmocka_unit_test(test_unscaled_windows_of_format_11_still_read),
        cmocka_unit_test(test_tenants_do_not_mix),
        cmocka_unit_test(test_selector_errors),
        cmocka_unit_test(test_deep_stack_round_trips),
        cmocka_unit_test(test_hostile_trees_refused),
        cmocka_unit_test(test_selfs_stored_divided_by_their_scale),
        cmocka_unit_test(test_sums_saturate),
        cmocka_unit_test(test_series_step),
    };
    fc_test_filter_from_env();
    return cmocka_run_group_tests_name("store_read", tests, setup, teardown);
}
