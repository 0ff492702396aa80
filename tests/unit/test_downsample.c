/*
 * downsample (issue 15), stateless part: call-tree folding (fold.c) on
 * hand-built profiles whose folded trees are worked out by hand below, and
 * on the largest corpus profile against a call tree this test builds itself
 * (not with fold.c); the encoders write no unused dictionary row after a
 * fold; sampling keeps a stable fraction of 10,000 series.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "config/schema.h"
#include "core/batch.h"
#include "core/buf.h"
#include "core/component.h"
#include "core/mem.h"
#include "core/registry.h"
#include "formats/otlp.h"
#include "formats/otlp_pb.h"
#include "formats/pprof.h"
#include "processors/downsample/fold.h"
#include "processors/downsample/window.h"
#include "tests/unit/fc_test.h"

/* ---- hand-built profiles ------------------------------------------------------------------- */

static uint32_t loc_of(struct fc_batch *b, const char *name)
{
    struct fc_function f = {0};
    struct fc_location l = {0};
    struct fc_line line = {0};

    assert_int_equal(fc_dict_cstring(b, name, &f.name), FC_OK);
    assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
    assert_int_equal(fc_dict_location(b, &l, &line, 1, &l.mapping), FC_OK);
    return l.mapping; /* the location index */
}

/* Adds a sample "root;a;b" (root first) with values (v, 10 v). label: a sample label or NULL. */
static void add(struct fc_batch *b, struct fc_profile *p, const char *path, int64_t v,
                const char *label)
{
    uint32_t locs[64], n = 0, stack;
    char tmp[256];
    struct fc_sample s = {0};
    int64_t vals[2] = {v, 10 * v};

    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *tok = strtok(tmp, ";"); tok != NULL; tok = strtok(NULL, ";")) {
        locs[n++] = loc_of(b, tok);
    }
    for (uint32_t i = 0; i < n / 2; i++) { /* leaf first */
        uint32_t x = locs[i];
        locs[i] = locs[n - 1 - i];
        locs[n - 1 - i] = x;
    }
    assert_int_equal(fc_dict_stack(b, locs, n, &stack), FC_OK);
    s.stack = stack;
    if (label != NULL) {
        struct fc_attr a = {0};
        uint32_t ai;
        a.kind = FC_ATTR_STR;
        assert_int_equal(fc_dict_cstring(b, "span_id", &a.key), FC_OK);
        assert_int_equal(fc_dict_cstring(b, label, &a.v.str), FC_OK);
        assert_int_equal(fc_dict_attr(b, &a, &ai), FC_OK);
        assert_int_equal(fc_dict_span(b, &ai, 1, &s.attrs), FC_OK);
    }
    assert_int_equal(fc_profile_add_sample(b, p, &s, vals, 2, NULL, 0), FC_OK);
}

/*
 * The tree (root first; values count, cpu = 10 x count; cpu drives):
 *   main;a;x 50   main;a;y 5 (span_id=7)   main;b 30   main;c 5 + 5   main 5   r2;z 1
 * Weights (cpu): main 1000, a 550, x 500, b 300, c 100, y 50, r2 10, z 10; total 1010.
 */
static struct fc_batch *hand_batch(void)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt[2];

    assert_non_null(p);
    assert_int_equal(fc_dict_cstring(b, "samples", &vt[0].type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "count", &vt[0].unit), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "cpu", &vt[1].type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt[1].unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, vt, 2), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "hand"), FC_OK);
    add(b, p, "main;a;x", 50, NULL);
    add(b, p, "main;a;y", 5, "7");
    add(b, p, "main;b", 30, NULL);
    add(b, p, "main;c", 5, NULL);
    add(b, p, "main;c", 5, NULL);
    add(b, p, "main", 5, NULL);
    add(b, p, "r2;z", 1, NULL);
    return b;
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The samples of profile 0 as sorted lines "main;a;other 5 50 [span_id=7]". */
static char *render(const struct fc_batch *b)
{
    const struct fc_profile *p = &b->profiles[0];
    char **lines = fc_xcalloc(p->n_samples + 1, sizeof(*lines));
    struct fc_buf out;

    fc_buf_init(&out, 0);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        struct fc_span sp = b->dict.stacks[s->stack].locations;
        struct fc_buf l;
        fc_buf_init(&l, 0);
        for (uint32_t j = sp.n; j-- > 0;) {
            const struct fc_location *loc = &b->dict.locations[fc_span_idx(b, sp)[j]];
            const struct fc_line *ln = &b->dict.lines[loc->lines_off];
            fc_buf_printf(&l, "%s%s", j + 1 == sp.n ? "" : ";",
                          fc_str(b, b->dict.functions[ln->function].name));
        }
        fc_buf_printf(&l, " %lld %lld", (long long)fc_sample_value(p, s, 0),
                      (long long)fc_sample_value(p, s, 1));
        if (s->attrs.n > 0) {
            fc_buf_printf(&l, " [span_id=%s]",
                          fc_str(b, b->dict.attrs[fc_span_idx(b, s->attrs)[0]].v.str));
        }
        lines[i] = fc_xstrdup((const char *)l.data);
        fc_buf_release(&l);
    }
    qsort(lines, p->n_samples, sizeof(*lines), cmp_str);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        fc_buf_printf(&out, "%s\n", lines[i]);
        free(lines[i]);
    }
    free(lines);
    return (char *)out.data;
}

