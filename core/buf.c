#include "core/buf.h"

#include "core/err.h"
#include "core/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fc_buf_init(struct fc_buf *b, size_t limit)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->limit = limit;
}

void fc_buf_release(struct fc_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void fc_buf_reset(struct fc_buf *b)
{
    b->len = 0;
    if (b->data != NULL) {
        b->data[0] = '\0';
    }
}

int fc_buf_reserve(struct fc_buf *b, size_t extra)
{
    size_t need;
    size_t cap;

    if (extra > SIZE_MAX - b->len - 1) {
        return FC_ETOOBIG;
    }
    need = b->len + extra + 1;
    if (b->limit != 0 && need - 1 > b->limit) {
        return FC_ETOOBIG;
    }
    if (need <= b->cap) {
        return FC_OK;
    }
    cap = b->cap ? b->cap : 256;
    while (cap < need) {
        cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    }
    b->data = fc_xrealloc(b->data, cap);
    b->cap = cap;
    return FC_OK;
}

int fc_buf_append(struct fc_buf *b, const void *p, size_t n)
{
    int rc = fc_buf_reserve(b, n);

    if (rc != FC_OK) {
        return rc;
    }
    if (n > 0) {
        memcpy(b->data + b->len, p, n);
    }
    b->len += n;
    b->data[b->len] = '\0';
    return FC_OK;
}

int fc_buf_puts(struct fc_buf *b, const char *s)
{
    return fc_buf_append(b, s, strlen(s));
}

int fc_buf_printf(struct fc_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;
    int rc;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        return FC_EINVAL;
    }
    rc = fc_buf_reserve(b, (size_t)n);
    if (rc != FC_OK) {
        return rc;
    }
    va_start(ap, fmt);
    vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return FC_OK;
}

int fc_buf_json_escape(struct fc_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    int rc = FC_OK;

    for (size_t i = 0; i < n && rc == FC_OK; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"':
            rc = fc_buf_append(b, "\\\"", 2);
            break;
        case '\\':
            rc = fc_buf_append(b, "\\\\", 2);
            break;
        case '\n':
            rc = fc_buf_append(b, "\\n", 2);
            break;
        case '\r':
            rc = fc_buf_append(b, "\\r", 2);
            break;
        case '\t':
            rc = fc_buf_append(b, "\\t", 2);
            break;
        default:
            if (c < 0x20) {
                char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                rc = fc_buf_append(b, esc, sizeof(esc));
            } else {
                rc = fc_buf_append(b, &s[i], 1);
            }
        }
    }
    return rc;
}

uint8_t *fc_buf_detach(struct fc_buf *b, size_t *len)
{
    uint8_t *d = b->data;

    if (len != NULL) {
        *len = b->len;
    }
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    return d;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

bool fc_hex_decode(const char *s, size_t len, uint8_t *out, size_t n)
{
    if (len != 2 * n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return false;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return true;
}
