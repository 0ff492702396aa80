/*
 * Input caps (issue 9): message nesting in protobuf and JSON at exactly the
 * limit and one over, empty bodies, each receiver cap at exactly its value
 * (accepted) and one over (refused, with a message naming the limit), and
 * deep stacks cut to their root-most frames. Expected values are worked out
 * by hand from the wire format and the inputs built here.
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
#include "core/component.h"
#include "core/limits.h"
#include "formats/folded.h"
#include "formats/json.h"
#include "formats/otlp.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "tests/unit/fc_test.h"

#define ANY_DESC (&opentelemetry__proto__common__v1__any_value__descriptor)

/* ---- protobuf nesting ---------------------------------------------------------------------- */

/*
 * An AnyValue holding k nested ArrayValues around AnyValue{int_value: 1}:
 * AnyValue(1) > ArrayValue(2) > AnyValue(3) > ... so its depth is 2k + 1.
 */
static void nested_any(unsigned k, struct fc_buf *out)
{
    struct fc_buf inner, arr;

    fc_buf_init(out, 0);
    fc_pb_put_uint(out, 3, 1); /* int_value = 1 */
    for (unsigned i = 0; i < k; i++) {
        fc_buf_init(&arr, 0);
        fc_pb_put_bytes(&arr, 1, out->data, out->len); /* ArrayValue.values */
        fc_buf_init(&inner, 0);
        fc_pb_put_bytes(&inner, 5, arr.data, arr.len); /* AnyValue.array_value */
        fc_buf_release(&arr);
        fc_buf_release(out);
        *out = inner;
    }
}

/*
 * An ExportProfilesServiceRequest with one resource attribute whose value is
 * nested_any(k): Request(1) > ResourceProfiles(2) > Resource(3) >
 * KeyValue(4) > AnyValue(5), so the deepest message is at 2k + 5.
 */
static void nested_request(unsigned k, struct fc_buf *out)
{
    struct fc_buf any, kv, res, rp;

    nested_any(k, &any);
    fc_buf_init(&kv, 0);
    fc_pb_put_bytes(&kv, 1, "deep", 4);
    fc_pb_put_bytes(&kv, 2, any.data, any.len);
    fc_buf_init(&res, 0);
    fc_pb_put_bytes(&res, 1, kv.data, kv.len);
    fc_buf_init(&rp, 0);
    fc_pb_put_bytes(&rp, 1, res.data, res.len);
    fc_buf_init(out, 0);
    fc_pb_put_bytes(out, 1, rp.data, rp.len);
    fc_buf_release(&any);
    fc_buf_release(&kv);
    fc_buf_release(&res);
    fc_buf_release(&rp);
}

static void test_pb_depth_at_and_over_the_limit(void **state)
{
    struct fc_buf m;
    struct fc_error err = {0};

    (void)state;
    nested_any(10, &m); /* depth 21 */
    assert_int_equal(fc_pb_check_depth(ANY_DESC, m.data, m.len, 21, &err), FC_OK);
    assert_int_equal(fc_pb_check_depth(ANY_DESC, m.data, m.len, 20, &err), FC_EPROTO);
    assert_string_equal(err.msg, "message nested deeper than max_message_depth (20)");
    /* A single message is depth 1. */
    fc_buf_release(&m);
    nested_any(0, &m);
    assert_int_equal(fc_pb_check_depth(ANY_DESC, m.data, m.len, 1, &err), FC_OK);
    fc_buf_release(&m);
    /* 3,000 levels (6,001 messages): refused by the walk without recursing. */
    nested_any(3000, &m);
    assert_int_equal(fc_pb_check_depth(ANY_DESC, m.data, m.len, 100, &err), FC_EPROTO);
    assert_string_equal(err.msg, "message nested deeper than max_message_depth (100)");
    /* 0 and values past the ceiling mean the ceiling (1000). */
    assert_int_equal(fc_pb_check_depth(ANY_DESC, m.data, m.len, 0, &err), FC_EPROTO);
    assert_string_equal(err.msg, "message nested deeper than max_message_depth (1000)");
    fc_buf_release(&m);
}

