/*
 * The OTLP codec: every corpus profile survives pprof -> OTLP -> batch with
 * identical stacks and values per sample type, OTLP -> batch -> OTLP is a
 * fixed point, pprof -> OTLP -> pprof keeps mappings, labels and links, and
 * malformed requests are refused with the element named.
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
#include "formats/folded.h"
#include "formats/otlp.h"
#include "formats/pb.h"
#include "formats/pprof.h"
#include "formats/pyroscope.h"
#include "google/rpc/status.pb-c.h"
#include "tests/unit/fc_test.h"

static struct fc_batch *decode_pprof_file(const char *name)
{
    char path[1024];
    size_t len;
    uint8_t *data;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};

    snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), name);
    data = fc_test_read(path, &len);
    assert_non_null(data);
    assert_int_equal(fc_pprof_decode(b, data, len, NULL, &p, &err), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "corpus"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "__name__", "process_cpu"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "region", "eu-north"), FC_OK);
    free(data);
    return b;
}

static void folded(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                   struct fc_buf *out)
{
    fc_buf_init(out, 0);
    assert_int_equal(fc_folded_write_profile(b, p, t, out), FC_OK);
}

static void assert_same_folded(const struct fc_batch *x, const struct fc_profile *p, uint32_t t,
                               const struct fc_batch *y, const struct fc_profile *q, uint32_t u)
{
    struct fc_buf a, b;

    folded(x, p, t, &a);
    folded(y, q, u, &b);
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len);
    assert_int_equal(fc_profile_total(p, t), fc_profile_total(q, u));
    fc_buf_release(&a);
    fc_buf_release(&b);
}

static struct fc_batch *otlp_round(const struct fc_batch *b, struct fc_buf *wire)
{
    struct fc_batch *c = fc_batch_new(0);
    struct fc_otlp_result res;
    struct fc_error err = {0};

    fc_buf_init(wire, 0);
    assert_int_equal(fc_otlp_encode(b, wire, &err), FC_OK);
    if (fc_otlp_decode(c, wire->data, wire->len, &res, &err) != FC_OK) {
        fail_msg("decode: %s", err.msg);
    }
    assert_int_equal(res.rejected_profiles, 0);
    return c;
}

static void test_corpus_pprof_otlp_round_trips(void **state)
{
    char names[64][256];
    size_t n_files = fc_test_corpus_files(names, 64);
    int files = 0;

    (void)state;
    for (size_t f = 0; f < n_files; f++) {
        const char *name = names[f];
        struct fc_batch *b, *c, *c2, *back;
        struct fc_buf w1, w2, w3;
        const struct fc_profile *p;
        b = decode_pprof_file(name);
        p = &b->profiles[0];
        /* pprof -> OTLP: one profile per sample type, same stacks and values. */
        c = otlp_round(b, &w1);
        assert_int_equal(c->n_profiles, p->n_sample_types);
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            const struct fc_profile *q = &c->profiles[t];
            assert_string_equal(fc_str(b, p->sample_types[t].type),
                                fc_str(c, q->sample_types[0].type));
            assert_same_folded(b, p, t, c, q, 0);
            assert_string_equal(fc_profile_label(c, q, "service_name"), "corpus");
            assert_string_equal(fc_profile_label(c, q, "region"), "eu-north");
            assert_string_equal(fc_profile_label(c, q, "__name__"), "process_cpu");
            assert_int_equal(q->period, p->period);
            assert_int_equal(q->time_ns, p->time_ns);
            assert_int_equal(q->duration_ns, p->duration_ns);
            assert_int_equal(q->n_labels, p->n_labels);
        }
        /* OTLP -> batch -> OTLP is a fixed point. */
        c2 = otlp_round(c, &w2);
        fc_buf_init(&w3, 0);
        {
            struct fc_error err = {0};
            assert_int_equal(fc_otlp_encode(c2, &w3, &err), FC_OK);
        }
        assert_int_equal(w2.len, w3.len);
        assert_memory_equal(w2.data, w3.data, w2.len);
        assert_int_equal(w1.len, w2.len);
        assert_memory_equal(w1.data, w2.data, w1.len);
        /* OTLP -> pprof -> batch: each type as its own pprof, all pprof fields back. */
        for (uint32_t t = 0; t < c->n_profiles; t++) {
            struct fc_buf pp;
            struct fc_error err = {0};
            struct fc_profile *r = NULL;
            back = fc_batch_new(0);
            fc_buf_init(&pp, 0);
            assert_int_equal(fc_pprof_encode(c, &c->profiles[t], &pp, &err), FC_OK);
            assert_int_equal(fc_pprof_decode(back, pp.data, pp.len, NULL, &r, &err), FC_OK);
            assert_same_folded(b, p, t, back, r, 0);
            assert_string_equal(fc_str(b, p->drop_frames), fc_str(back, r->drop_frames));
            assert_string_equal(fc_str(b, p->keep_frames), fc_str(back, r->keep_frames));
            assert_int_equal(p->comments.n, r->comments.n);
            for (uint32_t i = 0; i < r->n_samples; i++) {
                const struct fc_stack *s1 = &b->dict.stacks[p->samples[i].stack];
                const struct fc_stack *s2 = &back->dict.stacks[r->samples[i].stack];
                for (uint32_t j = 0; j < s1->locations.n; j++) {
                    const struct fc_location *l1 =
                        &b->dict.locations[fc_span_idx(b, s1->locations)[j]];
                    const struct fc_location *l2 =
                        &back->dict.locations[fc_span_idx(back, s2->locations)[j]];
                    const struct fc_mapping *m1 = &b->dict.mappings[l1->mapping];
                    const struct fc_mapping *m2 = &back->dict.mappings[l2->mapping];
                    assert_int_equal(l1->address, l2->address);
                    assert_int_equal(m1->flags, m2->flags);
                    assert_string_equal(fc_str(b, m1->build_id), fc_str(back, m2->build_id));
                    assert_int_equal(m1->memory_start, m2->memory_start);
                }
                assert_int_equal(p->samples[i].attrs.n, r->samples[i].attrs.n);
            }
            fc_buf_release(&pp);
            fc_batch_unref(back);
        }
        fc_buf_release(&w1);
        fc_buf_release(&w2);
        fc_buf_release(&w3);
        fc_batch_unref(b);
        fc_batch_unref(c);
        fc_batch_unref(c2);
        files++;
    }
    assert_true(files >= 17);
}

