#include "formats/pbjson.h"

#include "core/buf.h"
#include "formats/json.h"
#include "formats/pb.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes fields that OTLP JSON writes as hex, not base64. */
static bool hex_field(const char *name)
{
    return strcmp(name, "trace_id") == 0 || strcmp(name, "span_id") == 0 ||
           strcmp(name, "profile_id") == 0;
}

/* "attribute_indices" matches "attribute_indices" and "attributeIndices". */
static bool name_matches(const char *snake, const char *key)
{
    if (strcmp(snake, key) == 0) {
        return true;
    }
    while (*snake && *key) {
        if (*snake == '_' && snake[1] != '\0') {
            snake++;
            if (*key != (*snake >= 'a' && *snake <= 'z' ? *snake - 32 : *snake)) {
                return false;
            }
        } else if (*snake != *key) {
            return false;
        }
        snake++;
        key++;
    }
    return *snake == '\0' && *key == '\0';
}

static size_t scalar_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
        return 4;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    }
    return 8;
}

struct reader {
    struct fc_arena *a;
    struct fc_error *err;
    unsigned max_depth; /* message nesting, as fc_pb_check_depth counts it */
};

static int fail(struct reader *r, const char *field, const char *what)
{
    return fc_errorf(r->err, FC_EPROTO, "field %s: %s", field, what);
}

static int read_message(struct reader *r, const ProtobufCMessageDescriptor *d,
                        const struct fc_json *obj, unsigned depth, void **out);

/* depth: that of the message holding field f (the top-level message is 1). */
static int read_scalar(struct reader *r, const ProtobufCFieldDescriptor *f, const struct fc_json *v,
                       unsigned depth, void *slot)
{
    int64_t i;
    uint64_t u;

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        if (fc_json_int64(v, &i) != 0 || i < INT32_MIN || i > INT32_MAX) {
            return fail(r, f->name, "expected a 32-bit integer");
        }
        *(int32_t *)slot = (int32_t)i;
        return FC_OK;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        if (fc_json_uint64(v, &u) != 0 || u > UINT32_MAX) {
            return fail(r, f->name, "expected an unsigned 32-bit integer");
        }
        *(uint32_t *)slot = (uint32_t)u;
        return FC_OK;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        if (fc_json_int64(v, &i) != 0) {
            return fail(r, f->name, "expected a 64-bit integer (number or decimal string)");
        }
        *(int64_t *)slot = i;
        return FC_OK;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        if (fc_json_uint64(v, &u) != 0) {
            return fail(r, f->name, "expected an unsigned 64-bit integer");
        }
        *(uint64_t *)slot = u;
        return FC_OK;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d;
        char *end;
        if (v->type != FC_JSON_NUMBER && v->type != FC_JSON_STRING) {
            return fail(r, f->name, "expected a number");
        }
        if (strcmp(v->str, "NaN") == 0) {
            d = NAN;
        } else if (strcmp(v->str, "Infinity") == 0) {
            d = INFINITY;
        } else if (strcmp(v->str, "-Infinity") == 0) {
            d = -INFINITY;
        } else {
            d = strtod(v->str, &end);
            if (*v->str == '\0' || *end != '\0') {
                return fail(r, f->name, "expected a number");
            }
        }
        if (f->type == PROTOBUF_C_TYPE_FLOAT) {
            *(float *)slot = (float)d;
        } else {
            *(double *)slot = d;
        }
        return FC_OK;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (v->type != FC_JSON_BOOL) {
            return fail(r, f->name, "expected true or false");
        }
        *(protobuf_c_boolean *)slot = v->b;
        return FC_OK;
    case PROTOBUF_C_TYPE_STRING:
        if (v->type != FC_JSON_STRING) {
            return fail(r, f->name, "expected a string");
        }
        *(char **)slot = (char *)v->str; /* the tree lives in the same arena */
        return FC_OK;
    case PROTOBUF_C_TYPE_BYTES: {
        ProtobufCBinaryData *b = slot;
        if (v->type != FC_JSON_STRING) {
            return fail(r, f->name, "expected a string");
        }
        if (hex_field(f->name)) {
            uint8_t *data;
            if (v->len % 2 != 0) {
                return fail(r, f->name, "expected hex digits");
            }
            data = fc_arena_alloc(r->a, v->len / 2 + 1);
            if (data == NULL) {
                return FC_ETOOBIG;
            }
            if (!fc_hex_decode(v->str, v->len, data, v->len / 2)) {
                return fail(r, f->name, "expected hex digits");
            }
            b->data = data;
            b->len = v->len / 2;
            return FC_OK;
        }
        {
            uint8_t *data;
            size_t n;
            int rc = fc_base64_decode(r->a, v->str, v->len, &data, &n);
            if (rc != FC_OK) {
                return rc == FC_ETOOBIG ? rc : fail(r, f->name, "expected base64");
            }
            b->data = data;
            b->len = n;
            return FC_OK;
        }
    }
    case PROTOBUF_C_TYPE_MESSAGE:
        if (v->type == FC_JSON_NULL) {
            *(void **)slot = NULL;
            return FC_OK;
        }
        if (depth >= r->max_depth) {
            return fc_errorf(r->err, FC_EPROTO, "message nested deeper than max_message_depth (%u)",
                             r->max_depth);
        }
        return read_message(r, f->descriptor, v, depth + 1, (void **)slot);
    }
    return fail(r, f->name, "unsupported type");
}