static void test_pb_depth_refuses_malformed_bytes(void **state)
{
    /* Field 0 in a two-byte tag: protobuf-c takes it, then cannot read its own output. */
    static const uint8_t field_zero[] = {0x85, 0x00, 0x3d, 0x31, 0x7d, 0x01};
    /* array_value (5) claims 9 bytes, 2 follow. */
    static const uint8_t truncated[] = {0x2a, 0x09, 0x0a, 0x00};
    /* array_value holds values (1) of 3 bytes, but the ArrayValue is only 2 long. */
    static const uint8_t overruns_parent[] = {0x2a, 0x02, 0x0a, 0x03, 0x18, 0x01, 0x00};
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_pb_check_depth(ANY_DESC, field_zero, sizeof(field_zero), 10, &err),
                     FC_EPROTO);
    assert_non_null(strstr(err.msg, "not a valid AnyValue (malformed protobuf"));
    assert_int_equal(fc_pb_check_depth(ANY_DESC, truncated, sizeof(truncated), 10, &err),
                     FC_EPROTO);
    assert_int_equal(
        fc_pb_check_depth(ANY_DESC, overruns_parent, sizeof(overruns_parent), 10, &err), FC_EPROTO);
    /* Unknown fields and strings are skipped, not descended into. */
    {
        static const uint8_t unknown[] = {0xfa, 0x01, 0x02, 0x2a, 0x00, 0x0a, 0x01, 'x'};
        assert_int_equal(fc_pb_check_depth(ANY_DESC, unknown, sizeof(unknown), 1, &err), FC_OK);
    }
}

static void test_otlp_request_depth(void **state)
{
    struct fc_buf m;
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_batch *b;

    (void)state;
    nested_request(10, &m); /* deepest message at 25 */
    b = fc_batch_new(0);
    assert_int_equal(fc_otlp_decode_depth(b, m.data, m.len, 25, &res, &err), FC_OK);
    fc_batch_unref(b);
    b = fc_batch_new(0);
    assert_int_equal(fc_otlp_decode_depth(b, m.data, m.len, 24, &res, &err), FC_EPROTO);
    assert_string_equal(err.msg, "otlp: message nested deeper than max_message_depth (24)");
    fc_batch_unref(b);
    fc_buf_release(&m);
    /* The default (100) refuses 3,000 levels before protobuf-c sees them. */
    nested_request(3000, &m);
    b = fc_batch_new(0);
    assert_int_equal(fc_otlp_decode(b, m.data, m.len, &res, &err), FC_EPROTO);
    assert_string_equal(err.msg, "otlp: message nested deeper than max_message_depth (100)");
    fc_batch_unref(b);
    fc_buf_release(&m);
}

/* ---- JSON nesting ---------------------------------------------------------------------------- */

/* {"arrayValue":{"values":[ ... {"intValue":"1"} ... ]}}: k levels, message depth 2k + 1. */
static char *nested_any_json(unsigned k)
{
    struct fc_buf j;

    fc_buf_init(&j, 0);
    for (unsigned i = 0; i < k; i++) {
        fc_buf_puts(&j, "{\"arrayValue\":{\"values\":[");
    }
    fc_buf_puts(&j, "{\"intValue\":\"1\"}");
    for (unsigned i = 0; i < k; i++) {
        fc_buf_puts(&j, "]}}");
    }
    fc_buf_append(&j, "", 1);
    return (char *)j.data;
}

static void test_json_depth(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *v;
    struct fc_error err = {0};

    (void)state;
    /* Root depth 0: the 1 in [[1]] is inside two containers. */
    assert_int_equal(fc_json_parse_depth(a, "[[1]]", 5, 2, NULL, &v, &err), FC_OK);
    assert_int_equal(fc_json_parse_depth(a, "[[[1]]]", 7, 2, NULL, &v, &err), FC_EPROTO);
    /* The 1 (byte 3) is inside three containers. */
    assert_string_equal(err.msg, "json: nested deeper than 2 levels at byte 3");
    /* The default bound is 128 containers around a value. */
    {
        char deep[2 * 129 + 2];
        memset(deep, '[', 128);
        deep[128] = '1';
        memset(deep + 129, ']', 128);
        assert_int_equal(fc_json_parse(a, deep, 257, &v, &err), FC_OK);
        memset(deep, '[', 129);
        deep[129] = '1';
        memset(deep + 130, ']', 129);
        assert_int_equal(fc_json_parse(a, deep, 259, &v, &err), FC_EPROTO);
        assert_string_equal(err.msg, "json: nested deeper than 128 levels at byte 129");
    }
    fc_arena_free(a);
}

