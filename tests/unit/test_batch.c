/* The batch model: arena budget, interning, labels, values, refcount, clone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <stdio.h>
#include <cmocka.h>

#include "core/arena.h"
#include "core/batch.h"

static void test_arena_budget_refuses_and_flags(void **state)
{
    struct fc_arena *a = fc_arena_new(64 * 1024);
    void *p;

    (void)state;
    assert_non_null(fc_arena_alloc(a, 1000));
    assert_false(fc_arena_over_budget(a));
    p = fc_arena_alloc(a, 200 * 1024);
    assert_null(p);
    assert_true(fc_arena_over_budget(a));
    fc_arena_free(a);
}

static void test_arena_realloc_keeps_contents(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    char *p = fc_arena_alloc(a, 8);

    (void)state;
    memcpy(p, "abcdefg", 8);
    p = fc_arena_realloc(a, p, 8, 100000);
    assert_non_null(p);
    assert_string_equal(p, "abcdefg");
    fc_arena_free(a);
}

static void test_dictionary_interns_and_zero_is_unset(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    uint32_t s1, s2, s3, empty;
    struct fc_function f = {0};
    uint32_t f1, f2;

    (void)state;
    assert_int_equal(fc_dict_cstring(b, "main", &s1), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "main", &s2), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "other", &s3), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "", &empty), FC_OK);
    assert_int_equal(s1, s2);
    assert_int_not_equal(s1, s3);
    assert_int_equal(empty, 0);
    assert_string_equal(fc_str(b, s1), "main");
    /* Strings with NUL bytes are distinct by their full length. */
    assert_int_equal(fc_dict_string(b, "a\0b", 3, &s2), FC_OK);
    assert_int_equal(fc_dict_string(b, "a\0c", 3, &s3), FC_OK);
    assert_int_not_equal(s2, s3);
    f.name = s1;
    assert_int_equal(fc_dict_function(b, &f, &f1), FC_OK);
    assert_int_equal(fc_dict_function(b, &f, &f2), FC_OK);
    assert_int_equal(f1, f2);
    assert_int_not_equal(f1, 0);
    /* Index 0 of every table is the zero row. */
    assert_int_equal(b->dict.functions[0].name, 0);
    assert_int_equal(b->dict.stacks[0].locations.n, 0);
    fc_batch_unref(b);
}

static void test_many_strings_survive_rehash(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    char name[32];
    uint32_t ids[5000];

    (void)state;
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "fn_%d", i);
        assert_int_equal(fc_dict_cstring(b, name, &ids[i]), FC_OK);
    }
    for (int i = 0; i < 5000; i++) {
        uint32_t again;
        snprintf(name, sizeof(name), "fn_%d", i);
        assert_int_equal(fc_dict_cstring(b, name, &again), FC_OK);
        assert_int_equal(again, ids[i]);
        assert_string_equal(fc_str(b, ids[i]), name);
    }
    assert_int_equal(b->dict.n_strings, 5001);
    fc_batch_unref(b);
}

static void test_labels_stay_sorted_and_replace(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);

    (void)state;
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "api"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "__name__", "process_cpu"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "region", "eu"), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "region", "us"), FC_OK);
    assert_int_equal(p->n_labels, 3);
    assert_string_equal(fc_str(b, p->labels[0].name), "__name__");
    assert_string_equal(fc_str(b, p->labels[1].name), "region");
    assert_string_equal(fc_profile_label(b, p, "region"), "us");
    assert_int_equal(fc_profile_remove_label(b, p, "region"), FC_OK);
    assert_null(fc_profile_label(b, p, "region"));
    assert_int_equal(p->n_labels, 2);
    fc_batch_unref(b);
}

static void test_timestamps_only_samples_count_one_each(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt = {0, 0};
    struct fc_sample s = {0};
    int64_t ts[3] = {1, 2, 3};
    int64_t v[1] = {40};

    (void)state;
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, NULL, 0, ts, 3), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, v, 1, NULL, 0), FC_OK);
    assert_int_equal(fc_sample_value(p, &p->samples[0], 0), 3);
    assert_int_equal(fc_profile_total(p, 0), 43);
    assert_int_equal(fc_batch_sample_count(b), 2);
    fc_batch_unref(b);
}

