/*
 * Flame graphs (issue 9): Pyroscope's flamebearer levels of small trees
 * worked out by hand, maxNodes folding into "other", the "double" diff
 * format, a single 300,000-frame stack (no walk may recurse per frame), and
 * INT64_MAX values whose sums saturate instead of wrapping. Every expected
 * value below is computed by hand from the trees built here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/buf.h"
#include "formats/flamebearer.h"
#include "storage/tree.h"

#define MAX INT64_MAX

/* Symbol ids shared by every small tree (one tenant's id space). */
enum { A = 1, B, C, D };

static void insert(struct fc_tree *t, int64_t value, int depth, ...)
{
    uint32_t path[8];
    va_list ap;

    va_start(ap, depth);
    for (int i = 0; i < depth; i++) {
        path[i] = (uint32_t)va_arg(ap, int);
    }
    va_end(ap);
    fc_tree_insert(t, path, (uint32_t)depth, value);
}

/* names[node] of a small tree: its symbol's letter ("total" for the root). */
static char **small_names(const struct fc_tree *t)
{
    static const char *const letters[] = {"total", "a", "b", "c", "d"};
    char **names = calloc(t->n, sizeof(char *));

    for (uint32_t i = 0; i < t->n; i++) {
        names[i] = (char *)letters[t->nodes[i].name];
    }
    return names;
}

static void assert_level(const struct fc_flamegraph *fg, size_t d, const int64_t *want, size_t n)
{
    assert_true(d < fg->n_levels);
    assert_int_equal(fg->level_len[d], n);
    for (size_t i = 0; i < n; i++) {
        if (fg->levels[d][i] != want[i]) {
            fail_msg("level %zu value %zu: %lld, want %lld", d, i, (long long)fg->levels[d][i],
                     (long long)want[i]);
        }
    }
}

#define LEVEL(fg, d, ...)                                                                          \
    do {                                                                                           \
        const int64_t want_[] = {__VA_ARGS__};                                                     \
        assert_level((fg), (d), want_, sizeof(want_) / sizeof(want_[0]));                          \
    } while (0)

static void assert_names(const struct fc_flamegraph *fg, const char *const *want, size_t n)
{
    assert_int_equal(fg->n_names, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(fg->names[i], want[i]);
    }
}

#define NAMES(fg, ...)                                                                             \
    do {                                                                                           \
        const char *const want_[] = {__VA_ARGS__};                                                 \
        assert_names((fg), want_, sizeof(want_) / sizeof(want_[0]));                               \
    } while (0)

/* a;b 3 and a;c 2: the example of Pyroscope's format. */
static void test_two_stacks(void **state)
{
    struct fc_tree t;
    struct fc_flamegraph fg;
    char **names;

    (void)state;
    fc_tree_init(&t);
    insert(&t, 3, 2, A, B);
    insert(&t, 2, 2, A, C);
    names = small_names(&t);
    fc_flamegraph_build(&t, names, 0, &fg);
    NAMES(&fg, "total", "a", "b", "c");
    assert_int_equal(fg.n_levels, 3);
    LEVEL(&fg, 0, 0, 5, 0, 0);
    LEVEL(&fg, 1, 0, 5, 0, 1);
    LEVEL(&fg, 2, 0, 3, 3, 2, 0, 2, 2, 3);
    assert_int_equal(fg.total, 5);
    assert_int_equal(fg.max_self, 3);
    fc_flamegraph_release(&fg);
    free(names);
    fc_tree_release(&t);
}

/*
 * a;c 2, a;b 3, a 1, d 4 with c's id below b's: children are placed in
 * name order after the parent's self, so b starts at x 1 (delta 1).
 */
static void build_mixed(struct fc_tree *t)
{
    fc_tree_init(t);
    insert(t, 2, 2, A, B); /* id B is named "c" and id C "b": see mixed_names */
    insert(t, 3, 2, A, C);
    insert(t, 1, 1, A);
    insert(t, 4, 1, D);
}