/* A folded profile whose first sample carries pprof span/trace labels. */
static struct fc_batch *labelled_batch(void)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    struct fc_error err = {0};
    struct fc_attr a = {0};
    uint32_t ids[3];

    fc_dict_cstring(b, "samples", &vt.type);
    fc_dict_cstring(b, "count", &vt.unit);
    fc_profile_set_sample_types(b, p, &vt, 1);
    fc_profile_set_label(b, p, "service_name", "linked");
    assert_int_equal(fc_folded_decode(b, p, "main;handle;db 5\nmain;idle 2\n", 29, false, 0, &err),
                     FC_OK);
    a.kind = FC_ATTR_STR;
    fc_dict_cstring(b, "span_id", &a.key);
    fc_dict_cstring(b, "00f067aa0ba902b7", &a.v.str);
    fc_dict_attr(b, &a, &ids[0]);
    fc_dict_cstring(b, "trace_id", &a.key);
    fc_dict_cstring(b, "4bf92f3577b34da6a3ce929d0e0e4736", &a.v.str);
    fc_dict_attr(b, &a, &ids[1]);
    fc_dict_cstring(b, "thread.name", &a.key);
    fc_dict_cstring(b, "worker-1", &a.v.str);
    fc_dict_attr(b, &a, &ids[2]);
    fc_dict_span(b, ids, 3, &p->samples[0].attrs);
    return b;
}

