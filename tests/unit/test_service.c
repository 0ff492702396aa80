/*
 * The pipeline graph: one receiver instance per id however many pipelines
 * use it, one exporter instance per id, and fan-out that delivers a batch to
 * every exporter exactly once and frees it once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "config/load.h"
#include "core/metrics.h"
#include "core/service.h"
#include "formats/folded.h"
#include "tests/unit/fc_test.h"

struct fixture {
    struct fc_arena *arena;
    struct fc_service *svc;
    char dir[64];
    char a[128], b[128], c[128];
};

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    struct fc_diag d;
    char yaml[2048];
    struct fc_node *root;

    snprintf(f->dir, sizeof(f->dir), "/tmp/fc-service-XXXXXX");
    if (mkdtemp(f->dir) == NULL) {
        return -1;
    }
    snprintf(f->a, sizeof(f->a), "%s/a.txt", f->dir);
    snprintf(f->b, sizeof(f->b), "%s/b.txt", f->dir);
    snprintf(f->c, sizeof(f->c), "%s/c.txt", f->dir);
    /* pprof feeds two pipelines; debug/a is in both, debug/b and debug/c in one each. */
    snprintf(yaml, sizeof(yaml),
             "receivers:\n"
             "  pprof:\n"
             "    endpoint: 127.0.0.1:0\n"
             "exporters:\n"
             "  debug/a: {verbosity: detailed, path: %s}\n"
             "  debug/b: {verbosity: detailed, path: %s}\n"
             "  debug/c: {verbosity: detailed, path: %s}\n"
             "service:\n"
             "  telemetry: {metrics: {level: none}}\n"
             "  pipelines:\n"
             "    profiles/one: {receivers: [pprof], exporters: [debug/a, debug/b]}\n"
             "    profiles/two: {receivers: [pprof], exporters: [debug/a, debug/c]}\n",
             f->a, f->b, f->c);
    f->arena = fc_arena_new(0);
    fc_diag_init(&d);
    root = fc_test_yaml(f->arena, yaml, &d);
    f->svc = root ? fc_service_build(root, &d) : NULL;
    fc_diag_print(&d, stderr);
    fc_diag_release(&d);
    *state = f;
    return f->svc ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *f = *state;

    fc_service_free(f->svc);
    fc_arena_free(f->arena);
    unlink(f->a);
    unlink(f->b);
    unlink(f->c);
    rmdir(f->dir);
    fc_metrics_reset();
    free(f);
    return 0;
}

static int count_lines(const char *path, const char *needle)
{
    size_t len;
    char *text = (char *)fc_test_read(path, &len);
    int n = 0;

    if (text == NULL) {
        return -1;
    }
    for (char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    free(text);
    return n;
}

static struct fc_batch *folded_batch(const char *text)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    struct fc_error err = {0};

    fc_dict_cstring(b, "samples", &vt.type);
    fc_dict_cstring(b, "count", &vt.unit);
    fc_profile_set_sample_types(b, p, &vt, 1);
    fc_profile_set_label(b, p, "service_name", "fanout-test");
    assert_int_equal(fc_folded_decode(b, p, text, strlen(text), false, 0, &err), FC_OK);
    return b;
}

static void test_sharing_rules(void **state)
{
    struct fixture *f = *state;

    /* One receiver and three exporters, however many pipelines name them. */
    assert_non_null(fc_service_receiver(f->svc, "pprof"));
    assert_non_null(fc_service_exporter(f->svc, "debug/a"));
    assert_non_null(fc_service_exporter(f->svc, "debug/b"));
    assert_non_null(fc_service_exporter(f->svc, "debug/c"));
    assert_null(fc_service_exporter(f->svc, "debug"));
    assert_int_equal(fc_service_processor_count(f->svc), 0);
}

static void test_fanout_delivers_once_per_exporter_and_frees_once(void **state)
{
    struct fixture *f = *state;
    struct fc_error err = {0};
    struct fc_batch *b = folded_batch("main;work;leaf 7\nmain;idle 3\n");
    struct fc_receiver *r = fc_service_receiver(f->svc, "pprof");

    assert_int_equal(fc_service_start(f->svc, &err), FC_OK);
    assert_int_equal(fc_receiver_consume(r, b, &err), FC_OK);
    /* Every exporter has released its reference: only the caller's is left. */
    assert_int_equal(atomic_load(&b->refs), 1);
    fc_batch_unref(b);
    fc_service_shutdown(f->svc);
    /* debug/a is in both pipelines, so it saw the batch twice (once per pipeline). */
    assert_int_equal(count_lines(f->a, "main;work;leaf 7\n"), 2);
    assert_int_equal(count_lines(f->b, "main;work;leaf 7\n"), 1);
    assert_int_equal(count_lines(f->c, "main;work;leaf 7\n"), 1);
    assert_int_equal(count_lines(f->b, "service_name=\"fanout-test\""), 1);
    assert_int_equal(
        fc_metrics_value("flamecol_receiver_accepted_profile_samples_total", "receiver=\"pprof\""),
        2);
    assert_int_equal(
        fc_metrics_value("flamecol_exporter_sent_profile_samples_total", "exporter=\"debug/a\""),
        4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sharing_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fanout_delivers_once_per_exporter_and_frees_once,
                                        setup, teardown),
    };
    return cmocka_run_group_tests_name("service", tests, NULL, NULL);
}