static void test_pbjson_depth(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_error err = {0};
    char *text = nested_any_json(10); /* message depth 21 */
    void *out;

    (void)state;
    assert_int_equal(fc_pbjson_read_depth(a, ANY_DESC, text, strlen(text), 21, &out, &err), FC_OK);
    assert_int_equal(fc_pbjson_read_depth(a, ANY_DESC, text, strlen(text), 20, &out, &err),
                     FC_EPROTO);
    assert_string_equal(err.msg, "message nested deeper than max_message_depth (20)");
    free(text);
    /* 3,000 levels: the JSON parser stops at 2 x max_message_depth, naming the limit. */
    text = nested_any_json(3000);
    assert_int_equal(fc_pbjson_read(a, ANY_DESC, text, strlen(text), &out, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "nested deeper than max_message_depth (100) allows"));
    free(text);
    fc_arena_free(a);
}

/* ---- empty bodies ---------------------------------------------------------------------------- */

static void test_empty_bodies(void **state)
{
    struct fc_pb r;
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *v;
    struct fc_error err = {0};
    struct fc_batch *b = fc_batch_new(0);
    struct fc_otlp_result res;

    (void)state;
    fc_pb_init(&r, NULL, 0);
    assert_true(fc_pb_done(&r));
    assert_int_equal(fc_pb_check_depth(ANY_DESC, NULL, 0, 1, &err), FC_OK);
    assert_int_equal(fc_json_parse(a, NULL, 0, &v, &err), FC_EPROTO);
    assert_string_equal(err.msg, "json: unexpected end of input at byte 0");
    /* An empty ExportProfilesServiceRequest is a valid request with nothing in it. */
    assert_int_equal(fc_otlp_decode(b, NULL, 0, &res, &err), FC_OK);
    assert_int_equal(b->n_profiles, 0);
    fc_batch_unref(b);
    fc_arena_free(a);
}

/* ---- receiver caps --------------------------------------------------------------------------- */

/* Written out, not taken from fc_input_limits_default, so a changed default shows here. */
static const struct fc_input_limits defaults = {
    .max_message_depth = 100,
    .max_stack_depth = 1024,
    .max_sample_labels = 100,
    .max_labels = 30,
    .max_label_name_length = 1024,
    .max_label_value_length = 2048,
    .max_attributes = 128,
};

static struct fc_profile *new_profile(struct fc_batch *b)
{
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;

    assert_non_null(p);
    assert_int_equal(fc_dict_cstring(b, "samples", &vt.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "count", &vt.unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    return p;
}

static char *repeat(char c, size_t n)
{
    char *s = malloc(n + 1);

    memset(s, c, n);
    s[n] = '\0';
    return s;
}

/* A batch with one profile of n_labels series labels; the last has the given name/value sizes. */
static struct fc_batch *series_batch(uint32_t n_labels, size_t name_len, size_t value_len)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = new_profile(b);
    char name[32];

    for (uint32_t i = 0; i + 1 < n_labels; i++) {
        snprintf(name, sizeof(name), "l%02u", i);
        assert_int_equal(fc_profile_set_label(b, p, name, "v"), FC_OK);
    }
    {
        char *n = repeat('n', name_len), *v = repeat('v', value_len);
        assert_int_equal(fc_profile_set_label(b, p, n, v), FC_OK);
        free(n);
        free(v);
    }
    return b;
}

static int apply(const struct fc_input_limits *l, struct fc_batch *b, struct fc_error *err)
{
    int rc = fc_input_limits_apply(l, b, NULL, err);

    fc_batch_unref(b);
    return rc;
}

static void test_series_label_caps(void **state)
{
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(apply(&defaults, series_batch(30, 4, 4), &err), FC_OK);
    assert_int_equal(apply(&defaults, series_batch(31, 4, 4), &err), FC_EPROTO);
    assert_string_equal(err.msg, "profile 0 has 31 series labels, more than max_labels (30)");
    assert_int_equal(apply(&defaults, series_batch(1, 1024, 4), &err), FC_OK);
    assert_int_equal(apply(&defaults, series_batch(1, 1025, 4), &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "is 1025 bytes, more than max_label_name_length (1024)"));
    assert_int_equal(apply(&defaults, series_batch(1, 1, 2048), &err), FC_OK);
    assert_int_equal(apply(&defaults, series_batch(1, 1, 2049), &err), FC_EPROTO);
    assert_string_equal(err.msg, "profile 0: label \"n\" value is 2049 bytes, more than "
                                 "max_label_value_length (2048)");
}

/* One profile, one sample whose n labels are k00=v, k01=v, ...; the last value is value_len long.
 */
static struct fc_batch *sample_batch(uint32_t n, size_t name_len, size_t value_len)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = new_profile(b);
    uint32_t *ids = calloc(n + 1, sizeof(uint32_t));
    struct fc_sample s = {0};
    int64_t one = 1;

