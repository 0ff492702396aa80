/*
 * Frame records (storage/frame.h) and the tree collapse (storage/tree.c).
 *
 * The expected bytes are written by hand from the format in frame.h, not
 * produced by the encoder; the collapse is checked on hand-made trees.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/batch.h"
#include "storage/frame.h"
#include "storage/tree.h"

static struct fc_frame_str S(const char *s) {
    struct fc_frame_str x = {s, strlen(s)};
    return x;
}

static void
assert_str(struct fc_frame_str got, const char *want)
{
    assert_int_equal(got.n, strlen(want));
    assert_memory_equal(got.p, want, got.n);
}

static void assert_bytes(const struct fc_buf *b, const uint8_t *want, size_t n)
{
    if (b->len != n) {
        fail_msg("%zu bytes, want %zu", b->len, n);
    }
    assert_memory_equal(b->data, want, n);
}

/* A frame with only a name is the name itself: what format 3 stored. */
static void test_name_only_is_plain(void **state)
{
    struct fc_frame f = {0};
    struct fc_buf b;

    (void)state;
    f.name = S("runtime.main");
    fc_buf_init(&b, 0);
    fc_frame_encode(&f, &b);
    assert_bytes(&b, (const uint8_t *)"runtime.main", 12);
    fc_buf_release(&b);
}

/* {f, file a.go, line 3, inlined}: 00 01, flags INLINE|FILE|LINE = 0x29, 01 'f', 04 "a.go", zz(3)
 * = 6. */
static void test_record_bytes_by_hand(void **state)
{
    static const uint8_t want[] = {0, 1, 0x29, 1, 'f', 4, 'a', '.', 'g', 'o', 6};
    static const uint8_t want_sys[] = {0,   1,   0x12, 2,    'g', 'o', 3,
                                       'p', '.', 'g',  0x9c, 0x01}; /* SYSTEM|START, zz(78) = 156 */
    static const uint8_t want_same[] = {0, 1, 0x04, 1, 'h'};
    static const uint8_t want_neg[] = {0, 1, 0x20, 1, 'n', 3}; /* line -2: zz = 3 */
    struct fc_frame f = {0};
    struct fc_buf b;

    (void)state;
    fc_buf_init(&b, 0);
    f.name = S("f");
    f.file = S("a.go");
    f.line = 3;
    f.is_inline = true;
    fc_frame_encode(&f, &b);
    assert_bytes(&b, want, sizeof(want));

    memset(&f, 0, sizeof(f));
    fc_buf_reset(&b);
    f.name = S("go");
    f.system_name = S("p.g");
    f.start_line = 78;
    fc_frame_encode(&f, &b);
    assert_bytes(&b, want_sys, sizeof(want_sys));

    memset(&f, 0, sizeof(f));
    fc_buf_reset(&b);
    f.name = S("h");
    f.system_name = S("h"); /* the same as the name: a flag, not a copy */
    fc_frame_encode(&f, &b);
    assert_bytes(&b, want_same, sizeof(want_same));

    memset(&f, 0, sizeof(f));
    fc_buf_reset(&b);
    f.name = S("n");
    f.line = -2;
    fc_frame_encode(&f, &b);
    assert_bytes(&b, want_neg, sizeof(want_neg));
    fc_buf_release(&b);
}

/* Unsymbolized: empty name, the address and the whole mapping. */
static void test_unsymbolized_bytes_by_hand(void **state)
{
    static const uint8_t want[] = {0,    1,    0x80, 0x03, /* flags ADDRESS|MAPPING = 0x180 */
                                   0,                      /* empty name */
                                   0xb4, 0x24,             /* address 0x1234 */
                                   0x01,                   /* mapping flags HAS_FUNCTIONS */
                                   2,    'l',  'd',        /* file */
                                   1,    'x',              /* build id */
                                   0x80, 0x20,             /* start 0x1000 */
                                   0x80, 0x40,             /* limit 0x2000 */
                                   0x10};                  /* offset 16 */
    struct fc_frame f = {0}, d;
    struct fc_buf b;

    (void)state;
    f.has_address = true;
    f.address = 0x1234;
    f.has_mapping = true;
    f.mapping.file = S("ld");
    f.mapping.build_id = S("x");
    f.mapping.start = 0x1000;
    f.mapping.limit = 0x2000;
    f.mapping.offset = 16;
    f.mapping.flags = FC_MAPPING_HAS_FUNCTIONS;
    fc_buf_init(&b, 0);
    fc_frame_encode(&f, &b);
    assert_bytes(&b, want, sizeof(want));
    assert_int_equal(fc_frame_decode(want, sizeof(want), &d), FC_OK);
    assert_int_equal(d.name.n, 0);
    assert_true(d.has_address && d.has_mapping);
    assert_int_equal(d.address, 0x1234);
    assert_str(d.mapping.file, "ld");
    assert_str(d.mapping.build_id, "x");
    assert_int_equal(d.mapping.start, 0x1000);
    assert_int_equal(d.mapping.limit, 0x2000);
    assert_int_equal(d.mapping.offset, 16);
    assert_int_equal(d.mapping.flags, FC_MAPPING_HAS_FUNCTIONS);
    fc_buf_reset(&b);
    fc_frame_display(&d, FC_FRAME_FUNCTIONS, &b);
    assert_string_equal((const char *)b.data, "0x1234");
    fc_buf_release(&b);
}

