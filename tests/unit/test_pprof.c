/*
 * The pprof codec against real profiles: every corpus file decodes to the
 * totals and top flat values of its reference `pprof -top` output, survives
 * decode -> encode -> decode unchanged, and malformed input is refused with
 * a message, never a crash.
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
#include "core/limits.h"
#include "formats/folded.h"
#include "formats/gzip.h"
#include "formats/pprof.h"
#include "tests/unit/fc_test.h"

/* Sum of values whose leaf frame (innermost inlined function) is `name`. */
static int64_t flat_of(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                       const char *name)
{
    int64_t sum = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        const struct fc_stack *st = &b->dict.stacks[s->stack];
        const struct fc_location *loc;
        const char *fn;
        if (st->locations.n == 0) {
            continue;
        }
        loc = &b->dict.locations[fc_span_idx(b, st->locations)[0]];
        if (loc->n_lines == 0) {
            continue;
        }
        fn = fc_str(b, b->dict.functions[b->dict.lines[loc->lines_off].function].name);
        if (strcmp(fn, name) == 0) {
            sum += fc_sample_value(p, s, t);
        }
    }
    return sum;
}

/* Checks one corpus profile against its .top.txt; returns the sections checked. */
static int check_against_top(const struct fc_batch *b, const struct fc_profile *p,
                             const char *top_path)
{
    size_t len;
    char *text = (char *)fc_test_read(top_path, &len);
    char *save = NULL;
    int section = -1;
    int rows = 0;
    int sections = 0;

    assert_non_null(text);
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        long long flat;
        char name[512];
        int consumed = 0;
        if (sscanf(line, "### sample_index=%d", &section) == 1) {
            rows = 0;
            assert_true(section >= 0 && (uint32_t)section < p->n_sample_types);
            sections++;
            continue;
        }
        if (strncmp(line, "Showing nodes accounting for", 28) == 0) {
            const char *of = strstr(line, "of ");
            long long total = atoll(of + 3);
            assert_int_equal(fc_profile_total(p, (uint32_t)section), total);
            continue;
        }
        /* Rows: "<flat>[unit] <flat%> <sum%> <cum>[unit] <cum%>  <name>", first ten. */
        if (section >= 0 && rows < 10 &&
            sscanf(line, " %lld%*[a-zA-Z] %*s %*s %*s %*s %n", &flat, &consumed) >= 1 &&
            consumed > 0) {
            char *n = line + consumed;
            char *inl = strstr(n, " (inline)");
            if (inl != NULL) {
                *inl = '\0';
            }
            snprintf(name, sizeof(name), "%s", n);
            rows++;
            if (flat_of(b, p, (uint32_t)section, name) != flat) {
                fail_msg("%s section %d: flat of %s is %lld in pprof -top, %lld here", top_path,
                         section, name, flat, (long long)flat_of(b, p, (uint32_t)section, name));
            }
        } else if (section >= 0 && rows < 10 &&
                   sscanf(line, " %lld %*s %*s %*s %*s %n", &flat, &consumed) >= 1 &&
                   consumed > 0) {
            char *n = line + consumed;
            char *inl = strstr(n, " (inline)");
            if (inl != NULL) {
                *inl = '\0';
            }
            rows++;
            assert_int_equal(flat_of(b, p, (uint32_t)section, n), flat);
        }
    }
    free(text);
    return sections;
}

