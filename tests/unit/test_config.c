/* Config: loading, ${env:...}, merging, units, schema binding and graph errors with line:col. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/load.h"
#include "config/units.h"
#include "core/buf.h"
#include "core/metrics.h"
#include "core/service.h"
#include "tests/unit/fc_test.h"

/* Loads and builds; returns the diagnostics (the service is freed). */
static void check(const char *yaml, struct fc_diag *diag)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_node *root;

    fc_diag_init(diag);
    root = fc_test_yaml(a, yaml, diag);
    if (root != NULL) {
        fc_service_free(fc_service_build(root, diag));
    }
    fc_arena_free(a);
    fc_metrics_reset();
}

static const char valid[] = "receivers:\n"
                            "  pprof:\n"
                            "    endpoint: 127.0.0.1:0\n"
                            "exporters:\n"
                            "  debug:\n"
                            "service:\n"
                            "  pipelines:\n"
                            "    profiles:\n"
                            "      receivers: [pprof]\n"
                            "      exporters: [debug]\n";

static void test_valid_config_has_no_diagnostics(void **state)
{
    struct fc_diag d;

    (void)state;
    check(valid, &d);
    assert_int_equal(d.n, 0);
    fc_diag_release(&d);
}

static void expect_error(const char *yaml, const char *where, const char *what)
{
    struct fc_diag d;

    check(yaml, &d);
    if (!fc_test_diag_has(&d, where) || !fc_test_diag_has(&d, what)) {
        fc_diag_print(&d, stderr);
        fail_msg("expected an error at %s containing \"%s\"", where, what);
    }
    assert_true(fc_diag_has_errors(&d));
    fc_diag_release(&d);
}

static void test_unknown_key_names_line_and_column(void **state)
{
    (void)state;
    expect_error("exporters:\n"
                 "  debug:\n"
                 "    verbosty: basic\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    profiles: {receivers: [pprof], exporters: [debug]}\n"
                 "receivers: {pprof: }\n",
                 "test.yaml:3:5:", "unknown key 'verbosty'");
}

static void test_wrong_type_and_enum(void **state)
{
    (void)state;
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "    max_labels: many\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:17:", "expected an integer");
    expect_error("receivers: {pprof: }\n"
                 "exporters:\n"
                 "  debug:\n"
                 "    verbosity: loud\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:4:16:", "not one of basic|detailed");
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "    endpoint: [a, b]\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:15:", "expected a string, got a list");
}

static void test_unknown_component_type(void **state)
{
    (void)state;
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "  kafka/in:\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:3:", "unknown receiver type 'kafka'");
}

static void test_pipeline_needs_receivers_and_exporters(void **state)
{
    (void)state;
    expect_error("receivers: {pprof: }\n"
                 "exporters: {debug: }\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    profiles:\n"
                 "      exporters: [debug]\n",
                 "test.yaml:6:7:", "needs at least one receiver");
    expect_error("receivers: {pprof: }\n"
                 "exporters: {debug: }\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    profiles:\n"
                 "      receivers: [pprof]\n"
                 "      exporters: []\n",
                 "test.yaml:7:18:", "needs at least one exporter");
}

static void test_listed_twice_and_undefined(void **state)
{
    (void)state;
    /* The same check guards processors, receivers and exporters alike. */
    expect_error("receivers: {pprof: }\n"
                 "exporters: {debug: }\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    profiles:\n"
                 "      receivers: [pprof, pprof]\n"
                 "      exporters: [debug]\n",
                 "test.yaml:6:26:", "'pprof' is listed twice");
    expect_error("receivers: {pprof: }\n"
                 "exporters: {debug: }\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    profiles:\n"
                 "      receivers: [pprof]\n"
                 "      processors: [relabel/x]\n"
                 "      exporters: [debug]\n",
                 "test.yaml:7:20:", "processor 'relabel/x' is not defined in processors:");
}

static void test_unused_component_is_a_warning(void **state)
{
    struct fc_diag d;

    (void)state;
    check("receivers: {pprof: }\n"
          "exporters:\n"
          "  debug:\n"
          "  debug/spare:\n"
          "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
          &d);
    assert_false(fc_diag_has_errors(&d));
    assert_true(fc_test_diag_has(&d, "test.yaml:4:3:"));
    assert_true(fc_test_diag_has(&d, "exporters.debug/spare is defined but not used"));
    fc_diag_release(&d);
}

