#include "formats/pb.h"

#include <string.h>

int fc_pb_varint(struct fc_pb *r, uint64_t *v)
{
    uint64_t x = 0;

    for (int shift = 0; shift < 70; shift += 7) {
        uint8_t byte;
        if (r->p >= r->end) {
            return -1;
        }
        byte = *r->p++;
        x |= (uint64_t)(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) {
            *v = x;
            return 0;
        }
    }
    return -1;
}

int fc_pb_next(struct fc_pb *r, struct fc_pb_field *f)
{
    uint64_t tag;
    uint64_t len;

    if (fc_pb_varint(r, &tag) != 0 || (tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        return -1;
    }
    f->number = (uint32_t)(tag >> 3);
    f->wire = (enum fc_pb_wire)(tag & 7);
    f->data = NULL;
    f->len = 0;
    f->varint = 0;
    switch (f->wire) {
    case FC_PB_VARINT:
        return fc_pb_varint(r, &f->varint);
    case FC_PB_I64:
        if (r->end - r->p < 8) {
            return -1;
        }
        memcpy(&f->varint, r->p, 8); /* little-endian hosts only (x86_64, arm64) */
        r->p += 8;
        return 0;
    case FC_PB_I32: {
        uint32_t v;
        if (r->end - r->p < 4) {
            return -1;
        }
        memcpy(&v, r->p, 4);
        f->varint = v;
        r->p += 4;
        return 0;
    }
    case FC_PB_LEN:
        if (fc_pb_varint(r, &len) != 0 || len > (uint64_t)(r->end - r->p)) {
            return -1;
        }
        f->data = r->p;
        f->len = (size_t)len;
        r->p += len;
        return 0;
    default:
        return -1;
    }
}

int64_t fc_pb_packed_count(const uint8_t *data, size_t len)
{
    int64_t n = 0;

    for (size_t i = 0; i < len; i++) {
        if ((data[i] & 0x80) == 0) {
            n++;
        }
    }
    /* The last byte must end a varint. */
    if (len > 0 && (data[len - 1] & 0x80) != 0) {
        return -1;
    }
    return n;
}

void fc_pb_put_varint(struct fc_buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;

    do {
        uint8_t byte = v & 0x7f;
        v >>= 7;
        tmp[n++] = byte | (v ? 0x80 : 0);
    } while (v != 0);
    fc_buf_append(b, tmp, n);
}

void fc_pb_put_tag(struct fc_buf *b, uint32_t number, enum fc_pb_wire wire)
{
    fc_pb_put_varint(b, ((uint64_t)number << 3) | (uint64_t)wire);
}

void fc_pb_put_uint(struct fc_buf *b, uint32_t number, uint64_t v)
{
    if (v != 0) {
        fc_pb_put_tag(b, number, FC_PB_VARINT);
        fc_pb_put_varint(b, v);
    }
}

void fc_pb_put_int(struct fc_buf *b, uint32_t number, int64_t v)
{
    fc_pb_put_uint(b, number, (uint64_t)v);
}

void fc_pb_put_bool(struct fc_buf *b, uint32_t number, bool v)
{
    fc_pb_put_uint(b, number, v ? 1 : 0);
}

void fc_pb_put_fixed64(struct fc_buf *b, uint32_t number, uint64_t v)
{
    if (v != 0) {
        fc_pb_put_tag(b, number, FC_PB_I64);
        fc_buf_append(b, &v, 8);
    }
}

void fc_pb_put_bytes(struct fc_buf *b, uint32_t number, const void *data, size_t len)
{
    fc_pb_put_tag(b, number, FC_PB_LEN);
    fc_pb_put_varint(b, len);
    fc_buf_append(b, data, len);
}

static size_t varint_size(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

void fc_pb_put_packed(struct fc_buf *b, uint32_t number, const uint64_t *v, size_t n)
{
    size_t len = 0;

    if (n == 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        len += varint_size(v[i]);
    }
    fc_pb_put_tag(b, number, FC_PB_LEN);
    fc_pb_put_varint(b, len);
    for (size_t i = 0; i < n; i++) {
        fc_pb_put_varint(b, v[i]);
    }
}

void fc_pb_put_packed_i64(struct fc_buf *b, uint32_t number, const int64_t *v, size_t n)
{
    size_t len = 0;

    if (n == 0) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        len += varint_size((uint64_t)v[i]);
    }
    fc_pb_put_tag(b, number, FC_PB_LEN);
    fc_pb_put_varint(b, len);
    for (size_t i = 0; i < n; i++) {
        fc_pb_put_varint(b, (uint64_t)v[i]);
    }
}

/* A message being walked: where it ends, what its fields are, the last field looked up. */
struct depth_frame {
    const uint8_t *end;
    const ProtobufCMessageDescriptor *d;
    uint32_t last_number;                       /* 0 = none yet */
    const ProtobufCMessageDescriptor *last_sub; /* its message type, NULL when not a message */
};

/*
 * The descriptor of field f when it is a length-delimited sub-message, else
 * NULL. Repeated fields come in runs (string_table, location_table...), so
 * the last answer is kept and most fields skip the descriptor's search.
 */
static const ProtobufCMessageDescriptor *sub_message(struct depth_frame *fr,
                                                     const struct fc_pb_field *f)
{
    const ProtobufCFieldDescriptor *fd;

    if (f->wire != FC_PB_LEN) {
        return NULL;
    }
    if (f->number != fr->last_number) {
        fd = protobuf_c_message_descriptor_get_field(fr->d, f->number);
        fr->last_number = f->number;
        fr->last_sub = fd != NULL && fd->type == PROTOBUF_C_TYPE_MESSAGE ? fd->descriptor : NULL;
    }
    return fr->last_sub;
}

int fc_pb_check_depth(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                      unsigned max_depth, struct fc_error *err)
{
    /* An explicit stack: the walk itself must not recurse on outside input. */
    struct depth_frame stack[FC_PB_MAX_DEPTH_CEILING];
    unsigned depth = 1;
    struct fc_pb r;
    struct fc_pb_field f;
    const uint8_t *start;

    if (max_depth == 0 || max_depth > FC_PB_MAX_DEPTH_CEILING) {
        max_depth = FC_PB_MAX_DEPTH_CEILING;
    }
    fc_pb_init(&r, data, len);
    start = r.p;
    stack[0] = (struct depth_frame){r.end, d, 0, NULL};
    while (depth > 0) {
        const ProtobufCMessageDescriptor *sub;
        if (fc_pb_done(&r)) {
            /* This message is done: its parent goes on right after it. */
            depth--;
            r.end = depth > 0 ? stack[depth - 1].end : r.end;
            continue;
        }
        if (fc_pb_next(&r, &f) != 0) {
            return fc_errorf(err, FC_EPROTO, "not a valid %s (malformed protobuf at byte %zu)",
                             d->short_name, (size_t)(r.p - start));
        }
        if ((sub = sub_message(&stack[depth - 1], &f)) == NULL) {
            continue;
        }
        if (depth >= max_depth) {
            return fc_errorf(err, FC_EPROTO, "message nested deeper than max_message_depth (%u)",
                             max_depth);
        }
        stack[depth++] = (struct depth_frame){f.data + f.len, sub, 0, NULL};
        r.p = f.data;
        r.end = f.data + f.len;
    }
    return FC_OK;
}
