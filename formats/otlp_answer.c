#include "formats/otlp_answer.h"

#include "core/arena.h"
#include "formats/json.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdio.h>
#include <string.h>

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceResponse
    PbResponse;

/* Answers are read from at most 64 KiB of body; the JSON tree of one fits in this. */
#define JSON_ARENA_BUDGET (4u << 20)
/* The longest delay a Duration can name that still fits int64 ns (about 285 years). */
#define MAX_DELAY_SECONDS 9000000000LL

/* Copies peer text for a log line: cut to the field, control characters as spaces. */
static void copy_text(char *dst, size_t size, const char *src, size_t len)
{
    size_t n = len < size - 1 ? len : size - 1;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[i] = (c < 0x20 || c == 0x7f) ? ' ' : (char)c;
    }
    dst[n] = '\0';
}

static int64_t delay_ns(int64_t seconds, int64_t nanos)
{
    if (seconds < 0 || (seconds == 0 && nanos < 0)) {
        return 0;
    }
    if (seconds > MAX_DELAY_SECONDS) {
        seconds = MAX_DELAY_SECONDS;
    }
    if (nanos < 0 || nanos > 999999999) {
        nanos = 0; /* out of Duration's range: the seconds alone */
    }
    return seconds * 1000000000LL + nanos;
}

static bool is_retry_info(const char *type_url, size_t len)
{
    /* Any's type_url is "<host>/<full name>"; only the name after the last '/' matters. */
    static const char name[] = "google.rpc.RetryInfo";
    size_t n = sizeof(name) - 1;

    return len >= n && memcmp(type_url + len - n, name, n) == 0 &&
           (len == n || type_url[len - n - 1] == '/');
}

/* ---- protobuf ---------------------------------------------------------------------------- */

static int malformed(struct fc_error *err, const char *what)
{
    return fc_errorf(err, FC_EPROTO, "%s: malformed protobuf", what);
}

/* google.rpc.RetryInfo { Duration retry_delay = 1 { int64 seconds = 1; int32 nanos = 2; } } */
static int decode_retry_info(const uint8_t *data, size_t len, struct fc_rpc_status *st,
                             struct fc_error *err)
{
    struct fc_pb r, d;
    struct fc_pb_field f;
    int64_t seconds = 0, nanos = 0;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return malformed(err, "RetryInfo");
        }
        if (f.number != 1) {
            continue;
        }
        if (f.wire != FC_PB_LEN) {
            return malformed(err, "RetryInfo.retry_delay");
        }
        fc_pb_init(&d, f.data, f.len);
        while (!fc_pb_done(&d)) {
            struct fc_pb_field g;
            if (fc_pb_next(&d, &g) != 0) {
                return malformed(err, "RetryInfo.retry_delay");
            }
            if ((g.number == 1 || g.number == 2) && g.wire != FC_PB_VARINT) {
                return malformed(err, "RetryInfo.retry_delay");
            }
            if (g.number == 1) {
                seconds = fc_pb_i64(g.varint);
            } else if (g.number == 2) {
                nanos = (int32_t)(uint32_t)g.varint; /* int32: the low 32 bits */
            }
        }
    }
    st->has_retry_info = true;
    st->retry_delay_ns = delay_ns(seconds, nanos);
    return FC_OK;
}

/* google.protobuf.Any { string type_url = 1; bytes value = 2; } */
static int decode_any(const uint8_t *data, size_t len, struct fc_rpc_status *st,
                      struct fc_error *err)
{
    struct fc_pb r;
    struct fc_pb_field f;
    const uint8_t *type_url = NULL, *value = NULL;
    size_t type_len = 0, value_len = 0;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return malformed(err, "Status.details");
        }
        if ((f.number == 1 || f.number == 2) && f.wire != FC_PB_LEN) {
            return malformed(err, "Status.details");
        }
        if (f.number == 1) {
            type_url = f.data;
            type_len = f.len;
        } else if (f.number == 2) {
            value = f.data;
            value_len = f.len;
        }
    }
    if (type_url != NULL && is_retry_info((const char *)type_url, type_len)) {
        return decode_retry_info(value, value_len, st, err);
    }
    return FC_OK; /* another detail (ErrorInfo, DebugInfo, ...): not ours to read */
}