static void test_only_profiles_pipelines_and_known_top_keys(void **state)
{
    (void)state;
    expect_error("receivers: {pprof: }\n"
                 "exporters: {debug: }\n"
                 "service:\n"
                 "  pipelines:\n"
                 "    traces: {receivers: [pprof], exporters: [debug]}\n",
                 "test.yaml:5:5:", "profiles pipelines only");
    expect_error("connectors: {forward: }\n"
                 "receivers: {pprof: }\n",
                 "test.yaml:1:1:", "unknown top-level key 'connectors'");
    /* extensions: only the auth type (core/extensions.c) */
    expect_error("extensions: {health_check: }\n"
                 "receivers: {pprof: }\n",
                 "test.yaml:1:14:", "unknown extension 'health_check'");
}

static void test_yaml_syntax_error_has_position(void **state)
{
    (void)state;
    expect_error("receivers:\n  pprof: [\n", "test.yaml:3:1:", "yaml:");
    expect_error("receivers:\n  pprof:\n  pprof:\n", "test.yaml:3:3:", "duplicate key 'pprof'");
}

static void test_env_expansion(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_node *root;

    (void)state;
    setenv("FC_TEST_PORT", "4041", 1);
    unsetenv("FC_TEST_UNSET");
    fc_diag_init(&d);
    root = fc_test_yaml(a,
                        "a: 127.0.0.1:${env:FC_TEST_PORT}\n"
                        "b: ${env:FC_TEST_UNSET:-fallback}\n"
                        "c: $${env:FC_TEST_PORT}\n"
                        "d: ${FC_TEST_PORT}\n"
                        "e: x${env:FC_TEST_UNSET}y\n",
                        &d);
    assert_non_null(root);
    assert_string_equal(fc_node_get(root, "a")->str, "127.0.0.1:4041");
    assert_string_equal(fc_node_get(root, "b")->str, "fallback");
    assert_string_equal(fc_node_get(root, "c")->str, "${env:FC_TEST_PORT}");
    assert_string_equal(fc_node_get(root, "d")->str, "4041");
    assert_string_equal(fc_node_get(root, "e")->str, "xy");
    assert_false(fc_diag_has_errors(&d));
    assert_true(fc_test_diag_has(&d, "test.yaml:5:4:"));
    assert_true(fc_test_diag_has(&d, "FC_TEST_UNSET is not set"));
    fc_diag_release(&d);
    fc_diag_init(&d);
    assert_null(fc_node_get(fc_test_yaml(a, "x: ${file:/etc/passwd}\n", &d), "nothing"));
    assert_true(fc_test_diag_has(&d, "unsupported config provider 'file'"));
    fc_diag_release(&d);
    fc_arena_free(a);
}

static void test_merge_maps_merge_lists_replace(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_node *x, *y, *m, *list;

    (void)state;
    fc_diag_init(&d);
    x = fc_test_yaml(a, "r: {p: {endpoint: a, max_labels: 5}}\nl: [1, 2, 3]\nk: 1\n", &d);
    y = fc_test_yaml(a, "r: {p: {endpoint: b}, q: {}}\nl: [9]\n", &d);
    m = fc_config_merge(a, x, y);
    assert_string_equal(fc_node_get(fc_node_get(fc_node_get(m, "r"), "p"), "endpoint")->str, "b");
    assert_string_equal(fc_node_get(fc_node_get(fc_node_get(m, "r"), "p"), "max_labels")->str, "5");
    assert_non_null(fc_node_get(fc_node_get(m, "r"), "q"));
    list = fc_node_get(m, "l");
    assert_int_equal(list->n_items, 1);
    assert_string_equal(list->items[0]->str, "9");
    assert_string_equal(fc_node_get(m, "k")->str, "1");
    /* The inputs are unchanged. */
    assert_string_equal(fc_node_get(fc_node_get(fc_node_get(x, "r"), "p"), "endpoint")->str, "a");
    fc_diag_release(&d);
    fc_arena_free(a);
}

