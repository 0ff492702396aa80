/*
 * OTLP from senders of an older layout: each earlier opentelemetry-proto
 * layout, written here byte by byte from its field numbers (the table in
 * formats/otlp_layout.c, taken from the .proto files of those releases), is
 * refused naming the layout, or, for v1.9, translated to exactly what the
 * same request in the v1.10 layout decodes to. Nothing of the current
 * layout - our own encoding of every corpus profile, requests with empty or
 * bad profiles, the empty request - is ever taken for an older one. And the
 * OTLP receiver gives profiles stamped in 1970 the receive time.
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
#include "core/buf.h"
#include "formats/folded.h"
#include "formats/otlp.h"
#include "formats/otlp_layout.h"
#include "formats/pprof.h"
#include "receivers/otlp/otlp.h"
#include "tests/unit/fc_test.h"

/* ---- protobuf by hand (not formats/pb.c's writer) ----------------------------------------- */

static void varint(struct fc_buf *o, uint64_t x)
{
    do {
        uint8_t c = x & 0x7f;
        x >>= 7;
        if (x) {
            c |= 0x80;
        }
        assert_int_equal(fc_buf_append(o, &c, 1), FC_OK);
    } while (x);
}

static void fv(struct fc_buf *o, uint32_t n, uint64_t x) /* varint field */
{
    varint(o, (uint64_t)n << 3);
    varint(o, x);
}

static void f64(struct fc_buf *o, uint32_t n, uint64_t x) /* fixed64 field */
{
    uint8_t le[8];

    for (int i = 0; i < 8; i++) {
        le[i] = (uint8_t)(x >> (8 * i));
    }
    varint(o, (uint64_t)n << 3 | 1);
    assert_int_equal(fc_buf_append(o, le, 8), FC_OK);
}

static void fb(struct fc_buf *o, uint32_t n, const void *p, size_t len) /* bytes field */
{
    varint(o, (uint64_t)n << 3 | 2);
    varint(o, len);
    assert_int_equal(fc_buf_append(o, p, len), FC_OK);
}

static void fs(struct fc_buf *o, uint32_t n, const char *s)
{
    fb(o, n, s, strlen(s));
}

/* A message field: m's bytes, then m is emptied for the next one. */
static void fm(struct fc_buf *o, uint32_t n, struct fc_buf *m)
{
    fb(o, n, m->data, m->len);
    fc_buf_reset(m);
}

static void fpacked(struct fc_buf *o, uint32_t n, const uint64_t *x, size_t k)
{
    struct fc_buf t;

    fc_buf_init(&t, 0);
    for (size_t i = 0; i < k; i++) {
        varint(&t, x[i]);
    }
    fb(o, n, t.data, t.len);
    fc_buf_release(&t);
}

/* request{1: ResourceProfiles{2: ScopeProfiles{2: profile}}} + dict (when not NULL) at 2. */
static void wrap(struct fc_buf *req, struct fc_buf *profile, struct fc_buf *dict)
{
    struct fc_buf sp, rp;

    fc_buf_init(&sp, 0);
    fc_buf_init(&rp, 0);
    fm(&sp, 2, profile);
    fm(&rp, 2, &sp);
    fm(req, 1, &rp);
    if (dict != NULL) {
        fm(req, 2, dict);
    }
    fc_buf_release(&sp);
    fc_buf_release(&rp);
}

static const uint64_t NOW_NS = 1767225600000000000ULL; /* 2026-01-01 */

static int decode(const struct fc_buf *w, struct fc_batch **out, struct fc_otlp_result *res,
                  struct fc_error *err)
{
    *out = fc_batch_new(0);
    memset(err, 0, sizeof(*err));
    return fc_otlp_decode(*out, w->data, w->len, res, err);
}

static void assert_refused(const struct fc_buf *w, const char *want)
{
    struct fc_batch *b;
    struct fc_otlp_result res;
    struct fc_error err;
    int rc = decode(w, &b, &res, &err);

    if (rc != FC_EPROTO || strstr(err.msg, want) == NULL) {
        fail_msg("rc %d, message \"%s\"; want FC_EPROTO and \"%s\"", rc, err.msg, want);
    }
    fc_batch_unref(b);
}

