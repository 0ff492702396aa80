/*
 * What the network exporters' clients share (exporters/helper/client.h) and
 * the decoders of peers' answers (formats/otlp_answer.h).
 *
 * References: RFC 9110 §5.6.7 / §10.2.3 for Retry-After (the RFC's own
 * example date, Sun, 06 Nov 1994 08:49:37 GMT = unix 784111777); the OTLP
 * spec's status tables (reference otel.md §1.4) for classification; and
 * protobuf bytes written here byte by byte from the .proto field numbers
 * (google.rpc.Status: code=1, message=2, details=3; Any: type_url=1,
 * value=2; RetryInfo: retry_delay=1; Duration: seconds=1, nanos=2;
 * ExportProfilesServiceResponse: partial_success=1; ExportProfilesPartialSuccess:
 * rejected_profiles=1, error_message=2), never with flamecol's encoders.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>

#include "core/timeutil.h"
#include "exporters/helper/client.h"
#include "formats/otlp_answer.h"

#define S FC_NS_PER_SEC
#define RFC_DATE_UNIX 784111777LL /* Sun, 06 Nov 1994 08:49:37 GMT */

/* ---- protobuf written by hand ----------------------------------------------------------- */

#define RETRY_INFO_URL "type.googleapis.com/google.rpc.RetryInfo" /* 40 bytes */

/* Status{code=14, message="busy", details=[Any{RetryInfo{retry_delay{2s, 500000000ns}}}]} */
static const uint8_t status_unavailable_retry[] = {
    0x08, 0x0e,                        /* code = 14 */
    0x12, 0x04, 'b',  'u',  's',  'y', /* message */
    0x1a, 0x36,                        /* details[0]: Any, 54 bytes */
    0x0a, 0x28,                        /* type_url, 40 bytes */
    't',  'y',  'p',  'e',  '.',  'g',  'o', 'o', 'g', 'l', 'e',  'a',  'p', 'i', 's',
    '.',  'c',  'o',  'm',  '/',  'g',  'o', 'o', 'g', 'l', 'e',  '.',  'r', 'p', 'c',
    '.',  'R',  'e',  't',  'r',  'y',  'I', 'n', 'f', 'o', 0x12, 0x0a, /* value: RetryInfo, 10
                                                                           bytes */
    0x0a, 0x08,                         /* retry_delay: Duration, 8 bytes */
    0x08, 0x02,                         /* seconds = 2 */
    0x10, 0x80, 0xca, 0xb5, 0xee, 0x01, /* nanos = 500000000 */
};

/* Builds Status{code, message, details=[Any{type_url, value=RetryInfo{seconds, nanos}}]}. */
static size_t status_bytes(uint8_t *out, int code, const char *msg, const char *type_url,
                           int seconds, int nanos)
{
    uint8_t dur[16], ri[20], any[128];
    size_t nd = 0, nr = 0, na = 0, n = 0;

    if (seconds) {
        dur[nd++] = 0x08;
        dur[nd++] = (uint8_t)seconds; /* < 128 in these tests */
    }
    if (nanos) {
        uint32_t v = (uint32_t)nanos;
        dur[nd++] = 0x10;
        while (v >= 0x80) {
            dur[nd++] = (uint8_t)(v | 0x80);
            v >>= 7;
        }
        dur[nd++] = (uint8_t)v;
    }
    ri[nr++] = 0x0a;
    ri[nr++] = (uint8_t)nd;
    memcpy(ri + nr, dur, nd);
    nr += nd;
    if (type_url != NULL) {
        any[na++] = 0x0a;
        any[na++] = (uint8_t)strlen(type_url);
        memcpy(any + na, type_url, strlen(type_url));
        na += strlen(type_url);
        any[na++] = 0x12;
        any[na++] = (uint8_t)nr;
        memcpy(any + na, ri, nr);
        na += nr;
    }
    if (code) {
        out[n++] = 0x08;
        out[n++] = (uint8_t)code;
    }
    if (msg != NULL) {
        out[n++] = 0x12;
        out[n++] = (uint8_t)strlen(msg);
        memcpy(out + n, msg, strlen(msg));
        n += strlen(msg);
    }
    if (type_url != NULL) {
        out[n++] = 0x1a;
        out[n++] = (uint8_t)na;
        memcpy(out + n, any, na);
        n += na;
    }
    return n;
}

