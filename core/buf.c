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

/* Length of the valid UTF-8 sequence at s (RFC 3629: no overlongs, no
 * surrogates, nothing past U+10FFFF), or 0 when the bytes are not one. */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */

    if (c < 0x80) {
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        lo = c == 0xE0 ? 0xA0 : 0x80; /* overlong */
        hi = c == 0xED ? 0x9F : 0xBF; /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        lo = c == 0xF0 ? 0x90 : 0x80; /* overlong */
        hi = c == 0xF4 ? 0x8F : 0xBF; /* past U+10FFFF */
    } else {
        return 0;
    }
    if (n < len || s[1] < lo || s[1] > hi) {
        return 0;
    }
    for (size_t i = 2; i < len; i++) {
        if (s[i] < 0x80 || s[i] > 0xBF) {
            return 0;
        }
    }
    return len;
}

int fc_buf_json_escape(struct fc_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t run = 0; /* start of the bytes not yet copied */
    size_t i = 0;
    int rc = FC_OK;

    if (n == 0) {
        return FC_OK;
    }
    while (i < n && rc == FC_OK) {
        unsigned char c = u[i];
        size_t len = c < 0x80 ? 1 : utf8_seq_len(u + i, n - i);
        char esc[6] = {'\\', 0, 0, 0, 0, 0};
        size_t esc_len = 2;

        if (c == '"' || c == '\\') {
            esc[1] = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            esc[1] = c == '\n' ? 'n' : c == '\r' ? 'r' : 't';
        } else if (c < 0x20) {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            esc_len = 6;
        } else if (len == 0) {
            /* Invalid bytes become U+FFFD one by one, as Go's encoding/json does. */
            memcpy(esc, "\xEF\xBF\xBD", 3);
            esc_len = 3;
        } else {
            i += len;
            continue;
        }
        rc = fc_buf_append(b, s + run, i - run);
        rc = rc ? rc : fc_buf_append(b, esc, esc_len);
        run = ++i;
    }
    return rc ? rc : fc_buf_append(b, s + run, i - run);
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
