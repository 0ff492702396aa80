/*
 * Protobuf messages <-> JSON, driven by protobuf-c's descriptors, with the
 * OTLP JSON rules: lowerCamelCase names on output (both spellings read),
 * 64-bit integers written as strings (numbers or strings read), `traceId`,
 * `spanId` and `profileId` as hex, other bytes as base64, unknown fields
 * ignored, default values omitted.
 */
#ifndef FC_FORMATS_PBJSON_H
#define FC_FORMATS_PBJSON_H

#include "core/arena.h"
#include "core/buf.h"
#include "core/err.h"

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

/*
 * Reads text into a new message of type d, allocated in a. Messages nested
 * deeper than FC_PB_DEFAULT_MAX_DEPTH are refused (FC_EPROTO), as
 * fc_pb_check_depth() refuses them in protobuf.
 */
int fc_pbjson_read(struct fc_arena *a, const ProtobufCMessageDescriptor *d, const char *text,
                   size_t len, void **out, struct fc_error *err);
/* The same with another bound (max_message_depth); the top-level message is depth 1. */
int fc_pbjson_read_depth(struct fc_arena *a, const ProtobufCMessageDescriptor *d, const char *text,
                         size_t len, unsigned max_depth, void **out, struct fc_error *err);
int fc_pbjson_write(const ProtobufCMessage *m, struct fc_buf *out);

#endif
