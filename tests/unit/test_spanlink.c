/*
 * The spanlink processor (issue 15) on batches built here by hand. Expected
 * ids are worked out by hand: 0x0123456789abcdef = 81985529216486895,
 * 2^64 - 1 = 18446744073709551615.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/diag.h"
#include "config/schema.h"
#include "core/arena.h"
#include "core/batch.h"
#include "core/component.h"
#include "core/metrics.h"
#include "core/registry.h"
#include "processors/spanlink/spanlink.h"
#include "tests/unit/fc_test.h"

static const uint8_t SPAN_A[8] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};
static const uint8_t SPAN_B[8] = {0, 0, 0, 0, 0, 0, 0, 0x2a}; /* 42 */
static const uint8_t TRACE_A[16] = {0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                    0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff};
#define SPAN_A_HEX "0123456789abcdef"
#define SPAN_A_DEC "81985529216486895"
#define TRACE_A_HEX "00112233445566778899aabbccddeeff"

/* ---- building batches ---------------------------------------------------------------------- */

static struct fc_batch *new_batch(struct fc_profile **pp)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_value_type vt;
    struct fc_profile *p;

    assert_non_null(b);
    p = fc_batch_add_profile(b);
    assert_non_null(p);
    assert_int_equal(fc_dict_cstring(b, "cpu", &vt.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt.unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "svc"), FC_OK);
    *pp = p;
    return b;
}

static uint32_t str_attr(struct fc_batch *b, const char *k, const char *v)
{
    struct fc_attr a;
    uint32_t i;

    memset(&a, 0, sizeof(a));
    a.kind = FC_ATTR_STR;
    assert_int_equal(fc_dict_cstring(b, k, &a.key), FC_OK);
    assert_int_equal(fc_dict_cstring(b, v, &a.v.str), FC_OK);
    assert_int_equal(fc_dict_attr(b, &a, &i), FC_OK);
    return i;
}

static uint32_t num_attr(struct fc_batch *b, const char *k, int64_t v)
{
    struct fc_attr a;
    uint32_t i;

    memset(&a, 0, sizeof(a));
    a.kind = FC_ATTR_INT;
    a.v.i = v;
    assert_int_equal(fc_dict_cstring(b, k, &a.key), FC_OK);
    assert_int_equal(fc_dict_attr(b, &a, &i), FC_OK);
    return i;
}

static uint32_t link_of(struct fc_batch *b, const uint8_t span[8], const uint8_t *trace)
{
    struct fc_link k;
    uint32_t i;

    memset(&k, 0, sizeof(k));
    memcpy(k.span_id, span, 8);
    if (trace != NULL) {
        memcpy(k.trace_id, trace, 16);
    }
    assert_int_equal(fc_dict_link(b, &k, &i), FC_OK);
    return i;
}

/* A sample of value v on a one-frame stack named frame, with attribute indices attrs. */
static void add_sample(struct fc_batch *b, struct fc_profile *p, const char *frame, int64_t v,
                       uint32_t link, const uint32_t *attrs, uint32_t n_attrs)
{
    struct fc_function f = {0};
    struct fc_location loc = {0};
    struct fc_line line = {0};
    struct fc_sample s;
    uint32_t li;

    memset(&s, 0, sizeof(s));
    assert_int_equal(fc_dict_cstring(b, frame, &f.name), FC_OK);
    assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
    assert_int_equal(fc_dict_location(b, &loc, &line, 1, &li), FC_OK);
    assert_int_equal(fc_dict_stack(b, &li, 1, &s.stack), FC_OK);
    assert_int_equal(fc_dict_span(b, attrs, n_attrs, &s.attrs), FC_OK);
    s.link = link;
    assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
}

/* The string value of sample label k, NULL when absent; fails on a second one. */
static const char *label(const struct fc_batch *b, const struct fc_sample *s, const char *k)
{
    const char *found = NULL;

    for (uint32_t i = 0; i < s->attrs.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, s->attrs)[i]];
        if (strcmp(fc_str(b, a->key), k) == 0) {
            assert_null(found);
            assert_int_equal(a->kind, FC_ATTR_STR);
            found = fc_str(b, a->v.str);
        }
    }
    return found;
}