static void test_links_both_ways(void **state)
{
    struct fc_batch *b = labelled_batch();
    struct fc_buf wire, pp;
    struct fc_batch *c = otlp_round(b, &wire);
    struct fc_batch *back = fc_batch_new(0);
    const struct fc_profile *q = &c->profiles[0];
    const struct fc_link *k;
    struct fc_profile *r = NULL;
    struct fc_error err = {0};
    const struct fc_attr *a;

    (void)state;
    /* In OTLP the labels are a Link; thread.name stays an attribute. */
    assert_int_not_equal(q->samples[0].link, 0);
    k = &c->dict.links[q->samples[0].link];
    assert_int_equal(k->span_id[0], 0x00);
    assert_int_equal(k->span_id[7], 0xb7);
    assert_int_equal(k->trace_id[0], 0x4b);
    assert_int_equal(q->samples[0].attrs.n, 1);
    assert_null(fc_attrs_find(c, q->samples[0].attrs, "span_id"));
    assert_non_null(fc_attrs_find(c, q->samples[0].attrs, "thread.name"));
    assert_int_equal(q->samples[1].link, 0);
    /* Back in pprof the Link is the labels Pyroscope reads. */
    fc_buf_init(&pp, 0);
    assert_int_equal(fc_pprof_encode(c, q, &pp, &err), FC_OK);
    assert_int_equal(fc_pprof_decode(back, pp.data, pp.len, NULL, &r, &err), FC_OK);
    a = fc_attrs_find(back, r->samples[0].attrs, "span_id");
    assert_non_null(a);
    assert_string_equal(fc_str(back, a->v.str), "00f067aa0ba902b7");
    a = fc_attrs_find(back, r->samples[0].attrs, "trace_id");
    assert_string_equal(fc_str(back, a->v.str), "4bf92f3577b34da6a3ce929d0e0e4736");
    assert_int_equal(r->samples[1].attrs.n, 0);
    fc_buf_release(&wire);
    fc_buf_release(&pp);
    fc_batch_unref(b);
    fc_batch_unref(c);
    fc_batch_unref(back);
}

/* ---- malformed requests: built by hand with the wire writer ---- */

static void msg(struct fc_buf *out, uint32_t field, struct fc_buf *inner)
{
    fc_pb_put_bytes(out, field, inner->data, inner->len);
    fc_buf_reset(inner);
}

/* A request: dictionary {strings ["", "samples", "count"], stacks [{}, {locs}]} + one profile. */
static void request(struct fc_buf *out, const char *first_string, int32_t stack_loc,
                    int32_t sample_stack, bool with_values, int32_t attr_index)
{
    struct fc_buf d, t, p, s, sp, rp;

    fc_buf_init(&d, 0);
    fc_buf_init(&t, 0);
    fc_buf_init(&p, 0);
    fc_buf_init(&s, 0);
    fc_buf_init(&sp, 0);
    fc_buf_init(&rp, 0);
    fc_pb_put_bytes(&d, 5, first_string, strlen(first_string));
    fc_pb_put_bytes(&d, 5, "samples", 7);
    fc_pb_put_bytes(&d, 5, "count", 5);
    fc_pb_put_bytes(&d, 2, "", 0); /* location_table[0] = {} */
    fc_pb_put_uint(&t, 2, 0x1234); /* location 1: address */
    msg(&d, 2, &t);
    fc_pb_put_bytes(&d, 7, "", 0); /* stack_table[0] = {} */
    fc_pb_put_packed(&t, 1, (uint64_t[]){(uint64_t)(int64_t)stack_loc}, 1);
    msg(&d, 7, &t);
    fc_pb_put_uint(&t, 1, 1); /* sample_type {type=1 unit=2} */
    fc_pb_put_uint(&t, 2, 2);
    msg(&p, 1, &t);
    fc_pb_put_uint(&s, 1, (uint64_t)(int64_t)sample_stack);
    if (attr_index != 0) {
        fc_pb_put_packed(&s, 2, (uint64_t[]){(uint64_t)(int64_t)attr_index}, 1);
    }
    if (with_values) {
        fc_pb_put_packed_i64(&s, 4, (int64_t[]){42}, 1);
    }
    msg(&p, 2, &s);
    msg(&sp, 2, &p);
    msg(&rp, 2, &sp);
    msg(out, 1, &rp);
    msg(out, 2, &d);
    fc_buf_release(&d);
    fc_buf_release(&t);
    fc_buf_release(&p);
    fc_buf_release(&s);
    fc_buf_release(&sp);
    fc_buf_release(&rp);
}

static int decode(struct fc_buf *wire, struct fc_otlp_result *res, char *why)
{
    struct fc_batch *b = fc_batch_new(1 << 20);
    struct fc_error err = {0};
    int rc = fc_otlp_decode(b, wire->data, wire->len, res, &err);

    snprintf(why, 512, "%s", rc == FC_OK ? res->message : err.msg);
    fc_batch_unref(b);
    fc_buf_reset(wire);
    return rc;
}