static void fold_case(const struct fc_fold_options *o, const char *want, uint64_t nodes_after,
                      uint64_t folded, uint64_t merged)
{
    struct fc_batch *b = hand_batch();
    struct fc_fold_stats st;
    struct fc_error err = {0};
    char *got;

    assert_int_equal(fc_fold_profile(b, 0, o, &st, &err), FC_OK);
    got = render(b);
    if (strcmp(got, want) != 0) {
        fprintf(stderr, "want:\n%sgot:\n%s", want, got);
    }
    assert_string_equal(got, want);
    assert_int_equal(st.nodes_before, 8);
    assert_int_equal(st.nodes_after, nodes_after);
    assert_int_equal(st.samples_folded, folded);
    assert_int_equal(st.samples_merged, merged);
    assert_int_equal(fc_profile_total(&b->profiles[0], 0), 101);
    assert_int_equal(fc_profile_total(&b->profiles[0], 1), 1010);
    free(got);
    fc_batch_unref(b);
}

static void test_fold_min_fraction(void **state)
{
    struct fc_fold_options o = {.min_fraction = 0.1}; /* 101 of 1010: y, c, r2, z fold */

    (void)state;
    fold_case(&o,
              "main 5 50\n"
              "main;a;other 5 50 [span_id=7]\n"
              "main;a;x 50 500\n"
              "main;b 30 300\n"
              "main;other 10 100\n" /* the two c samples, merged */
              "other 1 10\n",
              7, 4, 1);
}

static void test_fold_max_nodes(void **state)
{
    /*
     * 5: root `other` 1, main (+ its other) 3, a (+ its other) 5; x, b, c, y would
     * need a sixth; r2 would too (its own other, the root's stays for nothing... it
     * goes: 1 + 1 - 1 = 1 more).
     */
    struct fc_fold_options o5 = {.max_nodes = 5};
    /*
     * 7: ... x 6, b 7; c is main's last unkept child, y a's: both free (0); r2 would
     * be an 8th. Only r2;z folds, and the two main;c samples are then merged.
     */
    struct fc_fold_options o7 = {.max_nodes = 7};
    struct fc_fold_options o1 = {.max_nodes = 1};

    (void)state;
    fold_case(&o5,
              "main 5 50\n"
              "main;a;other 5 50 [span_id=7]\n"
              "main;a;other 50 500\n"
              "main;other 40 400\n" /* b and both c, merged */
              "other 1 10\n",
              5, 6, 2);
    fold_case(&o7,
              "main 5 50\n"
              "main;a;x 50 500\n"
              "main;a;y 5 50 [span_id=7]\n"
              "main;b 30 300\n"
              "main;c 10 100\n"
              "other 1 10\n",
              7, 1, 1);
    /* One node: everything under a single root `other`, samples with labels kept apart. */
    fold_case(&o1,
              "other 5 50 [span_id=7]\n"
              "other 96 960\n",
              1, 7, 5);
}

static void test_fold_max_depth(void **state)
{
    struct fc_fold_options o = {.max_depth = 1};
    struct fc_fold_options o2 = {.max_depth = 2, .min_fraction = 0.3}; /* 303: b folds too */

    (void)state;
    fold_case(&o,
              "main 5 50\n"
              "main;other 5 50 [span_id=7]\n"
              "main;other 90 900\n"
              "r2;other 1 10\n",
              4, 6, 3);
    fold_case(&o2,
              "main 5 50\n"
              "main;a;other 5 50 [span_id=7]\n"
              "main;a;other 50 500\n"
              "main;other 40 400\n"
              "other 1 10\n",
              5, 6, 2);
}

static void test_fold_nothing_to_do(void **state)
{
    struct fc_fold_options o = {.max_nodes = 100, .max_depth = 10, .min_fraction = 0.001};
    struct fc_batch *b = hand_batch();
    char *before = render(b), *after;
    struct fc_fold_stats st;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_fold_profile(b, 0, &o, &st, &err), FC_OK);
    after = render(b);
    assert_string_equal(before, after);
    assert_int_equal(st.samples_folded, 0);
    assert_int_equal(st.nodes_after, 8);
    assert_int_equal(b->profiles[0].n_samples, 7); /* equal samples not folded stay apart */
    free(before);
    free(after);
    fc_batch_unref(b);
}

static void test_drive_type(void **state)
{
    struct fc_batch *b = hand_batch();
    struct fc_profile *p = &b->profiles[0];

    (void)state;
    assert_int_equal(fc_fold_drive_type(b, p, NULL), 1); /* the last, as pprof */
    assert_int_equal(fc_dict_cstring(b, "samples", &p->default_sample_type), FC_OK);
    assert_int_equal(fc_fold_drive_type(b, p, NULL), 0);
    /* A configured name wins when the profile has that type; else the default rule. */
    assert_int_equal(fc_fold_drive_type(b, p, "cpu"), 1);
    assert_int_equal(fc_fold_drive_type(b, p, "alloc_space"), 0);
    /*
     * main;b counts 0 (cpu 300): driven by counts (total 71, threshold 7.1) b and
     * y fold and c (10) stays; driven by cpu, b would stay.
     */
    p->nums[p->samples[2].values_off] = 0;
    {
        struct fc_fold_options o = {.min_fraction = 0.1};
        struct fc_error err = {0};
        char *got;
        assert_int_equal(fc_fold_profile(b, 0, &o, NULL, &err), FC_OK);
        got = render(b);
        assert_string_equal(got, "main 5 50\n"
                                 "main;a;other 5 50 [span_id=7]\n"
                                 "main;a;x 50 500\n"
                                 "main;c 10 100\n"
                                 "main;other 0 300\n"
                                 "other 1 10\n");
        free(got);
    }
    fc_batch_unref(b);
}

/* ---- an independent call tree -------------------------------------------------------------- */

struct path {
    char *key; /* location indices, root first, "," separated */
    int64_t v[8];
    uint32_t depth;
    bool other; /* ends in the `other` frame */
};

struct tree {
    struct path *p;
    size_t n;
};

static int by_key(const void *x, const void *y)
{
    return strcmp(((const struct path *)x)->key, ((const struct path *)y)->key);
}

static bool is_other(const struct fc_batch *b, uint32_t loc)
{
    const struct fc_location *l = &b->dict.locations[loc];
    return l->n_lines == 1 &&
           strcmp(fc_str(b, b->dict.functions[b->dict.lines[l->lines_off].function].name),
                  "other") == 0;
}