/* Node names of build_mixed: id B is "c" and id C is "b" (ids not in name order). */
static char **mixed_names(const struct fc_tree *t)
{
    static const char *const by_id[] = {"total", "a", "c", "b", "d"};
    char **names = calloc(t->n, sizeof(char *));

    for (uint32_t i = 0; i < t->n; i++) {
        names[i] = (char *)by_id[t->nodes[i].name];
    }
    return names;
}

static void test_name_order_and_self(void **state)
{
    struct fc_tree t;
    struct fc_flamegraph fg;
    struct fc_buf json;
    char **names;

    (void)state;
    build_mixed(&t);
    names = mixed_names(&t);
    fc_flamegraph_build(&t, names, 0, &fg);
    NAMES(&fg, "total", "a", "b", "c", "d");
    assert_int_equal(fg.n_levels, 3);
    LEVEL(&fg, 0, 0, 10, 0, 0);
    LEVEL(&fg, 1, 0, 6, 1, 1, 0, 4, 4, 4);
    LEVEL(&fg, 2, 1, 3, 3, 2, 0, 2, 2, 3);
    assert_int_equal(fg.total, 10);
    assert_int_equal(fg.max_self, 4);
    fc_flamegraph_release(&fg);

    /* The JSON carries the same levels. */
    {
        struct fc_flamebearer_meta meta = {.name = "cpu", .units = "samples", .sample_rate = 100};
        fc_buf_init(&json, 0);
        assert_int_equal(fc_flamebearer_write(&t, names, 0, &meta, &json), FC_OK);
        fc_buf_puts(&json, "");
        assert_non_null(strstr((const char *)json.data,
                               "{\"version\":1,\"flamebearer\":{\"names\":[\"total\",\"a\",\"b\","
                               "\"c\",\"d\"],\"levels\":[[0,10,0,0],[0,6,1,1,0,4,4,4],"
                               "[1,3,3,2,0,2,2,3]],\"numTicks\":10,\"maxSelf\":4},"));
        fc_buf_release(&json);
    }
    free(names);
    fc_tree_release(&t);
}

/*
 * maxNodes 3: totals 10, 6, 4, 3, 2, so minVal is 4; b (3) and c (2) fold
 * into one "other" of 5 under a, placed after a's self; d (4) stays.
 */
static void test_max_nodes_folds_into_other(void **state)
{
    struct fc_tree t;
    struct fc_flamegraph fg;
    char **names;

    (void)state;
    build_mixed(&t);
    names = mixed_names(&t);
    fc_flamegraph_build(&t, names, 3, &fg);
    NAMES(&fg, "total", "a", "other", "d");
    assert_int_equal(fg.n_levels, 3);
    LEVEL(&fg, 0, 0, 10, 0, 0);
    LEVEL(&fg, 1, 0, 6, 1, 1, 0, 4, 4, 3);
    LEVEL(&fg, 2, 1, 5, 5, 2);
    assert_int_equal(fg.total, 10);
    assert_int_equal(fg.max_self, 5);
    fc_flamegraph_release(&fg);

    /* maxNodes at or above the node count keeps everything. */
    fc_flamegraph_build(&t, names, 5, &fg);
    NAMES(&fg, "total", "a", "b", "c", "d");
    LEVEL(&fg, 2, 1, 3, 3, 2, 0, 2, 2, 3);
    fc_flamegraph_release(&fg);
    free(names);
    fc_tree_release(&t);
}

/*
 * Left a;b 3, a;c 2; right a;b 1, d 4. Names are numbered level by level:
 * total, then a and d, then b and c.
 */