static int read_message(struct reader *r, const ProtobufCMessageDescriptor *d,
                        const struct fc_json *obj, unsigned depth, void **out)
{
    ProtobufCMessage *m;

    if (obj->type != FC_JSON_OBJECT) {
        return fc_errorf(r->err, FC_EPROTO, "%s: expected a JSON object", d->short_name);
    }
    m = fc_arena_alloc(r->a, d->sizeof_message);
    if (m == NULL) {
        return FC_ETOOBIG;
    }
    d->message_init(m);
    for (size_t i = 0; i < obj->n; i++) {
        const ProtobufCFieldDescriptor *f = NULL;
        const struct fc_json *v = obj->items[i];
        char *base = (char *)m;
        int rc;
        for (unsigned k = 0; k < d->n_fields; k++) {
            if (name_matches(d->fields[k].name, obj->keys[i])) {
                f = &d->fields[k];
                break;
            }
        }
        if (f == NULL || v->type == FC_JSON_NULL) {
            continue; /* unknown fields are ignored, as OTLP requires */
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t esize = scalar_size(f->type);
            char *items;
            if (v->type != FC_JSON_ARRAY) {
                return fail(r, f->name, "expected an array");
            }
            items = fc_arena_calloc(r->a, v->n ? v->n : 1, esize);
            if (items == NULL) {
                return FC_ETOOBIG;
            }
            for (size_t k = 0; k < v->n; k++) {
                if ((rc = read_scalar(r, f, v->items[k], depth, items + k * esize)) != FC_OK) {
                    return rc;
                }
            }
            *(size_t *)(base + f->quantifier_offset) = v->n;
            *(void **)(base + f->offset) = items;
            continue;
        }
        if ((rc = read_scalar(r, f, v, depth, base + f->offset)) != FC_OK) {
            return rc;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            *(uint32_t *)(base + f->quantifier_offset) = f->id;
        } else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset) {
            *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
        }
    }
    *out = m;
    return FC_OK;
}

int fc_pbjson_read(struct fc_arena *a, const ProtobufCMessageDescriptor *d, const char *text,
                   size_t len, void **out, struct fc_error *err)
{
    return fc_pbjson_read_depth(a, d, text, len, FC_PB_DEFAULT_MAX_DEPTH, out, err);
}

int fc_pbjson_read_depth(struct fc_arena *a, const ProtobufCMessageDescriptor *d, const char *text,
                         size_t len, unsigned max_depth, void **out, struct fc_error *err)
{
    struct reader r = {a, err, max_depth};
    struct fc_json *root;
    char too_deep[96];
    int rc;

    if (r.max_depth == 0 || r.max_depth > FC_PB_MAX_DEPTH_CEILING) {
        r.max_depth = FC_PB_MAX_DEPTH_CEILING;
    }
    /*
     * A message n levels deep is at most 2n JSON levels (an object per
     * message, an array per repeated field), so the parser's bound follows
     * and a deeper document is refused before any tree is built.
     */
    snprintf(too_deep, sizeof(too_deep), "nested deeper than max_message_depth (%u) allows",
             r.max_depth);
    rc = fc_json_parse_depth(a, text, len, 2 * r.max_depth, too_deep, &root, err);
    if (rc != FC_OK) {
        return rc;
    }
    rc = read_message(&r, d, root, 1, out);
    if (rc == FC_ETOOBIG) {
        return fc_errorf(err, FC_ETOOBIG, "json: request exceeds the memory limit");
    }
    return rc;
}

/* ---- writing ------------------------------------------------------------------------------ */

static void put_name(struct fc_buf *out, const char *snake)
{
    fc_buf_puts(out, "\"");
    for (const char *p = snake; *p; p++) {
        if (*p == '_' && p[1] != '\0') {
            p++;
            fc_buf_printf(out, "%c", *p >= 'a' && *p <= 'z' ? *p - 32 : *p);
        } else {
            fc_buf_append(out, p, 1);
        }
    }
    fc_buf_puts(out, "\":");
}