static void assert_link(const struct fc_batch *b, const struct fc_sample *s, const uint8_t span[8],
                        const uint8_t *trace)
{
    static const uint8_t zero[16] = {0};

    assert_int_not_equal(s->link, 0);
    assert_memory_equal(b->dict.links[s->link].span_id, span, 8);
    assert_memory_equal(b->dict.links[s->link].trace_id, trace ? trace : zero, 16);
}

static struct fc_spanlink_stats run(struct fc_batch *b, int to, bool keep)
{
    struct fc_spanlink_config cfg = {to, keep};
    struct fc_spanlink_stats st;
    struct fc_error err;
    int64_t total = fc_profile_total(&b->profiles[0], 0);
    uint32_t n = b->profiles[0].n_samples;

    memset(&st, 0, sizeof(st));
    memset(&err, 0, sizeof(err));
    assert_int_equal(fc_spanlink_apply(b, &cfg, &st, &err), FC_OK);
    /* Nothing is merged or dropped: the totals are exact. */
    assert_int_equal(b->profiles[0].n_samples, n);
    assert_int_equal(fc_profile_total(&b->profiles[0], 0), total);
    return st;
}

/* ---- ids ------------------------------------------------------------------------------------ */

static void test_span_id_forms(void **state)
{
    uint8_t out[8], tr[16];
    static const uint8_t ones[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    static const uint8_t digits16[8] = {0x12, 0x34, 0x56, 0x78, 0x90, 0x12, 0x34, 0x56};
    static const uint8_t tr_low[16] = {0,    0,    0,    0,    0,    0,    0,    0,
                                       0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

    (void)state;
    assert_true(fc_span_id_parse(SPAN_A_HEX, 16, out));
    assert_memory_equal(out, SPAN_A, 8);
    assert_true(fc_span_id_parse("0123456789ABCDEF", 16, out));
    assert_memory_equal(out, SPAN_A, 8);
    assert_true(fc_span_id_parse(SPAN_A_DEC, strlen(SPAN_A_DEC), out));
    assert_memory_equal(out, SPAN_A, 8);
    assert_true(fc_span_id_parse("42", 2, out));
    assert_memory_equal(out, SPAN_B, 8);
    assert_true(fc_span_id_parse("18446744073709551615", 20, out));
    assert_memory_equal(out, ones, 8);
    /* Sixteen digits are hex, as the integrations send them. */
    assert_true(fc_span_id_parse("1234567890123456", 16, out));
    assert_memory_equal(out, digits16, 8);
    assert_false(fc_span_id_parse("18446744073709551616", 20, out)); /* 2^64 */
    assert_false(fc_span_id_parse("0000000000000000", 16, out));     /* the zero id */
    assert_false(fc_span_id_parse("0", 1, out));
    assert_false(fc_span_id_parse("", 0, out));
    assert_false(fc_span_id_parse("0123456789abcdeg", 16, out));
    assert_false(fc_span_id_parse("0123456789abcde", 15, out));
    assert_false(fc_span_id_parse("0123456789abcdef0", 17, out));
    assert_false(fc_span_id_parse("-42", 3, out));

    assert_true(fc_trace_id_parse(TRACE_A_HEX, 32, tr));
    assert_memory_equal(tr, TRACE_A, 16);
    assert_true(fc_trace_id_parse(SPAN_A_HEX, 16, tr)); /* a 64-bit trace id: the low half */
    assert_memory_equal(tr, tr_low, 16);
    assert_true(fc_trace_id_parse(SPAN_A_DEC, strlen(SPAN_A_DEC), tr));
    assert_memory_equal(tr, tr_low, 16);
    assert_false(fc_trace_id_parse("00000000000000000000000000000000", 32, tr));
    assert_false(fc_trace_id_parse("00112233445566778899aabbccddeefg", 32, tr));
    assert_false(fc_trace_id_parse("00112233445566778899aabbccddeef", 31, tr));
}

/* ---- labels -> links ------------------------------------------------------------------------ */

static void test_labels_become_links(void **state)
{
    struct fc_profile *p;
    struct fc_batch *b = new_batch(&p);
    uint32_t a1[] = {str_attr(b, "worker", "w1"), str_attr(b, "span_id", SPAN_A_HEX),
                     str_attr(b, "trace_id", TRACE_A_HEX)};
    uint32_t a2[] = {str_attr(b, "span_id", "42")};
    uint32_t a4[] = {str_attr(b, "span_id", "xyz"), str_attr(b, "trace_id", "nope")};
    uint32_t a5[] = {num_attr(b, "span_id", 42)};
    uint32_t a6[] = {str_attr(b, "trace_id", TRACE_A_HEX)};
    struct fc_spanlink_stats st;

    (void)state;
    add_sample(b, p, "a", 1, 0, a1, 3);
    add_sample(b, p, "b", 10, 0, a2, 1);
    add_sample(b, p, "c", 100, 0, NULL, 0);
    add_sample(b, p, "d", 1000, 0, a4, 2);
    add_sample(b, p, "e", 10000, 0, a5, 1);
    add_sample(b, p, "f", 100000, 0, a6, 1);
    st = run(b, FC_SPANLINK_TO_LINKS, false);

    assert_link(b, &p->samples[0], SPAN_A, TRACE_A);
    assert_int_equal(p->samples[0].attrs.n, 1);
    assert_string_equal(label(b, &p->samples[0], "worker"), "w1");
    assert_link(b, &p->samples[1], SPAN_B, NULL); /* decimal */
    assert_int_equal(p->samples[1].attrs.n, 0);
    assert_int_equal(p->samples[2].link, 0);
    /* Malformed: left as they are. */
    assert_int_equal(p->samples[3].link, 0);
    assert_string_equal(label(b, &p->samples[3], "span_id"), "xyz");
    assert_string_equal(label(b, &p->samples[3], "trace_id"), "nope");
    assert_link(b, &p->samples[4], SPAN_B, NULL); /* a pprof number label */
    assert_int_equal(p->samples[4].attrs.n, 0);
    /* A trace id alone is no span: it stays a label. */
    assert_int_equal(p->samples[5].link, 0);
    assert_string_equal(label(b, &p->samples[5], "trace_id"), TRACE_A_HEX);
    /* Equal links are one dictionary row. */
    assert_int_equal(p->samples[1].link, p->samples[4].link);

    assert_int_equal(st.linked, 3);
    assert_int_equal(st.labeled, 0);
    assert_int_equal(st.malformed, 2);
    assert_int_equal(st.conflicts, 0);
    assert_string_equal(fc_profile_label(b, p, "service_name"), "svc");
    fc_batch_unref(b);
}

/* ---- links -> labels ------------------------------------------------------------------------ */

static void test_links_become_labels(void **state)
{
    struct fc_profile *p;
    struct fc_batch *b = new_batch(&p);
    uint32_t a1[] = {str_attr(b, "worker", "w1")};
    uint32_t a3[] = {str_attr(b, "span_id", SPAN_A_DEC)};
    struct fc_spanlink_stats st;

    (void)state;
    add_sample(b, p, "a", 1, link_of(b, SPAN_A, TRACE_A), a1, 1);
    add_sample(b, p, "b", 2, link_of(b, SPAN_B, NULL), NULL, 0);
    add_sample(b, p, "c", 4, 0, a3, 1);
    add_sample(b, p, "d", 8, 0, NULL, 0);
    st = run(b, FC_SPANLINK_TO_LABELS, false);

    assert_int_equal(p->samples[0].link, 0);
    assert_string_equal(label(b, &p->samples[0], "span_id"), SPAN_A_HEX);
    assert_string_equal(label(b, &p->samples[0], "trace_id"), TRACE_A_HEX);
    assert_string_equal(label(b, &p->samples[0], "worker"), "w1");
    assert_int_equal(p->samples[1].link, 0);
    assert_string_equal(label(b, &p->samples[1], "span_id"), "000000000000002a");
    assert_null(label(b, &p->samples[1], "trace_id")); /* no trace id: no label */
    /* A decimal label is written as the hex the store and Pyroscope read. */
    assert_string_equal(label(b, &p->samples[2], "span_id"), SPAN_A_HEX);
    assert_int_equal(p->samples[3].attrs.n, 0);
    assert_int_equal(p->samples[3].link, 0);
    assert_int_equal(st.labeled, 2);
    assert_int_equal(st.linked, 0);
    fc_batch_unref(b);
}

static void test_both(void **state)
{
    struct fc_profile *p;
    struct fc_batch *b = new_batch(&p);
    uint32_t a1[] = {str_attr(b, "span_id", SPAN_A_DEC), str_attr(b, "trace_id", TRACE_A_HEX)};
    struct fc_spanlink_stats st;

    (void)state;
    add_sample(b, p, "a", 1, 0, a1, 2);
    add_sample(b, p, "b", 2, link_of(b, SPAN_B, NULL), NULL, 0);
    st = run(b, FC_SPANLINK_TO_BOTH, false);
    assert_link(b, &p->samples[0], SPAN_A, TRACE_A);
    assert_string_equal(label(b, &p->samples[0], "span_id"), SPAN_A_HEX);
    assert_string_equal(label(b, &p->samples[0], "trace_id"), TRACE_A_HEX);
    assert_link(b, &p->samples[1], SPAN_B, NULL);
    assert_string_equal(label(b, &p->samples[1], "span_id"), "000000000000002a");
    assert_int_equal(st.linked, 1);
    assert_int_equal(st.labeled, 1);
    fc_batch_unref(b);
}

/* ---- conflicts ------------------------------------------------------------------------------ */

static void test_conflict_link_wins(void **state)
{
    for (int to = FC_SPANLINK_TO_LINKS; to <= FC_SPANLINK_TO_BOTH; to++) {
        struct fc_profile *p;
        struct fc_batch *b = new_batch(&p);
        uint32_t other[] = {str_attr(b, "span_id", "000000000000002a")};
        uint32_t same[] = {str_attr(b, "span_id", SPAN_A_HEX),
                           str_attr(b, "trace_id", TRACE_A_HEX)};
        uint32_t other_trace[] = {str_attr(b, "span_id", SPAN_A_HEX),
                                  str_attr(b, "trace_id", "ffffffffffffffffffffffffffffffff")};
        struct fc_spanlink_stats st;

        (void)state;
        add_sample(b, p, "a", 1, link_of(b, SPAN_A, TRACE_A), other, 1);
        /* The same span, the link without a trace id: the labels complete it, no conflict. */
        add_sample(b, p, "b", 2, link_of(b, SPAN_A, NULL), same, 2);
        add_sample(b, p, "c", 4, link_of(b, SPAN_A, TRACE_A), other_trace, 2);
        st = run(b, to, false);
        assert_int_equal(st.conflicts, 2);
        for (int i = 0; i < 3; i++) {
            const struct fc_sample *s = &p->samples[i];
            if (to == FC_SPANLINK_TO_LABELS) {
                assert_int_equal(s->link, 0);
            } else {
                assert_link(b, s, SPAN_A, TRACE_A);
            }
            if (to == FC_SPANLINK_TO_LINKS) {
                assert_int_equal(s->attrs.n, 0);
            } else {
                assert_int_equal(s->attrs.n, 2);
                assert_string_equal(label(b, s, "span_id"), SPAN_A_HEX);
                assert_string_equal(label(b, s, "trace_id"), TRACE_A_HEX);
            }
        }
        fc_batch_unref(b);
    }
}

/* ---- series labels and span_name ------------------------------------------------------------ */

static void test_series_labels_move_to_samples(void **state)
{
    struct fc_profile *p;
    struct fc_batch *b = new_batch(&p);
    uint32_t own[] = {str_attr(b, "span_id", "000000000000002a")};
    uint32_t name[] = {str_attr(b, "span_name", "GET /x"), str_attr(b, "worker", "w")};
    struct fc_spanlink_stats st;

    (void)state;
    assert_int_equal(fc_profile_set_label(b, p, "span_id", SPAN_A_HEX), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "trace_id", TRACE_A_HEX), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "span_name", "root"), FC_OK);
    add_sample(b, p, "a", 1, 0, NULL, 0);
    add_sample(b, p, "b", 2, 0, own, 1);
    add_sample(b, p, "c", 4, 0, name, 2);
    st = run(b, FC_SPANLINK_TO_LINKS, false);
    assert_null(fc_profile_label(b, p, "span_id"));
    assert_null(fc_profile_label(b, p, "trace_id"));
    assert_null(fc_profile_label(b, p, "span_name"));
    assert_int_equal(p->n_labels, 1);
    assert_link(b, &p->samples[0], SPAN_A, TRACE_A);
    assert_link(b, &p->samples[1], SPAN_B, TRACE_A); /* its own span, the profile's trace */
    assert_link(b, &p->samples[2], SPAN_A, TRACE_A);
    assert_int_equal(p->samples[2].attrs.n, 1);
    assert_string_equal(label(b, &p->samples[2], "worker"), "w");
    assert_int_equal(st.series_labels_moved, 2);
    assert_int_equal(st.span_names_removed, 2);
    assert_int_equal(st.linked, 3);
    fc_batch_unref(b);
}