static void test_clone_is_deep_and_independent(void **state)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_batch *c = NULL;
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    struct fc_sample s = {0};
    int64_t v = 7;
    struct fc_error err = {0};
    uint32_t extra;

    (void)state;
    assert_int_equal(fc_dict_cstring(b, "cpu", &vt.type), FC_OK);
    assert_int_equal(fc_dict_cstring(b, "nanoseconds", &vt.unit), FC_OK);
    assert_int_equal(fc_profile_set_sample_types(b, p, &vt, 1), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", "api"), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, &v, 1, NULL, 0), FC_OK);
    assert_int_equal(fc_batch_set_tenant(b, "team-a"), FC_OK);
    assert_int_equal(fc_batch_clone(b, &c, &err), FC_OK);
    fc_batch_unref(b); /* the clone must not point into the original's arena */
    assert_string_equal(c->tenant, "team-a");
    assert_string_equal(fc_profile_label(c, &c->profiles[0], "service_name"), "api");
    assert_int_equal(fc_profile_total(&c->profiles[0], 0), 7);
    /* Interning still works on the clone, and finds existing rows. */
    assert_int_equal(fc_dict_cstring(c, "cpu", &extra), FC_OK);
    assert_int_equal(extra, c->profiles[0].sample_types[0].type);
    assert_int_equal(fc_profile_set_label(c, &c->profiles[0], "zone", "b"), FC_OK);
    assert_int_equal(c->profiles[0].n_labels, 2);
    fc_batch_unref(c);
}

static void test_refcount_frees_once(void **state)
{
    struct fc_batch *b = fc_batch_new(0);

    (void)state;
    fc_batch_ref(b);
    fc_batch_ref(b);
    assert_int_equal(atomic_load(&b->refs), 3);
    fc_batch_unref(b);
    fc_batch_unref(b);
    assert_int_equal(atomic_load(&b->refs), 1);
    fc_batch_unref(b); /* the last: ASan reports a leak or double free if this is wrong */
}

static void test_budget_makes_builders_fail_cleanly(void **state)
{
    struct fc_batch *b = fc_batch_new(64 * 1024);
    char name[64];
    uint32_t id;
    int rc = FC_OK;

    (void)state;
    assert_non_null(b);
    for (int i = 0; i < 100000 && rc == FC_OK; i++) {
        snprintf(name, sizeof(name), "a-rather-long-function-name-%d", i);
        rc = fc_dict_cstring(b, name, &id);
    }
    assert_int_equal(rc, FC_ETOOBIG);
    fc_batch_unref(b);
}

/* ---- merge -------------------------------------------------------------------------------- */

static uint32_t str(struct fc_batch *b, const char *s)
{
    uint32_t id;

    assert_int_equal(fc_dict_cstring(b, s, &id), FC_OK);
    return id;
}

static uint32_t loc_of(struct fc_batch *b, uint32_t mapping, const char *fn, const char *file,
                       int64_t line)
{
    struct fc_function f = {.name = str(b, fn), .filename = str(b, file)};
    struct fc_location l = {.mapping = mapping};
    struct fc_line ln = {.line = line};
    uint32_t id;

    assert_int_equal(fc_dict_function(b, &f, &ln.function), FC_OK);
    assert_int_equal(fc_dict_location(b, &l, &ln, 1, &id), FC_OK);
    return id;
}

static struct fc_profile *cpu_profile(struct fc_batch *b, const char *service, uint32_t origin)
{
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type t = {str(b, "cpu"), str(b, "nanoseconds")};

    assert_non_null(p);
    assert_int_equal(fc_profile_set_sample_types(b, p, &t, 1), FC_OK);
    assert_int_equal(fc_profile_set_label(b, p, "service_name", service), FC_OK);
    p->period_type = t;
    p->period = 10000000;
    p->origin = origin;
    return p;
}

static uint32_t origin_api(struct fc_batch *b)
{
    struct fc_attr a = {.key = str(b, "service.name"), .kind = FC_ATTR_STR};
    struct fc_origin o = {0};
    uint32_t id;

    a.v.str = str(b, "api");
    assert_int_equal(fc_dict_attr(b, &a, &id), FC_OK);
    assert_int_equal(fc_dict_span(b, &id, 1, &o.resource_attrs), FC_OK);
    o.scope_name = str(b, "ebpf");
    assert_int_equal(fc_batch_add_origin(b, &o, &id), FC_OK);
    return id;
}

