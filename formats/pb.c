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