static void same_profile(const struct fc_batch *x, const struct fc_profile *p,
                         const struct fc_batch *y, const struct fc_profile *q)
{
    struct fc_buf fx, fy;

    assert_int_equal(p->n_sample_types, q->n_sample_types);
    assert_int_equal(p->n_samples, q->n_samples);
    assert_int_equal(p->period, q->period);
    assert_int_equal(p->time_ns, q->time_ns);
    assert_int_equal(p->duration_ns, q->duration_ns);
    assert_string_equal(fc_str(x, p->period_type.type), fc_str(y, q->period_type.type));
    assert_int_equal(p->comments.n, q->comments.n);
    for (uint32_t i = 0; i < p->comments.n; i++) {
        assert_string_equal(fc_str(x, fc_span_idx(x, p->comments)[i]),
                            fc_str(y, fc_span_idx(y, q->comments)[i]));
    }
    assert_string_equal(fc_str(x, p->drop_frames), fc_str(y, q->drop_frames));
    assert_string_equal(fc_str(x, p->keep_frames), fc_str(y, q->keep_frames));
    assert_string_equal(fc_str(x, p->default_sample_type), fc_str(y, q->default_sample_type));
    assert_string_equal(fc_str(x, p->period_type.unit), fc_str(y, q->period_type.unit));
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        assert_string_equal(fc_str(x, p->sample_types[t].type), fc_str(y, q->sample_types[t].type));
        assert_string_equal(fc_str(x, p->sample_types[t].unit), fc_str(y, q->sample_types[t].unit));
        assert_int_equal(fc_profile_total(p, t), fc_profile_total(q, t));
    }
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *a = &p->samples[i], *b = &q->samples[i];
        const uint32_t *la = fc_span_idx(x, x->dict.stacks[a->stack].locations);
        const uint32_t *lb = fc_span_idx(y, y->dict.stacks[b->stack].locations);
        assert_int_equal(x->dict.stacks[a->stack].locations.n,
                         y->dict.stacks[b->stack].locations.n);
        for (uint32_t j = 0; j < x->dict.stacks[a->stack].locations.n; j++) {
            const struct fc_location *l1 = &x->dict.locations[la[j]];
            const struct fc_location *l2 = &y->dict.locations[lb[j]];
            const struct fc_mapping *m1 = &x->dict.mappings[l1->mapping];
            const struct fc_mapping *m2 = &y->dict.mappings[l2->mapping];
            assert_int_equal(l1->address, l2->address);
            assert_int_equal(l1->n_lines, l2->n_lines);
            assert_int_equal(m1->memory_start, m2->memory_start);
            assert_int_equal(m1->flags, m2->flags);
            assert_string_equal(fc_str(x, m1->build_id), fc_str(y, m2->build_id));
            assert_string_equal(fc_str(x, m1->filename), fc_str(y, m2->filename));
            for (uint32_t k = 0; k < l1->n_lines; k++) {
                const struct fc_line *n1 = &x->dict.lines[l1->lines_off + k];
                const struct fc_line *n2 = &y->dict.lines[l2->lines_off + k];
                const struct fc_function *f1 = &x->dict.functions[n1->function];
                const struct fc_function *f2 = &y->dict.functions[n2->function];
                assert_int_equal(n1->line, n2->line);
                assert_string_equal(fc_str(x, f1->name), fc_str(y, f2->name));
                assert_string_equal(fc_str(x, f1->system_name), fc_str(y, f2->system_name));
                assert_string_equal(fc_str(x, f1->filename), fc_str(y, f2->filename));
                assert_int_equal(f1->start_line, f2->start_line);
            }
        }
        assert_int_equal(a->attrs.n, b->attrs.n);
        for (uint32_t j = 0; j < a->attrs.n; j++) {
            const struct fc_attr *t1 = &x->dict.attrs[fc_span_idx(x, a->attrs)[j]];
            const struct fc_attr *t2 = &y->dict.attrs[fc_span_idx(y, b->attrs)[j]];
            assert_string_equal(fc_str(x, t1->key), fc_str(y, t2->key));
            assert_int_equal(t1->kind, t2->kind);
            if (t1->kind == FC_ATTR_STR) {
                assert_string_equal(fc_str(x, t1->v.str), fc_str(y, t2->v.str));
            } else {
                assert_int_equal(t1->v.i, t2->v.i);
                assert_string_equal(fc_str(x, t1->unit), fc_str(y, t2->unit));
            }
        }
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            assert_int_equal(fc_sample_value(p, a, t), fc_sample_value(q, b, t));
        }
    }
    /* And the folded view, the way a human reads it, is identical. */
    fc_buf_init(&fx, 0);
    fc_buf_init(&fy, 0);
    fc_folded_write_profile(x, p, 0, &fx);
    fc_folded_write_profile(y, q, 0, &fy);
    assert_int_equal(fx.len, fy.len);
    assert_memory_equal(fx.data, fy.data, fx.len);
    fc_buf_release(&fx);
    fc_buf_release(&fy);
}