/* ---- the older layouts -------------------------------------------------------------------- */

/* A ValueType {type_strindex, unit_strindex}. */
static void value_type(struct fc_buf *o, uint32_t n, uint64_t type, uint64_t unit)
{
    struct fc_buf t;

    fc_buf_init(&t, 0);
    fv(&t, 1, type);
    fv(&t, 2, unit);
    fm(o, n, &t);
    fc_buf_release(&t);
}

/* v1.3: ScopeProfiles.profiles holds ProfileContainers. */
static void v13_request(struct fc_buf *req)
{
    struct fc_buf c, p;
    static const uint8_t id[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

    fc_buf_init(&c, 0);
    fc_buf_init(&p, 0);
    value_type(&p, 1, 1, 2); /* pprofextended Profile: sample_type */
    fs(&p, 6, "");           /* string_table */
    fs(&p, 6, "cpu");
    fs(&p, 6, "nanoseconds");
    fb(&c, 1, id, 16);      /* profile_id */
    f64(&c, 2, NOW_NS);     /* start_time_unix_nano */
    f64(&c, 3, NOW_NS + 1); /* end_time_unix_nano */
    fm(&c, 8, &p);          /* profile */
    wrap(req, &c, NULL);
    fc_buf_release(&c);
    fc_buf_release(&p);
}

/* v1.4-v1.5: the Profile holds its tables. */
static void v15_request(struct fc_buf *req, bool with_locations)
{
    struct fc_buf p, t;
    static const uint64_t value[] = {5};
    static const uint64_t loc[] = {1};

    fc_buf_init(&p, 0);
    fc_buf_init(&t, 0);
    value_type(&p, 1, 1, 2);
    fv(&t, 1, 0); /* Sample: locations_start_index, locations_length, value */
    fv(&t, 2, 1);
    fpacked(&t, 3, value, 1);
    fm(&p, 2, &t);
    if (with_locations) {
        fv(&t, 2, 0x1000); /* Location.address */
        fm(&p, 4, &t);     /* location_table */
        fpacked(&p, 5, loc, 1);
    }
    fs(&p, 10, ""); /* string_table */
    fs(&p, 10, "cpu");
    fs(&p, 10, "nanoseconds");
    fs(&p, 10, "main");
    fv(&p, 11, NOW_NS); /* time_nanos */
    fv(&p, 14, 10000000);
    wrap(req, &p, NULL);
    fc_buf_release(&p);
    fc_buf_release(&t);
}

/* v1.6: ProfilesData with the tables as its own fields (v1.6-v1.7 Profile inside). */
static void v16_request(struct fc_buf *req)
{
    struct fc_buf p, t;
    static const uint64_t value[] = {5};

    fc_buf_init(&p, 0);
    fc_buf_init(&t, 0);
    value_type(&p, 1, 1, 2);
    fv(&t, 2, 1);
    fpacked(&t, 3, value, 1);
    fm(&p, 2, &t);
    fv(&p, 4, NOW_NS);
    wrap(req, &p, NULL);
    fs(req, 6, ""); /* ProfilesData.string_table */
    fs(req, 6, "cpu");
    fs(req, 6, "nanoseconds");
    fc_buf_release(&p);
    fc_buf_release(&t);
}

/* v1.7, as async-profiler 4.0 writes it: dictionary of KeyValues, location_indices. */
static void v17_request(struct fc_buf *req, bool with_period)
{
    struct fc_buf p, t, d, kv;
    static const uint64_t value[] = {5};
    static const uint64_t loc[] = {1};

    fc_buf_init(&p, 0);
    fc_buf_init(&t, 0);
    fc_buf_init(&d, 0);
    fc_buf_init(&kv, 0);
    value_type(&p, 1, 1, 2);
    fv(&t, 2, 1); /* Sample: locations_length 1, value [5] */
    fpacked(&t, 3, value, 1);
    fm(&p, 2, &t);
    if (with_period) {
        fpacked(&p, 3, loc, 1);  /* location_indices */
        fv(&p, 4, NOW_NS);       /* time_nanos */
        value_type(&p, 6, 1, 2); /* period_type */
        fv(&p, 7, 10000000);     /* period */
    }
    fs(&d, 5, "");
    fs(&d, 5, "cpu");
    fs(&d, 5, "nanoseconds");
    fs(&t, 1, "thread.name"); /* attribute_table: KeyValue{key, value} */
    fs(&kv, 1, "main");
    fm(&t, 2, &kv);
    fm(&d, 6, &t);
    wrap(req, &p, &d);
    fc_buf_release(&p);
    fc_buf_release(&t);
    fc_buf_release(&d);
    fc_buf_release(&kv);
}

/* The current dictionary: "", cpu, nanoseconds, main, work; main <- work; attribute k=v. */
static void dictionary(struct fc_buf *d)
{
    struct fc_buf t, l, a;
    static const uint64_t stack[] = {2, 1}; /* leaf first: work, main */

    fc_buf_init(&t, 0);
    fc_buf_init(&l, 0);
    fc_buf_init(&a, 0);
    fm(d, 1, &t); /* mapping_table[0] */
    fm(d, 2, &t); /* location_table[0] */
    for (int i = 1; i <= 2; i++) {
        fv(&l, 1, (uint64_t)i); /* Line.function_index */
        fm(&t, 3, &l);
        fm(d, 2, &t);
    }
    fm(d, 3, &t); /* function_table[0] */
    for (int i = 1; i <= 2; i++) {
        fv(&t, 1, 2 + (uint64_t)i); /* name_strindex: main, work */
        fm(d, 3, &t);
    }
    fs(d, 5, "");
    fs(d, 5, "cpu");
    fs(d, 5, "nanoseconds");
    fs(d, 5, "main");
    fs(d, 5, "work");
    fs(d, 5, "k");
    fs(d, 5, "v");
    fm(d, 6, &t); /* attribute_table[0] */
    fv(&t, 1, 5); /* KeyValueAndUnit{key_strindex "k", value {string_value "v"}} */
    fs(&a, 1, "v");
    fm(&t, 2, &a);
    fm(d, 6, &t);
    fm(d, 7, &t); /* stack_table[0] */
    fpacked(&t, 1, stack, 2);
    fm(d, 7, &t);
    fc_buf_release(&t);
    fc_buf_release(&l);
    fc_buf_release(&a);
}

enum numbering { V1_8, V1_9, V1_10 };

/*
 * A cpu profile of two samples on stack 1: value 7 (with attribute 1 and,
 * when link, link 1), value 3. Samples and profile in the given numbering.
 */
static void request(struct fc_buf *req, enum numbering nb, bool attrs, bool link)
{
    struct fc_buf p, s, d;
    static const uint64_t seven[] = {7}, three[] = {3}, attr[] = {1};
    /* Sample fields: values, attribute_indices, link_index. */
    uint32_t values = nb == V1_10 ? 4 : 2, attributes = nb == V1_10 ? 2 : 3,
             link_index = nb == V1_10 ? 3 : 4;

    fc_buf_init(&p, 0);
    fc_buf_init(&s, 0);
    fc_buf_init(&d, 0);
    dictionary(&d);
    if (link) {
        struct fc_buf k;
        static const uint8_t trace[16] = {0xaa, 1}, span[8] = {0xbb, 2};
        fc_buf_init(&k, 0);
        fm(&d, 4, &k); /* link_table[0] */
        fb(&k, 1, trace, 16);
        fb(&k, 2, span, 8);
        fm(&d, 4, &k);
        fc_buf_release(&k);
    }
    value_type(&p, 1, 1, 2);
    fv(&s, 1, 1);
    if (nb == V1_10) { /* v1.10 writes them in field order: attributes, link, values */
        if (attrs) {
            fpacked(&s, attributes, attr, 1);
        }
        if (link) {
            fv(&s, link_index, 1);
        }
        fpacked(&s, values, seven, 1);
    } else {
        fpacked(&s, values, seven, 1);
        if (attrs) {
            fpacked(&s, attributes, attr, 1);
        }
        if (link) {
            fv(&s, link_index, 1);
        }
    }
    fm(&p, 2, &s);
    fv(&s, 1, 1);
    fpacked(&s, values, three, 1);
    fm(&p, 2, &s);
    f64(&p, 3, NOW_NS);
    fv(&p, 4, 1000000000);
    value_type(&p, 5, 1, 2);
    fv(&p, 6, 10000000);
    if (nb == V1_8) {
        static const uint64_t comment[] = {3};
        static const uint8_t id[16] = {9, 9, 9};
        fpacked(&p, 7, comment, 1); /* comment_strindices */
        fb(&p, 8, id, 16);          /* profile_id */
        fv(&p, 9, 2);               /* dropped_attributes_count */
    }
    wrap(req, &p, &d);
    fc_buf_release(&p);
    fc_buf_release(&s);
    fc_buf_release(&d);
}

/* A pprof Profile (profile.proto) posted where OTLP is expected. */
static void pprof_request(struct fc_buf *req)
{
    struct fc_buf s;
    static const uint64_t loc[] = {1}, value[] = {5};

    fc_buf_init(&s, 0);
    value_type(req, 1, 1, 2);
    fpacked(&s, 1, loc, 1);
    fpacked(&s, 2, value, 1);
    fm(req, 2, &s);
    fs(req, 6, "");
    fs(req, 6, "cpu");
    fs(req, 6, "nanoseconds");
    fv(req, 9, NOW_NS);   /* time_nanos */
    fv(req, 12, 1000000); /* period */
    fc_buf_release(&s);
}

static void test_each_older_layout_is_refused_by_name(void **state)
{
    struct fc_buf w;

    (void)state;
    fc_buf_init(&w, 0);
    v13_request(&w);
    assert_refused(&w, "otlp: OTLP profiles layout of opentelemetry-proto v1.3 "
                       "(ProfileContainer.start_time_unix_nano, field 2): not supported; send the "
                       "v1.10 layout (v1development as of opentelemetry-proto 1.10)");
    fc_buf_reset(&w);
    v15_request(&w, true);
    assert_refused(&w, "opentelemetry-proto v1.4-v1.5 (Profile.string_table, field 10)");
    fc_buf_reset(&w);
    v15_request(&w, false); /* only the strings and the samples tell it */
    assert_refused(&w, "opentelemetry-proto v1.4-v1.5 (Profile.string_table, field 10)");
    fc_buf_reset(&w);
    v16_request(&w);
    assert_refused(&w, "opentelemetry-proto v1.6 (ProfilesData.string_table, field 6)");
    fc_buf_reset(&w);
    v17_request(&w, true);
    assert_refused(&w, "opentelemetry-proto v1.6-v1.7 (Profile.location_indices, field 3)");
    fc_buf_reset(&w);
    v17_request(&w, false); /* only the dictionary's KeyValue tells it */
    assert_refused(&w, "opentelemetry-proto v1.6-v1.7 "
                       "(ProfilesDictionary.attribute_table (KeyValue), field 6)");
    fc_buf_reset(&w);
    request(&w, V1_8, true, false);
    assert_refused(&w, "opentelemetry-proto v1.8 (Profile.profile_id, field 8)");
    fc_buf_reset(&w);
    pprof_request(&w);
    assert_refused(&w, "this is a pprof Profile (Profile.time_nanos, field 9), not an OTLP "
                       "ExportProfilesServiceRequest");
    fc_buf_release(&w);
}

/* Folded stacks and total of the only profile of a decoded request. */
static void folded(const struct fc_batch *b, struct fc_buf *out)
{
    assert_int_equal(b->n_profiles, 1);
    fc_buf_init(out, 0);
    assert_int_equal(fc_folded_write_profile(b, &b->profiles[0], 0, out), FC_OK);
}

static void test_v19_is_translated_exactly(void **state)
{
    (void)state;
    for (int shape = 0; shape < 4; shape++) {
        bool attrs = shape & 1, link = shape & 2;
        struct fc_buf old, cur, fo, fc;
        struct fc_batch *a, *c;
        struct fc_otlp_result ra, rc;
        struct fc_error err;
        const struct fc_profile *p;

        fc_buf_init(&old, 0);
        fc_buf_init(&cur, 0);
        request(&old, V1_9, attrs, link);
        request(&cur, V1_10, attrs, link);
        if (decode(&old, &a, &ra, &err) != FC_OK) {
            fail_msg("v1.9 (attrs %d, link %d) refused: %s", attrs, link, err.msg);
        }
        assert_int_equal(decode(&cur, &c, &rc, &err), FC_OK);
        assert_true(ra.translated);
        assert_false(rc.translated);
        assert_int_equal(ra.profiles, 1);
        assert_int_equal(ra.rejected_profiles, 0);
        assert_string_equal(ra.message, FC_OTLP_LAYOUT_TRANSLATED_NOTE);
        assert_string_equal(rc.message, "");
        /* The same as the v1.10 request, sample by sample. */
        folded(a, &fo);
        folded(c, &fc);
        assert_int_equal(fo.len, fc.len);
        assert_memory_equal(fo.data, fc.data, fo.len);
        /* One line per sample, root first. */
        assert_int_equal(fo.len, strlen("main;work 7\nmain;work 3\n"));
        assert_memory_equal(fo.data, "main;work 7\nmain;work 3\n", fo.len);
        p = &a->profiles[0];
        assert_int_equal(p->n_samples, 2);
        assert_int_equal(fc_sample_values(p, &p->samples[0])[0], 7);
        assert_int_equal(fc_sample_values(p, &p->samples[1])[0], 3);
        assert_int_equal(p->samples[0].attrs.n, attrs ? 1 : 0);
        if (attrs) {
            const struct fc_attr *at = &a->dict.attrs[fc_span_idx(a, p->samples[0].attrs)[0]];
            assert_string_equal(fc_str(a, at->key), "k");
            assert_string_equal(fc_str(a, at->v.str), "v");
        }
        assert_int_equal(p->samples[0].link != 0, link);
        if (link) {
            assert_int_equal(a->dict.links[p->samples[0].link].trace_id[0], 0xaa);
        }
        assert_int_equal(p->time_ns, (int64_t)NOW_NS);
        fc_buf_release(&fo);
        fc_buf_release(&fc);
        fc_batch_unref(a);
        fc_batch_unref(c);
        fc_buf_release(&old);
        fc_buf_release(&cur);
    }
}

static void test_current_layout_is_never_taken_for_an_older_one(void **state)
{
    char names[64][256];
    size_t n = fc_test_corpus_files(names, 64);
    struct fc_buf w, p, s, d;
    struct fc_batch *b;
    struct fc_otlp_result res;
    struct fc_error err;
    struct fc_otlp_layout_info info;
    static const uint64_t bad[] = {9};

    (void)state;
    assert_true(n > 0);
    /* Our own encoding of every corpus profile. */
    for (size_t i = 0; i < n; i++) {
        char path[1024];
        size_t len;
        uint8_t *data;
        struct fc_profile *prof = NULL;
        b = fc_batch_new(0);
        snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), names[i]);
        data = fc_test_read(path, &len);
        assert_non_null(data);
        assert_int_equal(fc_pprof_decode(b, data, len, NULL, &prof, &err), FC_OK);
        free(data);
        fc_buf_init(&w, 0);
        assert_int_equal(fc_otlp_encode(b, &w, &err), FC_OK);
        if (fc_otlp_layout_scan(w.data, w.len, &info) != FC_OTLP_LAYOUT_NONE) {
            fail_msg("%s: our encoding taken for %s (%s)", names[i], info.versions, info.field);
        }
        fc_buf_release(&w);
        fc_batch_unref(b);
    }
    fc_buf_init(&w, 0);
    fc_buf_init(&p, 0);
    fc_buf_init(&s, 0);
    fc_buf_init(&d, 0);
    /* A genuinely empty request. */
    assert_int_equal(decode(&w, &b, &res, &err), FC_OK);
    assert_int_equal(res.profiles, 0);
    fc_batch_unref(b);
    /* A profile without samples: accepted as it is. */
    value_type(&p, 1, 1, 2);
    f64(&p, 3, NOW_NS);
    dictionary(&d);
    wrap(&w, &p, &d);
    assert_int_equal(decode(&w, &b, &res, &err), FC_OK);
    assert_int_equal(res.profiles, 1);
    assert_int_equal(b->profiles[0].n_samples, 0);
    fc_batch_unref(b);
    /* A profile with nothing at all. */
    fc_buf_reset(&w);
    wrap(&w, &p, NULL);
    assert_int_equal(decode(&w, &b, &res, &err), FC_OK);
    assert_int_equal(res.profiles, 1);
    fc_batch_unref(b);
    /* A bad stack index rejects that profile (partial success), naming it. */
    fc_buf_reset(&w);
    value_type(&p, 1, 1, 2);
    fv(&s, 1, 9);
    fpacked(&s, 4, bad, 1);
    fm(&p, 2, &s);
    dictionary(&d);
    wrap(&w, &p, &d);
    assert_int_equal(decode(&w, &b, &res, &err), FC_OK);
    assert_int_equal(res.rejected_profiles, 1);
    assert_non_null(strstr(res.message, "stack_index: index 9"));
    fc_batch_unref(b);
    /* A sample with neither values nor timestamps but attributes: rejected, not translated. */
    fc_buf_reset(&w);
    value_type(&p, 1, 1, 2);
    fv(&s, 1, 1);
    fpacked(&s, 2, bad, 1);
    fpacked(&s, 4, bad, 1);
    fm(&p, 2, &s);
    fv(&s, 1, 1);
    fm(&p, 2, &s);
    dictionary(&d);
    wrap(&w, &p, &d);
    assert_int_equal(decode(&w, &b, &res, &err), FC_OK);
    assert_false(res.translated);
    assert_int_equal(res.rejected_profiles, 1);
    fc_batch_unref(b);
    fc_buf_release(&w);
    fc_buf_release(&p);
    fc_buf_release(&s);
    fc_buf_release(&d);
}