static void test_malformed_requests(void **state)
{
    struct fc_buf w;
    struct fc_otlp_result res;
    char why[512];

    (void)state;
    fc_buf_init(&w, 0);
    request(&w, "", 1, 1, true, 0);
    if (decode(&w, &res, why) != FC_OK) {
        fail_msg("valid request refused: %s", why);
    }
    assert_int_equal(res.profiles, 1);
    assert_int_equal(res.rejected_profiles, 0);
    /* A dictionary problem refuses the whole request. */
    request(&w, "x", 1, 1, true, 0);
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    assert_non_null(strstr(why, "string_table[0] must be \"\""));
    request(&w, "", 9, 1, true, 0);
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    assert_non_null(strstr(why, "dictionary.stack_table[1].location_indices: index 9"));
    /* A problem inside one profile rejects that profile: partial success. */
    request(&w, "", 1, 5, true, 0);
    assert_int_equal(decode(&w, &res, why), FC_OK);
    assert_int_equal(res.rejected_profiles, 1);
    assert_int_equal(res.profiles, 0);
    assert_non_null(strstr(why, "stack_index: index 5"));
    request(&w, "", 1, 1, false, 0);
    assert_int_equal(decode(&w, &res, why), FC_OK);
    assert_int_equal(res.rejected_profiles, 1);
    assert_non_null(strstr(why, "neither values nor timestamps"));
    request(&w, "", 1, 1, true, 3);
    assert_int_equal(decode(&w, &res, why), FC_OK);
    assert_non_null(strstr(why, "attribute_indices: index 3"));
    /* Wire-level garbage. */
    fc_buf_append(&w, "\x0a\xff\xff\xff\xff\x0f", 6); /* a huge length */
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    assert_non_null(strstr(why, "not a valid ExportProfilesServiceRequest"));
    request(&w, "", 1, 1, true, 0);
    w.len -= 3; /* truncated */
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    fc_buf_append(&w, "\x0d\x01\x02\x03\x04", 5); /* resource_profiles as fixed32 */
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    /* An empty request is a success with nothing in it. */
    assert_int_equal(decode(&w, &res, why), FC_OK);
    assert_int_equal(res.profiles, 0);
    fc_buf_release(&w);
}

static void test_bad_link_lengths(void **state)
{
    struct fc_buf w, d, k;
    struct fc_otlp_result res;
    char why[512];

    (void)state;
    fc_buf_init(&w, 0);
    fc_buf_init(&d, 0);
    fc_buf_init(&k, 0);
    fc_pb_put_bytes(&d, 5, "", 0);
    fc_pb_put_bytes(&d, 4, "", 0);
    fc_pb_put_bytes(&k, 1, "0123456789abcdef", 16);
    fc_pb_put_bytes(&k, 2, "1234", 4);
    msg(&d, 4, &k);
    msg(&w, 2, &d);
    assert_int_equal(decode(&w, &res, why), FC_EPROTO);
    assert_non_null(strstr(why, "link_table[1]"));
    fc_buf_release(&w);
    fc_buf_release(&d);
    fc_buf_release(&k);
}

static void test_json_round_trips_and_rules(void **state)
{
    char names[64][256];
    size_t n_files = fc_test_corpus_files(names, 64);
    int files = 0;

    (void)state;
    for (size_t f = 0; f < n_files; f++) {
        const char *name = names[f];
        struct fc_batch *b, *c, *c2;
        struct fc_buf j1, j2;
        struct fc_otlp_result res;
        struct fc_error err = {0};
        b = decode_pprof_file(name);
        fc_buf_init(&j1, 0);
        fc_buf_init(&j2, 0);
        assert_int_equal(fc_otlp_encode_json(b, &j1, &err), FC_OK);
        c = fc_batch_new(0);
        if (fc_otlp_decode_json(c, (const char *)j1.data, j1.len, &res, &err) != FC_OK) {
            fail_msg("%s: %s", name, err.msg);
        }
        assert_int_equal(c->n_profiles, b->profiles[0].n_sample_types);
        for (uint32_t t = 0; t < c->n_profiles; t++) {
            assert_same_folded(b, &b->profiles[0], t, c, &c->profiles[t], 0);
        }
        /* JSON -> batch -> JSON is a fixed point too. */
        assert_int_equal(fc_otlp_encode_json(c, &j2, &err), FC_OK);
        assert_int_equal(j1.len, j2.len);
        assert_memory_equal(j1.data, j2.data, j1.len);
        c2 = fc_batch_new(0);
        assert_int_equal(fc_otlp_decode_json(c2, (const char *)j2.data, j2.len, &res, &err), FC_OK);
        fc_buf_release(&j1);
        fc_buf_release(&j2);
        fc_batch_unref(b);
        fc_batch_unref(c);
        fc_batch_unref(c2);
        files++;
    }
    assert_true(files >= 17);
}

