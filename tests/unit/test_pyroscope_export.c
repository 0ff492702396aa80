/*
 * What the pyroscope exporter puts on the wire (formats/pyroscope_push.h),
 * for hand-built batches, read back with a protobuf reader and a pprof
 * reader written here from push.proto and profile.proto (field numbers
 * only), zlib's own inflate, and the expected /ingest query strings written
 * out by hand. flamecol's pprof decoder is only a second check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "core/batch.h"
#include "formats/pprof.h"
#include "formats/pyroscope_push.h"

/* ---- a tiny protobuf reader ------------------------------------------------------------ */

struct rd {
    const uint8_t *p, *end;
};

struct fld {
    uint32_t num;
    int wire;
    uint64_t v;
    const uint8_t *d;
    size_t len;
};

static uint64_t rd_varint(struct rd *r)
{
    uint64_t v = 0;
    int shift = 0;

    for (;;) {
        assert_true(r->p < r->end);
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            return v;
        }
        shift += 7;
        assert_true(shift < 64);
    }
}

/* 0 at the end, 1 with a field. Only the wire types these messages use. */
static int rd_next(struct rd *r, struct fld *f)
{
    uint64_t tag;

    if (r->p >= r->end) {
        return 0;
    }
    tag = rd_varint(r);
    f->num = (uint32_t)(tag >> 3);
    f->wire = (int)(tag & 7);
    if (f->wire == 0) {
        f->v = rd_varint(r);
    } else if (f->wire == 2) {
        f->len = rd_varint(r);
        assert_true(f->len <= (size_t)(r->end - r->p));
        f->d = r->p;
        r->p += f->len;
    } else {
        fail_msg("unexpected wire type %d", f->wire);
    }
    return 1;
}

static struct rd rd_of(const uint8_t *d, size_t len)
{
    struct rd r = {d, d + len};
    return r;
}

/* ---- the pprof fields this test reads ---------------------------------------------------- */

struct pp_sample {
    int64_t values[4];
    size_t n_values;
    uint64_t locs[16];
    size_t n_locs;
    int64_t label_key[4], label_str[4];
    size_t n_labels;
};

struct pp {
    char *strings[64];
    size_t n_strings;
    int64_t type[4], unit[4];
    size_t n_types;
    struct pp_sample samples[8];
    size_t n_samples;
    int64_t time_nanos, duration_nanos, period;
};

static void pp_packed(const struct fld *f, int64_t *out, size_t *n, size_t max)
{
    if (f->wire == 0) {
        assert_true(*n < max);
        out[(*n)++] = (int64_t)f->v;
        return;
    }
    struct rd r = rd_of(f->d, f->len);
    while (r.p < r.end) {
        assert_true(*n < max);
        out[(*n)++] = (int64_t)rd_varint(&r);
    }
}

static void pp_read(const uint8_t *data, size_t len, struct pp *pp)
{
    struct rd r = rd_of(data, len), s;
    struct fld f, g;

    memset(pp, 0, sizeof(*pp));
    while (rd_next(&r, &f)) {
        switch (f.num) {
        case 1: /* sample_type */
            s = rd_of(f.d, f.len);
            while (rd_next(&s, &g)) {
                if (g.num == 1) {
                    pp->type[pp->n_types] = (int64_t)g.v;
                } else if (g.num == 2) {
                    pp->unit[pp->n_types] = (int64_t)g.v;
                }
            }
            pp->n_types++;
            break;
        case 2: { /* sample */
            struct pp_sample *sm = &pp->samples[pp->n_samples++];
            s = rd_of(f.d, f.len);
            while (rd_next(&s, &g)) {
                if (g.num == 1) {
                    int64_t locs[16];
                    size_t n = sm->n_locs;
                    pp_packed(&g, locs + n, &n, 16 - n);
                    for (size_t i = sm->n_locs; i < n; i++) {
                        sm->locs[i] = (uint64_t)locs[i];
                    }
                    sm->n_locs = n;
                } else if (g.num == 2) {
                    pp_packed(&g, sm->values, &sm->n_values, 4);
                } else if (g.num == 3) {
                    struct rd l = rd_of(g.d, g.len);
                    struct fld h;
                    while (rd_next(&l, &h)) {
                        if (h.num == 1) {
                            sm->label_key[sm->n_labels] = (int64_t)h.v;
                        } else if (h.num == 2) {
                            sm->label_str[sm->n_labels] = (int64_t)h.v;
                        }
                    }
                    sm->n_labels++;
                }
            }
            break;
        }
        case 6:
            assert_true(pp->n_strings < 64);
            pp->strings[pp->n_strings] = calloc(1, f.len + 1);
            memcpy(pp->strings[pp->n_strings++], f.d, f.len);
            break;
        case 9:
            pp->time_nanos = (int64_t)f.v;
            break;
        case 10:
            pp->duration_nanos = (int64_t)f.v;
            break;
        case 12:
            pp->period = (int64_t)f.v;
            break;
        default:
            break;
        }
    }
}