static void test_diff_small(void **state)
{
    struct fc_tree l, r;
    struct fc_flamegraph_diff d;
    char **ln, **rn;

    (void)state;
    fc_tree_init(&l);
    fc_tree_init(&r);
    insert(&l, 3, 2, A, B);
    insert(&l, 2, 2, A, C);
    insert(&r, 1, 2, A, B);
    insert(&r, 4, 1, D);
    ln = small_names(&l);
    rn = small_names(&r);
    fc_flamegraph_diff_build(&l, ln, &r, rn, 0, &d);
    NAMES(&d.fg, "total", "a", "d", "b", "c");
    assert_int_equal(d.fg.n_levels, 3);
    LEVEL(&d.fg, 0, 0, 5, 0, 0, 5, 0, 0);
    LEVEL(&d.fg, 1, 0, 5, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4, 4, 2);
    LEVEL(&d.fg, 2, 0, 3, 3, 0, 1, 1, 3, 0, 2, 2, 0, 0, 0, 4);
    assert_int_equal(d.left_ticks, 5);
    assert_int_equal(d.right_ticks, 5);
    assert_int_equal(d.fg.total, 10);
    assert_int_equal(d.fg.max_self, 4);
    fc_flamegraph_release(&d.fg);

    /* maxNodes 3: left + right totals 10, 6, 4, 4, 2; c (2) folds into "other". */
    fc_flamegraph_diff_build(&l, ln, &r, rn, 3, &d);
    NAMES(&d.fg, "total", "a", "d", "b", "other");
    LEVEL(&d.fg, 1, 0, 5, 0, 0, 1, 0, 1, 0, 0, 0, 0, 4, 4, 2);
    LEVEL(&d.fg, 2, 0, 3, 3, 0, 1, 1, 3, 0, 2, 2, 0, 0, 0, 4);
    fc_flamegraph_release(&d.fg);

    /* And the JSON of the first. */
    {
        struct fc_flamebearer_meta meta = {.name = "cpu", .units = "samples"};
        struct fc_buf json;
        fc_flamegraph_diff_build(&l, ln, &r, rn, 0, &d);
        fc_buf_init(&json, 0);
        assert_int_equal(fc_flamebearer_diff_write(&d, &meta, &json), FC_OK);
        fc_buf_puts(&json, "");
        assert_non_null(strstr((const char *)json.data,
                               "\"levels\":[[0,5,0,0,5,0,0],[0,5,0,0,1,0,1,0,0,0,0,4,4,2],"
                               "[0,3,3,0,1,1,3,0,2,2,0,0,0,4]],\"numTicks\":10,\"maxSelf\":4}"));
        assert_non_null(strstr((const char *)json.data, "\"leftTicks\":5,\"rightTicks\":5"));
        fc_buf_release(&json);
        fc_flamegraph_release(&d.fg);
    }
    free(ln);
    free(rn);
    fc_tree_release(&l);
    fc_tree_release(&r);
}

/* ---- one very deep stack ------------------------------------------------------------------- */

#define DEEP 300000

/* One stack of depth frames with distinct ids 1..depth, named f1..f<depth>. */
static void build_deep(struct fc_tree *t, uint32_t depth, int64_t value)
{
    uint32_t *path = malloc(depth * sizeof(uint32_t));

    for (uint32_t i = 0; i < depth; i++) {
        path[i] = i + 1;
    }
    fc_tree_init(t);
    fc_tree_insert(t, path, depth, value);
    free(path);
}

static char **deep_names(const struct fc_tree *t, char **storage)
{
    char **names = calloc(t->n, sizeof(char *));
    char *s = malloc((size_t)t->n * 12);

    for (uint32_t i = 0; i < t->n; i++) {
        names[i] = s + (size_t)i * 12;
        if (i == 0) {
            strcpy(names[i], "total");
        } else {
            snprintf(names[i], 12, "f%u", t->nodes[i].name);
        }
    }
    *storage = s;
    return names;
}