static void test_durations_and_sizes(void **state)
{
    int64_t v;
    const char *why;

    (void)state;
    assert_int_equal(fc_parse_duration("10s", &v, &why), 0);
    assert_int_equal(v, 10000000000LL);
    assert_int_equal(fc_parse_duration("5m", &v, &why), 0);
    assert_int_equal(v, 300000000000LL);
    assert_int_equal(fc_parse_duration("30d", &v, &why), 0);
    assert_int_equal(v, 30LL * 86400 * 1000000000LL);
    assert_int_equal(fc_parse_duration("1h30m", &v, &why), 0);
    assert_int_equal(v, 5400LL * 1000000000LL);
    assert_int_equal(fc_parse_duration("250ms", &v, &why), 0);
    assert_int_equal(v, 250000000LL);
    assert_int_equal(fc_parse_duration("0", &v, &why), 0);
    assert_int_equal(v, 0);
    assert_int_equal(fc_parse_duration("10", &v, &why), -1);
    assert_int_equal(fc_parse_duration("10 s", &v, &why), -1);
    assert_int_equal(fc_parse_duration("1y", &v, &why), -1);
    assert_int_equal(fc_parse_size("64MiB", &v, &why), 0);
    assert_int_equal(v, 64LL * 1024 * 1024);
    assert_int_equal(fc_parse_size("1GB", &v, &why), 0);
    assert_int_equal(v, 1000000000LL);
    assert_int_equal(fc_parse_size("512", &v, &why), 0);
    assert_int_equal(v, 512);
    assert_int_equal(fc_parse_size("16KiB", &v, &why), 0);
    assert_int_equal(v, 16384);
    assert_int_equal(fc_parse_size("12XB", &v, &why), -1);
    assert_int_equal(fc_parse_size("-1MiB", &v, &why), -1);
}

static void test_bad_duration_in_config_has_position(void **state)
{
    (void)state;
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "    retry_after: soon\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:18:", "invalid duration \"soon\"");
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "    max_request_body_size: lots\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:28:", "invalid size \"lots\"");
}

static void test_component_create_errors_point_at_component(void **state)
{
    (void)state;
    expect_error("receivers:\n"
                 "  pprof:\n"
                 "    endpoint: nowhere\n"
                 "exporters: {debug: }\n"
                 "service: {pipelines: {profiles: {receivers: [pprof], exporters: [debug]}}}\n",
                 "test.yaml:3:5:", "receivers.pprof: endpoint \"nowhere\": expected host:port");
}

static void test_print_config_dump_round_trips(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_buf out;
    struct fc_node *root, *again;

    (void)state;
    fc_diag_init(&d);
    fc_buf_init(&out, 0);
    root = fc_test_yaml(a, valid, &d);
    fc_config_dump(root, &out);
    again = fc_test_yaml(a, (const char *)out.data, &d);
    assert_non_null(again);
    assert_string_equal(
        fc_node_get(fc_node_get(fc_node_get(again, "receivers"), "pprof"), "endpoint")->str,
        "127.0.0.1:0");
    assert_int_equal(d.n, 0);
    fc_buf_release(&out);
    fc_diag_release(&d);
    fc_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_config_has_no_diagnostics),
        cmocka_unit_test(test_unknown_key_names_line_and_column),
        cmocka_unit_test(test_wrong_type_and_enum),
        cmocka_unit_test(test_unknown_component_type),
        cmocka_unit_test(test_pipeline_needs_receivers_and_exporters),
        cmocka_unit_test(test_listed_twice_and_undefined),
        cmocka_unit_test(test_unused_component_is_a_warning),
        cmocka_unit_test(test_only_profiles_pipelines_and_known_top_keys),
        cmocka_unit_test(test_yaml_syntax_error_has_position),
        cmocka_unit_test(test_env_expansion),
        cmocka_unit_test(test_merge_maps_merge_lists_replace),
        cmocka_unit_test(test_durations_and_sizes),
        cmocka_unit_test(test_bad_duration_in_config_has_position),
        cmocka_unit_test(test_component_create_errors_point_at_component),
        cmocka_unit_test(test_print_config_dump_round_trips),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