    for (uint32_t i = 0; i < n; i++) {
        struct fc_attr a = {0};
        char key[32];
        char *k = i + 1 == n ? repeat('k', name_len) : NULL;
        char *v = repeat('v', i + 1 == n ? value_len : 1);
        snprintf(key, sizeof(key), "k%02u", i);
        a.kind = FC_ATTR_STR;
        assert_int_equal(fc_dict_cstring(b, k ? k : key, &a.key), FC_OK);
        assert_int_equal(fc_dict_cstring(b, v, &a.v.str), FC_OK);
        assert_int_equal(fc_dict_attr(b, &a, &ids[i]), FC_OK);
        free(k);
        free(v);
    }
    assert_int_equal(fc_dict_span(b, ids, n, &s.attrs), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, &one, 1, NULL, 0), FC_OK);
    free(ids);
    return b;
}

static void test_sample_label_caps(void **state)
{
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(apply(&defaults, sample_batch(100, 3, 1), &err), FC_OK);
    assert_int_equal(apply(&defaults, sample_batch(101, 3, 1), &err), FC_EPROTO);
    assert_string_equal(err.msg,
                        "profile 0 sample 0 has 101 labels, more than max_sample_labels (100)");
    assert_int_equal(apply(&defaults, sample_batch(1, 1024, 1), &err), FC_OK);
    assert_int_equal(apply(&defaults, sample_batch(1, 1025, 1), &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "profile 0 sample 0: label name \"kkk"));
    assert_non_null(strstr(err.msg, "is 1025 bytes, more than max_label_name_length (1024)"));
    assert_int_equal(apply(&defaults, sample_batch(1, 3, 2048), &err), FC_OK);
    /* Today's hostile input: an 8 MiB sample label value. */
    assert_int_equal(apply(&defaults, sample_batch(1, 3, 8u << 20), &err), FC_EPROTO);
    assert_string_equal(err.msg, "profile 0 sample 0: label \"kkk\" value is 8388608 bytes, more "
                                 "than max_label_value_length (2048)");
    /* 0 = no limit. */
    {
        struct fc_input_limits open = defaults;
        open.max_label_value_length = 0;
        open.max_sample_labels = 0;
        assert_int_equal(apply(&open, sample_batch(101, 3, 4096), &err), FC_OK);
    }
}

/* n resource attributes and m profile attributes on an OTLP-shaped profile. */
static struct fc_batch *attr_batch(uint32_t n, uint32_t m)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = new_profile(b);
    uint32_t *ids = calloc(n + m + 1, sizeof(uint32_t));
    struct fc_origin o = {0};

    for (uint32_t i = 0; i < n + m; i++) {
        struct fc_attr a = {0};
        char key[32];
        snprintf(key, sizeof(key), "attr.%u", i);
        a.kind = FC_ATTR_INT;
        a.v.i = i;
        assert_int_equal(fc_dict_cstring(b, key, &a.key), FC_OK);
        assert_int_equal(fc_dict_attr(b, &a, &ids[i]), FC_OK);
    }
    assert_int_equal(fc_dict_span(b, ids, n, &o.resource_attrs), FC_OK);
    assert_int_equal(fc_dict_span(b, ids + n, m, &p->attrs), FC_OK);
    assert_int_equal(fc_batch_add_origin(b, &o, &p->origin), FC_OK);
    free(ids);
    return b;
}

static void test_attribute_cap(void **state)
{
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(apply(&defaults, attr_batch(120, 8), &err), FC_OK);
    assert_int_equal(apply(&defaults, attr_batch(121, 8), &err), FC_EPROTO);
    assert_string_equal(err.msg, "profile 0 has 129 attributes (resource 121, scope 0, profile "
                                 "8), more than max_attributes (128)");
    assert_int_equal(apply(&defaults, attr_batch(20000, 0), &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "20000 attributes"));
}

/* The function name of frame i (leaf first) of stack s. */
static const char *frame(const struct fc_batch *b, uint32_t s, uint32_t i)
{
    const struct fc_stack *st = &b->dict.stacks[s];
    const struct fc_location *loc = &b->dict.locations[fc_span_idx(b, st->locations)[i]];
    const struct fc_line *line = &b->dict.lines[loc->lines_off];

    return fc_str(b, b->dict.functions[line->function].name);
}

