/*
 * Protocol buffers wire format: a bounds-checked reader over a byte range
 * and a writer into an fc_buf. Every read checks the remaining length; a
 * malformed message yields an error, never a read past the end.
 */
#ifndef FC_FORMATS_PB_H
#define FC_FORMATS_PB_H

#include "core/buf.h"
#include "core/err.h"

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fc_pb_wire { FC_PB_VARINT = 0, FC_PB_I64 = 1, FC_PB_LEN = 2, FC_PB_I32 = 5 };

struct fc_pb {
    const uint8_t *p;
    const uint8_t *end;
};

struct fc_pb_field {
    uint32_t number;
    enum fc_pb_wire wire;
    uint64_t varint;     /* VARINT, I64, I32 */
    const uint8_t *data; /* LEN */
    size_t len;          /* LEN */
};

static inline void fc_pb_init(struct fc_pb *r, const uint8_t *data, size_t len)
{
    static const uint8_t empty[1];

    /* An empty body may come as NULL; NULL + 0 is undefined behaviour. */
    if (data == NULL) {
        data = empty;
        len = 0;
    }
    r->p = data;
    r->end = data + len;
}

static inline bool fc_pb_done(const struct fc_pb *r)
{
    return r->p >= r->end;
}

/* 0 = ok, -1 = malformed (truncated, bad wire type, varint over 10 bytes). */
int fc_pb_varint(struct fc_pb *r, uint64_t *v);
/* Reads the next field; group wire types (3, 4) are refused as malformed. */
int fc_pb_next(struct fc_pb *r, struct fc_pb_field *f);
/* Counts the varints in a packed field; -1 when malformed. */
int64_t fc_pb_packed_count(const uint8_t *data, size_t len);

/*
 * Message nesting. protobuf-c's unpack recurses once per nested message, so
 * a request nested a few thousand levels deep overflows the stack: check
 * the wire bytes with fc_pb_check_depth() before every unpack of outside
 * input. The top-level message is depth 1.
 */
#define FC_PB_DEFAULT_MAX_DEPTH 100  /* protobuf's own default recursion limit (C++, Java) */
#define FC_PB_MAX_DEPTH_CEILING 1000 /* the most any config may allow (about 1.5 MB of stack) */

/*
 * One pass over data, guided by descriptor d: a length-delimited field whose
 * descriptor says "message" is one level deeper. No allocation, no
 * recursion. FC_OK, or FC_EPROTO when a message is nested deeper than
 * max_depth ("message nested deeper than max_message_depth (N)") or the
 * wire bytes are malformed (truncated, field number 0, groups). max_depth 0
 * or over FC_PB_MAX_DEPTH_CEILING means the ceiling.
 */
int fc_pb_check_depth(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t len,
                      unsigned max_depth, struct fc_error *err);

void fc_pb_put_varint(struct fc_buf *b, uint64_t v);
void fc_pb_put_tag(struct fc_buf *b, uint32_t number, enum fc_pb_wire wire);
/* Omits the field when v == 0 (proto3 default). */
void fc_pb_put_uint(struct fc_buf *b, uint32_t number, uint64_t v);
void fc_pb_put_int(struct fc_buf *b, uint32_t number, int64_t v);
void fc_pb_put_bool(struct fc_buf *b, uint32_t number, bool v);
void fc_pb_put_fixed64(struct fc_buf *b, uint32_t number, uint64_t v);
/* Always written (repeated strings must keep empty entries). */
void fc_pb_put_bytes(struct fc_buf *b, uint32_t number, const void *data, size_t len);
/* Packed repeated varints; omitted when n == 0. */
void fc_pb_put_packed(struct fc_buf *b, uint32_t number, const uint64_t *v, size_t n);
void fc_pb_put_packed_i64(struct fc_buf *b, uint32_t number, const int64_t *v, size_t n);

/* Signed values travel as two's complement varints (int64, not sint64). */
static inline int64_t fc_pb_i64(uint64_t v)
{
    return (int64_t)v;
}

#endif