static void test_garbage_is_never_named(void **state)
{
    struct fc_otlp_layout_info info;
    uint8_t buf[512];
    struct fc_buf w;
    uint32_t x = 12345;

    (void)state;
    assert_int_equal(fc_otlp_layout_scan(NULL, 0, &info), FC_OTLP_LAYOUT_NONE);
    assert_string_equal(info.versions, "");
    assert_int_equal(fc_otlp_layout_scan((const uint8_t *)"\x0a\xff\xff\xff\xff\x0f", 6, &info),
                     FC_OTLP_LAYOUT_NONE);
    /* Truncated anywhere, an older request is never misread past its end (ASan run). */
    fc_buf_init(&w, 0);
    v15_request(&w, true);
    for (size_t cut = 0; cut < w.len; cut++) {
        fc_otlp_layout_scan(w.data, cut, &info);
        uint8_t *copy = malloc(cut ? cut : 1);
        memcpy(copy, w.data, cut);
        fc_otlp_layout_translate(copy, cut);
        free(copy);
    }
    fc_buf_release(&w);
    for (int round = 0; round < 2000; round++) {
        for (size_t i = 0; i < sizeof(buf); i++) {
            x = x * 1103515245u + 12345u;
            buf[i] = (uint8_t)(x >> 16);
        }
        fc_otlp_layout_scan(buf, sizeof(buf), &info);
        fc_otlp_layout_translate(buf, sizeof(buf));
    }
}

