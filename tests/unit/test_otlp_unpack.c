/*
 * The hand-written ExportProfilesServiceRequest decoder (formats/otlp_unpack.h)
 * on requests written byte by byte here, against what protobuf-c makes of
 * them (its rules, read from protobuf-c.c: unknown fields kept, a singular
 * message given twice merged, a bool read from any wire type), and the
 * errors fc_otlp_decode_depth gives, which must be the ones of the
 * fc_pb_check_depth pre-pass and protobuf-c's unpack it replaces.
 * tests/fuzz/fuzz_otlp_unpack.c compares the two decoders on any bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "core/arena.h"
#include "core/batch.h"
#include "formats/otlp.h"
#include "formats/otlp_unpack.h"
#include "formats/pb.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"
#include "tests/unit/fc_test.h"

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    PbRequest;
typedef Opentelemetry__Proto__Common__V1__AnyValue PbAnyValue;

#define CASE(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

/* Two dictionaries merge (tables concatenated); an unknown field is kept as it came. */
static void test_merge_and_unknown_fields(void **state)
{
    static const uint8_t req[] = {
        0x12, 0x05, 0x2a, 0x00, 0x2a, 0x01, 'a',  /* dictionary { string_table "", "a" } */
        0x0a, 0x05, 0x1a, 0x01, 'x',  0x48, 0x05, /* resource_profiles { schema_url "x", 9: 5 } */
        0x12, 0x03, 0x2a, 0x01, 'b',              /* dictionary { string_table "b" } */
    };
    struct fc_arena *a = fc_arena_new(0);
    PbRequest *r;

    (void)state;
    r = fc_otlp_unpack(a, req, sizeof(req), FC_PB_DEFAULT_MAX_DEPTH);
    assert_non_null(r);
    assert_non_null(r->dictionary);
    assert_int_equal(r->dictionary->n_string_table, 3);
    assert_string_equal(r->dictionary->string_table[0], "");
    assert_string_equal(r->dictionary->string_table[1], "a");
    assert_string_equal(r->dictionary->string_table[2], "b");
    assert_int_equal(r->n_resource_profiles, 1);
    assert_string_equal(r->resource_profiles[0]->schema_url, "x");
    assert_int_equal(r->resource_profiles[0]->base.n_unknown_fields, 1);
    assert_int_equal(r->resource_profiles[0]->base.unknown_fields[0].tag, 9);
    assert_int_equal(r->resource_profiles[0]->base.unknown_fields[0].wire_type,
                     PROTOBUF_C_WIRE_TYPE_VARINT);
    assert_int_equal(r->resource_profiles[0]->base.unknown_fields[0].len, 1);
    assert_int_equal(r->resource_profiles[0]->base.unknown_fields[0].data[0], 5);
    fc_arena_free(a);
}

/*
 * protobuf-c reads a bool from any wire type: true when a byte of it has a
 * low bit set. Resource attributes k1: bool as fixed64 0x8080...80 (false),
 * k2: bool as fixed32 00 01 00 00 (true).
 */
static void test_bool_from_any_wire_type(void **state)
{
    static const uint8_t req[] = {
        0x0a, 0x2a,                               /* resource_profiles */
        0x0a, 0x28,                               /* resource */
        0x0a, 0x0f, 0x0a, 0x02, 'k',  '1',        /* attributes { key "k1" */
        0x12, 0x09, 0x11, 0x80, 0x80, 0x80, 0x80, /*   value { bool_value: fixed64 */
        0x80, 0x80, 0x80, 0x80,                   /*   } } */
        0x0a, 0x0b, 0x0a, 0x02, 'k',  '2',        /* attributes { key "k2" */
        0x12, 0x05, 0x15, 0x00, 0x01, 0x00, 0x00, /*   value { bool_value: fixed32 } } */
        0x0a, 0x08, 0x0a, 0x02, 'k',  '3',        /* attributes { key "k3" */
        0x12, 0x02, 0x10, 0x80,                   /*   value { bool_value: varint, cut } } */
    };
    struct fc_arena *a = fc_arena_new(0);
    const PbAnyValue *v;
    PbRequest *r;

    (void)state;
    /* k3's varint does not end: refused. Without it (k1, k2 only) the request is taken. */
    assert_null(fc_otlp_unpack(a, req, sizeof(req), FC_PB_DEFAULT_MAX_DEPTH));
    {
        uint8_t ok[sizeof(req)];
        memcpy(ok, req, sizeof(req));
        ok[1] = 0x20; /* resource_profiles and resource shrink by k3's 10 bytes */
        ok[3] = 0x1e;
        r = fc_otlp_unpack(a, ok, sizeof(req) - 10, FC_PB_DEFAULT_MAX_DEPTH);
    }
    assert_non_null(r);
    assert_int_equal(r->resource_profiles[0]->resource->n_attributes, 2);
    v = r->resource_profiles[0]->resource->attributes[0]->value;
    assert_int_equal(v->value_case, CASE(BOOL_VALUE));
    assert_int_equal(v->bool_value, 0);
    v = r->resource_profiles[0]->resource->attributes[1]->value;
    assert_int_equal(v->value_case, CASE(BOOL_VALUE));
    assert_int_equal(v->bool_value, 1);
    fc_arena_free(a);
}

static const char *decode_error(const uint8_t *req, size_t len, unsigned max_depth,
                                struct fc_error *err)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_otlp_result res;

    assert_int_equal(fc_otlp_decode_depth(b, req, len, max_depth, &res, err), FC_EPROTO);
    fc_batch_unref(b);
    return err->msg;
}

/* The messages of the pre-pass and of protobuf-c's refusal, as they were. */
static void test_errors_as_before(void **state)
{
    /* resource_profiles of 5 bytes, 1 there: the pre-pass stops at byte 2. */
    static const uint8_t past_end[] = {0x0a, 0x05, 0x01};
    /* dictionary as a varint: wire-valid, refused by protobuf-c. */
    static const uint8_t wire_type[] = {0x10, 0x01};
    /* field 15 in a 6-byte tag: fc_pb_check_depth reads it, protobuf-c does not. */
    static const uint8_t long_tag[] = {0xf8, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01};
    /* resource_profiles { resource {} }: depth 3. */
    static const uint8_t three[] = {0x0a, 0x02, 0x0a, 0x00};
    struct fc_error err = {0};

    (void)state;
    assert_string_equal(decode_error(past_end, sizeof(past_end), 100, &err),
                        "otlp: not a valid ExportProfilesServiceRequest (malformed protobuf at "
                        "byte 2)");
    assert_string_equal(decode_error(wire_type, sizeof(wire_type), 100, &err),
                        "otlp: not a valid ExportProfilesServiceRequest (malformed protobuf)");
    assert_string_equal(decode_error(long_tag, sizeof(long_tag), 100, &err),
                        "otlp: not a valid ExportProfilesServiceRequest (malformed protobuf)");
    assert_string_equal(decode_error(three, sizeof(three), 2, &err),
                        "otlp: message nested deeper than max_message_depth (2)");
    {
        struct fc_arena *a = fc_arena_new(0);
        assert_non_null(fc_otlp_unpack(a, three, sizeof(three), 3));
        assert_null(fc_otlp_unpack(a, three, sizeof(three), 2));
        fc_arena_free(a);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_and_unknown_fields),
        cmocka_unit_test(test_bool_from_any_wire_type),
        cmocka_unit_test(test_errors_as_before),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