static void test_round_trip_every_field(void **state)
{
    struct fc_frame f = {0}, d;
    struct fc_buf b;

    (void)state;
    f.name = S("pkg.(*T).Method");
    f.system_name = S("_ZN3pkg1T6MethodEv");
    f.file = S("/src/pkg/t.go");
    f.start_line = 100;
    f.line = 123;
    f.column = 7;
    f.is_inline = true;
    fc_buf_init(&b, 0);
    fc_frame_encode(&f, &b);
    assert_int_equal(b.data[0], 0);
    assert_int_equal(fc_frame_decode(b.data, b.len, &d), FC_OK);
    assert_str(d.name, "pkg.(*T).Method");
    assert_str(d.system_name, "_ZN3pkg1T6MethodEv");
    assert_str(d.file, "/src/pkg/t.go");
    assert_int_equal(d.start_line, 100);
    assert_int_equal(d.line, 123);
    assert_int_equal(d.column, 7);
    assert_true(d.is_inline);
    assert_false(d.has_address);
    assert_false(d.has_mapping);
    fc_buf_release(&b);
}

/* Plain names decode as names (format 3 data); a name starting with NUL becomes a record. */
static void test_plain_names_and_nul(void **state)
{
    static const char name[] = "\0odd";
    struct fc_frame f = {0}, d;
    struct fc_buf b;

    (void)state;
    assert_int_equal(fc_frame_decode((const uint8_t *)"main.main", 9, &d), FC_OK);
    assert_str(d.name, "main.main");
    assert_int_equal(d.system_name.n + d.file.n, 0);
    assert_int_equal(d.line, 0);
    assert_false(d.is_inline || d.has_address);
    /* "0x7f..." was format 3's name of an unsymbolized frame: still a name. */
    assert_int_equal(fc_frame_decode((const uint8_t *)"0x7f12", 6, &d), FC_OK);
    assert_str(d.name, "0x7f12");
    assert_false(d.has_address);

    f.name.p = name;
    f.name.n = 4;
    fc_buf_init(&b, 0);
    fc_frame_encode(&f, &b);
    assert_int_equal(b.len, 2 + 1 + 1 + 4);
    assert_int_equal(fc_frame_decode(b.data, b.len, &d), FC_OK);
    assert_int_equal(d.name.n, 4);
    assert_memory_equal(d.name.p, name, 4);
    fc_buf_release(&b);
}

/* Every strict prefix of a record, and damaged ones, are refused. */
static void test_bad_records(void **state)
{
    static const uint8_t good[] = {0, 1, 0x29, 1, 'f', 4, 'a', '.', 'g', 'o', 6};
    uint8_t bad[sizeof(good) + 1];
    struct fc_frame d;

    (void)state;
    assert_int_equal(fc_frame_decode(good, sizeof(good), &d), FC_OK);
    for (size_t n = 1; n < sizeof(good); n++) {
        if (fc_frame_decode(good, n, &d) == FC_OK) {
            fail_msg("the %zu-byte prefix decoded", n);
        }
    }
    memcpy(bad, good, sizeof(good));
    bad[sizeof(good)] = 0; /* a byte left over */
    assert_int_equal(fc_frame_decode(bad, sizeof(good) + 1, &d), FC_EPROTO);
    memcpy(bad, good, sizeof(good));
    bad[1] = 2; /* a version this build does not know */
    assert_int_equal(fc_frame_decode(bad, sizeof(good), &d), FC_EPROTO);
    memcpy(bad, good, sizeof(good));
    bad[2] = 0x29 | 0x02 | 0x04; /* SYSTEM and SYSTEM_SAME */
    assert_int_equal(fc_frame_decode(bad, sizeof(good), &d), FC_EPROTO);
    {
        static const uint8_t unknown_flag[] = {0, 1, 0x80, 0x04, 1, 'f'}; /* 1 << 9 */
        static const uint8_t mapping_alone[] = {0, 1, 0x80, 0x02, 1, 'f'};
        static const uint8_t long_name[] = {0, 1, 0, 9, 'f'};
        assert_int_equal(fc_frame_decode(unknown_flag, sizeof(unknown_flag), &d), FC_EPROTO);
        assert_int_equal(fc_frame_decode(mapping_alone, sizeof(mapping_alone), &d), FC_EPROTO);
        assert_int_equal(fc_frame_decode(long_name, sizeof(long_name), &d), FC_EPROTO);
    }
}