static void sample(struct fc_batch *b, struct fc_profile *p, const uint32_t *locs, uint32_t n,
                   const struct fc_attr *attrs, uint32_t n_attrs, uint32_t link, int64_t value,
                   const int64_t *ts, uint32_t n_ts)
{
    struct fc_sample s = {.link = link};
    uint32_t ids[4];

    assert_int_equal(fc_dict_stack(b, locs, n, &s.stack), FC_OK);
    for (uint32_t i = 0; i < n_attrs; i++) {
        assert_int_equal(fc_dict_attr(b, &attrs[i], &ids[i]), FC_OK);
    }
    assert_int_equal(fc_dict_span(b, ids, n_attrs, &s.attrs), FC_OK);
    assert_int_equal(fc_profile_add_sample(b, p, &s, &value, ts != NULL ? 0 : 1, ts, n_ts), FC_OK);
}

static struct fc_attr str_attr(struct fc_batch *b, const char *k, const char *v)
{
    struct fc_attr a = {.key = str(b, k), .kind = FC_ATTR_STR};

    a.v.str = str(b, v);
    return a;
}

static struct fc_attr blob_attr(struct fc_batch *b, const char *k, const uint8_t *data)
{
    struct fc_attr a = {.key = str(b, k), .kind = FC_ATTR_BYTES};

    a.v.blob.data = data;
    a.v.blob.len = 2;
    return a;
}

/*
 * A: service api, stacks foo;main (5, thread=t1 + link) and main (3, blob 01 02).
 * B: service web, same origin, stacks bar;main (7, thread=t1 + the same link, bar in
 * libc.so) and main (timestamps 100, 200: counts 2, blob 01 03).
 */
static struct fc_batch *batch_a(void)
{
    static const uint8_t blob[] = {1, 2};
    struct fc_batch *b = fc_batch_new(0);
    struct fc_link lk = {{1, 2, 3}, {4, 5}};
    struct fc_profile *p;
    uint32_t l[2], link;
    struct fc_attr a;

    assert_int_equal(fc_batch_set_tenant(b, "team-a"), FC_OK);
    p = cpu_profile(b, "api", origin_api(b));
    l[0] = loc_of(b, 0, "foo", "a.go", 20);
    l[1] = loc_of(b, 0, "main", "a.go", 10);
    assert_int_equal(fc_dict_link(b, &lk, &link), FC_OK);
    a = str_attr(b, "thread", "t1");
    sample(b, p, l, 2, &a, 1, link, 5, NULL, 0);
    a = blob_attr(b, "blob", blob);
    sample(b, p, l + 1, 1, &a, 1, 0, 3, NULL, 0);
    return b;
}

static struct fc_batch *batch_b(const char *tenant)
{
    static const uint8_t blob[] = {1, 3};
    static const int64_t ts[] = {100, 200};
    struct fc_batch *b = fc_batch_new(0);
    struct fc_link lk = {{1, 2, 3}, {4, 5}};
    struct fc_mapping m = {.memory_start = 0x1000, .memory_limit = 0x2000};
    struct fc_profile *p;
    uint32_t l[2], link, mapping;
    struct fc_attr a;

    assert_int_equal(fc_batch_set_tenant(b, tenant), FC_OK);
    /* Rows in another order than A's: indices differ, values do not. */
    m.filename = str(b, "libc.so");
    assert_int_equal(fc_dict_mapping(b, &m, &mapping), FC_OK);
    l[0] = loc_of(b, mapping, "bar", "b.go", 30);
    l[1] = loc_of(b, 0, "main", "a.go", 10);
    p = cpu_profile(b, "web", origin_api(b));
    assert_int_equal(fc_dict_link(b, &lk, &link), FC_OK);
    a = str_attr(b, "thread", "t1");
    sample(b, p, l, 2, &a, 1, link, 7, NULL, 0);
    a = blob_attr(b, "blob", blob);
    sample(b, p, l + 1, 1, &a, 1, 0, 0, ts, 2);
    return b;
}