static void test_json_of_an_older_layout_is_refused(void **state)
{
    /* v1.8's names: Profile.sample (v1.9 renamed it samples), commentStrindices. */
    static const char v18[] = "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{"
                              "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
                              "\"sample\":[{\"stackIndex\":1,\"values\":[\"7\"]}],"
                              "\"timeUnixNano\":\"1767225600000000000\"}]}]}],"
                              "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\"]}}";
    /* v1.7's names and shapes. */
    static const char v17[] =
        "{\"resourceProfiles\":[{\"scopeProfiles\":[{\"profiles\":[{"
        "\"sampleType\":[{\"typeStrindex\":1,\"unitStrindex\":2}],"
        "\"sample\":[{\"locationsStartIndex\":0,\"locationsLength\":1,\"value\":[\"7\"]}],"
        "\"locationIndices\":[1],\"timeNanos\":\"1767225600000000000\"}]}]}],"
        "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\"]}}";
    /* The current layout, with "sample" only as a string: accepted. */
    static const char v110[] =
        "{\"resourceProfiles\":[{\"resource\":{\"attributes\":[{\"key\":\"sample\","
        "\"value\":{\"stringValue\":\"\\\"sample\\\": 1\"}}]},\"scopeProfiles\":[{\"profiles\":[{"
        "\"sampleType\":{\"typeStrindex\":1,\"unitStrindex\":2},"
        "\"timeUnixNano\":\"1767225600000000000\"}]}]}],"
        "\"dictionary\":{\"stringTable\":[\"\",\"cpu\",\"nanoseconds\",\"sample\"]}}";
    struct fc_batch *b = fc_batch_new(0);
    struct fc_otlp_result res;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_otlp_decode_json(b, v18, strlen(v18), &res, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "otlp json: OTLP profiles layout of opentelemetry-proto "
                                    "v1.4-v1.8 (key \"sample\"): not supported"));
    fc_batch_unref(b);
    /* v1.7's repeated sampleType does not even read: the layout is named all the same. */
    b = fc_batch_new(0);
    assert_int_equal(fc_otlp_decode_json(b, v17, strlen(v17), &res, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "otlp json: OTLP profiles layout of opentelemetry-proto "
                                    "v1.4-v1.7 (key \"locationsStartIndex\"): not supported"));
    assert_non_null(strstr(err.msg, "(ValueType: expected a JSON object)"));
    fc_batch_unref(b);
    b = fc_batch_new(0);
    if (fc_otlp_decode_json(b, v110, strlen(v110), &res, &err) != FC_OK) {
        fail_msg("current JSON refused: %s", err.msg);
    }
    assert_int_equal(res.profiles, 1);
    fc_batch_unref(b);
}