/* Adds one node: key so far, with sample s's values. */
static void push(struct path **all, size_t *n, size_t *cap, const char *key, uint32_t depth,
                 bool other, const struct fc_profile *p, const struct fc_sample *s)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4096;
        *all = fc_xrealloc(*all, *cap * sizeof(**all));
    }
    memset(&(*all)[*n], 0, sizeof(**all));
    (*all)[*n].key = fc_xstrdup(key);
    (*all)[*n].depth = depth;
    (*all)[*n].other = other;
    for (uint32_t ty = 0; ty < p->n_sample_types; ty++) {
        (*all)[*n].v[ty] = fc_sample_value(p, s, ty);
    }
    (*n)++;
}

/*
 * Every node (path prefix) of profile 0 with its totals per type: by location,
 * or by_frames: by function, a location's inlined lines one node each (caller first).
 */
static void tree_build(const struct fc_batch *b, struct tree *t, bool by_frames)
{
    const struct fc_profile *p = &b->profiles[0];
    struct path *all = NULL;
    size_t n = 0, cap = 0;

    assert_true(p->n_sample_types <= 8);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        struct fc_span sp = b->dict.stacks[s->stack].locations;
        struct fc_buf key;
        fc_buf_init(&key, 0);
        for (uint32_t d = 0; d < sp.n; d++) {
            uint32_t loc = fc_span_idx(b, sp)[sp.n - 1 - d];
            const struct fc_location *l = &b->dict.locations[loc];
            if (!by_frames) {
                fc_buf_printf(&key, "%s%u", d ? "," : "", loc);
                push(&all, &n, &cap, (const char *)key.data, d + 1, is_other(b, loc), p, s);
                continue;
            }
            for (uint32_t k = l->n_lines; k-- > 0;) {
                fc_buf_printf(&key, "%s%u", key.len ? "," : "",
                              b->dict.lines[l->lines_off + k].function);
                push(&all, &n, &cap, (const char *)key.data, d + 1, is_other(b, loc), p, s);
            }
        }
        fc_buf_release(&key);
    }
    qsort(all, n, sizeof(*all), by_key);
    t->n = 0;
    for (size_t i = 0; i < n; i++) {
        if (t->n > 0 && strcmp(all[t->n - 1].key, all[i].key) == 0) {
            for (uint32_t ty = 0; ty < 8; ty++) {
                all[t->n - 1].v[ty] += all[i].v[ty];
            }
            free(all[i].key);
        } else {
            all[t->n++] = all[i];
        }
    }
    t->p = all;
}

static const struct path *tree_find(const struct tree *t, const char *key)
{
    struct path k = {.key = (char *)key};
    return bsearch(&k, t->p, t->n, sizeof(*t->p), by_key);
}

static void tree_free(struct tree *t)
{
    for (size_t i = 0; i < t->n; i++) {
        free(t->p[i].key);
    }
    free(t->p);
}

static struct fc_batch *largest_corpus_profile(void)
{
    char names[64][256], path[512], best[512] = "";
    size_t n = fc_test_corpus_files(names, 64);
    off_t best_size = -1;
    struct fc_batch *b;
    struct fc_pprof_limits lim = {0};
    struct fc_error err = {0};
    uint8_t *data;
    size_t len;

    for (size_t i = 0; i < n; i++) {
        struct stat sb;
        snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), names[i]);
        if (stat(path, &sb) == 0 && sb.st_size > best_size) {
            best_size = sb.st_size;
            snprintf(best, sizeof(best), "%s", path);
        }
    }
    assert_true(best_size > 0);
    data = fc_test_read(best, &len);
    assert_non_null(data);
    b = fc_batch_new(0);
    assert_int_equal(fc_pprof_decode(b, data, len, &lim, NULL, &err), FC_OK);
    free(data);
    return b;
}