static void test_keep_span_name_and_bad_series_id(void **state)
{
    struct fc_profile *p;
    struct fc_batch *b = new_batch(&p);
    uint32_t name[] = {str_attr(b, "span_name", "GET /x"), str_attr(b, "span_id", SPAN_A_HEX)};
    struct fc_spanlink_stats st;

    (void)state;
    assert_int_equal(fc_profile_set_label(b, p, "span_id", "not-an-id"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "span_name", "root"), FC_OK);
    add_sample(b, p, "a", 1, 0, name, 2);
    add_sample(b, p, "b", 2, 0, NULL, 0);
    st = run(b, FC_SPANLINK_TO_LINKS, true);
    /* A span id is never left a series label, even one that is not an id. */
    assert_null(fc_profile_label(b, p, "span_id"));
    assert_string_equal(fc_profile_label(b, p, "span_name"), "root");
    assert_string_equal(label(b, &p->samples[0], "span_name"), "GET /x");
    assert_link(b, &p->samples[0], SPAN_A, NULL);
    assert_int_equal(p->samples[1].link, 0);
    assert_int_equal(st.malformed, 1);
    assert_int_equal(st.series_labels_moved, 1);
    assert_int_equal(st.span_names_removed, 0);
    fc_batch_unref(b);
}

/* ---- the processor as configured ------------------------------------------------------------ */