/* Levels: the root and then one per frame, each one node [0, 7, self, depth]. */
static void test_deep_stack(void **state)
{
    struct fc_tree t;
    struct fc_flamegraph fg;
    struct fc_buf json;
    struct fc_flamebearer_meta meta = {.name = "cpu", .units = "samples"};
    char **names, *storage;
    char want[64];

    (void)state;
    build_deep(&t, DEEP, 7);
    assert_int_equal(t.n, DEEP + 1);
    names = deep_names(&t, &storage);
    fc_flamegraph_build(&t, names, 0, &fg);
    assert_int_equal(fg.n_levels, DEEP + 1);
    assert_int_equal(fg.n_names, DEEP + 1);
    assert_int_equal(fg.total, 7);
    assert_int_equal(fg.max_self, 7);
    for (size_t d = 0; d <= DEEP; d++) {
        int64_t want_level[4] = {0, 7, d == DEEP ? 7 : 0, (int64_t)d};
        assert_level(&fg, d, want_level, 4);
    }
    assert_string_equal(fg.names[DEEP], "f300000");
    fc_flamegraph_release(&fg);

    /* maxNodes below the node count: every total is 7, so nothing folds. */
    fc_flamegraph_build(&t, names, 1024, &fg);
    assert_int_equal(fg.n_levels, DEEP + 1);
    LEVEL(&fg, DEEP, 0, 7, 7, DEEP);
    fc_flamegraph_release(&fg);

    fc_buf_init(&json, 0);
    assert_int_equal(fc_flamebearer_write(&t, names, 0, &meta, &json), FC_OK);
    fc_buf_puts(&json, "");
    snprintf(want, sizeof(want), "[0,7,0,%d],[0,7,7,%d]],\"numTicks\":7,\"maxSelf\":7}", DEEP - 1,
             DEEP);
    assert_non_null(strstr((const char *)json.data, want));
    fc_buf_release(&json);
    free(names);
    free(storage);
    fc_tree_release(&t);
}

/*
 * Left: the 300,000-frame stack with 7; right: its first 200,000 frames
 * with 5. Names are numbered level by level, so name index = depth.
 */
static void test_deep_diff(void **state)
{
    struct fc_tree l, r;
    struct fc_flamegraph_diff d;
    char **ln, **rn, *ls, *rs;

    (void)state;
    build_deep(&l, DEEP, 7);
    build_deep(&r, 200000, 5);
    ln = deep_names(&l, &ls);
    rn = deep_names(&r, &rs);
    fc_flamegraph_diff_build(&l, ln, &r, rn, 0, &d);
    assert_int_equal(d.fg.n_levels, DEEP + 1);
    assert_int_equal(d.fg.n_names, DEEP + 1);
    assert_int_equal(d.left_ticks, 7);
    assert_int_equal(d.right_ticks, 5);
    assert_int_equal(d.fg.total, 12);
    assert_int_equal(d.fg.max_self, 7);
    for (size_t i = 0; i <= DEEP; i++) {
        int64_t rt = i <= 200000 ? 5 : 0;
        /* Below the right stack's end, right x starts after its self (5). */
        int64_t rx = i > 200000 ? 5 : 0;
        int64_t want_level[7] = {0, 7, i == DEEP ? 7 : 0, rx, rt, i == 200000 ? 5 : 0, (int64_t)i};
        assert_level(&d.fg, i, want_level, 7);
    }
    fc_flamegraph_release(&d.fg);

    /*
     * The other way round with maxNodes 4096: the 200,001 shared nodes have
     * 12, so minVal is 12 and the rest of the right stack (7) folds into
     * one "other" under frame 200,000, named after the 200,001 names above.
     */
    fc_flamegraph_diff_build(&r, rn, &l, ln, 4096, &d);
    assert_int_equal(d.fg.n_levels, 200002);
    assert_int_equal(d.fg.n_names, 200002);
    LEVEL(&d.fg, 200000, 0, 5, 5, 0, 7, 0, 200000);
    /* Its left x comes after frame 200,000's left self (5); its right x after 0. */
    LEVEL(&d.fg, 200001, 5, 0, 0, 0, 7, 7, 200001);
    assert_string_equal(d.fg.names[200001], "other");
    fc_flamegraph_release(&d.fg);
    free(ln);
    free(rn);
    free(ls);
    free(rs);
    fc_tree_release(&l);
    fc_tree_release(&r);
}