static void test_corpus_matches_pprof_top_and_round_trips(void **state)
{
    char names[64][256];
    size_t n_files = fc_test_corpus_files(names, 64);
    int files = 0;

    (void)state;
    for (size_t f = 0; f < n_files; f++) {
        const char *name = names[f];
        char path[1024], top[1024];
        size_t len, n = strlen(name);
        uint8_t *data;
        struct fc_batch *b, *c;
        struct fc_profile *p = NULL, *q = NULL;
        struct fc_error err = {0};
        struct fc_buf enc;
        snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), name);
        snprintf(top, sizeof(top), "%s/%.*s.top.txt", fc_test_corpus(), (int)(n - 6), name);
        data = fc_test_read(path, &len);
        assert_non_null(data);
        b = fc_batch_new(0);
        if (fc_pprof_decode(b, data, len, NULL, &p, &err) != FC_OK) {
            fail_msg("%s: %s", name, err.msg);
        }
        assert_true(check_against_top(b, p, top) >= 1);
        /* decode -> encode -> decode */
        fc_buf_init(&enc, 0);
        assert_int_equal(fc_pprof_encode(b, p, &enc, &err), FC_OK);
        c = fc_batch_new(0);
        if (fc_pprof_decode(c, enc.data, enc.len, NULL, &q, &err) != FC_OK) {
            fail_msg("%s re-encoded: %s", name, err.msg);
        }
        same_profile(b, p, c, q);
        assert_true(check_against_top(c, q, top) >= 1);
        fc_buf_release(&enc);
        fc_batch_unref(b);
        fc_batch_unref(c);
        free(data);
        files++;
    }
    assert_true(files >= 17);
}

static uint8_t *corpus_plain(const char *name, size_t *len)
{
    char path[1024];
    size_t glen;
    uint8_t *gz;
    struct fc_buf out;
    struct fc_error err = {0};

    snprintf(path, sizeof(path), "%s/%s", fc_test_corpus(), name);
    gz = fc_test_read(path, &glen);
    assert_non_null(gz);
    fc_buf_init(&out, 0);
    assert_int_equal(fc_gunzip(gz, glen, 0, &out, &err), FC_OK);
    free(gz);
    return fc_buf_detach(&out, len);
}

static int decode_err(const uint8_t *data, size_t len, const struct fc_pprof_limits *lim, char *msg,
                      size_t size)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_error err = {0};
    int rc = fc_pprof_decode(b, data, len, lim, NULL, &err);

    snprintf(msg, size, "%s", err.msg);
    assert_int_equal(b->n_profiles, rc == FC_OK ? 1 : 0);
    fc_batch_unref(b);
    return rc;
}