/* Display names: by function (fc_frame_name's text) and pprof's "name file:line". */
static void test_display(void **state)
{
    struct fc_frame f = {0};
    struct fc_buf b;

    (void)state;
    fc_buf_init(&b, 0);
    f.name = S("work");
    f.file = S("/src/w.go");
    f.line = 25;
    fc_frame_display(&f, FC_FRAME_FUNCTIONS, &b);
    assert_string_equal((const char *)b.data, "work");
    fc_buf_reset(&b);
    fc_frame_display(&f, FC_FRAME_LINES, &b);
    assert_string_equal((const char *)b.data, "work /src/w.go:25");
    fc_buf_reset(&b);
    f.line = 0;
    fc_frame_display(&f, FC_FRAME_LINES, &b);
    assert_string_equal((const char *)b.data, "work /src/w.go");
    fc_buf_reset(&b);
    f.file.n = 0;
    fc_frame_display(&f, FC_FRAME_LINES, &b);
    assert_string_equal((const char *)b.data, "work");
    fc_buf_reset(&b);
    memset(&f, 0, sizeof(f));
    f.has_address = true;
    f.address = 0x7f1354522bf4;
    fc_frame_display(&f, FC_FRAME_LINES, &b);
    assert_string_equal((const char *)b.data, "0x7f1354522bf4");
    fc_buf_release(&b);
}

/* From a batch: a location of two lines (helper inlined into work), one without lines. */
static void test_frames_of_a_batch(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_function work = {0}, helper = {0};
    struct fc_mapping m = {0};
    struct fc_line lines[2] = {{0}};
    struct fc_location inl = {0}, raw = {0};
    uint32_t inl_id, raw_id;
    struct fc_frame f;

    (void)state;
    fc_dict_cstring(b, "work", &work.name);
    fc_dict_cstring(b, "pkg.work", &work.system_name);
    fc_dict_cstring(b, "/w.go", &work.filename);
    work.start_line = 20;
    fc_dict_cstring(b, "helper", &helper.name);
    fc_dict_cstring(b, "/w.go", &helper.filename);
    assert_int_equal(fc_dict_function(b, &helper, &lines[0].function), FC_OK);
    lines[0].line = 42;
    assert_int_equal(fc_dict_function(b, &work, &lines[1].function), FC_OK);
    lines[1].line = 30;
    inl.address = 0x2020;
    assert_int_equal(fc_dict_location(b, &inl, lines, 2, &inl_id), FC_OK);
    fc_dict_cstring(b, "/lib/ld.so", &m.filename);
    fc_dict_cstring(b, "bid", &m.build_id);
    m.memory_start = 0x7f00;
    m.memory_limit = 0x8f00;
    assert_int_equal(fc_dict_mapping(b, &m, &raw.mapping), FC_OK);
    raw.address = 0x7f10;
    assert_int_equal(fc_dict_location(b, &raw, NULL, 0, &raw_id), FC_OK);

    fc_frame_of(b, &b->dict.locations[inl_id], 0, &f); /* innermost: inlined into work */
    assert_str(f.name, "helper");
    assert_int_equal(f.line, 42);
    assert_true(f.is_inline);
    assert_false(f.has_address); /* symbolized: no address */
    fc_frame_of(b, &b->dict.locations[inl_id], 1, &f);
    assert_str(f.name, "work");
    assert_str(f.system_name, "pkg.work");
    assert_str(f.file, "/w.go");
    assert_int_equal(f.start_line, 20);
    assert_int_equal(f.line, 30);
    assert_false(f.is_inline);
    fc_frame_of(b, &b->dict.locations[raw_id], 0, &f);
    assert_int_equal(f.name.n, 0);
    assert_true(f.has_address && f.has_mapping);
    assert_int_equal(f.address, 0x7f10);
    assert_str(f.mapping.file, "/lib/ld.so");
    assert_str(f.mapping.build_id, "bid");
    assert_int_equal(f.mapping.start, 0x7f00);
    assert_int_equal(f.mapping.limit, 0x8f00);
    fc_batch_unref(b);
}

/* Node (name, self, total) of a tree child list, found by name. */
static const struct fc_tree_node *kid(const struct fc_tree *t, uint32_t parent, uint32_t name)
{
    for (uint32_t c = t->nodes[parent].first; c != 0; c = t->nodes[c].next) {
        if (t->nodes[c].name == name) {
            return &t->nodes[c];
        }
    }
    fail_msg("no child %u", name);
    return NULL;
}