/*
 * A comb: the 300,000-frame stack f1..f300000 with 7, and under each frame's
 * parent a leaf "g" of 1 beside it (f1..f(d-1);g 1 for every depth d). The
 * walk's own stack grows while siblings are still pending, so a walk that
 * kept a pointer into it across a child would misplace the g leaves.
 * f_d's total is 7 + (N - d); g_d starts where f_d ends (delta 0). Names in
 * the single graph are numbered in visit order (the chain, then "g"); in the
 * diff level by level (f1, g, then f2, f3, ...).
 */
static void test_deep_comb(void **state)
{
    const uint32_t n = DEEP;
    const uint32_t g = DEEP + 1; /* g's id */
    struct fc_tree t;
    struct fc_flamegraph fg;
    struct fc_flamegraph_diff d;
    char **names, *storage;

    (void)state;
    /* Built node by node: inserting 300,000 stacks of up to 300,000 frames is quadratic. */
    fc_tree_init(&t);
    free(t.nodes);
    t.n = t.cap = 2 * n + 1;
    t.nodes = calloc(t.n, sizeof(*t.nodes));
    t.nodes[0].total = 7 + n;
    t.nodes[0].first = 1;
    for (uint32_t i = 1; i <= n; i++) {
        t.nodes[i].name = i; /* f_i: children sorted by id, so before g */
        t.nodes[i].total = 7 + (n - i);
        t.nodes[i].self = i == n ? 7 : 0;
        t.nodes[i].first = i < n ? i + 1 : 0;
        t.nodes[i].next = n + i;
        t.nodes[n + i].name = g;
        t.nodes[n + i].total = t.nodes[n + i].self = 1;
    }
    names = deep_names(&t, &storage);
    for (uint32_t i = 1; i < t.n; i++) {
        if (t.nodes[i].name == g) {
            strcpy(names[i], "g");
        }
    }
    assert_int_equal(t.n, 2 * n + 1);

    fc_flamegraph_build(&t, names, 0, &fg);
    assert_int_equal(fg.n_levels, n + 1);
    assert_int_equal(fg.n_names, n + 2);
    assert_int_equal(fg.total, 7 + n);
    assert_int_equal(fg.max_self, 7);
    LEVEL(&fg, 0, 0, 7 + n, 0, 0);
    for (uint32_t i = 1; i <= n; i++) {
        int64_t want_level[8] = {0, 7 + (int64_t)(n - i), i == n ? 7 : 0, i, 0, 1, 1, n + 1};
        assert_level(&fg, i, want_level, 8);
    }
    assert_string_equal(fg.names[n + 1], "g");
    fc_flamegraph_release(&fg);

    fc_flamegraph_diff_build(&t, names, &t, names, 0, &d);
    assert_int_equal(d.fg.n_levels, n + 1);
    assert_int_equal(d.fg.n_names, n + 2);
    assert_int_equal(d.fg.total, 2 * (7 + (int64_t)n));
    assert_int_equal(d.fg.max_self, 14);
    LEVEL(&d.fg, 0, 0, 7 + n, 0, 0, 7 + n, 0, 0);
    LEVEL(&d.fg, 1, 0, 7 + n - 1, 0, 0, 7 + n - 1, 0, 1, 0, 1, 1, 0, 1, 1, 2);
    for (uint32_t i = 2; i <= n; i++) {
        int64_t tot = 7 + (int64_t)(n - i), self = i == n ? 7 : 0;
        int64_t want_level[14] = {0, tot, self, 0, tot, self, i + 1, 0, 1, 1, 0, 1, 1, 2};
        assert_level(&d.fg, i, want_level, 14);
    }
    assert_string_equal(d.fg.names[2], "g");
    fc_flamegraph_release(&d.fg);
    free(names);
    free(storage);
    fc_tree_release(&t);
}

/* ---- saturation ---------------------------------------------------------------------------- */

/*
 * a, b and c;d each INT64_MAX: c starts at MAX + MAX, which saturates to
 * MAX (not -2), so d's delta against its level's start is MAX.
 */
