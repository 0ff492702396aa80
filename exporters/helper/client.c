/*
 * What the network exporters' clients share: the `tls` block, Retry-After,
 * and the classification of HTTP and gRPC answers (OTLP spec, reference
 * otel.md §1.4, as the Collector's otlphttp / otlp exporters do it).
 */
#include "exporters/helper/client.h"

#include "core/timeutil.h"
#include "formats/otlp_answer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const struct fc_field fc_tls_client_fields[] = {
    {"insecure", FC_FIELD_BOOL, "false", offsetof(struct fc_tls_client_config, insecure),
     "gRPC: plaintext, no TLS (HTTP: the endpoint's scheme decides)"},
    {"ca_file", FC_FIELD_STR, "", offsetof(struct fc_tls_client_config, ca_file),
     "PEM file of the CAs that sign the peer's certificate; empty: the system's CAs"},
    {"cert_file", FC_FIELD_STR, "", offsetof(struct fc_tls_client_config, cert_file),
     "PEM client certificate, for peers that require one (mTLS); with key_file"},
    {"key_file", FC_FIELD_STR, "", offsetof(struct fc_tls_client_config, key_file),
     "PEM private key of cert_file"},
    {"insecure_skip_verify", FC_FIELD_BOOL, "false",
     offsetof(struct fc_tls_client_config, insecure_skip_verify),
     "accept any certificate the peer shows (encrypted, not authenticated)"},
    {"server_name_override", FC_FIELD_STR, "",
     offsetof(struct fc_tls_client_config, server_name_override),
     "the name to ask for (SNI) and to verify in the peer's certificate, instead of the "
     "endpoint's host"},
    {NULL},
};

static int readable(const char *key, const char *path, struct fc_error *err)
{
    FILE *f;

    if (path == NULL || path[0] == '\0') {
        return FC_OK;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        return fc_errorf(err, FC_ECONFIG, "tls.%s: cannot read %s: %s", key, path, strerror(errno));
    }
    fclose(f);
    return FC_OK;
}

int fc_tls_client_check(const struct fc_tls_client_config *tls, struct fc_error *err)
{
    bool cert = tls->cert_file != NULL && tls->cert_file[0] != '\0';
    bool key = tls->key_file != NULL && tls->key_file[0] != '\0';
    int rc;

    if (cert != key) {
        return fc_errorf(err, FC_ECONFIG, "tls: cert_file and key_file go together (%s is empty)",
                         cert ? "key_file" : "cert_file");
    }
    if ((rc = readable("ca_file", tls->ca_file, err)) != FC_OK ||
        (rc = readable("cert_file", tls->cert_file, err)) != FC_OK ||
        (rc = readable("key_file", tls->key_file, err)) != FC_OK) {
        return rc;
    }
    return FC_OK;
}

/* ---- Retry-After ------------------------------------------------------------------------- */

/* The most a peer may make us wait (a day); a larger delay-seconds reads as this. */
#define MAX_RETRY_AFTER_S 86400LL

static const char *const month_names[12] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                            "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
static const char *const day_names[7] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const day_long[7] = {"Sunday",   "Monday", "Tuesday", "Wednesday",
                                        "Thursday", "Friday", "Saturday"};

/* Reads exactly n digits. */
static bool digits(const char **s, int n, int *out)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if ((*s)[i] < '0' || (*s)[i] > '9') {
            return false;
        }
        v = v * 10 + ((*s)[i] - '0');
    }
    *s += n;
    *out = v;
    return true;
}

static bool lit(const char **s, const char *word)
{
    size_t n = strlen(word);

    if (strncmp(*s, word, n) != 0) {
        return false;
    }
    *s += n;
    return true;
}

static bool month(const char **s, int *mon)
{
    for (int i = 0; i < 12; i++) {
        if (lit(s, month_names[i])) {
            *mon = i;
            return true;
        }
    }
    return false;
}

static bool day_name(const char **s, const char *const *names)
{
    for (int i = 0; i < 7; i++) {
        if (lit(s, names[i])) {
            return true;
        }
    }
    return false;
}

/* "08:49:37" */
static bool clock_time(const char **s, struct tm *tm)
{
    return digits(s, 2, &tm->tm_hour) && lit(s, ":") && digits(s, 2, &tm->tm_min) && lit(s, ":") &&
           digits(s, 2, &tm->tm_sec) && tm->tm_hour < 24 && tm->tm_min < 60 && tm->tm_sec <= 60;
}