/* ---- Retry-After ------------------------------------------------------------------------- */

static void test_retry_after_seconds(void **state)
{
    (void)state;
    assert_int_equal(fc_parse_retry_after("120", 0), 120 * S);
    assert_int_equal(fc_parse_retry_after("0", 0), 0);
    assert_int_equal(fc_parse_retry_after("2", 1700000000), 2 * S);
    assert_int_equal(fc_parse_retry_after(" 7 ", 0), 7 * S);
    assert_int_equal(fc_parse_retry_after("007", 0), 7 * S);
    /* A day at most: a peer cannot park a request for ever. */
    assert_int_equal(fc_parse_retry_after("99999999999999999999999", 0), 86400 * S);
}

static void test_retry_after_garbage(void **state)
{
    static const char *bad[] = {
        "",
        " ",
        "-5",
        "1.5",
        "12a",
        "abc",
        "0x10",
        "+3",
        "1 2",
        "Sun, 06 Nov 1994 08:49:37 UTC",    /* the zone must be GMT */
        "Sun, 6 Nov 1994 08:49:37 GMT",     /* IMF-fixdate has two-digit days */
        "Sun, 06 Now 1994 08:49:37 GMT",    /* no such month */
        "Sun, 06 Nov 1994 08:49:37 GMT x",  /* trailing text */
        "Sun, 06 Nov 1994 25:49:37 GMT",    /* hour 25 */
        "Sun, 32 Nov 1994 08:49:37 GMT",    /* day 32 */
        "Xyz, 06 Nov 1994 08:49:37 GMT",    /* no such day */
        "Sunday, 06-Nov-1994 08:49:37 GMT", /* RFC 850 has two-digit years */
        "Sun Nov 6 08:49:37 1994",          /* asctime pads the day with a space */
    };

    (void)state;
    assert_int_equal(fc_parse_retry_after(NULL, 0), -1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (fc_parse_retry_after(bad[i], RFC_DATE_UNIX) != -1) {
            fail_msg("accepted Retry-After \"%s\"", bad[i]);
        }
    }
}

static void test_retry_after_http_date(void **state)
{
    int64_t now = RFC_DATE_UNIX - 120;

    (void)state;
    /* The three forms of RFC 9110 §5.6.7, all naming the same instant. */
    assert_int_equal(fc_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now), 120 * S);
    assert_int_equal(fc_parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now), 120 * S);
    assert_int_equal(fc_parse_retry_after("Sun Nov  6 08:49:37 1994", now), 120 * S);
    /* A date in the past: retry now. */
    assert_int_equal(fc_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", RFC_DATE_UNIX + 50), 0);
    assert_int_equal(fc_parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", RFC_DATE_UNIX), 0);
    /* 2026-11-23T04:00:00Z = 1795406400 (20780 days x 86400 + 4 h). */
    assert_int_equal(fc_parse_retry_after("Mon, 23 Nov 2026 04:00:02 GMT", 1795406400), 2 * S);
    /* RFC 850 two-digit years: within 50 years ahead of now, else the past century. */
    assert_int_equal(fc_parse_retry_after("Monday, 23-Nov-26 04:00:05 GMT", 1795406400), 5 * S);
}

/* ---- HTTP answers ------------------------------------------------------------------------ */

static void expect_http(long status, enum fc_send_outcome want)
{
    struct fc_send_result res;
    char type[32];

    fc_http_result(status, NULL, NULL, 0, false, &res);
    if (res.outcome != want) {
        fail_msg("HTTP %ld: outcome %d, want %d", status, res.outcome, want);
    }
    snprintf(type, sizeof(type), "http_%ld", status);
    if (want != FC_SEND_OK) {
        assert_string_equal(res.error_type, type);
    }
}

static void test_http_status_classes(void **state)
{
    static const long ok[] = {200, 201, 202, 204, 299};
    static const long retry[] = {429, 502, 503, 504};
    static const long permanent[] = {100, 301, 302, 304, 400, 401, 403, 404, 405,
                                     408, 409, 413, 415, 422, 500, 501, 505, 599};

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        expect_http(ok[i], FC_SEND_OK);
    }
    for (size_t i = 0; i < sizeof(retry) / sizeof(retry[0]); i++) {
        expect_http(retry[i], FC_SEND_RETRY);
    }
    for (size_t i = 0; i < sizeof(permanent) / sizeof(permanent[0]); i++) {
        expect_http(permanent[i], FC_SEND_PERMANENT);
    }
}