static void pp_free(struct pp *pp)
{
    for (size_t i = 0; i < pp->n_strings; i++) {
        free(pp->strings[i]);
    }
}

static const char *pp_str(const struct pp *pp, int64_t i)
{
    assert_true(i >= 0 && (size_t)i < pp->n_strings);
    return pp->strings[i];
}

/* The value of string label key in sample sm, or NULL. */
static const char *pp_label(const struct pp *pp, const struct pp_sample *sm, const char *key)
{
    for (size_t i = 0; i < sm->n_labels; i++) {
        if (strcmp(pp_str(pp, sm->label_key[i]), key) == 0) {
            return pp_str(pp, sm->label_str[i]);
        }
    }
    return NULL;
}

/* zlib's inflate with gzip framing (not flamecol's gzip code). */
static uint8_t *inflate_gzip(const uint8_t *in, size_t len, size_t *out_len)
{
    size_t cap = 1 << 20;
    uint8_t *out = malloc(cap);
    z_stream z;

    memset(&z, 0, sizeof(z));
    assert_int_equal(inflateInit2(&z, 16 + MAX_WBITS), Z_OK);
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    z.next_out = out;
    z.avail_out = (uInt)cap;
    assert_int_equal(inflate(&z, Z_FINISH), Z_STREAM_END);
    *out_len = z.total_out;
    inflateEnd(&z);
    return out;
}

/* ---- hand-built batches ------------------------------------------------------------------ */

static const uint8_t SPAN[8] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
static const uint8_t TRACE[16] = {0xa0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff};

static uint32_t str(struct fc_batch *b, const char *s)
{
    uint32_t i;
    assert_int_equal(fc_dict_cstring(b, s, &i), FC_OK);
    return i;
}

static uint32_t location(struct fc_batch *b, const char *fn)
{
    struct fc_function f = {0};
    struct fc_line line = {0};
    struct fc_location l = {0};
    uint32_t id;

    f.name = str(b, fn);
    assert_int_equal(fc_dict_function(b, &f, &line.function), FC_OK);
    assert_int_equal(fc_dict_location(b, &l, &line, 1, &id), FC_OK);
    return id;
}

/*
 * One cpu profile of service "api": work<-main 30 ns with pprof label
 * worker=w1, main 12 ns linked to span 0102030405060708.
 */
static struct fc_profile *cpu_profile(struct fc_batch *b)
{
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt = {str(b, "cpu"), str(b, "nanoseconds")};
    uint32_t work = location(b, "work"), main_ = location(b, "main");
    uint32_t both[2] = {work, main_};
    struct fc_sample s = {0};
    struct fc_attr a = {0};
    struct fc_link k;
    uint32_t attr;
    int64_t v;

    assert_non_null(p);
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    p->period_type = vt;
    p->period = 10000000;
    p->time_ns = 1700000000123456789LL;
    p->duration_ns = 9900000000LL;
    assert_int_equal(fc_dict_stack(b, both, 2, &s.stack), FC_OK);
    a.key = str(b, "worker");
    a.kind = FC_ATTR_STR;
    a.v.str = str(b, "w1");
    assert_int_equal(fc_dict_attr(b, &a, &attr), FC_OK);
    assert_int_equal(fc_dict_span(b, &attr, 1, &s.attrs), FC_OK);
    v = 30;
    assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
    memset(&s, 0, sizeof(s));
    assert_int_equal(fc_dict_stack(b, &main_, 1, &s.stack), FC_OK);
    memcpy(k.span_id, SPAN, 8);
    memcpy(k.trace_id, TRACE, 16);
    assert_int_equal(fc_dict_link(b, &k, &s.link), FC_OK);
    v = 12;
    assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
    return p;
}

static void label(struct fc_batch *b, struct fc_profile *p, const char *k, const char *v)
{
    assert_int_equal(fc_profile_set_label(b, p, k, v), FC_OK);
}