static void test_receiver_stamps_1970_at_receive_time(void **state)
{
    /* time_ns as sent -> kept (1) or replaced by now (0). */
    static const struct {
        int64_t t;
        int kept;
    } cases[] = {
        {0, 0},
        {-5, 0},
        {1767225600LL, 0},          /* seconds sent as nanoseconds: 1970-01-01 00:00:01 */
        {1767225600000LL, 0},       /* milliseconds: 1970-01-01 00:29 */
        {1767225600000000LL, 0},    /* microseconds: 1970-01-21 */
        {946684799999999999LL, 0},  /* 1999-12-31T23:59:59.999999999Z */
        {946684800000000000LL, 1},  /* 2000-01-01T00:00:00Z */
        {1767225600000000000LL, 1}, /* 2026 */
    };
    const int64_t now = 1767225600123456789LL;
    struct fc_batch *b = fc_batch_new(0);
    uint32_t replaced = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fc_batch_add_profile(b)->time_ns = cases[i].t;
        replaced += cases[i].kept ? 0 : 1;
    }
    assert_int_equal(otlp_fix_times(b, now), replaced);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(b->profiles[i].time_ns, cases[i].kept ? cases[i].t : now);
    }
    /* Once stamped, nothing is replaced again. */
    assert_int_equal(otlp_fix_times(b, now + 1), 0);
    fc_batch_unref(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_each_older_layout_is_refused_by_name),
        cmocka_unit_test(test_v19_is_translated_exactly),
        cmocka_unit_test(test_current_layout_is_never_taken_for_an_older_one),
        cmocka_unit_test(test_garbage_is_never_named),
        cmocka_unit_test(test_json_of_an_older_layout_is_refused),
        cmocka_unit_test(test_receiver_stamps_1970_at_receive_time),
    };
    return cmocka_run_group_tests_name("otlp_layout", tests, NULL, NULL);
}