static void build_huge(struct fc_tree *t)
{
    fc_tree_init(t);
    insert(t, MAX, 1, A);
    insert(t, MAX, 1, B);
    insert(t, MAX, 2, C, D);
}

static void test_int64_max_saturates(void **state)
{
    struct fc_tree t;
    struct fc_flamegraph fg;
    struct fc_flamegraph_diff d;
    char **names;

    (void)state;
    build_huge(&t);
    names = small_names(&t);
    assert_int_equal(t.nodes[0].total, MAX);
    fc_flamegraph_build(&t, names, 0, &fg);
    NAMES(&fg, "total", "a", "b", "c", "d");
    LEVEL(&fg, 0, 0, MAX, 0, 0);
    LEVEL(&fg, 1, 0, MAX, MAX, 1, 0, MAX, MAX, 2, 0, MAX, 0, 3);
    LEVEL(&fg, 2, MAX, MAX, MAX, 4);
    assert_true(fg.total == MAX);
    assert_true(fg.max_self == MAX);
    fc_flamegraph_release(&fg);

    /* maxNodes 2: minVal MAX, nothing is below it. */
    fc_flamegraph_build(&t, names, 2, &fg);
    LEVEL(&fg, 2, MAX, MAX, MAX, 4);
    fc_flamegraph_release(&fg);

    /* The diff of the tree with itself: left + right saturate too. */
    fc_flamegraph_diff_build(&t, names, &t, names, 0, &d);
    NAMES(&d.fg, "total", "a", "b", "c", "d");
    LEVEL(&d.fg, 0, 0, MAX, 0, 0, MAX, 0, 0);
    LEVEL(&d.fg, 1, 0, MAX, MAX, 0, MAX, MAX, 1, 0, MAX, MAX, 0, MAX, MAX, 2, 0, MAX, 0, 0, MAX, 0,
          3);
    LEVEL(&d.fg, 2, MAX, MAX, MAX, MAX, MAX, MAX, 4);
    assert_true(d.left_ticks == MAX);
    assert_true(d.right_ticks == MAX);
    assert_true(d.fg.total == MAX);
    assert_true(d.fg.max_self == MAX);
    fc_flamegraph_release(&d.fg);

    /* Left + right of every node is MAX: maxNodes 2 folds nothing either. */
    fc_flamegraph_diff_build(&t, names, &t, names, 2, &d);
    NAMES(&d.fg, "total", "a", "b", "c", "d");
    LEVEL(&d.fg, 2, MAX, MAX, MAX, MAX, MAX, MAX, 4);
    fc_flamegraph_release(&d.fg);
    free(names);
    fc_tree_release(&t);
}

/* An empty tree (no root) gives an empty graph rather than a crash. */
static void test_empty_tree(void **state)
{
    struct fc_tree t = {0}, one;
    struct fc_flamegraph fg;
    struct fc_flamegraph_diff d;
    char total[] = "total";
    char *names[] = {total};

    (void)state;
    fc_flamegraph_build(&t, names, 0, &fg);
    assert_int_equal(fg.n_levels, 0);
    assert_int_equal(fg.total, 0);
    fc_flamegraph_release(&fg);
    fc_tree_init(&one);
    fc_flamegraph_diff_build(&t, names, &one, names, 0, &d);
    assert_int_equal(d.fg.n_levels, 1);
    LEVEL(&d.fg, 0, 0, 0, 0, 0, 0, 0, 0);
    fc_flamegraph_release(&d.fg);
    fc_tree_release(&one);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_stacks),
        cmocka_unit_test(test_name_order_and_self),
        cmocka_unit_test(test_max_nodes_folds_into_other),
        cmocka_unit_test(test_diff_small),
        cmocka_unit_test(test_deep_stack),
        cmocka_unit_test(test_deep_diff),
        cmocka_unit_test(test_deep_comb),
        cmocka_unit_test(test_int64_max_saturates),
        cmocka_unit_test(test_empty_tree),
    };
    return cmocka_run_group_tests_name("flamebearer", tests, NULL, NULL);
}
