/*
 * The pprof receiver's answers to the back-pressure contract: a retryable
 * refusal from the pipeline becomes 429 / 503 with Retry-After, permanent
 * ones their 4xx without it, each as Pyroscope's JSON {code, message}.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "receivers/pprof/pprof.h"

static const char *header(const struct fc_http_response *resp, const char *name)
{
    for (int i = 0; i < resp->n_headers; i++) {
        if (strcmp(resp->headers[i][0], name) == 0) {
            return resp->headers[i][1];
        }
    }
    return NULL;
}

static void answer(int code, int *status, char *retry_after, char *body)
{
    struct pprof_config cfg = {.retry_after = 7000000000LL};
    struct fc_receiver self = {.id = "pprof"};
    struct pprof_receiver r = {.self = &self, .cfg = &cfg};
    struct fc_http_response resp = {0};
    struct fc_error err = {0};
    const char *ra;

    fc_buf_init(&resp.body, 0);
    fc_errorf(&err, code, "queue \"full\"");
    pprof_error(&r, &resp, 0, &err);
    *status = resp.status;
    ra = header(&resp, "Retry-After");
    snprintf(retry_after, 16, "%s", ra ? ra : "");
    snprintf(body, 256, "%s", (const char *)resp.body.data);
    assert_string_equal(resp.content_type, "application/json");
    for (int i = 0; i < resp.n_headers; i++) {
        free(resp.headers[i][0]);
        free(resp.headers[i][1]);
    }
    fc_buf_release(&resp.body);
}

static void test_back_pressure_and_errors_map_to_status(void **state)
{
    int status;
    char ra[16], body[256];

    (void)state;
    answer(FC_EAGAIN, &status, ra, body);
    assert_int_equal(status, 429);
    assert_string_equal(ra, "7");
    assert_string_equal(body,
                        "{\"code\":\"resource_exhausted\",\"message\":\"queue \\\"full\\\"\"}");
    answer(FC_EUNAVAIL, &status, ra, body);
    assert_int_equal(status, 503);
    assert_string_equal(ra, "7");
    assert_non_null(strstr(body, "\"code\":\"unavailable\""));
    answer(FC_EPROTO, &status, ra, body);
    assert_int_equal(status, 400);
    assert_string_equal(ra, "");
    assert_non_null(strstr(body, "\"code\":\"invalid_argument\""));
    answer(FC_ETOOBIG, &status, ra, body);
    assert_int_equal(status, 413);
    assert_string_equal(ra, "");
    answer(FC_EIO, &status, ra, body);
    assert_int_equal(status, 500);
    assert_non_null(strstr(body, "\"code\":\"internal\""));
}

static void test_retryable_codes(void **state)
{
    (void)state;
    assert_true(fc_err_retryable(FC_EAGAIN));
    assert_true(fc_err_retryable(FC_EUNAVAIL));
    assert_false(fc_err_retryable(FC_EPROTO));
    assert_false(fc_err_retryable(FC_ETOOBIG));
    assert_int_equal(fc_err_grpc_status(FC_EAGAIN), 8);
    assert_int_equal(fc_err_grpc_status(FC_EUNAVAIL), 14);
    assert_int_equal(fc_err_grpc_status(FC_EPROTO), 3);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_back_pressure_and_errors_map_to_status),
        cmocka_unit_test(test_retryable_codes),
    };
    return cmocka_run_group_tests_name("pprof_receiver", tests, NULL, NULL);
}