static void test_json_encoding_details(void **state)
{
    struct fc_batch *b = labelled_batch();
    struct fc_batch *c = fc_batch_new(0);
    struct fc_buf j;
    struct fc_otlp_result res;
    struct fc_error err = {0};
    const char *text;
    /* snake_case names, int64 as numbers, unknown fields: all accepted. */
    const char *hand = "{\"resource_profiles\":[{\"resource\":{\"attributes\":[{\"key\":"
                       "\"service.name\",\"value\":{\"stringValue\":\"svc\"}}]},"
                       "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
                       "\"unitStrindex\":2},\"timeUnixNano\":1700000000000000000,"
                       "\"samples\":[{\"stackIndex\":1,\"values\":[\"5\"],\"linkIndex\":1,"
                       "\"futureField\":true}]}]}]}],"
                       "\"dictionary\":{\"stringTable\":[\"\",\"samples\",\"count\",\"main\"],"
                       "\"functionTable\":[{},{\"nameStrindex\":3}],"
                       "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
                       "\"stackTable\":[{},{\"locationIndices\":[1]}],"
                       "\"linkTable\":[{},{\"traceId\":\"4BF92F3577B34DA6A3CE929D0E0E4736\","
                       "\"spanId\":\"00f067aa0ba902b7\"}]}}";

    (void)state;
    fc_buf_init(&j, 0);
    assert_int_equal(fc_otlp_encode_json(b, &j, &err), FC_OK);
    text = (const char *)j.data;
    assert_non_null(strstr(text, "\"resourceProfiles\":["));
    assert_non_null(strstr(text, "\"traceId\":\"4bf92f3577b34da6a3ce929d0e0e4736\""));
    assert_non_null(strstr(text, "\"spanId\":\"00f067aa0ba902b7\""));
    assert_non_null(strstr(text, "\"values\":[\"5\"]"));
    assert_non_null(strstr(text, "\"stringValue\":\"linked\""));
    assert_null(strstr(text, "_"
                             "strindex")); /* no snake_case names */
    assert_int_equal(fc_otlp_decode_json(c, hand, strlen(hand), &res, &err), FC_OK);
    assert_int_equal(res.profiles, 1);
    assert_string_equal(fc_profile_label(c, &c->profiles[0], "service_name"), "svc");
    assert_int_equal(c->profiles[0].time_ns, 1700000000000000000LL);
    assert_int_equal(fc_profile_total(&c->profiles[0], 0), 5);
    assert_int_equal(c->dict.links[c->profiles[0].samples[0].link].trace_id[0], 0x4b);
    /* Bad JSON and bad hex are refused with the field named. */
    {
        static const char *const bad[] = {
            "{\"resourceProfiles\":[",
            "{\"dictionary\":{\"linkTable\":[{},{\"traceId\":\"zz\"}]}}",
            "{\"resourceProfiles\":5}",
            "{\"dictionary\":{\"stringTable\":[\"\", 7]}}",
        };
        static const char *const why[] = {"json:", "trace_id", "resource_profiles", "string_table"};
        for (size_t i = 0; i < 4; i++) {
            assert_int_equal(fc_otlp_decode_json(c, bad[i], strlen(bad[i]), &res, &err), FC_EPROTO);
            if (strstr(err.msg, why[i]) == NULL) {
                fail_msg("%s: %s", bad[i], err.msg);
            }
        }
    }
    fc_buf_release(&j);
    fc_batch_unref(b);
    fc_batch_unref(c);
}