/* Folds the largest corpus profile with o and checks it against the tree built here. */
static void corpus_case(const struct fc_fold_options *o)
{
    struct fc_batch *b = largest_corpus_profile();
    const struct fc_profile *p = &b->profiles[0];
    struct tree before, after, frames;
    int64_t totals[8];
    struct fc_fold_stats st;
    struct fc_error err = {0};
    uint32_t drive = p->n_sample_types - 1; /* pprof's rule, worked out here */
    uint64_t wsum = 0;
    size_t kept = 0, maxdepth = 0;

    for (uint32_t ty = 0; ty < p->n_sample_types; ty++) {
        const char *name = fc_str(b, p->sample_types[ty].type);
        if (p->default_sample_type != 0 && p->default_sample_type == p->sample_types[ty].type) {
            drive = ty;
        }
        if (o->sample_type != NULL && strcmp(name, o->sample_type) == 0) {
            drive = ty;
            break;
        }
    }
    tree_build(b, &before, false);
    for (uint32_t ty = 0; ty < p->n_sample_types; ty++) {
        totals[ty] = fc_profile_total(p, ty);
    }
    for (uint32_t i = 0; i < p->n_samples; i++) {
        int64_t v = fc_sample_value(p, &p->samples[i], drive);
        wsum += (uint64_t)(v < 0 ? -v : v);
    }
    assert_true(before.n > 500); /* the largest profile is not a toy */
    assert_int_equal(fc_fold_profile(b, 0, o, &st, &err), FC_OK);
    p = &b->profiles[0];
    tree_build(b, &after, false);
    tree_build(b, &frames, true);
    for (uint32_t ty = 0; ty < p->n_sample_types; ty++) {
        assert_int_equal(fc_profile_total(p, ty), totals[ty]);
    }
    assert_true(st.nodes_before >= before.n);
    assert_true(st.nodes_after >= frames.n && st.nodes_after >= after.n);
    if (o->max_nodes > 0) {
        /* What a flame graph shows (frames, inlined ones included) is within the bound... */
        assert_true(frames.n <= o->max_nodes);
        assert_true(after.n <= o->max_nodes);
        /* ...and the bound is used, not just kept under. */
        assert_true(frames.n >= o->max_nodes / 2);
        fprintf(stderr, "max_nodes %u: %zu frames, %zu locations\n", o->max_nodes, frames.n,
                after.n);
    }
    for (size_t i = 0; i < after.n; i++) {
        const struct path *a = &after.p[i];
        const struct path *o0 = tree_find(&before, a->key);
        maxdepth = a->depth > maxdepth ? a->depth : maxdepth;
        if (a->other) {
            continue;
        }
        /* Every kept node is a node of the original tree with the same totals. */
        assert_non_null(o0);
        for (uint32_t ty = 0; ty < p->n_sample_types; ty++) {
            assert_int_equal(a->v[ty], o0->v[ty]);
        }
        if (o->min_fraction > 0) {
            int64_t v = o0->v[drive] < 0 ? -o0->v[drive] : o0->v[drive];
            assert_true((double)v >= o->min_fraction * (double)wsum);
        }
        kept++;
    }
    /* What must be kept is: every node within the bounds (no max_nodes). */
    if (o->max_nodes == 0) {
        size_t want = 0;
        for (size_t i = 0; i < before.n; i++) {
            int64_t v = before.p[i].v[drive] < 0 ? -before.p[i].v[drive] : before.p[i].v[drive];
            bool in = (o->max_depth == 0 || before.p[i].depth <= o->max_depth) &&
                      (double)v >= o->min_fraction * (double)wsum;
            want += in;
            if (in) {
                assert_non_null(tree_find(&after, before.p[i].key));
            }
        }
        fprintf(stderr, "kept %zu of %zu nodes\n", kept, before.n);
        assert_int_equal(kept, want);
        assert_true(kept < before.n);
    }
    if (o->max_depth > 0) {
        assert_true(maxdepth <= o->max_depth + 1);
    }
    tree_free(&before);
    tree_free(&after);
    tree_free(&frames);
    fc_batch_unref(b);
}

static void test_corpus_max_nodes(void **state)
{
    struct fc_fold_options o = {.max_nodes = 200};
    struct fc_fold_options o2 = {.max_nodes = 50, .max_depth = 12, .min_fraction = 0.0001};

    (void)state;
    corpus_case(&o);
    corpus_case(&o2);
}

static void test_corpus_min_fraction(void **state)
{
    struct fc_fold_options o = {.min_fraction = 0.01}; /* 0.001 folds nothing here */
    struct fc_fold_options o2 = {.min_fraction = 0.02, .sample_type = "samples"};

    (void)state;
    corpus_case(&o);
    corpus_case(&o2);
}

static void test_corpus_max_depth(void **state)
{
    struct fc_fold_options o = {.max_depth = 8};

    (void)state;
    corpus_case(&o);
}

/* ---- what the encoders write after a fold ----------------------------------------------- */

/* ---- no unused dictionary row in what the encoders write ---------------------------------- */

static void mark_attrs(const struct fc_batch *b, struct fc_span sp, bool *attr)
{
    for (uint32_t k = 0; k < sp.n; k++) {
        attr[fc_span_idx(b, sp)[k]] = true;
    }
}

static void mark_vt(const struct fc_value_type *vt, bool *str)
{
    str[vt->type] = str[vt->unit] = true;
}

/* The rows b's samples reach: stacks, locations, functions, mappings, links, attributes. */
static void mark_sample_rows(const struct fc_batch *b, bool *st, bool *loc, bool *fn, bool *map,
                             bool *link, bool *attr)
{
    const struct fc_dict *d = &b->dict;

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        const struct fc_profile *p = &b->profiles[i];
        mark_attrs(b, p->attrs, attr);
        for (uint32_t j = 0; j < p->n_samples; j++) {
            struct fc_span sp = d->stacks[p->samples[j].stack].locations;
            st[p->samples[j].stack] = true;
            link[p->samples[j].link] = true;
            mark_attrs(b, p->samples[j].attrs, attr);
            for (uint32_t k = 0; k < sp.n; k++) {
                const struct fc_location *l = &d->locations[fc_span_idx(b, sp)[k]];
                loc[fc_span_idx(b, sp)[k]] = true;
                map[l->mapping] = true;
                mark_attrs(b, l->attrs, attr);
                for (uint32_t m = 0; m < l->n_lines; m++) {
                    fn[d->lines[l->lines_off + m].function] = true;
                }
            }
        }
    }
    for (uint32_t i = 1; i < d->n_mappings; i++) {
        if (map[i]) {
            mark_attrs(b, d->mappings[i].attrs, attr);
        }
    }
    for (uint32_t i = 1; i < b->n_origins; i++) {
        mark_attrs(b, b->origins[i].resource_attrs, attr);
        mark_attrs(b, b->origins[i].scope_attrs, attr);
    }
}

/* The strings the used rows and the profiles name. */
static void mark_strings(const struct fc_batch *b, const bool *fn, const bool *map,
                         const bool *attr, bool *str)
{
    const struct fc_dict *d = &b->dict;

    for (uint32_t i = 1; i < d->n_functions; i++) {
        if (fn[i]) {
            str[d->functions[i].name] = str[d->functions[i].system_name] = true;
            str[d->functions[i].filename] = true;
        }
    }
    for (uint32_t i = 1; i < d->n_mappings; i++) {
        if (map[i]) {
            str[d->mappings[i].filename] = str[d->mappings[i].build_id] = true;
        }
    }
    for (uint32_t i = 1; i < d->n_attrs; i++) {
        if (attr[i]) {
            str[d->attrs[i].key] = str[d->attrs[i].unit] = true;
            if (d->attrs[i].kind == FC_ATTR_STR) {
                str[d->attrs[i].v.str] = true;
            }
        }
    }
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        const struct fc_profile *p = &b->profiles[i];
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            mark_vt(&p->sample_types[t], str);
        }
        mark_vt(&p->period_type, str);
        str[p->drop_frames] = str[p->keep_frames] = str[p->default_sample_type] = true;
        str[p->original_payload_format] = true;
        for (uint32_t k = 0; k < p->comments.n; k++) {
            str[fc_span_idx(b, p->comments)[k]] = true;
        }
        for (uint32_t k = 0; k < p->n_labels; k++) {
            str[p->labels[k].name] = str[p->labels[k].value] = true;
        }
    }
    for (uint32_t i = 1; i < b->n_origins; i++) {
        const struct fc_origin *o = &b->origins[i];
        str[o->resource_schema_url] = str[o->scope_name] = true;
        str[o->scope_version] = str[o->scope_schema_url] = true;
    }
}