int fc_rpc_status_decode(const uint8_t *data, size_t len, struct fc_rpc_status *st,
                         struct fc_error *err)
{
    struct fc_pb r;
    struct fc_pb_field f;
    int rc;

    memset(st, 0, sizeof(*st));
    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return malformed(err, "Status");
        }
        switch (f.number) {
        case 1:
            if (f.wire != FC_PB_VARINT) {
                return malformed(err, "Status.code");
            }
            st->code = (int32_t)(uint32_t)f.varint;
            break;
        case 2:
            if (f.wire != FC_PB_LEN) {
                return malformed(err, "Status.message");
            }
            copy_text(st->message, sizeof(st->message), (const char *)f.data, f.len);
            break;
        case 3:
            if (f.wire != FC_PB_LEN) {
                return malformed(err, "Status.details");
            }
            if ((rc = decode_any(f.data, f.len, st, err)) != FC_OK) {
                return rc;
            }
            break;
        default:
            break; /* unknown fields are skipped */
        }
    }
    return FC_OK;
}

int fc_otlp_partial_decode(const uint8_t *data, size_t len, struct fc_partial_success *ps,
                           struct fc_error *err)
{
    struct fc_pb r, p;
    struct fc_pb_field f, g;

    memset(ps, 0, sizeof(*ps));
    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return malformed(err, "ExportProfilesServiceResponse");
        }
        if (f.number != 1) {
            continue;
        }
        if (f.wire != FC_PB_LEN) {
            return malformed(err, "ExportProfilesServiceResponse.partial_success");
        }
        /* A repeated occurrence of a message field merges into the first. */
        ps->present = true;
        fc_pb_init(&p, f.data, f.len);
        while (!fc_pb_done(&p)) {
            if (fc_pb_next(&p, &g) != 0) {
                return malformed(err, "ExportProfilesPartialSuccess");
            }
            if (g.number == 1) {
                if (g.wire != FC_PB_VARINT) {
                    return malformed(err, "ExportProfilesPartialSuccess.rejected_profiles");
                }
                ps->rejected_profiles = fc_pb_i64(g.varint);
            } else if (g.number == 2) {
                if (g.wire != FC_PB_LEN) {
                    return malformed(err, "ExportProfilesPartialSuccess.error_message");
                }
                copy_text(ps->message, sizeof(ps->message), (const char *)g.data, g.len);
            }
        }
    }
    return FC_OK;
}

/* ---- JSON -------------------------------------------------------------------------------- */

static bool blank(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (text[i] != ' ' && text[i] != '\t' && text[i] != '\r' && text[i] != '\n') {
            return false;
        }
    }
    return true;
}

/* proto3 JSON Duration: "-"? digits ("." 1-9 digits)? "s". */
static int parse_json_duration(const struct fc_json *v, int64_t *out)
{
    const char *s;
    int64_t seconds = 0, nanos = 0;
    bool neg = false;
    size_t i = 0, digits = 0;

    if (v == NULL || v->type != FC_JSON_STRING) {
        return -1;
    }
    s = v->str;
    if (s[i] == '-') {
        neg = true;
        i++;
    }
    for (; s[i] >= '0' && s[i] <= '9'; i++, digits++) {
        if (seconds <= MAX_DELAY_SECONDS) {
            seconds = seconds * 10 + (s[i] - '0');
        }
    }
    if (digits == 0) {
        return -1;
    }
    if (s[i] == '.') {
        int64_t scale = 100000000;
        size_t frac = 0;
        for (i++; s[i] >= '0' && s[i] <= '9'; i++, frac++) {
            if (frac >= 9) {
                return -1;
            }
            nanos += (s[i] - '0') * scale;
            scale /= 10;
        }
        if (frac == 0) {
            return -1;
        }
    }
    if (s[i] != 's' || s[i + 1] != '\0') {
        return -1;
    }
    *out = neg ? 0 : delay_ns(seconds, nanos);
    return 0;
}

static int json_detail(struct fc_arena *a, const struct fc_json *d, struct fc_rpc_status *st,
                       struct fc_error *err)
{
    const struct fc_json *type, *value;