/*
 * RFC 9110 §5.6.7: IMF-fixdate "Sun, 06 Nov 1994 08:49:37 GMT", and the
 * obsolete forms a recipient must accept: RFC 850 "Sunday, 06-Nov-94
 * 08:49:37 GMT" and asctime "Sun Nov  6 08:49:37 1994". Unix seconds or -1.
 */
static int64_t parse_http_date(const char *s, int64_t now_s)
{
    struct tm tm;
    const char *p = s;
    int year;

    memset(&tm, 0, sizeof(tm));
    if (day_name(&p, day_names) && lit(&p, ", ")) {
        /* IMF-fixdate */
        if (!(digits(&p, 2, &tm.tm_mday) && lit(&p, " ") && month(&p, &tm.tm_mon) && lit(&p, " ") &&
              digits(&p, 4, &year) && lit(&p, " ") && clock_time(&p, &tm) && lit(&p, " GMT"))) {
            return -1;
        }
    } else if ((p = s, day_name(&p, day_names)) && lit(&p, " ")) {
        /* asctime: the day of month is space-padded */
        if (!(month(&p, &tm.tm_mon) && lit(&p, " "))) {
            return -1;
        }
        if (*p == ' ') {
            p++;
            if (!digits(&p, 1, &tm.tm_mday)) {
                return -1;
            }
        } else if (!digits(&p, 2, &tm.tm_mday)) {
            return -1;
        }
        if (!(lit(&p, " ") && clock_time(&p, &tm) && lit(&p, " ") && digits(&p, 4, &year))) {
            return -1;
        }
    } else if ((p = s, day_name(&p, day_long)) && lit(&p, ", ")) {
        /* RFC 850: a two-digit year more than 50 years ahead is in the past century. */
        int yy;
        time_t now = (time_t)now_s;
        struct tm now_tm;
        if (!(digits(&p, 2, &tm.tm_mday) && lit(&p, "-") && month(&p, &tm.tm_mon) && lit(&p, "-") &&
              digits(&p, 2, &yy) && lit(&p, " ") && clock_time(&p, &tm) && lit(&p, " GMT"))) {
            return -1;
        }
        gmtime_r(&now, &now_tm);
        year = (now_tm.tm_year + 1900) / 100 * 100 + yy;
        if (year > now_tm.tm_year + 1900 + 50) {
            year -= 100;
        }
    } else {
        return -1;
    }
    if (*p != '\0' || tm.tm_mday < 1 || tm.tm_mday > 31) {
        return -1;
    }
    tm.tm_year = year - 1900;
    return (int64_t)timegm(&tm);
}

int64_t fc_parse_retry_after(const char *value, int64_t now_s)
{
    char buf[64];
    size_t start = 0, end;
    int64_t secs = 0;

    if (value == NULL) {
        return -1;
    }
    /* Header values may come with surrounding white space. */
    end = strlen(value);
    while (start < end && (value[start] == ' ' || value[start] == '\t')) {
        start++;
    }
    while (end > start && (value[end - 1] == ' ' || value[end - 1] == '\t' ||
                           value[end - 1] == '\r' || value[end - 1] == '\n')) {
        end--;
    }
    if (end == start || end - start >= sizeof(buf)) {
        return -1;
    }
    memcpy(buf, value + start, end - start);
    buf[end - start] = '\0';
    if (buf[0] >= '0' && buf[0] <= '9') {
        for (const char *p = buf; *p != '\0'; p++) {
            if (*p < '0' || *p > '9') {
                return -1;
            }
            if (secs < MAX_RETRY_AFTER_S) {
                secs = secs * 10 + (*p - '0');
            }
        }
    } else {
        int64_t when = parse_http_date(buf, now_s);
        if (when < 0) {
            return -1;
        }
        secs = when > now_s ? when - now_s : 0; /* a date in the past: now */
    }
    if (secs > MAX_RETRY_AFTER_S) {
        secs = MAX_RETRY_AFTER_S;
    }
    return secs * FC_NS_PER_SEC;
}

/* ---- answers ----------------------------------------------------------------------------- */

static void result_reset(struct fc_send_result *res)
{
    memset(res, 0, sizeof(*res));
    res->outcome = FC_SEND_OK;
}

/* Text a peer answered (a plain-text error page), kept when it is printable. */
static bool printable_text(const uint8_t *body, size_t len)
{
    if (len == 0) {
        return false;
    }
    for (size_t i = 0; i < len && i < 256; i++) {
        if (body[i] < 0x20 && body[i] != '\n' && body[i] != '\r' && body[i] != '\t') {
            return false;
        }
    }
    return true;
}