static void assert_all(const bool *used, uint32_t n, const char *what)
{
    for (uint32_t i = 1; i < n; i++) {
        if (!used[i]) {
            fail_msg("%s row %u is not used", what, i);
        }
    }
}

/*
 * Every row of b's dictionary (strings, attributes, mappings, links, functions, locations,
 * stacks) is used by the profiles. b is what a decoder made of an encoder's output.
 */
static void assert_no_unused_rows(const struct fc_batch *b)
{
    const struct fc_dict *d = &b->dict;
    bool *loc = fc_xcalloc(d->n_locations + 1, 1), *fn = fc_xcalloc(d->n_functions + 1, 1);
    bool *st = fc_xcalloc(d->n_stacks + 1, 1), *map = fc_xcalloc(d->n_mappings + 1, 1);
    bool *link = fc_xcalloc(d->n_links + 1, 1), *attr = fc_xcalloc(d->n_attrs + 1, 1);
    bool *str = fc_xcalloc(d->n_strings + 1, 1);

    mark_sample_rows(b, st, loc, fn, map, link, attr);
    mark_strings(b, fn, map, attr, str);
    assert_all(loc, d->n_locations, "location");
    assert_all(fn, d->n_functions, "function");
    assert_all(st, d->n_stacks, "stack");
    assert_all(map, d->n_mappings, "mapping");
    assert_all(link, d->n_links, "link");
    assert_all(attr, d->n_attrs, "attribute");
    assert_all(str, d->n_strings, "string");
    free(loc);
    free(fn);
    free(st);
    free(map);
    free(link);
    free(attr);
    free(str);
}

static void mark_index(bool *used, size_t n, int32_t i, const char *what)
{
    if (i < 0 || (size_t)i >= (n > 0 ? n : 1)) {
        fail_msg("dangling %s index %d (%zu rows)", what, i, n);
    }
    if (n > 0) {
        used[i] = true;
    }
}

#define ANY_STRINDEX OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE_STRINDEX

static void mark_kvu(const PbDict *d, const int32_t *idx, size_t n, bool *attr)
{
    for (size_t i = 0; i < n; i++) {
        mark_index(attr, d->n_attribute_table, idx[i], "attribute");
    }
}

/* Resource and scope attributes: a key or value may be a string_table index. */
static void mark_kvs(const PbDict *d, PbKeyValue *const *kvs, size_t n, bool *str)
{
    for (size_t i = 0; i < n; i++) {
        mark_index(str, d->n_string_table, kvs[i]->key_strindex, "string");
        if (kvs[i]->value != NULL && kvs[i]->value->value_case == ANY_STRINDEX) {
            mark_index(str, d->n_string_table, kvs[i]->value->string_value_strindex, "string");
        }
    }
}

/*
 * The same on the wire, for OTLP: a decoder interns an inline string_value and a string_table
 * entry of the same text into one row, so an unused string_table entry only shows here.
 */