static void test_http_retry_after(void **state)
{
    struct fc_send_result res;

    (void)state;
    /* Honoured on 429 and 503 only (the Collector's otlphttp exporter). */
    fc_http_result(429, "3", NULL, 0, false, &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 3 * S);
    fc_http_result(503, "120", NULL, 0, false, &res);
    assert_int_equal(res.retry_after_ns, 120 * S);
    fc_http_result(502, "5", NULL, 0, false, &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 0);
    fc_http_result(504, "5", NULL, 0, false, &res);
    assert_int_equal(res.retry_after_ns, 0);
    fc_http_result(400, "5", NULL, 0, false, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    assert_int_equal(res.retry_after_ns, 0);
    /* Unreadable: the backoff decides. */
    fc_http_result(429, "soon", NULL, 0, false, &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 0);
    /* An HTTP-date a minute ahead of the clock. */
    {
        char date[64];
        time_t t = (time_t)(fc_now_ns() / S + 60);
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", &tm);
        fc_http_result(503, date, NULL, 0, false, &res);
        assert_true(res.retry_after_ns > 55 * S && res.retry_after_ns <= 60 * S);
    }
}

static void test_http_messages(void **state)
{
    struct fc_send_result res;
    uint8_t body[256];
    size_t n;
    const char *json = "{\"code\": 3, \"message\": \"bad profile 7\"}";
    const char *text = "upstream connect error\n";
    const uint8_t binary[] = {0xff, 0x00, 0x01, 0x02};

    (void)state;
    n = status_bytes(body, 3, "invalid dictionary", NULL, 0, 0);
    fc_http_result(400, NULL, body, n, false, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    assert_non_null(strstr(res.message, "invalid dictionary"));
    fc_http_result(400, NULL, (const uint8_t *)json, strlen(json), true, &res);
    assert_non_null(strstr(res.message, "bad profile 7"));
    fc_http_result(502, NULL, (const uint8_t *)text, strlen(text), false, &res);
    assert_non_null(strstr(res.message, "upstream connect error"));
    assert_null(strchr(res.message, '\n'));
    fc_http_result(500, NULL, binary, sizeof(binary), false, &res);
    assert_string_equal(res.message, "HTTP 500");
    fc_http_result(200, NULL, NULL, 0, false, &res);
    assert_int_equal(res.outcome, FC_SEND_OK);
    assert_string_equal(res.error_type, "");
}

/* ---- gRPC answers ------------------------------------------------------------------------ */

static void test_grpc_codes(void **state)
{
    /* OTLP: retryable CANCELLED, DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE,
     * DATA_LOSS; RESOURCE_EXHAUSTED only with RetryInfo; every other code permanent. */
    static const struct {
        int code;
        const char *name;
        enum fc_send_outcome outcome;
    } table[] = {
        {0, "", FC_SEND_OK},
        {1, "CANCELLED", FC_SEND_RETRY},
        {2, "UNKNOWN", FC_SEND_PERMANENT},
        {3, "INVALID_ARGUMENT", FC_SEND_PERMANENT},
        {4, "DEADLINE_EXCEEDED", FC_SEND_RETRY},
        {5, "NOT_FOUND", FC_SEND_PERMANENT},
        {6, "ALREADY_EXISTS", FC_SEND_PERMANENT},
        {7, "PERMISSION_DENIED", FC_SEND_PERMANENT},
        {8, "RESOURCE_EXHAUSTED", FC_SEND_PERMANENT},
        {9, "FAILED_PRECONDITION", FC_SEND_PERMANENT},
        {10, "ABORTED", FC_SEND_RETRY},
        {11, "OUT_OF_RANGE", FC_SEND_RETRY},
        {12, "UNIMPLEMENTED", FC_SEND_PERMANENT},
        {13, "INTERNAL", FC_SEND_PERMANENT},
        {14, "UNAVAILABLE", FC_SEND_RETRY},
        {15, "DATA_LOSS", FC_SEND_RETRY},
        {16, "UNAUTHENTICATED", FC_SEND_PERMANENT},
    };
    struct fc_send_result res;
    char type[48];

    (void)state;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        fc_grpc_result(table[i].code, "m", NULL, 0, &res);
        if (res.outcome != table[i].outcome) {
            fail_msg("gRPC code %d: outcome %d, want %d", table[i].code, res.outcome,
                     table[i].outcome);
        }
        if (table[i].code != 0) {
            snprintf(type, sizeof(type), "grpc_%s", table[i].name);
            assert_string_equal(res.error_type, type);
        }
        assert_int_equal(res.retry_after_ns, 0);
    }
    fc_grpc_result(99, "from the future", NULL, 0, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    assert_string_equal(res.error_type, "grpc_99");
}

static void test_grpc_retry_info(void **state)
{
    struct fc_send_result res;
    uint8_t det[256];
    size_t n;

    (void)state;
    /* RESOURCE_EXHAUSTED with RetryInfo: throttled, retry after its delay. */
    n = status_bytes(det, 8, "slow down", RETRY_INFO_URL, 3, 0);
    fc_grpc_result(8, "slow down", det, n, &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 3 * S);
    /* Without RetryInfo (another detail only): permanent. */
    n = status_bytes(det, 8, "too big", "type.googleapis.com/google.rpc.ErrorInfo", 3, 0);
    fc_grpc_result(8, "too big", det, n, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    assert_int_equal(res.retry_after_ns, 0);
    fc_grpc_result(8, "too big", NULL, 0, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    /* UNAVAILABLE with RetryInfo 2.5 s (the fixed bytes above). */
    fc_grpc_result(14, "", status_unavailable_retry, sizeof(status_unavailable_retry), &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 2 * S + 500000000);
    assert_non_null(strstr(res.message, "busy")); /* the status message when the call had none */
    /* Undecodable details: the code alone decides. */
    fc_grpc_result(14, "x", (const uint8_t *)"\x1a\x7f", 2, &res);
    assert_int_equal(res.outcome, FC_SEND_RETRY);
    assert_int_equal(res.retry_after_ns, 0);
    /* A permanent code never carries a delay. */
    n = status_bytes(det, 3, "bad", RETRY_INFO_URL, 3, 0);
    fc_grpc_result(3, "bad", det, n, &res);
    assert_int_equal(res.outcome, FC_SEND_PERMANENT);
    assert_int_equal(res.retry_after_ns, 0);
}

/* ---- decoders ---------------------------------------------------------------------------- */

static void test_status_decode(void **state)
{
    struct fc_rpc_status st;
    struct fc_error err = {0};
    /* code = -1 (int32: ten-byte varint), message "é", unknown fields 9 (varint),
     * 10 (fixed64), 11 (fixed32), 12 (bytes) skipped */
    const uint8_t odd[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x12,
                           0x02, 0xc3, 0xa9, 0x48, 0x05, 0x51, 1,    2,    3,    4,    5,    6,
                           7,    8,    0x5d, 1,    2,    3,    4,    0x62, 0x01, 'z'};
    const uint8_t ctrl[] = {0x12, 0x03, 'a', '\n', 'b'};
    uint8_t buf[256];
    size_t n;

    (void)state;
    assert_int_equal(
        fc_rpc_status_decode(status_unavailable_retry, sizeof(status_unavailable_retry), &st, &err),
        FC_OK);
    assert_int_equal(st.code, 14);
    assert_string_equal(st.message, "busy");
    assert_true(st.has_retry_info);
    assert_int_equal(st.retry_delay_ns, 2 * S + 500000000);

    assert_int_equal(fc_rpc_status_decode(odd, sizeof(odd), &st, &err), FC_OK);
    assert_int_equal(st.code, -1);
    assert_string_equal(st.message, "\xc3\xa9");
    assert_false(st.has_retry_info);

    assert_int_equal(fc_rpc_status_decode(ctrl, sizeof(ctrl), &st, &err), FC_OK);
    assert_string_equal(st.message, "a b");

    assert_int_equal(fc_rpc_status_decode(NULL, 0, &st, &err), FC_OK);
    assert_int_equal(st.code, 0);

    /* Type URLs: any host, the full name after the last '/'. */
    n = status_bytes(buf, 14, NULL, "example.com/google.rpc.RetryInfo", 1, 0);
    assert_int_equal(fc_rpc_status_decode(buf, n, &st, &err), FC_OK);
    assert_true(st.has_retry_info);
    n = status_bytes(buf, 14, NULL, "type.googleapis.com/xgoogle.rpc.RetryInfo", 1, 0);
    assert_int_equal(fc_rpc_status_decode(buf, n, &st, &err), FC_OK);
    assert_false(st.has_retry_info);
}

static void test_status_decode_malformed(void **state)
{
    struct fc_rpc_status st;
    struct fc_error err = {0};
    const uint8_t truncated[] = {0x12, 0x05, 'a', 'b'};
    const uint8_t code_as_bytes[] = {0x0a, 0x01, 0x0e};
    const uint8_t message_as_varint[] = {0x10, 0x01};
    const uint8_t group[] = {0x0b, 0x0c};
    const uint8_t bad_varint[] = {0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                  0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    const uint8_t field_zero[] = {0x00, 0x01};
    /* details[0] = Any{RetryInfo, value = retry_delay as a varint} */
    uint8_t bad_retry[64];
    size_t n = 0;

    (void)state;
    assert_int_equal(fc_rpc_status_decode(truncated, sizeof(truncated), &st, &err), FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode(code_as_bytes, sizeof(code_as_bytes), &st, &err),
                     FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode(message_as_varint, sizeof(message_as_varint), &st, &err),
                     FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode(group, sizeof(group), &st, &err), FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode(bad_varint, sizeof(bad_varint), &st, &err), FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode(field_zero, sizeof(field_zero), &st, &err), FC_EPROTO);
    bad_retry[n++] = 0x1a;
    bad_retry[n++] = 2 + 40 + 2 + 2;
    bad_retry[n++] = 0x0a;
    bad_retry[n++] = 40;
    memcpy(bad_retry + n, RETRY_INFO_URL, 40);
    n += 40;
    bad_retry[n++] = 0x12;
    bad_retry[n++] = 2;
    bad_retry[n++] = 0x08; /* retry_delay (field 1) as a varint */
    bad_retry[n++] = 0x05;
    assert_int_equal(fc_rpc_status_decode(bad_retry, n, &st, &err), FC_EPROTO);
}

static void test_retry_delay_bounds(void **state)
{
    struct fc_rpc_status st;
    struct fc_error err = {0};
    /* Status{details=[Any{RetryInfo{Duration{seconds=-5}}}]} */
    uint8_t neg[80], huge[80];
    size_t n = 0, m = 0;
    const uint8_t dneg[] = {0x08, 0xfb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
    /* seconds = 315576000000 (Duration's maximum), nanos = 999999999 */
    const uint8_t dhuge[] = {0x08, 0x80, 0xbc, 0xae, 0xce, 0x97, 0x09,
                             0x10, 0xff, 0x93, 0xeb, 0xdc, 0x03};

    (void)state;
    neg[n++] = 0x1a;
    neg[n++] = (uint8_t)(2 + 40 + 2 + 2 + sizeof(dneg));
    neg[n++] = 0x0a;
    neg[n++] = 40;
    memcpy(neg + n, RETRY_INFO_URL, 40);
    n += 40;
    neg[n++] = 0x12;
    neg[n++] = (uint8_t)(2 + sizeof(dneg));
    neg[n++] = 0x0a;
    neg[n++] = (uint8_t)sizeof(dneg);
    memcpy(neg + n, dneg, sizeof(dneg));
    n += sizeof(dneg);
    assert_int_equal(fc_rpc_status_decode(neg, n, &st, &err), FC_OK);
    assert_true(st.has_retry_info);
    assert_int_equal(st.retry_delay_ns, 0);

    huge[m++] = 0x1a;
    huge[m++] = (uint8_t)(2 + 40 + 2 + 2 + sizeof(dhuge));
    huge[m++] = 0x0a;
    huge[m++] = 40;
    memcpy(huge + m, RETRY_INFO_URL, 40);
    m += 40;
    huge[m++] = 0x12;
    huge[m++] = (uint8_t)(2 + sizeof(dhuge));
    huge[m++] = 0x0a;
    huge[m++] = (uint8_t)sizeof(dhuge);
    memcpy(huge + m, dhuge, sizeof(dhuge));
    m += sizeof(dhuge);
    assert_int_equal(fc_rpc_status_decode(huge, m, &st, &err), FC_OK);
    assert_true(st.retry_delay_ns > 0); /* no overflow into a negative delay */
}

static void test_partial_decode(void **state)
{
    struct fc_partial_success ps;
    struct fc_error err = {0};
    /* {partial_success{rejected_profiles=3, error_message="bad"}} */
    const uint8_t three[] = {0x0a, 0x07, 0x08, 0x03, 0x12, 0x03, 'b', 'a', 'd'};
    /* {partial_success{}}: present, nothing rejected */
    const uint8_t empty_ps[] = {0x0a, 0x00};
    /* unknown field 5 then partial_success{rejected_profiles=300} */
    const uint8_t big[] = {0x28, 0x01, 0x0a, 0x03, 0x08, 0xac, 0x02};
    const uint8_t truncated[] = {0x0a, 0x05, 0x08, 0x03};
    const uint8_t rejected_as_bytes[] = {0x0a, 0x03, 0x0a, 0x01, 0x03};

    (void)state;
    assert_int_equal(fc_otlp_partial_decode(three, sizeof(three), &ps, &err), FC_OK);
    assert_true(ps.present);
    assert_int_equal(ps.rejected_profiles, 3);
    assert_string_equal(ps.message, "bad");
    assert_int_equal(fc_otlp_partial_decode(empty_ps, sizeof(empty_ps), &ps, &err), FC_OK);
    assert_true(ps.present);
    assert_int_equal(ps.rejected_profiles, 0);
    assert_int_equal(fc_otlp_partial_decode(NULL, 0, &ps, &err), FC_OK);
    assert_false(ps.present);
    assert_int_equal(fc_otlp_partial_decode(big, sizeof(big), &ps, &err), FC_OK);
    assert_int_equal(ps.rejected_profiles, 300);
    assert_int_equal(fc_otlp_partial_decode(truncated, sizeof(truncated), &ps, &err), FC_EPROTO);
    assert_int_equal(
        fc_otlp_partial_decode(rejected_as_bytes, sizeof(rejected_as_bytes), &ps, &err), FC_EPROTO);
}

static void test_json_decoders(void **state)
{
    struct fc_partial_success ps;
    struct fc_rpc_status st;
    struct fc_error err = {0};
    const char *p1 = "{\"partialSuccess\":{\"rejectedProfiles\":\"2\",\"errorMessage\":\"x\"}}";
    const char *p2 = "{\"partial_success\":{\"rejected_profiles\":4}, \"unknown\": [1]}";
    const char *s1 = "{\"code\":8,\"message\":\"later\",\"details\":[{\"@type\":"
                     "\"type.googleapis.com/google.rpc.RetryInfo\",\"retryDelay\":\"1.5s\"}]}";
    /* the plain mapping: value = base64 of RetryInfo{retry_delay{seconds=3}} = 0a 02 08 03 */
    const char *s2 = "{\"code\":14,\"details\":[{\"typeUrl\":"
                     "\"type.googleapis.com/google.rpc.RetryInfo\",\"value\":\"CgIIAw==\"}]}";
    const char *s3 = "{\"code\":8,\"details\":[{\"@type\":"
                     "\"type.googleapis.com/google.rpc.ErrorInfo\",\"reason\":\"x\"}]}";

    (void)state;
    assert_int_equal(fc_otlp_partial_decode_json(p1, strlen(p1), &ps, &err), FC_OK);
    assert_true(ps.present);
    assert_int_equal(ps.rejected_profiles, 2);
    assert_string_equal(ps.message, "x");
    assert_int_equal(fc_otlp_partial_decode_json(p2, strlen(p2), &ps, &err), FC_OK);
    assert_int_equal(ps.rejected_profiles, 4);
    assert_int_equal(fc_otlp_partial_decode_json("{}", 2, &ps, &err), FC_OK);
    assert_false(ps.present);
    assert_int_equal(fc_otlp_partial_decode_json(" \n", 2, &ps, &err), FC_OK);
    assert_false(ps.present);
    assert_int_equal(fc_otlp_partial_decode_json("{\"partialSuccess\":", 18, &ps, &err), FC_EPROTO);

    assert_int_equal(fc_rpc_status_decode_json(s1, strlen(s1), &st, &err), FC_OK);
    assert_int_equal(st.code, 8);
    assert_string_equal(st.message, "later");
    assert_true(st.has_retry_info);
    assert_int_equal(st.retry_delay_ns, 1500000000);
    assert_int_equal(fc_rpc_status_decode_json(s2, strlen(s2), &st, &err), FC_OK);
    assert_true(st.has_retry_info);
    assert_int_equal(st.retry_delay_ns, 3 * S);
    assert_int_equal(fc_rpc_status_decode_json(s3, strlen(s3), &st, &err), FC_OK);
    assert_false(st.has_retry_info);
    assert_int_equal(fc_rpc_status_decode_json("[1]", 3, &st, &err), FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode_json("{\"code\":\"x\"}", 12, &st, &err), FC_EPROTO);
    assert_int_equal(fc_rpc_status_decode_json("{\"details\":[{\"@type\":\"" RETRY_INFO_URL
                                               "\",\"retryDelay\":\"soon\"}]}",
                                               strlen("{\"details\":[{\"@type\":\"" RETRY_INFO_URL
                                                      "\",\"retryDelay\":\"soon\"}]}"),
                                               &st, &err),
                     FC_EPROTO);
}

/* ---- tls ---------------------------------------------------------------------------------- */

static void test_tls_check(void **state)
{
    struct fc_tls_client_config tls = {
        .ca_file = "", .cert_file = "", .key_file = "", .server_name_override = ""};
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_tls_client_check(&tls, &err), FC_OK);
    tls.cert_file = "/etc/hostname";
    assert_int_equal(fc_tls_client_check(&tls, &err), FC_ECONFIG);
    assert_non_null(strstr(err.msg, "key_file"));
    tls.key_file = "/etc/hostname";
    assert_int_equal(fc_tls_client_check(&tls, &err), FC_OK);
    tls.ca_file = "/nonexistent/ca.pem";
    assert_int_equal(fc_tls_client_check(&tls, &err), FC_ECONFIG);
    assert_non_null(strstr(err.msg, "ca_file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_retry_after_seconds),
        cmocka_unit_test(test_retry_after_garbage),
        cmocka_unit_test(test_retry_after_http_date),
        cmocka_unit_test(test_http_status_classes),
        cmocka_unit_test(test_http_retry_after),
        cmocka_unit_test(test_http_messages),
        cmocka_unit_test(test_grpc_codes),
        cmocka_unit_test(test_grpc_retry_info),
        cmocka_unit_test(test_status_decode),
        cmocka_unit_test(test_status_decode_malformed),
        cmocka_unit_test(test_retry_delay_bounds),
        cmocka_unit_test(test_partial_decode),
        cmocka_unit_test(test_json_decoders),
        cmocka_unit_test(test_tls_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