/*
 * Symbols 1 and 2 are both A, 3 and 4 both B, 5 is C, 6 is A:
 *   1 (2) -> 3 (5)            A (self 2) -> B (5 + 7 + 9 = 21)
 *   2 (0) -> 4 (7), 5 (1)                 -> C (1)
 *   6 (0) -> 3 (9)                        (A: total 2 + 5 + 7 + 1 + 9 = 24)
 * so A at the root is one node, and its two B children one node.
 */
static void test_collapse_merges_equal_names(void **state)
{
    static const uint32_t a1[] = {1}, a13[] = {1, 3}, a24[] = {2, 4}, a25[] = {2, 5},
                          a63[] = {6, 3};
    enum { A = 10, B = 20, C = 30 };
    static const uint32_t key_of_sym[] = {0, A, A, B, B, C, A};
    struct fc_tree t, out;
    uint32_t *key;
    const struct fc_tree_node *a, *bb, *cc;

    (void)state;
    fc_tree_init(&t);
    fc_tree_insert(&t, a1, 1, 2);
    fc_tree_insert(&t, a13, 2, 5);
    fc_tree_insert(&t, a24, 2, 7);
    fc_tree_insert(&t, a25, 2, 1);
    fc_tree_insert(&t, a63, 2, 9);
    key = calloc(t.n, sizeof(uint32_t));
    for (uint32_t i = 1; i < t.n; i++) {
        key[i] = key_of_sym[t.nodes[i].name];
    }
    fc_tree_init(&out);
    fc_tree_collapse(&out, &t, key);
    assert_int_equal(out.n, 4); /* root, A, B, C */
    assert_int_equal(fc_tree_total(&out), 24);
    a = kid(&out, 0, A);
    assert_int_equal(a->self, 2);
    assert_int_equal(a->total, 24);
    assert_int_equal(a->next, 0);
    bb = kid(&out, (uint32_t)(a - out.nodes), B);
    cc = kid(&out, (uint32_t)(a - out.nodes), C);
    assert_int_equal(bb->self, 21);
    assert_int_equal(bb->total, 21);
    assert_int_equal(cc->self, 1);
    /* Children sorted by key: B before C. */
    assert_int_equal(out.nodes[a - out.nodes].first, (uint32_t)(bb - out.nodes));
    free(key);
    fc_tree_release(&t);
    fc_tree_release(&out);
}

/* A 300,000-frame stack of alternating symbols that collapse to one name per level. */
static void test_collapse_deep(void **state)
{
    enum { DEEP = 300000 };
    uint32_t *path = malloc(DEEP * sizeof(uint32_t));
    uint32_t *key;
    struct fc_tree t, out;
    uint32_t at = 0, depth = 0;

    (void)state;
    fc_tree_init(&t);
    for (uint32_t i = 0; i < DEEP; i++) {
        path[i] = 2 * (i % 1000) + 1; /* odd ids */
    }
    fc_tree_insert(&t, path, DEEP, 3);
    for (uint32_t i = 0; i < DEEP; i++) {
        path[i] = 2 * (i % 1000) + 2; /* even ids, the same names */
    }
    fc_tree_insert(&t, path, DEEP, 4);
    key = calloc(t.n, sizeof(uint32_t));
    for (uint32_t i = 1; i < t.n; i++) {
        key[i] = (t.nodes[i].name + 1) / 2; /* 2k+1 and 2k+2 -> k+1 */
    }
    fc_tree_init(&out);
    fc_tree_collapse(&out, &t, key);
    assert_int_equal(out.n, DEEP + 1);
    for (uint32_t c = out.nodes[0].first; c != 0; c = out.nodes[c].first) {
        assert_int_equal(out.nodes[c].total, 7);
        assert_int_equal(out.nodes[c].name, depth % 1000 + 1);
        at = c;
        depth++;
    }
    assert_int_equal(depth, DEEP);
    assert_int_equal(out.nodes[at].self, 7);
    free(key);
    free(path);
    fc_tree_release(&t);
    fc_tree_release(&out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_only_is_plain),
        cmocka_unit_test(test_record_bytes_by_hand),
        cmocka_unit_test(test_unsymbolized_bytes_by_hand),
        cmocka_unit_test(test_round_trip_every_field),
        cmocka_unit_test(test_plain_names_and_nul),
        cmocka_unit_test(test_bad_records),
        cmocka_unit_test(test_display),
        cmocka_unit_test(test_frames_of_a_batch),
        cmocka_unit_test(test_collapse_merges_equal_names),
        cmocka_unit_test(test_collapse_deep),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