static void assert_otlp_wire_no_unused(const struct fc_buf *out)
{
    PbRequest *r =
        opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
            NULL, out->len, out->data);
    const PbDict *d;
    bool *str, *attr, *map, *link, *loc, *fn, *st;

    assert_non_null(r);
    d = r->dictionary;
    assert_non_null(d);
    str = fc_xcalloc(d->n_string_table + 1, 1);
    attr = fc_xcalloc(d->n_attribute_table + 1, 1);
    map = fc_xcalloc(d->n_mapping_table + 1, 1);
    link = fc_xcalloc(d->n_link_table + 1, 1);
    loc = fc_xcalloc(d->n_location_table + 1, 1);
    fn = fc_xcalloc(d->n_function_table + 1, 1);
    st = fc_xcalloc(d->n_stack_table + 1, 1);
    for (size_t i = 0; i < r->n_resource_profiles; i++) {
        const PbResource *res = r->resource_profiles[i]->resource;
        if (res != NULL) {
            mark_kvs(d, res->attributes, res->n_attributes, str);
        }
        for (size_t j = 0; j < r->resource_profiles[i]->n_scope_profiles; j++) {
            const PbScopeProfiles *sp = r->resource_profiles[i]->scope_profiles[j];
            if (sp->scope != NULL) {
                mark_kvs(d, sp->scope->attributes, sp->scope->n_attributes, str);
            }
            for (size_t k = 0; k < sp->n_profiles; k++) {
                const PbProfile *p = sp->profiles[k];
                if (p->sample_type != NULL) {
                    mark_index(str, d->n_string_table, p->sample_type->type_strindex, "string");
                    mark_index(str, d->n_string_table, p->sample_type->unit_strindex, "string");
                }
                if (p->period_type != NULL) {
                    mark_index(str, d->n_string_table, p->period_type->type_strindex, "string");
                    mark_index(str, d->n_string_table, p->period_type->unit_strindex, "string");
                }
                mark_kvu(d, p->attribute_indices, p->n_attribute_indices, attr);
                for (size_t m = 0; m < p->n_samples; m++) {
                    const PbSample *s = p->samples[m];
                    mark_index(st, d->n_stack_table, s->stack_index, "stack");
                    mark_index(link, d->n_link_table, s->link_index, "link");
                    mark_kvu(d, s->attribute_indices, s->n_attribute_indices, attr);
                }
            }
        }
    }
    for (size_t i = 1; i < d->n_stack_table; i++) {
        for (size_t k = 0; st[i] && k < d->stack_table[i]->n_location_indices; k++) {
            mark_index(loc, d->n_location_table, d->stack_table[i]->location_indices[k],
                       "location");
        }
    }
    for (size_t i = 1; i < d->n_location_table; i++) {
        const PbLocation *l = d->location_table[i];
        if (!loc[i]) {
            continue;
        }
        mark_index(map, d->n_mapping_table, l->mapping_index, "mapping");
        mark_kvu(d, l->attribute_indices, l->n_attribute_indices, attr);
        for (size_t k = 0; k < l->n_lines; k++) {
            mark_index(fn, d->n_function_table, l->lines[k]->function_index, "function");
        }
    }
    for (size_t i = 1; i < d->n_function_table; i++) {
        const PbFunction *f = d->function_table[i];
        if (fn[i]) {
            mark_index(str, d->n_string_table, f->name_strindex, "string");
            mark_index(str, d->n_string_table, f->system_name_strindex, "string");
            mark_index(str, d->n_string_table, f->filename_strindex, "string");
        }
    }
    for (size_t i = 1; i < d->n_mapping_table; i++) {
        if (map[i]) {
            mark_index(str, d->n_string_table, d->mapping_table[i]->filename_strindex, "string");
            mark_kvu(d, d->mapping_table[i]->attribute_indices,
                     d->mapping_table[i]->n_attribute_indices, attr);
        }
    }
    for (size_t i = 1; i < d->n_attribute_table; i++) {
        const PbKeyValueAndUnit *a = d->attribute_table[i];
        if (!attr[i]) {
            continue;
        }
        mark_index(str, d->n_string_table, a->key_strindex, "string");
        mark_index(str, d->n_string_table, a->unit_strindex, "string");
        if (a->value != NULL && a->value->value_case == ANY_STRINDEX) {
            mark_index(str, d->n_string_table, a->value->string_value_strindex, "string");
        }
    }
    assert_all(str, (uint32_t)d->n_string_table, "otlp string_table");
    assert_all(attr, (uint32_t)d->n_attribute_table, "otlp attribute_table");
    assert_all(map, (uint32_t)d->n_mapping_table, "otlp mapping_table");
    assert_all(link, (uint32_t)d->n_link_table, "otlp link_table");
    assert_all(loc, (uint32_t)d->n_location_table, "otlp location_table");
    assert_all(fn, (uint32_t)d->n_function_table, "otlp function_table");
    assert_all(st, (uint32_t)d->n_stack_table, "otlp stack_table");
    free(str);
    free(attr);
    free(map);
    free(link);
    free(loc);
    free(fn);
    free(st);
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
        r, NULL);
}

/* Both encoders write only the rows the (folded) profile uses, for every corpus profile. */
static void check_encoders_only_used_rows(const char *path)
{
    size_t len;
    uint8_t *data = fc_test_read(path, &len);
    struct fc_batch *b = fc_batch_new(0), *c, *e;
    struct fc_fold_options o = {.max_nodes = 100};
    struct fc_error err = {0};
    struct fc_buf out;
    struct fc_otlp_result res;
    struct fc_pprof_limits lim = {0};

    assert_non_null(data);
    assert_int_equal(fc_pprof_decode(b, data, len, &lim, NULL, &err), FC_OK);
    free(data);
    assert_int_equal(fc_fold_profile(b, 0, &o, NULL, &err), FC_OK);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_otlp_encode(b, &out, &err), FC_OK);
    assert_otlp_wire_no_unused(&out);
    c = fc_batch_new(0);
    memset(&res, 0, sizeof(res));
    assert_int_equal(fc_otlp_decode(c, out.data, out.len, &res, &err), FC_OK);
    assert_no_unused_rows(c);
    fc_buf_release(&out);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_pprof_encode(b, &b->profiles[0], &out, &err), FC_OK);
    e = fc_batch_new(0);
    assert_int_equal(fc_pprof_decode(e, out.data, out.len, &lim, NULL, &err), FC_OK);
    assert_no_unused_rows(e);
    for (uint32_t ty = 0; ty < b->profiles[0].n_sample_types; ty++) {
        assert_int_equal(fc_profile_total(&e->profiles[0], ty),
                         fc_profile_total(&b->profiles[0], ty));
    }
    fc_buf_release(&out);
    fc_batch_unref(b);
    fc_batch_unref(c);
    fc_batch_unref(e);
}

static void test_encoders_write_only_used_rows(void **state)
{
    struct fc_batch *b = largest_corpus_profile(), *c;
    struct fc_fold_options o = {.max_nodes = 100};
    struct fc_error err = {0};
    struct fc_buf out;
    struct fc_otlp_result res;
    uint32_t locs_before = b->dict.n_locations;
    char names[64][256], path[512];
    size_t n = fc_test_corpus_files(names, 64);

    (void)state;
    assert_int_equal(fc_fold_profile(b, 0, &o, NULL, &err), FC_OK);
    /* The batch itself keeps the folded rows (more than were used)... */
    assert_true(b->dict.n_locations >= locs_before);
    /* ...what is sent does not. */
    fc_buf_init(&out, 0);
    assert_int_equal(fc_otlp_encode(b, &out, &err), FC_OK);
    c = fc_batch_new(0);
    memset(&res, 0, sizeof(res));
    assert_int_equal(fc_otlp_decode(c, out.data, out.len, &res, &err), FC_OK);
    assert_true(c->dict.n_locations < locs_before);
    fc_buf_release(&out);
    fc_batch_unref(b);
    fc_batch_unref(c);
    assert_true(n > 10);
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), names[i]);
        check_encoders_only_used_rows(path);
    }
}