static void write_message(const ProtobufCMessage *m, struct fc_buf *out);

static void write_scalar(const ProtobufCFieldDescriptor *f, const void *slot, struct fc_buf *out)
{
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    switch (f->type) {
    case PROTOBUF_C_TYPE_INT32:
    case PROTOBUF_C_TYPE_SINT32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_ENUM:
        fc_buf_printf(out, "%" PRId32, *(const int32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT32:
    case PROTOBUF_C_TYPE_FIXED32:
        fc_buf_printf(out, "%" PRIu32, *(const uint32_t *)slot);
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_SINT64:
    case PROTOBUF_C_TYPE_SFIXED64:
        fc_buf_printf(out, "\"%" PRId64 "\"", *(const int64_t *)slot);
        break;
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
        fc_buf_printf(out, "\"%" PRIu64 "\"", *(const uint64_t *)slot);
        break;
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
        double d = f->type == PROTOBUF_C_TYPE_FLOAT ? *(const float *)slot : *(const double *)slot;
        if (isnan(d)) {
            fc_buf_puts(out, "\"NaN\"");
        } else if (isinf(d)) {
            fc_buf_puts(out, d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
        } else {
            fc_buf_printf(out, "%.17g", d);
        }
        break;
    }
    case PROTOBUF_C_TYPE_BOOL:
        fc_buf_puts(out, *(const protobuf_c_boolean *)slot ? "true" : "false");
        break;
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)slot;
        fc_buf_puts(out, "\"");
        fc_buf_json_escape(out, s ? s : "", s ? strlen(s) : 0);
        fc_buf_puts(out, "\"");
        break;
    }
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *b = slot;
        fc_buf_puts(out, "\"");
        if (hex_field(f->name)) {
            for (size_t i = 0; i < b->len; i++) {
                fc_buf_printf(out, "%02x", b->data[i]);
            }
        } else {
            for (size_t i = 0; i < b->len; i += 3) {
                uint32_t v = (uint32_t)b->data[i] << 16;
                char q[4];
                if (i + 1 < b->len) {
                    v |= (uint32_t)b->data[i + 1] << 8;
                }
                if (i + 2 < b->len) {
                    v |= b->data[i + 2];
                }
                q[0] = b64[(v >> 18) & 63];
                q[1] = b64[(v >> 12) & 63];
                q[2] = i + 1 < b->len ? b64[(v >> 6) & 63] : '=';
                q[3] = i + 2 < b->len ? b64[v & 63] : '=';
                fc_buf_append(out, q, 4);
            }
        }
        fc_buf_puts(out, "\"");
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)slot;
        if (sub == NULL) {
            fc_buf_puts(out, "{}");
        } else {
            write_message(sub, out);
        }
        break;
    }
    }
}

/* proto3: fields at their default are not written. */
static bool is_default(const ProtobufCFieldDescriptor *f, const void *slot)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING: {
        const char *s = *(char *const *)slot;
        return s == NULL || s[0] == '\0';
    }
    case PROTOBUF_C_TYPE_BYTES:
        return ((const ProtobufCBinaryData *)slot)->len == 0;
    case PROTOBUF_C_TYPE_MESSAGE:
        return *(void *const *)slot == NULL;
    default: {
        static const uint8_t zero[8];
        return memcmp(slot, zero, scalar_size(f->type)) == 0;
    }
    }
}

static void write_message(const ProtobufCMessage *m, struct fc_buf *out)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    bool first = true;

    fc_buf_puts(out, "{");
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const void *slot = base + f->offset;
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            const char *items = *(char *const *)slot;
            size_t esize = scalar_size(f->type);
            if (n == 0) {
                continue;
            }
            fc_buf_puts(out, first ? "" : ",");
            put_name(out, f->name);
            fc_buf_puts(out, "[");
            for (size_t k = 0; k < n; k++) {
                fc_buf_puts(out, k ? "," : "");
                write_scalar(f, items + k * esize, out);
            }
            fc_buf_puts(out, "]");
            first = false;
            continue;
        }
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            if (*(const uint32_t *)(base + f->quantifier_offset) != f->id) {
                continue;
            }
        } else if (is_default(f, slot)) {
            continue;
        }
        fc_buf_puts(out, first ? "" : ",");
        put_name(out, f->name);
        write_scalar(f, slot, out);
        first = false;
    }
    fc_buf_puts(out, "}");
}

int fc_pbjson_write(const ProtobufCMessage *m, struct fc_buf *out)
{
    size_t before = out->len;

    write_message(m, out);
    /* fc_buf appends fail only at the buffer's limit; a cut document is not JSON. */
    if (out->limit != 0 && out->len >= out->limit) {
        out->len = before;
        return FC_ETOOBIG;
    }
    return FC_OK;
}