static void set_message(struct fc_send_result *res, const char *prefix, const char *text,
                        size_t len)
{
    size_t n = (size_t)snprintf(res->message, sizeof(res->message), "%s", prefix);

    for (size_t i = 0; i < len && n + 1 < sizeof(res->message); i++) {
        unsigned char c = (unsigned char)text[i];
        res->message[n++] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    res->message[n < sizeof(res->message) ? n : sizeof(res->message) - 1] = '\0';
}

void fc_http_result(long status, const char *retry_after, const uint8_t *body, size_t len,
                    bool json, struct fc_send_result *res)
{
    struct fc_rpc_status st;
    struct fc_error derr = {0};
    char prefix[32];
    int rc;

    result_reset(res);
    if (status >= 200 && status < 300) {
        return;
    }
    snprintf(res->error_type, sizeof(res->error_type), "http_%ld", status);
    switch (status) {
    case 429:
    case 503:
        res->outcome = FC_SEND_RETRY;
        if (retry_after != NULL) {
            int64_t ns = fc_parse_retry_after(retry_after, fc_now_ns() / FC_NS_PER_SEC);
            res->retry_after_ns = ns > 0 ? ns : 0;
        }
        break;
    case 502:
    case 504:
        res->outcome = FC_SEND_RETRY;
        break;
    default:
        res->outcome = FC_SEND_PERMANENT;
        break;
    }
    /* The body of an error is a google.rpc.Status in the request's encoding (OTLP). */
    snprintf(prefix, sizeof(prefix), "HTTP %ld: ", status);
    rc = json ? fc_rpc_status_decode_json((const char *)body, len, &st, &derr)
              : fc_rpc_status_decode(body, len, &st, &derr);
    if (rc == FC_OK && st.message[0] != '\0') {
        set_message(res, prefix, st.message, strlen(st.message));
    } else if (printable_text(body, len)) {
        set_message(res, prefix, (const char *)body, len);
    } else {
        snprintf(res->message, sizeof(res->message), "HTTP %ld", status);
    }
}

static const char *const grpc_code_names[] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

void fc_grpc_result(int code, const char *message, const uint8_t *details, size_t details_len,
                    struct fc_send_result *res)
{
    struct fc_rpc_status st;
    struct fc_error derr = {0};
    bool retry_info = false;
    const char *text = message;

    result_reset(res);
    if (code == 0) {
        return;
    }
    if (code > 0 && code < (int)(sizeof(grpc_code_names) / sizeof(grpc_code_names[0]))) {
        snprintf(res->error_type, sizeof(res->error_type), "grpc_%s", grpc_code_names[code]);
    } else {
        snprintf(res->error_type, sizeof(res->error_type), "grpc_%d", code);
    }
    if (details != NULL && details_len > 0 &&
        fc_rpc_status_decode(details, details_len, &st, &derr) == FC_OK) {
        retry_info = st.has_retry_info;
        if (retry_info) {
            /* Capped as Retry-After is: a peer must not park a consumer for years. */
            res->retry_after_ns = st.retry_delay_ns < MAX_RETRY_AFTER_S * FC_NS_PER_SEC
                                      ? st.retry_delay_ns
                                      : MAX_RETRY_AFTER_S * FC_NS_PER_SEC;
        }
        if (text == NULL || text[0] == '\0') {
            text = st.message;
        }
    }
    switch (code) {
    case 1:  /* CANCELLED */
    case 4:  /* DEADLINE_EXCEEDED */
    case 10: /* ABORTED */
    case 11: /* OUT_OF_RANGE */
    case 14: /* UNAVAILABLE */
    case 15: /* DATA_LOSS */
        res->outcome = FC_SEND_RETRY;
        break;
    case 8: /* RESOURCE_EXHAUSTED: the peer says when it can take more, or never */
        res->outcome = retry_info ? FC_SEND_RETRY : FC_SEND_PERMANENT;
        break;
    default:
        res->outcome = FC_SEND_PERMANENT;
        break;
    }
    if (res->outcome != FC_SEND_RETRY) {
        res->retry_after_ns = 0;
    }
    {
        char prefix[64];
        snprintf(prefix, sizeof(prefix), "%s: ", res->error_type + 5); /* after "grpc_" */
        set_message(res, prefix, text ? text : "", text ? strlen(text) : 0);
    }
}
