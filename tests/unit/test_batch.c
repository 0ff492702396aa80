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
    };
    return cmocka_run_group_tests_name("batch", tests, NULL, NULL);
}
