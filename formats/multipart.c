#include "formats/multipart.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const uint8_t *find(const uint8_t *hay, size_t hay_len, const char *needle, size_t n)
{
    if (n == 0 || hay_len < n) {
        return NULL;
    }
    for (size_t i = 0; i + n <= hay_len; i++) {
        if (hay[i] == (uint8_t)needle[0] && memcmp(hay + i, needle, n) == 0) {
            return hay + i;
        }
    }
    return NULL;
}

/* Copies the value of `key=` (quoted or not) from a header's parameters. */
static int header_param(const char *h, size_t hlen, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key);

    for (size_t i = 0; i + klen < hlen; i++) {
        if ((i == 0 || h[i - 1] == ';' || h[i - 1] == ' ') && strncasecmp(h + i, key, klen) == 0 &&
            h[i + klen] == '=') {
            const char *v = h + i + klen + 1;
            const char *end = h + hlen;
            size_t n = 0;
            if (v < end && *v == '"') {
                v++;
                while (v < end && *v != '"' && n + 1 < size) {
                    if (*v == '\\' && v + 1 < end) {
                        v++;
                    }
                    out[n++] = *v++;
                }
            } else {
                while (v < end && *v != ';' && !isspace((unsigned char)*v) && n + 1 < size) {
                    out[n++] = *v++;
                }
            }
            out[n] = '\0';
            return 1;
        }
    }
    return 0;
}

int fc_multipart_parse(const char *content_type, const uint8_t *body, size_t len,
                       struct fc_multipart_part *parts, size_t *n_parts, struct fc_error *err)
{
    char boundary[200];
    char delim[210];
    size_t dlen;
    const uint8_t *p;
    const uint8_t *end = body + len;

    *n_parts = 0;
    if (content_type == NULL ||
        !header_param(content_type, strlen(content_type), "boundary", boundary + 0,
                      sizeof(boundary)) ||
        boundary[0] == '\0') {
        return fc_errorf(err, FC_EPROTO, "multipart: Content-Type has no boundary");
    }
    dlen = (size_t)snprintf(delim, sizeof(delim), "--%s", boundary);
    p = find(body, len, delim, dlen);
    if (p == NULL) {
        return fc_errorf(err, FC_EPROTO, "multipart: the boundary never appears in the body");
    }
    for (;;) {
        const uint8_t *hdr_end;
        const uint8_t *data;
        const uint8_t *next;
        struct fc_multipart_part *part;
        size_t sep_len;

        p += dlen;
        if (end - p >= 2 && p[0] == '-' && p[1] == '-') {
            return FC_OK; /* the closing delimiter */
        }
        /* The rest of the delimiter line. */
        while (p < end && (*p == ' ' || *p == '\t')) {
            p++;
        }
        if (p < end && *p == '\r') {
            p++;
        }
        if (p >= end || *p != '\n') {
            return fc_errorf(err, FC_EPROTO, "multipart: malformed delimiter line");
        }
        p++;
        hdr_end = find(p, (size_t)(end - p), "\r\n\r\n", 4);
        sep_len = 4;
        {
            const uint8_t *lf = find(p, (size_t)(end - p), "\n\n", 2);
            if (lf != NULL && (hdr_end == NULL || lf < hdr_end)) {
                hdr_end = lf;
                sep_len = 2;
            }
        }
        if (hdr_end == NULL) {
            return fc_errorf(err, FC_EPROTO, "multipart: part %zu has no end of headers", *n_parts);
        }
        if (*n_parts >= FC_MULTIPART_MAX_PARTS) {
            return fc_errorf(err, FC_EPROTO, "multipart: more than %d parts",
                             FC_MULTIPART_MAX_PARTS);
        }
        part = &parts[*n_parts];
        memset(part, 0, sizeof(*part));
        for (const uint8_t *h = p; h < hdr_end;) {
            const uint8_t *eol = memchr(h, '\n', (size_t)(hdr_end - h));
            size_t hl = (size_t)((eol ? eol : hdr_end) - h);
            if (hl > 0 && h[hl - 1] == '\r') {
                hl--;
            }
            if (hl > 20 && strncasecmp((const char *)h, "Content-Disposition:", 20) == 0) {
                header_param((const char *)h, hl, "name", part->name, sizeof(part->name));
                header_param((const char *)h, hl, "filename", part->filename,
                             sizeof(part->filename));
            } else if (hl > 13 && strncasecmp((const char *)h, "Content-Type:", 13) == 0) {
                size_t off = 13;
                while (off < hl && h[off] == ' ') {
                    off++;
                }
                snprintf(part->content_type, sizeof(part->content_type), "%.*s", (int)(hl - off),
                         h + off);
            }
            h = eol ? eol + 1 : hdr_end;
        }
        data = hdr_end + sep_len;
        next = find(data, (size_t)(end - data), delim, dlen);
        if (next == NULL) {
            return fc_errorf(err, FC_EPROTO,
                             "multipart: part '%s' is not terminated by the "
                             "boundary",
                             part->name);
        }
        /* The CRLF before the delimiter belongs to the delimiter. */
        part->data = data;
        part->len = (size_t)(next - data);
        if (part->len >= 2 && next[-2] == '\r' && next[-1] == '\n') {
            part->len -= 2;
        } else if (part->len >= 1 && next[-1] == '\n') {
            part->len -= 1;
        }
        if (part->name[0] == '\0') {
            return fc_errorf(err, FC_EPROTO, "multipart: part %zu has no name", *n_parts);
        }
        (*n_parts)++;
        p = next;
    }
}

const struct fc_multipart_part *fc_multipart_find(const struct fc_multipart_part *parts, size_t n,
                                                  const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(parts[i].name, name) == 0) {
            return &parts[i];
        }
    }
    return NULL;
}