/* Two profiles: cpu (api, with reserved labels) and memory (db). */
static struct fc_batch *two_profiles(void)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);

    assert_int_equal(fc_batch_set_tenant(b, "t1"), FC_OK);
    label(b, p, "__name__", "process_cpu");
    label(b, p, "service_name", "api");
    label(b, p, "__delta__", "false");
    label(b, p, "__session_id__", "abc");
    label(b, p, "__private__", "x");
    label(b, p, "env", "prod");
    label(b, p, "region", "eu-west");
    label(b, p, "pyroscope_spy", "gospy");

    p = fc_batch_add_profile(b);
    struct fc_value_type vt = {str(b, "alloc_space"), str(b, "bytes")};
    uint32_t loc = location(b, "alloc");
    struct fc_sample s = {0};
    int64_t v = 4096;
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    p->period_type.type = str(b, "space");
    p->period_type.unit = str(b, "bytes");
    p->period = 524288;
    p->time_ns = 1700000100000000000LL;
    assert_int_equal(fc_dict_stack(b, &loc, 1, &s.stack), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
    label(b, p, "__name__", "memory");
    label(b, p, "service_name", "db");
    return b;
}

/* ---- push.v1 ------------------------------------------------------------------------------ */

struct series {
    char names[16][64], values[16][64];
    size_t n_labels;
    const uint8_t *raw[4];
    size_t raw_len[4];
    char id[4][64];
    size_t n_samples;
};

static size_t read_push(const uint8_t *data, size_t len, struct series *out, size_t max)
{
    struct rd r = rd_of(data, len);
    struct fld f, g, h;
    size_t n = 0;

    while (rd_next(&r, &f)) {
        assert_int_equal(f.num, 1); /* PushRequest.series */
        assert_int_equal(f.wire, 2);
        assert_true(n < max);
        struct series *s = &out[n++];
        memset(s, 0, sizeof(*s));
        struct rd sr = rd_of(f.d, f.len);
        while (rd_next(&sr, &g)) {
            struct rd sub = rd_of(g.d, g.len);
            if (g.num == 1) { /* labels: LabelPair{name=1, value=2} */
                while (rd_next(&sub, &h)) {
                    assert_true(h.len < 64);
                    memcpy(h.num == 1 ? s->names[s->n_labels] : s->values[s->n_labels], h.d, h.len);
                }
                s->n_labels++;
            } else if (g.num == 2) { /* samples: RawSample{raw_profile=1, ID=2} */
                while (rd_next(&sub, &h)) {
                    if (h.num == 1) {
                        s->raw[s->n_samples] = h.d;
                        s->raw_len[s->n_samples] = h.len;
                    } else if (h.num == 2) {
                        assert_true(h.len < 64);
                        memcpy(s->id[s->n_samples], h.d, h.len);
                    }
                }
                s->n_samples++;
            } else {
                fail_msg("unexpected RawProfileSeries field %u", g.num);
            }
        }
    }
    return n;
}

static void assert_uuid_v4(const char *id)
{
    assert_int_equal(strlen(id), 36);
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            assert_int_equal(id[i], '-');
        } else {
            assert_non_null(strchr("0123456789abcdef", id[i]));
        }
    }
    assert_int_equal(id[14], '4');
    assert_non_null(strchr("89ab", id[19]));
}