/* The frames of a sample's stack, leaf first, as "fn:line;fn:line". */
static void stack_text(const struct fc_batch *b, const struct fc_sample *s, char *out, size_t n)
{
    struct fc_span sp = b->dict.stacks[s->stack].locations;
    size_t at = 0;

    out[0] = '\0';
    for (uint32_t i = 0; i < sp.n && at < n; i++) {
        const struct fc_location *l = &b->dict.locations[fc_span_idx(b, sp)[i]];
        const struct fc_line *ln = &b->dict.lines[l->lines_off];
        at +=
            (size_t)snprintf(out + at, n - at, "%s%s:%lld", i ? ";" : "",
                             fc_str(b, b->dict.functions[ln->function].name), (long long)ln->line);
    }
}

static void test_merge_one_dictionary_exact_totals(void **state)
{
    struct fc_batch *a = batch_a();
    struct fc_batch *b = batch_b("team-a");
    struct fc_batch *m = fc_batch_new(0);
    struct fc_error err = {0};
    const struct fc_profile *p0, *p1;
    const struct fc_attr *x;
    char text[256];

    (void)state;
    assert_int_equal(fc_batch_set_tenant(m, "team-a"), FC_OK);
    assert_int_equal(fc_batch_merge(m, a, &err), FC_OK);
    assert_int_equal(fc_batch_merge(m, b, &err), FC_OK);
    fc_batch_unref(a); /* nothing of the merged batch may point into its sources */
    fc_batch_unref(b);
    assert_int_equal(m->n_profiles, 2);
    /*
     * strings: "", cpu, nanoseconds, service_name, api, service.name, ebpf, foo, a.go,
     * main, thread, t1, blob (A: 13) + web, libc.so, bar, b.go (B's new ones) = 17.
     */
    assert_int_equal(m->dict.n_strings, 17);
    assert_int_equal(m->dict.n_functions, 4); /* zero, foo, main, bar */
    assert_int_equal(m->dict.n_mappings, 2);  /* zero, libc.so */
    assert_int_equal(m->dict.n_locations, 4); /* zero, foo:20, main:10, bar:30 */
    assert_int_equal(m->dict.n_stacks, 4);    /* zero, foo;main, main, bar;main */
    assert_int_equal(m->dict.n_links, 2);     /* zero, the one both use */
    assert_int_equal(m->dict.n_attrs, 5);     /* zero, service.name=api, t1, blob 0102, 0103 */
    assert_int_equal(m->n_origins, 2);        /* zero, and the one both requests share */
    p0 = &m->profiles[0];
    p1 = &m->profiles[1];
    assert_int_equal(fc_profile_total(p0, 0), 8);
    assert_int_equal(fc_profile_total(p1, 0), 9); /* 7 + 2 timestamps */
    assert_string_equal(fc_profile_label(m, p0, "service_name"), "api");
    assert_string_equal(fc_profile_label(m, p1, "service_name"), "web");
    assert_string_equal(fc_str(m, p1->sample_types[0].type), "cpu");
    assert_string_equal(fc_str(m, p1->period_type.unit), "nanoseconds");
    assert_int_equal(p1->period, 10000000);
    assert_int_equal(p0->origin, 1);
    assert_int_equal(p1->origin, 1);
    x = fc_attrs_find(m, m->origins[1].resource_attrs, "service.name");
    assert_non_null(x);
    assert_string_equal(fc_str(m, x->v.str), "api");
    assert_string_equal(fc_str(m, m->origins[1].scope_name), "ebpf");
    /* Stacks, links and sample attributes resolve to the same values as in the sources. */
    stack_text(m, &p0->samples[0], text, sizeof(text));
    assert_string_equal(text, "foo:20;main:10");
    stack_text(m, &p1->samples[0], text, sizeof(text));
    assert_string_equal(text, "bar:30;main:10");
    assert_int_equal(p0->samples[1].stack, p1->samples[1].stack); /* main:10, one row */
    assert_string_equal(
        fc_str(m, m->dict
                      .mappings[m->dict
                                    .locations[fc_span_idx(
                                        m, m->dict.stacks[p1->samples[0].stack].locations)[0]]
                                    .mapping]
                      .filename),
        "libc.so");
    assert_int_equal(p0->samples[0].link, 1);
    assert_int_equal(p1->samples[0].link, 1);
    assert_int_equal(m->dict.links[1].trace_id[2], 3);
    x = fc_attrs_find(m, p1->samples[0].attrs, "thread");
    assert_string_equal(fc_str(m, x->v.str), "t1");
    x = fc_attrs_find(m, p1->samples[1].attrs, "blob");
    assert_int_equal(x->kind, FC_ATTR_BYTES);
    assert_int_equal(x->v.blob.len, 2);
    assert_int_equal(x->v.blob.data[1], 3);
    x = fc_attrs_find(m, p0->samples[1].attrs, "blob");
    assert_int_equal(x->v.blob.data[1], 2);
    assert_int_equal(p1->samples[1].n_ts, 2);
    assert_int_equal(p1->nums[p1->samples[1].ts_off + 1], 200);
    /* The merged batch still interns: an existing row is found. */
    assert_int_equal(str(m, "bar"), m->dict.functions[3].name);
    fc_batch_unref(m);
}