/* The eBPF profiler's shape: samples:count, a cpu period, timestamps only, strindex forms. */
static const char ebpf_json[] =
    "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
    "{\"keyStrindex\":4,\"value\":{\"stringValueStrindex\":5}},"
    "{\"key\":\"host.name\",\"value\":{\"stringValue\":\"node-1\"}},"
    "{\"key\":\"process.pid\",\"value\":{\"intValue\":\"4242\"}}],"
    "\"droppedAttributesCount\":2},\"schemaUrl\":\"https://opentelemetry.io/schemas/1.30.0\","
    "\"scopeProfiles\":[{\"scope\":{\"name\":\"ebpf-profiler\",\"version\":\"0.1\"},"
    "\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
    "\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":6},\"period\":\"50000000\","
    "\"timeUnixNano\":\"1700000000000000000\",\"durationNano\":\"5000000000\","
    "\"profileId\":\"0102030405060708090a0b0c0d0e0f10\",\"droppedAttributesCount\":3,"
    "\"originalPayloadFormat\":\"pprof\",\"originalPayload\":\"aGVsbG8=\","
    "\"attributeIndices\":[2],"
    "\"samples\":[{\"stackIndex\":1,\"attributeIndices\":[1],"
    "\"timestampsUnixNano\":[\"1700000000100000000\",\"1700000000200000000\"]}]}]}]}],"
    "\"dictionary\":{\"stringTable\":[\"\",\"samples\",\"count\",\"cpu\",\"service.name\","
    "\"checkout\",\"nanoseconds\",\"thread.name\",\"worker\",\"main\",\"bytes\",\"heap\"],"
    "\"attributeTable\":[{},{\"keyStrindex\":7,\"value\":{\"stringValueStrindex\":8}},"
    "{\"keyStrindex\":11,\"value\":{\"intValue\":\"7\"},\"unitStrindex\":10}],"
    "\"functionTable\":[{},{\"nameStrindex\":9}],"
    "\"locationTable\":[{},{\"address\":\"4096\",\"lines\":[{\"functionIndex\":1,\"line\":\"12\"}]}"
    "],"
    "\"stackTable\":[{},{\"locationIndices\":[1]}]}}";

static void test_every_field_and_form_survives(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_batch *c = fc_batch_new(0);
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_buf j1, j2, id;
    const struct fc_profile *p;
    int64_t scale;

    (void)state;
    fc_buf_init(&j1, 0);
    fc_buf_init(&j2, 0);
    fc_buf_init(&id, 0);
    if (fc_otlp_decode_json(b, ebpf_json, strlen(ebpf_json), &res, &err) != FC_OK) {
        fail_msg("%s", err.msg);
    }
    p = &b->profiles[0];
    assert_string_equal(fc_profile_label(b, p, "service_name"), "checkout");
    assert_string_equal(fc_profile_label(b, p, "host.name"), "node-1");
    assert_string_equal(fc_profile_label(b, p, "process.pid"), "4242");
    assert_string_equal(fc_profile_label(b, p, "__name__"), "process_cpu");
    /* Timestamps only: one each. */
    assert_int_equal(fc_profile_total(p, 0), 2);
    /* Pyroscope stores it as cpu time: value x period. */
    fc_pyro_stored_type(b, p, 0, &id, &scale);
    assert_string_equal((const char *)id.data, "process_cpu:cpu:nanoseconds:cpu:nanoseconds");
    assert_int_equal(scale, 50000000);
    /* And every field, with its literal or strindex form, comes back out. */
    assert_int_equal(fc_otlp_encode_json(b, &j1, &err), FC_OK);
    assert_int_equal(fc_otlp_decode_json(c, (const char *)j1.data, j1.len, &res, &err), FC_OK);
    assert_int_equal(fc_otlp_encode_json(c, &j2, &err), FC_OK);
    assert_int_equal(j1.len, j2.len);
    assert_memory_equal(j1.data, j2.data, j1.len);
    {
        static const char *const expect[] = {
            "\"keyStrindex\":",
            "\"stringValueStrindex\":",
            "\"key\":\"host.name\"",
            "\"stringValue\":\"node-1\"",
            "\"intValue\":\"4242\"",
            "\"droppedAttributesCount\":2",
            "\"droppedAttributesCount\":3",
            "\"schemaUrl\":\"https://opentelemetry.io/schemas/1.30.0\"",
            "\"name\":\"ebpf-profiler\"",
            "\"version\":\"0.1\"",
            "\"profileId\":\"0102030405060708090a0b0c0d0e0f10\"",
            "\"originalPayloadFormat\":\"pprof\"",
            "\"originalPayload\":\"aGVsbG8=\"",
            "\"timestampsUnixNano\":[\"1700000000100000000\",\"1700000000200000000\"]",
            "\"durationNano\":\"5000000000\"",
            "\"period\":\"50000000\"",
            "\"line\":\"12\"",
            "\"address\":\"4096\"",
            "\"unitStrindex\":"};
        for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
            if (strstr((const char *)j1.data, expect[i]) == NULL) {
                fail_msg("missing %s in %s", expect[i], (const char *)j1.data);
            }
        }
    }
    fc_buf_release(&j1);
    fc_buf_release(&j2);
    fc_buf_release(&id);
    fc_batch_unref(b);
    fc_batch_unref(c);
}

