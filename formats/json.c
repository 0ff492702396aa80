#include "formats/json.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    struct fc_arena *a;
    const char *p;
    const char *start;
    const char *end;
    struct fc_error *err;
    unsigned max_depth;
    const char *too_deep; /* what to call a document nested deeper than max_depth */
};

static int fail(struct parser *ps, const char *what)
{
    return fc_errorf(ps->err, FC_EPROTO, "json: %s at byte %zu", what, (size_t)(ps->p - ps->start));
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) {
        ps->p++;
    }
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        *v <<= 4;
        if (c >= '0' && c <= '9') {
            *v |= (uint32_t)(c - '0');
        } else if (c >= 'a' && c <= 'f') {
            *v |= (uint32_t)(c - 'a' + 10);
        } else if (c >= 'A' && c <= 'F') {
            *v |= (uint32_t)(c - 'A' + 10);
        } else {
            return -1;
        }
    }
    return 0;
}

static size_t put_utf8(char *out, uint32_t cp)
{
    if (cp < 0x80) {
        out[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (char)(0xc0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xe0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        out[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    out[0] = (char)(0xf0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    out[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

static int parse_string(struct parser *ps, const char **out, size_t *out_len)
{
    const char *s = ++ps->p; /* after the quote */
    char *buf;
    size_t n = 0;

    /* The unescaped string is never longer than the escaped one. */
    while (ps->p < ps->end && *ps->p != '"') {
        if (*ps->p == '\\') {
            ps->p++;
        }
        ps->p++;
    }
    if (ps->p >= ps->end) {
        return fail(ps, "unterminated string");
    }
    buf = fc_arena_alloc(ps->a, (size_t)(ps->p - s) + 1);
    if (buf == NULL) {
        return fc_errorf(ps->err, FC_ETOOBIG, "json: document exceeds the memory limit");
    }
    for (const char *q = s; q < ps->p; q++) {
        if ((unsigned char)*q < 0x20) {
            return fail(ps, "control character in string");
        }
        if (*q != '\\') {
            buf[n++] = *q;
            continue;
        }
        q++;
        switch (*q) {
        case '"':
        case '\\':
        case '/':
            buf[n++] = *q;
            break;
        case 'b':
            buf[n++] = '\b';
            break;
        case 'f':
            buf[n++] = '\f';
            break;
        case 'n':
            buf[n++] = '\n';
            break;
        case 'r':
            buf[n++] = '\r';
            break;
        case 't':
            buf[n++] = '\t';
            break;
        case 'u': {
            uint32_t cp;
            if (ps->p - q < 5 || hex4(q + 1, &cp) != 0) {
                return fail(ps, "bad \\u escape");
            }
            q += 4;
            if (cp >= 0xd800 && cp < 0xdc00 && ps->p - q >= 7 && q[1] == '\\' && q[2] == 'u') {
                uint32_t lo;
                if (hex4(q + 3, &lo) == 0 && lo >= 0xdc00 && lo < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                    q += 6;
                }
            }
            /* \u escapes take 6 bytes and produce at most 4. */
            n += put_utf8(buf + n, cp);
            break;
        }
        default:
            return fail(ps, "bad escape in string");
        }
    }
    buf[n] = '\0';
    ps->p++;
    *out = buf;
    *out_len = n;
    return FC_OK;
}

static int parse_value(struct parser *ps, struct fc_json **out, unsigned depth);

static int grow_items(struct parser *ps, struct fc_json *v, size_t *cap, bool keys)
{
    size_t ncap = *cap ? *cap * 2 : 8;
    struct fc_json **items =
        fc_arena_realloc(ps->a, v->items, *cap * sizeof(*items), ncap * sizeof(*items));
    if (items == NULL) {
        return fc_errorf(ps->err, FC_ETOOBIG, "json: document exceeds the memory limit");
    }
    v->items = items;
    if (keys) {
        const char **k = fc_arena_realloc(ps->a, v->keys, *cap * sizeof(*k), ncap * sizeof(*k));
        if (k == NULL) {
            return fc_errorf(ps->err, FC_ETOOBIG, "json: document exceeds the memory limit");
        }
        v->keys = k;
    }
    *cap = ncap;
    return FC_OK;
}

static int parse_container(struct parser *ps, struct fc_json *v, unsigned depth)
{
    bool object = *ps->p == '{';
    char close = object ? '}' : ']';
    size_t cap = 0;
    int rc;

    v->type = object ? FC_JSON_OBJECT : FC_JSON_ARRAY;
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return FC_OK;
    }
    for (;;) {
        const char *key = NULL;
        size_t klen;
        skip_ws(ps);
        if (object) {
            if (ps->p >= ps->end || *ps->p != '"') {
                return fail(ps, "expected a string key");
            }
            if ((rc = parse_string(ps, &key, &klen)) != FC_OK) {
                return rc;
            }
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                return fail(ps, "expected ':'");
            }
            ps->p++;
        }
        if (v->n == cap && (rc = grow_items(ps, v, &cap, object)) != FC_OK) {
            return rc;
        }
        if ((rc = parse_value(ps, &v->items[v->n], depth + 1)) != FC_OK) {
            return rc;
        }
        if (object) {
            v->keys[v->n] = key;
        }
        v->n++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return FC_OK;
        }
        return fail(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

/* Recursion is bounded: every container level is one more depth, refused past max_depth. */
static int parse_value(struct parser *ps, struct fc_json **out, unsigned depth)
{
    struct fc_json *v;

    if (depth > ps->max_depth) {
        return fail(ps, ps->too_deep);
    }
    skip_ws(ps);
    if (ps->p >= ps->end) {
        return fail(ps, "unexpected end of input");
    }
    v = fc_arena_calloc(ps->a, 1, sizeof(*v));
    if (v == NULL) {
        return fc_errorf(ps->err, FC_ETOOBIG, "json: document exceeds the memory limit");
    }
    *out = v;
    switch (*ps->p) {
    case '{':
    case '[':
        return parse_container(ps, v, depth);
    case '"':
        v->type = FC_JSON_STRING;
        return parse_string(ps, &v->str, &v->len);
    case 't':
    case 'f':
    case 'n': {
        static const char *const words[] = {"true", "false", "null"};
        for (int i = 0; i < 3; i++) {
            size_t n = strlen(words[i]);
            if ((size_t)(ps->end - ps->p) >= n && memcmp(ps->p, words[i], n) == 0) {
                ps->p += n;
                v->type = i == 2 ? FC_JSON_NULL : FC_JSON_BOOL;
                v->b = i == 0;
                return FC_OK;
            }
        }
        return fail(ps, "unexpected word");
    }
    default: {
        const char *s = ps->p;
        if (*ps->p == '-') {
            ps->p++;
        }
        if (ps->p >= ps->end || !(*ps->p >= '0' && *ps->p <= '9')) {
            return fail(ps, "unexpected character");
        }
        while (ps->p < ps->end &&
               ((*ps->p >= '0' && *ps->p <= '9') || *ps->p == '.' || *ps->p == 'e' ||
                *ps->p == 'E' || *ps->p == '+' || *ps->p == '-')) {
            ps->p++;
        }
        v->type = FC_JSON_NUMBER;
        v->len = (size_t)(ps->p - s);
        v->str = fc_arena_strndup(ps->a, s, v->len);
        return v->str ? FC_OK : fc_errorf(ps->err, FC_ETOOBIG, "json: document too large");
    }
    }
}

int fc_json_parse(struct fc_arena *a, const char *text, size_t len, struct fc_json **out,
                  struct fc_error *err)
{
    return fc_json_parse_depth(a, text, len, FC_JSON_MAX_DEPTH, NULL, out, err);
}

int fc_json_parse_depth(struct fc_arena *a, const char *text, size_t len, unsigned max_depth,
                        const char *too_deep, struct fc_json **out, struct fc_error *err)
{
    struct parser ps = {a, "", "", "", err, max_depth, too_deep};
    char what[96];
    int rc;

    /* An empty body may come as NULL; NULL + 0 is undefined behaviour. */
    if (text != NULL) {
        ps.p = ps.start = text;
        ps.end = text + len;
    }
    if (ps.max_depth > FC_JSON_MAX_DEPTH_CEILING) {
        ps.max_depth = FC_JSON_MAX_DEPTH_CEILING;
    }
    if (too_deep == NULL) {
        snprintf(what, sizeof(what), "nested deeper than %u levels", ps.max_depth);
        ps.too_deep = what;
    }
    rc = parse_value(&ps, out, 0);

    if (rc != FC_OK) {
        return rc;
    }
    skip_ws(&ps);
    if (ps.p != ps.end) {
        return fail(&ps, "trailing data after the document");
    }
    return FC_OK;
}

const struct fc_json *fc_json_get(const struct fc_json *obj, const char *key)
{
    if (obj == NULL || obj->type != FC_JSON_OBJECT) {
        return NULL;
    }
    for (size_t i = 0; i < obj->n; i++) {
        if (strcmp(obj->keys[i], key) == 0) {
            return obj->items[i];
        }
    }
    return NULL;
}

int fc_json_int64(const struct fc_json *v, int64_t *out)
{
    char *end;

    if (v == NULL || (v->type != FC_JSON_NUMBER && v->type != FC_JSON_STRING) || v->len == 0) {
        return -1;
    }
    errno = 0;
    *out = strtoll(v->str, &end, 10);
    return (errno != 0 || *end != '\0') ? -1 : 0;
}

int fc_json_uint64(const struct fc_json *v, uint64_t *out)
{
    char *end;

    if (v == NULL || (v->type != FC_JSON_NUMBER && v->type != FC_JSON_STRING) || v->len == 0 ||
        v->str[0] == '-') {
        return -1;
    }
    errno = 0;
    *out = strtoull(v->str, &end, 10);
    return (errno != 0 || *end != '\0') ? -1 : 0;
}

static int b64_value(char c)
{
    if (c >= 'A' && c <= 'Z') {
        return c - 'A';
    }
    if (c >= 'a' && c <= 'z') {
        return c - 'a' + 26;
    }
    if (c >= '0' && c <= '9') {
        return c - '0' + 52;
    }
    if (c == '+' || c == '-') {
        return 62;
    }
    if (c == '/' || c == '_') {
        return 63;
    }
    return -1;
}

int fc_base64_decode(struct fc_arena *a, const char *s, size_t len, uint8_t **out, size_t *out_len)
{
    uint8_t *buf;
    uint32_t acc = 0;
    int bits = 0;
    size_t n = 0;

    while (len > 0 && s[len - 1] == '=') {
        len--;
    }
    buf = fc_arena_alloc(a, len * 3 / 4 + 3);
    if (buf == NULL) {
        return FC_ETOOBIG;
    }
    for (size_t i = 0; i < len; i++) {
        int v = b64_value(s[i]);
        if (v < 0) {
            return FC_EPROTO;
        }
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            buf[n++] = (uint8_t)(acc >> bits);
        }
    }
    if (bits >= 6) {
        return FC_EPROTO; /* a lone trailing character */
    }
    *out = buf;
    *out_len = n;
    return FC_OK;
}