static void test_processor_defaults_and_metrics(void **state)
{
    const struct fc_registry_entry *e = fc_registry_find(FC_KIND_PROCESSOR, "spanlink");
    const struct fc_processor_type *t;
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_spanlink_config cfg;
    struct fc_processor self;
    struct fc_error err;
    struct fc_profile *p;
    struct fc_batch *b;
    const char *lab = "processor=\"spanlink/t\",pipeline=\"profiles\"";

    (void)state;
    assert_non_null(e);
    t = fc_processor_type_of(e);
    assert_false(t->preserves_batch);
    fc_diag_init(&d);
    memset(&cfg, 0xff, sizeof(cfg));
    assert_int_equal(fc_schema_bind(a, t->info.fields, NULL, &cfg, "processors.spanlink", &d), 0);
    assert_int_equal(cfg.to, FC_SPANLINK_TO_LINKS);
    assert_false(cfg.keep_span_name);
    assert_int_not_equal(fc_schema_bind(a, t->info.fields, fc_test_yaml(a, "to: spans\n", &d), &cfg,
                                        "processors.spanlink", &d),
                         0);
    fc_diag_release(&d);

    memset(&self, 0, sizeof(self));
    self.type = t;
    self.id = "spanlink/t";
    self.pipeline = "profiles";
    cfg.to = FC_SPANLINK_TO_LINKS;
    cfg.keep_span_name = false;
    self.config = &cfg;
    memset(&err, 0, sizeof(err));
    assert_int_equal(t->create(&self, &err), FC_OK);
    b = new_batch(&p);
    {
        uint32_t x[] = {str_attr(b, "span_id", "xyz")};
        uint32_t y[] = {str_attr(b, "span_id", "000000000000002a")};
        add_sample(b, p, "a", 1, link_of(b, SPAN_A, NULL), y, 1);
        add_sample(b, p, "b", 1, 0, x, 1);
        add_sample(b, p, "c", 1, 0, y, 1);
    }
    assert_int_equal(t->process(&self, &b, &err), FC_OK);
    assert_int_equal(fc_metrics_value("flamecol_processor_spanlink_conflicts_total", lab), 1);
    assert_int_equal(fc_metrics_value("flamecol_processor_spanlink_malformed_labels_total", lab),
                     1);
    assert_int_equal(fc_metrics_value("flamecol_processor_spanlink_linked_samples_total", lab), 1);
    t->destroy(&self);
    fc_batch_unref(b);
    fc_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_span_id_forms),
        cmocka_unit_test(test_labels_become_links),
        cmocka_unit_test(test_links_become_labels),
        cmocka_unit_test(test_both),
        cmocka_unit_test(test_conflict_link_wins),
        cmocka_unit_test(test_series_labels_move_to_samples),
        cmocka_unit_test(test_keep_span_name_and_bad_series_id),
        cmocka_unit_test(test_processor_defaults_and_metrics),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