static void test_push_request(void **state)
{
    struct fc_batch *b = two_profiles();
    struct fc_buf out;
    struct fc_error err = {0};
    struct series s[4];
    struct pp pp;
    uint8_t *plain;
    size_t plain_len;

    (void)state;
    fc_buf_init(&out, 0);
    assert_int_equal(fc_pyro_push_encode(b, 0, b->n_profiles, &out, &err), FC_OK);
    assert_int_equal(read_push(out.data, out.len, s, 4), 2);

    /* Series labels, sorted; `__*` dropped except __name__ and __delta__ (Alloy). */
    static const char *want[][2] = {{"__delta__", "false"}, {"__name__", "process_cpu"},
                                    {"env", "prod"},        {"pyroscope_spy", "gospy"},
                                    {"region", "eu-west"},  {"service_name", "api"}};
    assert_int_equal(s[0].n_labels, 6);
    for (size_t i = 0; i < 6; i++) {
        assert_string_equal(s[0].names[i], want[i][0]);
        assert_string_equal(s[0].values[i], want[i][1]);
    }
    assert_int_equal(s[1].n_labels, 2);
    assert_string_equal(s[1].names[0], "__name__");
    assert_string_equal(s[1].values[0], "memory");
    assert_string_equal(s[1].names[1], "service_name");
    assert_string_equal(s[1].values[1], "db");

    /* One RawSample each: a gzipped pprof and a UUID. */
    assert_int_equal(s[0].n_samples, 1);
    assert_int_equal(s[1].n_samples, 1);
    assert_uuid_v4(s[0].id[0]);
    assert_uuid_v4(s[1].id[0]);
    assert_string_not_equal(s[0].id[0], s[1].id[0]);
    assert_true(s[0].raw_len[0] > 2);
    assert_int_equal(s[0].raw[0][0], 0x1f);
    assert_int_equal(s[0].raw[0][1], 0x8b);

    plain = inflate_gzip(s[0].raw[0], s[0].raw_len[0], &plain_len);
    pp_read(plain, plain_len, &pp);
    assert_int_equal(pp.n_types, 1);
    assert_string_equal(pp_str(&pp, pp.type[0]), "cpu");
    assert_string_equal(pp_str(&pp, pp.unit[0]), "nanoseconds");
    assert_int_equal(pp.time_nanos, 1700000000123456789LL);
    assert_int_equal(pp.duration_nanos, 9900000000LL);
    assert_int_equal(pp.period, 10000000);
    assert_int_equal(pp.n_samples, 2);
    assert_int_equal(pp.samples[0].values[0], 30);
    assert_int_equal(pp.samples[0].n_locs, 2);
    assert_string_equal(pp_label(&pp, &pp.samples[0], "worker"), "w1");
    assert_null(pp_label(&pp, &pp.samples[0], "span_id"));
    assert_int_equal(pp.samples[1].values[0], 12);
    /* The span link travels as Pyroscope's span_id / trace_id labels. */
    assert_string_equal(pp_label(&pp, &pp.samples[1], "span_id"), "0102030405060708");
    assert_string_equal(pp_label(&pp, &pp.samples[1], "trace_id"),
                        "a00102030405060708090a0b0c0d0eff");
    pp_free(&pp);

    /* Second check: flamecol's own decoder reads the same totals back. */
    {
        struct fc_batch *d = fc_batch_new(0);
        struct fc_profile *q = NULL;
        assert_int_equal(fc_pprof_decode(d, s[1].raw[0], s[1].raw_len[0], NULL, &q, &err), FC_OK);
        assert_int_equal(fc_profile_total(q, 0), 4096);
        assert_string_equal(fc_str(d, q->sample_types[0].type), "alloc_space");
        fc_batch_unref(d);
    }
    free(plain);

    /* A range of profiles: [1, 2) is the memory profile alone. */
    fc_buf_reset(&out);
    assert_int_equal(fc_pyro_push_encode(b, 1, 1, &out, &err), FC_OK);
    assert_int_equal(read_push(out.data, out.len, s, 4), 1);
    assert_string_equal(s[0].values[1], "db");
    fc_buf_release(&out);
    fc_batch_unref(b);
}

static void test_push_id_from_profile_id(void **state)
{
    struct fc_batch *b = two_profiles();
    struct fc_buf out;
    struct fc_error err = {0};
    struct series s[2];
    static const uint8_t id[16] = {0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0,
                                   0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef};

    (void)state;
    memcpy(b->profiles[0].profile_id, id, 16);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_pyro_push_encode(b, 0, 1, &out, &err), FC_OK);
    assert_int_equal(read_push(out.data, out.len, s, 2), 1);
    assert_string_equal(s[0].id[0], "12345678-9abc-def0-0123-456789abcdef");
    fc_buf_release(&out);
    fc_batch_unref(b);
}

static void test_push_label_filter(void **state)
{
    (void)state;
    assert_true(fc_pyro_push_label_kept("__name__"));
    assert_true(fc_pyro_push_label_kept("__delta__"));
    assert_true(fc_pyro_push_label_kept("service_name"));
    assert_true(fc_pyro_push_label_kept("_x"));
    assert_false(fc_pyro_push_label_kept("__session_id__"));
    assert_false(fc_pyro_push_label_kept("__profile_type__"));
    assert_false(fc_pyro_push_label_kept("__"));
}