/* ---- the processor: sampling and validation ------------------------------------------------ */

struct proc {
    struct fc_arena *a;
    struct fc_processor self;
    _Atomic int64_t dropped;
};

static int proc_open(struct proc *pr, const char *yaml, struct fc_error *err)
{
    const struct fc_registry_entry *e = fc_registry_find(FC_KIND_PROCESSOR, "downsample");
    const struct fc_processor_type *type;
    struct fc_diag d;
    struct fc_node *root;

    assert_non_null(e);
    type = (const struct fc_processor_type *)e->info;
    memset(pr, 0, sizeof(*pr));
    pr->a = fc_arena_new(0);
    fc_diag_init(&d);
    root = fc_test_yaml(pr->a, yaml, &d);
    assert_non_null(root);
    pr->self.type = type;
    pr->self.id = "downsample";
    pr->self.pipeline = "profiles";
    pr->self.config = fc_arena_calloc(pr->a, 1, type->info.config_size);
    pr->self.dropped_samples = &pr->dropped;
    assert_int_equal(fc_schema_bind(pr->a, type->info.fields, root, pr->self.config, "test", &d),
                     0);
    fc_diag_release(&d);
    return type->create(&pr->self, err);
}

static void proc_close(struct proc *pr)
{
    if (pr->self.ctx != NULL) {
        pr->self.type->destroy(&pr->self);
    }
    fc_arena_free(pr->a);
}

/* n series service_name=svc-<i>, one sample of value 3 each; runs the processor on them. */
static struct fc_batch *sample_series(struct proc *pr, uint32_t n)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_error err = {0};
    struct fc_value_type vt;
    uint32_t stack, loc = loc_of(b, "f");

    assert_int_equal(fc_dict_cstring(b, "cpu", &vt.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt.unit), FC_OK);
    assert_int_equal(fc_dict_stack(b, &loc, 1, &stack), FC_OK);
    for (uint32_t i = 0; i < n; i++) {
        struct fc_profile *p = fc_batch_add_profile(b);
        struct fc_sample s = {.stack = stack};
        int64_t v = 3;
        char name[32];
        snprintf(name, sizeof(name), "svc-%u", i);
        assert_int_equal(fc_profile_set_label(b, p, "service_name", name), FC_OK);
        assert_int_equal(fc_profile_set_label(b, p, "__name__", "process_cpu"), FC_OK);
        assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
        assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
    }
    assert_int_equal(pr->self.type->process(&pr->self, &b, &err), FC_OK);
    return b;
}

static void kept_set(const struct fc_batch *b, uint32_t n, bool *kept)
{
    memset(kept, 0, n);
    for (uint32_t i = 0; b != NULL && i < b->n_profiles; i++) {
        unsigned k;
        assert_int_equal(sscanf(fc_profile_label(b, &b->profiles[i], "service_name"), "svc-%u", &k),
                         1);
        assert_true(k < n);
        kept[k] = true;
    }
}

static void sampling_case(double fraction)
{
    enum { N = 10000 };
    struct proc pr1, pr2;
    struct fc_error err = {0};
    char yaml[64];
    static bool k1[N], k2[N];
    struct fc_batch *b1, *b2;
    uint32_t n = 0;

    snprintf(yaml, sizeof(yaml), "sampling: {fraction: %g}\n", fraction);
    assert_int_equal(proc_open(&pr1, yaml, &err), FC_OK);
    assert_int_equal(proc_open(&pr2, yaml, &err), FC_OK);
    b1 = sample_series(&pr1, N);
    b2 = sample_series(&pr2, N);
    kept_set(b1, N, k1);
    kept_set(b2, N, k2);
    for (uint32_t i = 0; i < N; i++) {
        assert_int_equal(k1[i], k2[i]); /* the same series on both runs */
        n += k1[i];
    }
    fprintf(stderr, "sampling %g: kept %u of %d series\n", fraction, n, N);
    assert_true((double)n / N >= fraction - 0.02 && (double)n / N <= fraction + 0.02);
    /* Dropped samples (one each, value 3) are counted; kept series are whole. */
    assert_int_equal(pr1.dropped, N - n);
    for (uint32_t i = 0; b1 != NULL && i < b1->n_profiles; i++) {
        assert_int_equal(fc_profile_total(&b1->profiles[i], 0), 3);
    }
    if (b1 != NULL) {
        fc_batch_unref(b1);
    }
    if (b2 != NULL) {
        fc_batch_unref(b2);
    }
    proc_close(&pr1);
    proc_close(&pr2);
}

static void test_sampling_fraction(void **state)
{
    (void)state;
    sampling_case(0.1);
    sampling_case(0.5);
    sampling_case(0.9);
}

static void test_config_refused(void **state)
{
    static const struct {
        const char *yaml, *msg;
    } cases[] = {
        {"storage: /tmp/x\n", "storage: is the durable buffer of `window`"},
        {"window: 60s\nmax_buffer_bytes: 0\n", "max_buffer_bytes"},
        {"min_fraction: 1.5\n", "min_fraction"},
        {"max_nodes: -1\n", "max_nodes"},
        {"max_depth: -2\n", "max_depth"},
        {"sampling: {fraction: 0}\n", "sampling.fraction"},
        {"sampling: {fraction: 1.01}\n", "sampling.fraction"},
    };
    struct proc pr;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fc_error err = {0};
        assert_int_equal(proc_open(&pr, cases[i].yaml, &err), FC_ECONFIG);
        if (strstr(err.msg, cases[i].msg) == NULL) {
            fprintf(stderr, "%s: %s\n", cases[i].yaml, err.msg);
        }
        assert_non_null(strstr(err.msg, cases[i].msg));
        proc_close(&pr);
    }
    {
        struct fc_error err = {0};
        assert_int_equal(proc_open(&pr, "window: 0s\nmax_nodes: 10\n", &err), FC_OK);
        proc_close(&pr);
        assert_int_equal(proc_open(&pr, "window: 60s\nmax_nodes: 10\n", &err), FC_OK);
        proc_close(&pr);
    }
}