static void test_deep_stacks_keep_the_root(void **state)
{
    /* Folded text is root first: f4 is the root, f0 the leaf. */
    static const char text[] = "f4;f3;f2;f1;f0 7\nf4;f3;f2 1\n";
    struct fc_input_limits l = defaults;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = new_profile(b);
    struct fc_error err = {0};
    uint64_t cut = 0;
    uint32_t s;

    (void)state;
    assert_int_equal(fc_folded_decode(b, p, text, strlen(text), false, 0, &err), FC_OK);
    /* At exactly the limit nothing is cut. */
    l.max_stack_depth = 5;
    assert_int_equal(fc_input_limits_apply(&l, b, &cut, &err), FC_OK);
    assert_int_equal(cut, 0);
    l.max_stack_depth = 3;
    assert_int_equal(fc_input_limits_apply(&l, b, &cut, &err), FC_OK);
    assert_int_equal(cut, 1); /* the 3-frame stack is already within the limit */
    s = p->samples[0].stack;
    assert_int_equal(b->dict.stacks[s].locations.n, 3);
    assert_string_equal(frame(b, s, 0), "f2");
    assert_string_equal(frame(b, s, 1), "f3");
    assert_string_equal(frame(b, s, 2), "f4");
    assert_int_equal(fc_profile_total(p, 0), 8);
    fc_batch_unref(b);
}

static void test_config_validation(void **state)
{
    struct fc_input_limits l = defaults;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_OK);
    l.max_message_depth = 1000;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_OK);
    l.max_message_depth = 1001;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_ECONFIG);
    assert_string_equal(err.msg, "max_message_depth must be between 1 and 1000");
    l.max_message_depth = 0;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_ECONFIG);
    l = defaults;
    l.max_labels = 0;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_ECONFIG);
    l = defaults;
    l.max_attributes = -1;
    assert_int_equal(fc_input_limits_validate(&l, &err), FC_ECONFIG);
}

extern const struct fc_receiver_type fc_pprof_receiver;
extern const struct fc_receiver_type fc_otlp_receiver;

static const struct fc_field *find_field(const struct fc_field *fields, const char *name)
{
    for (; fields->name != NULL; fields++) {
        if (strcmp(fields->name, name) == 0) {
            return fields;
        }
    }
    return NULL;
}

/* One schema fragment: both receivers expose the same keys, defaults and help. */
static void test_both_receivers_share_the_keys(void **state)
{
    static const char *const keys[] = {
        "max_message_depth",     "max_stack_depth",        "max_sample_labels", "max_labels",
        "max_label_name_length", "max_label_value_length", "max_attributes"};
    static const struct fc_field fields[] = {FC_INPUT_LIMITS_FIELDS(0), {NULL}};
    struct fc_arena *a = fc_arena_new(0);
    struct fc_input_limits bound;
    struct fc_diag diag;

    (void)state;
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const struct fc_field *p = find_field(fc_pprof_receiver.info.fields, keys[i]);
        const struct fc_field *o = find_field(fc_otlp_receiver.info.fields, keys[i]);
        assert_non_null(p);
        assert_non_null(o);
        assert_string_equal(p->default_value, o->default_value);
        assert_string_equal(p->help, o->help);
    }
    /* The defaults, bound from the schema, are the ones code without a config uses. */
    fc_diag_init(&diag);
    memset(&bound, 0xff, sizeof(bound));
    assert_int_equal(fc_schema_bind(a, fields, NULL, &bound, "test", &diag), 0);
    assert_memory_equal(&bound, &fc_input_limits_default, sizeof(bound));
    assert_int_equal(bound.max_message_depth, 100);
    assert_int_equal(bound.max_stack_depth, 1024);
    assert_int_equal(bound.max_attributes, 128);
    fc_diag_release(&diag);
    fc_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pb_depth_at_and_over_the_limit),
        cmocka_unit_test(test_pb_depth_refuses_malformed_bytes),
        cmocka_unit_test(test_otlp_request_depth),
        cmocka_unit_test(test_json_depth),
        cmocka_unit_test(test_pbjson_depth),
        cmocka_unit_test(test_empty_bodies),
        cmocka_unit_test(test_series_label_caps),
        cmocka_unit_test(test_sample_label_caps),
        cmocka_unit_test(test_attribute_cap),
        cmocka_unit_test(test_deep_stacks_keep_the_root),
        cmocka_unit_test(test_config_validation),
        cmocka_unit_test(test_both_receivers_share_the_keys),
    };
    return cmocka_run_group_tests_name("limits", tests, NULL, NULL);
}