static void test_merge_into_a_request_and_tenants_apart(void **state)
{
    struct fc_batch *a = batch_a();
    struct fc_batch *b = batch_b("team-a");
    struct fc_batch *other = batch_b("team-b");
    struct fc_error err = {0};
    uint32_t strings;

    (void)state;
    fc_batch_set_wire(a, (const uint8_t *)"req", 3, NULL, 0, 1);
    /* Into a request's own batch: A's rows stay where they are, B's are added. */
    strings = a->dict.n_strings;
    assert_int_equal(fc_batch_merge(a, b, &err), FC_OK);
    assert_int_equal(a->dict.n_strings, strings + 4); /* web, libc.so, bar, b.go */
    assert_int_equal(a->n_profiles, 2);
    assert_int_equal(fc_batch_sample_count(a), 4);
    assert_int_equal(fc_profile_total(&a->profiles[0], 0) + fc_profile_total(&a->profiles[1], 0),
                     17);
    assert_null(a->wire.body); /* no longer the request it came as */
    /* Tenants never share a batch. */
    assert_int_equal(fc_batch_merge(a, other, &err), FC_EINVAL);
    assert_int_equal(a->n_profiles, 2);
    /* Merging some profiles only. */
    {
        uint32_t which = 1;
        struct fc_batch *m = fc_batch_new(0);
        assert_int_equal(fc_batch_set_tenant(m, "team-a"), FC_OK);
        assert_int_equal(fc_batch_merge_profiles(m, a, &which, 1, &err), FC_OK);
        assert_int_equal(m->n_profiles, 1);
        assert_string_equal(fc_profile_label(m, &m->profiles[0], "service_name"), "web");
        assert_int_equal(fc_profile_total(&m->profiles[0], 0), 9);
        fc_batch_unref(m);
    }
    fc_batch_unref(a);
    fc_batch_unref(b);
    fc_batch_unref(other);
}

static void test_merge_over_budget_keeps_dst(void **state)
{
    struct fc_batch *dst = fc_batch_new(48 * 1024);
    struct fc_batch *big = batch_a();
    struct fc_error err = {0};
    char name[64];
    int rc = FC_OK;

    (void)state;
    assert_int_equal(fc_batch_set_tenant(dst, "team-a"), FC_OK);
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "a-rather-long-function-name-%d", i);
        str(big, name);
    }
    rc = fc_batch_merge(dst, big, &err);
    assert_int_equal(rc, FC_ETOOBIG);
    assert_int_equal(dst->n_profiles, 0);
    assert_int_equal(dst->n_origins, 1);
    fc_batch_unref(dst);
    fc_batch_unref(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_budget_refuses_and_flags),
        cmocka_unit_test(test_arena_realloc_keeps_contents),
        cmocka_unit_test(test_dictionary_interns_and_zero_is_unset),
        cmocka_unit_test(test_many_strings_survive_rehash),
        cmocka_unit_test(test_labels_stay_sorted_and_replace),
        cmocka_unit_test(test_timestamps_only_samples_count_one_each),
        cmocka_unit_test(test_clone_is_deep_and_independent),
        cmocka_unit_test(test_refcount_frees_once),
        cmocka_unit_test(test_budget_makes_builders_fail_cleanly),
        cmocka_unit_test(test_merge_one_dictionary_exact_totals),
        cmocka_unit_test(test_merge_into_a_request_and_tenants_apart),
        cmocka_unit_test(test_merge_over_budget_keeps_dst),
    };
    return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