static void test_status_carries_retry_info(void **state)
{
    struct fc_buf out;
    Google__Rpc__Status *st;
    Google__Rpc__RetryInfo *ri;

    (void)state;
    fc_buf_init(&out, 0);
    assert_int_equal(fc_otlp_status(14, "queue full", 5000000000LL, false, &out), FC_OK);
    st = google__rpc__status__unpack(NULL, out.len, out.data);
    assert_non_null(st);
    assert_int_equal(st->code, 14);
    assert_string_equal(st->message, "queue full");
    assert_int_equal(st->n_details, 1);
    assert_string_equal(st->details[0]->type_url, "type.googleapis.com/google.rpc.RetryInfo");
    ri = google__rpc__retry_info__unpack(NULL, st->details[0]->value.len,
                                         st->details[0]->value.data);
    assert_int_equal(ri->retry_delay->seconds, 5);
    google__rpc__retry_info__free_unpacked(ri, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    fc_buf_reset(&out);
    assert_int_equal(fc_otlp_status(3, "bad", 0, true, &out), FC_OK);
    assert_string_equal((const char *)out.data, "{\"code\":3,\"message\":\"bad\"}");
    fc_buf_reset(&out);
    assert_int_equal(fc_otlp_response(2, "two bad", true, &out), FC_OK);
    assert_string_equal(
        (const char *)out.data,
        "{\"partialSuccess\":{\"rejectedProfiles\":\"2\",\"errorMessage\":\"two bad\"}}");
    fc_buf_reset(&out);
    assert_int_equal(fc_otlp_response(0, NULL, true, &out), FC_OK);
    assert_string_equal((const char *)out.data, "{}");
    fc_buf_release(&out);
}

/*
 * One OTLP profile, hand-built: sample type, period type and period, and a
 * __name__ resource attribute when name is not NULL; each of its 2 samples
 * has the value 3. What Pyroscope's OTLP ingest names it (pkg/ingester/otlp
 * convert.go: "type:unit:period_type:period_unit", the period part empty for
 * period 0) is written down by hand in the cases below.
 */
static void stored_as(const char *type, const char *unit, const char *ptype, const char *punit,
                      long period, const char *name, const char *want_id, int64_t want_scale)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_buf json, id;
    int64_t scale;

    fc_buf_init(&json, 0);
    fc_buf_init(&id, 0);
    fc_buf_printf(&json,
                  "{\"resourceProfiles\":[{\"resource\":{\"attributes\":["
                  "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"svc\"}}%s%s%s]},"
                  "\"scopeProfiles\":[{\"profiles\":[{\"sampleType\":{\"typeStrindex\":1,"
                  "\"unitStrindex\":2},\"periodType\":{\"typeStrindex\":3,\"unitStrindex\":4},"
                  "\"period\":\"%ld\",\"timeUnixNano\":\"1700000000000000000\","
                  "\"samples\":[{\"stackIndex\":1,\"values\":[\"3\"]},"
                  "{\"stackIndex\":1,\"values\":[\"3\"]}]}]}]}],"
                  "\"dictionary\":{\"stringTable\":[\"\",\"%s\",\"%s\",\"%s\",\"%s\",\"main\"],"
                  "\"functionTable\":[{},{\"nameStrindex\":5}],"
                  "\"locationTable\":[{},{\"lines\":[{\"functionIndex\":1}]}],"
                  "\"stackTable\":[{},{\"locationIndices\":[1]}]}}",
                  name ? ",{\"key\":\"__name__\",\"value\":{\"stringValue\":\"" : "",
                  name ? name : "", name ? "\"}}" : "", period, type, unit, ptype, punit);
    if (fc_otlp_decode_json(b, (const char *)json.data, json.len, &res, &err) != FC_OK) {
        fail_msg("%s", err.msg);
    }
    assert_int_equal(res.profiles, 1);
    fc_pyro_stored_type(b, &b->profiles[0], 0, &id, &scale);
    if (strcmp((const char *)id.data, want_id) != 0 || scale != want_scale) {
        fail_msg("%s:%s:%s:%s period %ld name %s: stored as %s x%lld, want %s x%lld", type, unit,
                 ptype, punit, period, name ? name : "-", (const char *)id.data, (long long)scale,
                 want_id, (long long)want_scale);
    }
    fc_buf_release(&json);
    fc_buf_release(&id);
    fc_batch_unref(b);
}