/*
 * An OTLP profile of samples:count with a cpu period (3 samples, counted
 * from timestamps alone). Named by its sender (__name__ given, as a pprof
 * source through flamecol's OTLP is), it goes as it came: samples:count 3.
 * Named by the OTLP decoder (cpu_samples_as_ns), it goes over push as
 * Pyroscope's OTLP ingest stores it: cpu:nanoseconds, 3 x 10 ms; over
 * ingest as it came.
 */
static void otlp_cpu_samples_go_as(bool as_ns, bool as_stored, const char *type, const char *unit,
                                   int64_t value)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt = {str(b, "samples"), str(b, "count")};
    struct fc_origin o = {0};
    uint32_t loc = location(b, "spin");
    struct fc_sample s = {0};
    int64_t ts[3] = {1, 2, 3};
    struct fc_buf raw;
    struct fc_error err = {0};
    struct pp pp;
    uint8_t *plain;
    size_t plain_len;

    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    p->period_type.type = str(b, "cpu");
    p->period_type.unit = str(b, "nanoseconds");
    p->period = 10000000;
    p->cpu_samples_as_ns = as_ns;
    assert_int_equal(fc_batch_add_origin(b, &o, &p->origin), FC_OK);
    assert_int_equal(fc_dict_stack(b, &loc, 1, &s.stack), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, NULL, 0, ts, 3), FC_OK);
    label(b, p, "__name__", "process_cpu");
    label(b, p, "service_name", "ebpf");

    fc_buf_init(&raw, 0);
    assert_int_equal(fc_pyro_raw_profile(b, p, as_stored, &raw, &err), FC_OK);
    plain = inflate_gzip(raw.data, raw.len, &plain_len);
    pp_read(plain, plain_len, &pp);
    assert_int_equal(pp.n_types, 1);
    assert_string_equal(pp_str(&pp, pp.type[0]), type);
    assert_string_equal(pp_str(&pp, pp.unit[0]), unit);
    assert_int_equal(pp.period, 10000000);
    assert_int_equal(pp.n_samples, 1);
    assert_int_equal(pp.samples[0].values[0], value);
    pp_free(&pp);
    free(plain);
    fc_buf_release(&raw);
    /* The batch itself is not rewritten. */
    assert_int_equal(fc_profile_total(p, 0), 3);
    assert_string_equal(fc_str(b, p->sample_types[0].type), "samples");
    fc_batch_unref(b);
}

static void test_otlp_cpu_samples_as_named(void **state)
{
    (void)state;
    otlp_cpu_samples_go_as(false, true, "samples", "count", 3);
    otlp_cpu_samples_go_as(true, true, "cpu", "nanoseconds", 30000000);
    /* ingest: exactly as received. */
    otlp_cpu_samples_go_as(true, false, "samples", "count", 3);
}

/* ---- /ingest -------------------------------------------------------------------------------- */

static void assert_target(const struct fc_batch *b, const struct fc_profile *p, const char *want)
{
    struct fc_buf out;
    struct fc_error err = {0};

    fc_buf_init(&out, 0);
    assert_int_equal(fc_pyro_ingest_target(b, p, &out, &err), FC_OK);
    assert_string_equal((const char *)out.data, want);
    fc_buf_release(&out);
}

static void test_ingest_query(void **state)
{
    struct fc_batch *b = two_profiles();

    (void)state;
    /*
     * name = api{__session_id__=abc,env=prod,region=eu-west} (sorted; other
     * `__*` and service_name/pyroscope_spy are not labels there);
     * from = floor(1700000000.123456789), until = floor(1700000010.023456789).
     */
    assert_target(b, &b->profiles[0],
                  "/ingest?name=api%7B__session_id__%3Dabc%2Cenv%3Dprod%2Cregion%3Deu-west%7D"
                  "&from=1700000000&until=1700000010&format=pprof&spyName=gospy");
    /* No duration: until = from. No spy: no spyName. */
    assert_target(b, &b->profiles[1],
                  "/ingest?name=db%7B%7D&from=1700000100&until=1700000100&format=pprof");
    /* An unknown time: the server takes now. */
    b->profiles[1].time_ns = 0;
    assert_target(b, &b->profiles[1], "/ingest?name=db%7B%7D&format=pprof");
    fc_batch_unref(b);
}

