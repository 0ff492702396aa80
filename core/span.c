#include "core/span.h"

#include "core/buf.h"

#include <stdlib.h>
#include <string.h>

/* ---- ids ---------------------------------------------------------------------------------- */

bool fc_id_is_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

static void put_u64(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(v >> (56 - 8 * i));
    }
}

/* 1-20 decimal digits that fit in 64 bits. */
static bool parse_decimal(const char *s, size_t len, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 20) {
        return false;
    }
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned)(s[i] - '0');
        if (d > 9 || v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

/* A 64-bit id: 16 hex digits, else decimal. */
static bool parse_id64(const char *s, size_t len, uint8_t out[8])
{
    uint64_t v;

    if (len == 16) {
        return fc_hex_decode(s, len, out, 8);
    }
    if (!parse_decimal(s, len, &v)) {
        return false;
    }
    put_u64(out, v);
    return true;
}

bool fc_span_id_parse(const char *s, size_t len, uint8_t out[8])
{
    return parse_id64(s, len, out) && !fc_id_is_zero(out, 8);
}

bool fc_trace_id_parse(const char *s, size_t len, uint8_t out[16])
{
    if (len == 32) {
        if (!fc_hex_decode(s, len, out, 16)) {
            return false;
        }
    } else {
        memset(out, 0, 8);
        if (!parse_id64(s, len, out + 8)) {
            return false;
        }
    }
    return !fc_id_is_zero(out, 16);
}

bool fc_span_id_attr(const struct fc_batch *b, const struct fc_attr *a, uint8_t out[8])
{
    if (a->kind == FC_ATTR_STR) {
        return fc_span_id_parse(fc_str(b, a->v.str), b->dict.str_len[a->v.str], out);
    }
    if (a->kind == FC_ATTR_INT && a->v.i != 0) {
        put_u64(out, (uint64_t)a->v.i); /* a pprof number label */
        return true;
    }
    return false;
}

bool fc_trace_id_attr(const struct fc_batch *b, const struct fc_attr *a, uint8_t out[16])
{
    return a->kind == FC_ATTR_STR &&
           fc_trace_id_parse(fc_str(b, a->v.str), b->dict.str_len[a->v.str], out);
}

bool fc_sample_span(const struct fc_batch *b, const struct fc_sample *s, uint8_t span[8],
                    uint8_t trace[16])
{
    const struct fc_attr *a;

    memset(trace, 0, 16);
    if (s->link != 0) {
        memcpy(span, b->dict.links[s->link].span_id, 8);
        memcpy(trace, b->dict.links[s->link].trace_id, 16);
        return !fc_id_is_zero(span, 8);
    }
    a = fc_attrs_find(b, s->attrs, "span_id");
    if (a == NULL || !fc_span_id_attr(b, a, span)) {
        return false;
    }
    a = fc_attrs_find(b, s->attrs, "trace_id");
    if (a != NULL && !fc_trace_id_attr(b, a, trace)) {
        memset(trace, 0, 16);
    }
    return true;
}