static void test_profile_types_as_pyroscope_otlp_ingest_names_them(void **state)
{
    (void)state;
    /* The eBPF profiler's: cpu time, values x period. */
    stored_as("samples", "count", "cpu", "nanoseconds", 10000000, NULL,
              "process_cpu:cpu:nanoseconds:cpu:nanoseconds", 10000000);
    /* A Go CPU pprof's second profile lands elsewhere: never counted twice. */
    stored_as("cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, NULL,
              "cpu:cpu:nanoseconds:cpu:nanoseconds", 1);
    /* Node's cpu time with a wall period. */
    stored_as("cpu", "nanoseconds", "wall", "nanoseconds", 1000, NULL,
              "wall:cpu:nanoseconds:wall:nanoseconds", 1);
    stored_as("alloc_space", "bytes", "space", "bytes", 524288, NULL,
              "space:alloc_space:bytes:space:bytes", 1);
    stored_as("off_cpu", "nanoseconds", "", "", 0, NULL, "off_cpu:off_cpu:nanoseconds::", 1);
    /* Period 0: no period part, so no conversion; the sample type names it. */
    stored_as("samples", "count", "cpu", "nanoseconds", 0, NULL,
              "samples:samples:count:cpu:nanoseconds", 1);
    /* A profile that names itself (a pprof source, through flamecol's OTLP) keeps its types. */
    stored_as("samples", "count", "cpu", "nanoseconds", 10000000, "process_cpu",
              "process_cpu:samples:count:cpu:nanoseconds", 1);
    stored_as("cpu", "nanoseconds", "cpu", "nanoseconds", 10000000, "process_cpu",
              "process_cpu:cpu:nanoseconds:cpu:nanoseconds", 1);
}

/* No service.name: the semantic conventions' unknown_service, with the executable when known. */
static void test_unknown_service_names_the_executable(void **state)
{
    static const char *const bodies[] = {
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"process.executable."
        "name\","
        "\"value\":{\"stringValue\":\"java\"}}]},\"scopeProfiles\":[{\"profiles\":[{}]}]}]}",
        "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{}]}]}]}",
    };
    static const char *const want[] = {"unknown_service:java", "unknown_service"};

    (void)state;
    for (size_t i = 0; i < 2; i++) {
        struct fc_batch *b = fc_batch_new(0);
        struct fc_otlp_result res;
        struct fc_error err = {0};
        if (fc_otlp_decode_json(b, bodies[i], strlen(bodies[i]), &res, &err) != FC_OK) {
            fail_msg("%s", err.msg);
        }
        assert_int_equal(res.profiles, 1);
        assert_string_equal(fc_profile_label(b, &b->profiles[0], "service_name"), want[i]);
        fc_batch_unref(b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_pprof_otlp_round_trips),
        cmocka_unit_test(test_links_both_ways),
        cmocka_unit_test(test_malformed_requests),
        cmocka_unit_test(test_bad_link_lengths),
        cmocka_unit_test(test_json_round_trips_and_rules),
        cmocka_unit_test(test_json_encoding_details),
        cmocka_unit_test(test_every_field_and_form_survives),
        cmocka_unit_test(test_profile_types_as_pyroscope_otlp_ingest_names_them),
        cmocka_unit_test(test_unknown_service_names_the_executable),
        cmocka_unit_test(test_status_carries_retry_info),
    };
    return cmocka_run_group_tests_name("otlp", tests, NULL, NULL);
}