static void test_ingest_escaping(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);

    (void)state;
    label(b, p, "__name__", "process_cpu");
    label(b, p, "service_name", "ns/app-1.v2_x");
    label(b, p, "path", "/a b&c=d?e#f");
    label(b, p, "otel.scope.name", "com.grafana.pyroscope/go");
    label(b, p, "city", "Z\xc3\xbcrich");
    label(b, p, "pyroscope_spy", "my spy");
    p->time_ns = 999999999; /* under a second: from=0 */
    p->duration_ns = 1;
    /* name = ns/app-1.v2_x{city=Zürich,otel.scope.name=com.grafana.pyroscope/go,path=/a b&c=d?e#f}
     */
    assert_target(
        b, p,
        "/ingest?name=ns%2Fapp-1.v2_x%7Bcity%3DZ%C3%BCrich%2Cotel.scope.name%3Dcom.grafana."
        "pyroscope%2Fgo%2Cpath%3D%2Fa%20b%26c%3Dd%3Fe%23f%7D&from=0&until=1&format=pprof"
        "&spyName=my%20spy");
    fc_batch_unref(b);
}

/* label k=v makes the /ingest name unrepresentable: refused, the message names it. */
static void assert_refused(const char *k, const char *v, const char *needle)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);
    struct fc_buf out;
    struct fc_error err = {0};

    label(b, p, "__name__", "process_cpu");
    label(b, p, "service_name", "api");
    label(b, p, k, v);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_pyro_ingest_target(b, p, &out, &err), FC_EPROTO);
    if (strstr(err.msg, needle) == NULL) {
        fail_msg("message \"%s\" does not name %s", err.msg, needle);
    }
    assert_non_null(strstr(err.msg, "protocol push"));
    fc_buf_release(&out);
    fc_batch_unref(b);
}

static void test_ingest_refuses_what_the_name_cannot_carry(void **state)
{
    (void)state;
    assert_refused("hosts", "a,b", "hosts");     /* ',' splits labels */
    assert_refused("hosts", "a=b,c=d", "hosts"); /* ... into two that parse */
    assert_refused("expr", "x}", "expr");        /* '}' ends the set */
    assert_refused("pad", " v", "pad");          /* values are trimmed */
    assert_refused("pad", "v\t", "pad");
    assert_refused("k8s-pod", "p", "k8s-pod"); /* keys: [A-Za-z0-9_.] */
    assert_refused("service_name", "my app", "my app");
    assert_refused("service_name", "a:b", "a:b");
}

/* Every label a name can carry, and a value with '=' and '{' (split at the first '='). */
static void test_ingest_accepts_what_the_name_carries(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);

    (void)state;
    label(b, p, "__name__", "process_cpu");
    label(b, p, "service_name", "api");
    label(b, p, "q", "a=b{c");
    label(b, p, "empty", "");
    p->time_ns = 0;
    /* api{empty=,q=a=b{c} */
    assert_target(b, p, "/ingest?name=api%7Bempty%3D%2Cq%3Da%3Db%7Bc%7D&format=pprof");
    fc_batch_unref(b);
}

/* More labels than the name parser takes: refused with the parser's reason. */
static void test_ingest_too_many_labels(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);
    struct fc_buf out;
    struct fc_error err = {0};
    char k[16];

    (void)state;
    label(b, p, "service_name", "api");
    for (int i = 0; i < 65; i++) {
        snprintf(k, sizeof(k), "k%02d", i);
        label(b, p, k, "v");
    }
    fc_buf_init(&out, 0);
    assert_int_equal(fc_pyro_ingest_target(b, p, &out, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "more than 64 labels"));
    fc_buf_release(&out);
    fc_batch_unref(b);
}

/*
 * No service_name: Pyroscope's unknown_service. A __name__ the server would
 * derive otherwise (process_cpu from cpu) is not refused: over /ingest the
 * server names the profile, and __name__ never goes into the name.
 */
static void test_ingest_defaults(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = cpu_profile(b);

    (void)state;
    label(b, p, "__name__", "custom");
    p->time_ns = 0;
    assert_target(b, p, "/ingest?name=unknown_service%7B%7D&format=pprof");
    fc_batch_unref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_request),
        cmocka_unit_test(test_push_id_from_profile_id),
        cmocka_unit_test(test_push_label_filter),
        cmocka_unit_test(test_otlp_cpu_samples_as_named),
        cmocka_unit_test(test_ingest_query),
        cmocka_unit_test(test_ingest_escaping),
        cmocka_unit_test(test_ingest_refuses_what_the_name_cannot_carry),
        cmocka_unit_test(test_ingest_accepts_what_the_name_carries),
        cmocka_unit_test(test_ingest_too_many_labels),
        cmocka_unit_test(test_ingest_defaults),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