static void test_malformed_inputs_are_refused(void **state)
{
    size_t len;
    uint8_t *plain = corpus_plain("go-1s-cpu.pb.gz", &len);
    char msg[512];
    static const uint8_t huge_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                          0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    static const uint8_t bad_gzip[] = {0x1f, 0x8b, 0x08, 0x00, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3};
    /* sample_type {type=1 unit=2}, string_table ["", "x"], sample {location_id=[7], value=[1]} */
    static const uint8_t bad_index[] = {0x0a, 0x04, 0x08, 0x01, 0x10, 0x05,
                                        0x32, 0x00, 0x32, 0x01, 'x'};
    static const uint8_t bad_location[] = {0x0a, 0x04, 0x08, 0x01, 0x10, 0x01, 0x32, 0x00, 0x32,
                                           0x01, 'x',  0x12, 0x05, 0x0a, 0x01, 0x07, 0x10, 0x01};
    static const uint8_t no_empty_string[] = {0x0a, 0x04, 0x08, 0x00, 0x10, 0x00, 0x32, 0x01, 'x'};

    (void)state;
    assert_int_equal(decode_err(plain, len / 2, NULL, msg, sizeof(msg)), FC_EPROTO);
    assert_non_null(strstr(msg, "pprof:"));
    assert_int_equal(decode_err(plain, 0, NULL, msg, sizeof(msg)), FC_EPROTO);
    assert_non_null(strstr(msg, "empty"));
    assert_int_equal(decode_err(huge_varint, sizeof(huge_varint), NULL, msg, sizeof(msg)),
                     FC_EPROTO);
    assert_int_equal(decode_err(bad_gzip, sizeof(bad_gzip), NULL, msg, sizeof(msg)), FC_EPROTO);
    assert_non_null(strstr(msg, "gzip"));
    assert_int_equal(decode_err(bad_index, sizeof(bad_index), NULL, msg, sizeof(msg)), FC_EPROTO);
    assert_non_null(strstr(msg, "string index 5 is outside the string table"));
    assert_int_equal(decode_err(bad_location, sizeof(bad_location), NULL, msg, sizeof(msg)),
                     FC_EPROTO);
    assert_non_null(strstr(msg, "sample 0: location_id 7 is not in the location table"));
    assert_int_equal(decode_err(no_empty_string, sizeof(no_empty_string), NULL, msg, sizeof(msg)),
                     FC_EPROTO);
    assert_non_null(strstr(msg, "string_table[0]"));
    free(plain);
}

static void test_limits(void **state)
{
    char path[1024];
    size_t len;
    uint8_t *gz;
    char msg[512];
    struct fc_pprof_limits tiny = {.max_decompressed = 1000};
    struct fc_input_limits shallow = {
        .max_message_depth = 100, .max_stack_depth = 3, .max_labels = 30};
    uint64_t cut = 0;
    struct fc_batch *b = fc_batch_new(0);
    struct fc_batch *small = fc_batch_new(16 * 1024);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};

    (void)state;
    snprintf(path, sizeof(path), "%s/go-1s-cpu.pb.gz", fc_test_corpus());
    gz = fc_test_read(path, &len);
    /* A decompression bomb guard: the cap applies to inflated bytes. */
    assert_int_equal(decode_err(gz, len, &tiny, msg, sizeof(msg)), FC_ETOOBIG);
    assert_non_null(strstr(msg, "exceeds the limit of 1000 bytes"));
    /* Deep stacks keep their root-most frames (the receivers' shared caps cut them). */
    assert_int_equal(fc_pprof_decode(b, gz, len, NULL, &p, &err), FC_OK);
    assert_int_equal(fc_input_limits_apply(&shallow, b, &cut, &err), FC_OK);
    assert_true(cut > 0);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        assert_true(b->dict.stacks[p->samples[i].stack].locations.n <= 3);
    }
    assert_int_equal(fc_profile_total(p, 0), 108);
    /* The batch memory budget turns into FC_ETOOBIG, not a crash. */
    assert_int_equal(fc_pprof_decode(small, gz, len, NULL, NULL, &err), FC_ETOOBIG);
    fc_batch_unref(b);
    fc_batch_unref(small);
    free(gz);
}

static void test_sample_labels_survive_round_trip(void **state)
{
    size_t len;
    uint8_t *plain = corpus_plain("go-1s-cpu.pb.gz", &len);
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};
    uint32_t labelled = 0;

    (void)state;
    assert_int_equal(fc_pprof_decode(b, plain, len, NULL, &p, &err), FC_OK);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        labelled += p->samples[i].attrs.n > 0;
    }
    /* The Go corpus program tags work with pprof.Do labels. */
    assert_true(labelled > 0);
    fc_batch_unref(b);
    free(plain);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_corpus_matches_pprof_top_and_round_trips),
        cmocka_unit_test(test_malformed_inputs_are_refused),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_sample_labels_survive_round_trip),
    };
    return cmocka_run_group_tests_name("pprof", tests, NULL, NULL);
}