/* Through the processor: a folded batch keeps its totals and loses its wire bytes. */
static void test_process_folds(void **state)
{
    struct proc pr;
    struct fc_error err = {0};
    struct fc_batch *b = hand_batch();
    static const uint8_t body[] = {1, 2, 3};
    char *got;

    (void)state;
    assert_int_equal(proc_open(&pr, "max_depth: 1\n", &err), FC_OK);
    fc_batch_set_wire(b, body, sizeof(body), NULL, 0, 1);
    assert_int_equal(pr.self.type->process(&pr.self, &b, &err), FC_OK);
    assert_null(b->wire.body);
    got = render(b);
    assert_string_equal(got, "main 5 50\n"
                             "main;other 5 50 [span_id=7]\n"
                             "main;other 90 900\n"
                             "r2;other 1 10\n");
    assert_int_equal(pr.dropped, 0); /* merged samples are not drops */
    free(got);
    fc_batch_unref(b);
    proc_close(&pr);
}

/* ---- window: merging a series' profiles ---------------------------------------------------- */

/*
 * A second profile of hand_batch's series, its dictionary built in another
 * order: r2;z 2, main;a;x 10, main;a;y 1 (span_id=7), main;a;y 1 (span_id=8),
 * main;d 4; at 70 s for 10 s (hand_batch's is set to 60 s for 10 s).
 */
static struct fc_batch *hand_batch2(void)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt[2];

    assert_non_null(p);
    assert_int_equal(fc_dict_cstring(b, "zzz-unused-first", &vt[0].type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "samples", &vt[0].type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "count", &vt[0].unit), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "cpu", &vt[1].type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt[1].unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, vt, 2), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "hand"), FC_OK);
    add(b, p, "r2;z", 2, NULL);
    add(b, p, "main;a;x", 10, NULL);
    add(b, p, "main;a;y", 1, "7");
    add(b, p, "main;a;y", 1, "8");
    add(b, p, "main;d", 4, NULL);
    p->time_ns = 70000000000LL;
    p->duration_ns = 10000000000LL;
    return b;
}

static void test_window_merge(void **state)
{
    struct fc_batch *b1 = hand_batch(), *b2 = hand_batch2(), *acc = fc_batch_new(0), *c;
    struct fc_error err = {0};
    struct fc_otlp_result res = {0};
    uint64_t merged = 0;
    struct fc_buf out;
    char *got;

    (void)state;
    b1->profiles[0].time_ns = 60000000000LL;
    b1->profiles[0].duration_ns = 10000000000LL;
    assert_int_equal(fc_batch_set_tenant(acc, b1->tenant), FC_OK);
    assert_int_equal(fc_dswin_merge(acc, b1, 0, &merged, &err), FC_OK);
    assert_int_equal(merged, 1); /* main;c 5 + 5 */
    assert_int_equal(fc_dswin_merge(acc, b2, 0, &merged, &err), FC_OK);
    assert_int_equal(merged, 3); /* main;a;x, main;a;y [7], r2;z */
    assert_int_equal(acc->n_profiles, 1);
    got = render(acc);
    assert_string_equal(got, "main 5 50\n"
                             "main;a;x 60 600\n"
                             "main;a;y 1 10 [span_id=8]\n"
                             "main;a;y 6 60 [span_id=7]\n"
                             "main;b 30 300\n"
                             "main;c 10 100\n"
                             "main;d 4 40\n"
                             "r2;z 3 30\n");
    free(got);
    assert_int_equal(fc_profile_total(&acc->profiles[0], 0), 101 + 18);
    assert_int_equal(fc_profile_total(&acc->profiles[0], 1), 1010 + 180);
    /* It covers both inputs: from 60 s to the end of the second, 80 s. */
    assert_int_equal(acc->profiles[0].time_ns, 60000000000LL);
    assert_int_equal(acc->profiles[0].duration_ns, 20000000000LL);
    assert_string_equal(fc_profile_label(acc, &acc->profiles[0], "service_name"), "hand");
    /* What leaves is a valid profile without unused rows. */
    fc_buf_init(&out, 0);
    assert_int_equal(fc_otlp_encode(acc, &out, &err), FC_OK);
    c = fc_batch_new(0);
    assert_int_equal(fc_otlp_decode(c, out.data, out.len, &res, &err), FC_OK);
    assert_int_equal(res.profiles, 2); /* one per sample type */
    assert_no_unused_rows(c);
    assert_int_equal(fc_profile_total(&c->profiles[0], 0) + fc_profile_total(&c->profiles[1], 0),
                     119 + 1190);
    fc_buf_release(&out);
    /* A second profile into a batch of more than one is refused. */
    assert_int_equal(fc_dswin_merge(c, b2, 0, NULL, &err), FC_EINVAL);
    fc_batch_unref(c);
    fc_batch_unref(acc);
    fc_batch_unref(b1);
    fc_batch_unref(b2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fold_min_fraction),
        cmocka_unit_test(test_fold_max_nodes),
        cmocka_unit_test(test_fold_max_depth),
        cmocka_unit_test(test_fold_nothing_to_do),
        cmocka_unit_test(test_drive_type),
        cmocka_unit_test(test_corpus_max_nodes),
        cmocka_unit_test(test_corpus_min_fraction),
        cmocka_unit_test(test_corpus_max_depth),
        cmocka_unit_test(test_encoders_write_only_used_rows),
        cmocka_unit_test(test_sampling_fraction),
        cmocka_unit_test(test_config_refused),
        cmocka_unit_test(test_process_folds),
        cmocka_unit_test(test_window_merge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