    if (d->type != FC_JSON_OBJECT) {
        return fc_errorf(err, FC_EPROTO, "Status.details: an element is not an object");
    }
    /* proto3 JSON: the Any's type in "@type", the message's own fields beside it. */
    type = fc_json_get(d, "@type");
    if (type != NULL && type->type == FC_JSON_STRING) {
        if (is_retry_info(type->str, type->len)) {
            int64_t ns = 0;
            const struct fc_json *delay = fc_json_get(d, "retryDelay");
            if (delay == NULL) {
                delay = fc_json_get(d, "retry_delay");
            }
            if (delay != NULL && parse_json_duration(delay, &ns) != 0) {
                return fc_errorf(err, FC_EPROTO, "RetryInfo.retryDelay: not a duration");
            }
            st->has_retry_info = true;
            st->retry_delay_ns = ns;
        }
        return FC_OK;
    }
    /* The plain mapping of Any as a message: typeUrl and base64 value. */
    type = fc_json_get(d, "typeUrl");
    if (type == NULL) {
        type = fc_json_get(d, "type_url");
    }
    value = fc_json_get(d, "value");
    if (type != NULL && type->type == FC_JSON_STRING && is_retry_info(type->str, type->len)) {
        uint8_t *bytes = NULL;
        size_t n = 0;
        if (value != NULL) {
            if (value->type != FC_JSON_STRING ||
                fc_base64_decode(a, value->str, value->len, &bytes, &n) != FC_OK) {
                return fc_errorf(err, FC_EPROTO, "Status.details.value: not base64");
            }
        }
        return decode_retry_info(bytes, n, st, err);
    }
    return FC_OK;
}

int fc_rpc_status_decode_json(const char *text, size_t len, struct fc_rpc_status *st,
                              struct fc_error *err)
{
    struct fc_arena *a;
    struct fc_json *root;
    const struct fc_json *v;
    int rc;

    memset(st, 0, sizeof(*st));
    if (blank(text, len)) {
        return FC_OK;
    }
    a = fc_arena_new(JSON_ARENA_BUDGET);
    rc = fc_json_parse(a, text, len, &root, err);
    if (rc == FC_OK && root->type != FC_JSON_OBJECT) {
        rc = fc_errorf(err, FC_EPROTO, "Status: not a JSON object");
    }
    if (rc == FC_OK && (v = fc_json_get(root, "code")) != NULL) {
        int64_t code;
        if (fc_json_int64(v, &code) != 0 || code < INT32_MIN || code > INT32_MAX) {
            rc = fc_errorf(err, FC_EPROTO, "Status.code: not an int32");
        } else {
            st->code = (int32_t)code;
        }
    }
    if (rc == FC_OK && (v = fc_json_get(root, "message")) != NULL) {
        if (v->type != FC_JSON_STRING) {
            rc = fc_errorf(err, FC_EPROTO, "Status.message: not a string");
        } else {
            copy_text(st->message, sizeof(st->message), v->str, v->len);
        }
    }
    if (rc == FC_OK && (v = fc_json_get(root, "details")) != NULL && v->type != FC_JSON_NULL) {
        if (v->type != FC_JSON_ARRAY) {
            rc = fc_errorf(err, FC_EPROTO, "Status.details: not an array");
        }
        for (size_t i = 0; rc == FC_OK && i < v->n; i++) {
            rc = json_detail(a, v->items[i], st, err);
        }
    }
    fc_arena_free(a);
    return rc;
}

int fc_otlp_partial_decode_json(const char *text, size_t len, struct fc_partial_success *ps,
                                struct fc_error *err)
{
    struct fc_arena *a;
    PbResponse *resp = NULL;
    int rc;

    memset(ps, 0, sizeof(*ps));
    if (blank(text, len)) {
        return FC_OK;
    }
    a = fc_arena_new(JSON_ARENA_BUDGET);
    rc = fc_pbjson_read(
        a,
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_response__descriptor,
        text, len, (void **)&resp, err);
    if (rc == FC_OK && resp->partial_success != NULL) {
        const char *m = resp->partial_success->error_message;
        ps->present = true;
        ps->rejected_profiles = resp->partial_success->rejected_profiles;
        if (m != NULL) {
            copy_text(ps->message, sizeof(ps->message), m, strlen(m));
        }
    }
    fc_arena_free(a);
    return rc;
}
