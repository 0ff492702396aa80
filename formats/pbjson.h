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

/* Reads text into a new message of type d, allocated in a. */
int fc_pbjson_read(struct fc_arena *a, const ProtobufCMessageDescriptor *d, const char *text,
                   size_t len, void **out, struct fc_error *err);
int fc_pbjson_write(const ProtobufCMessage *m, struct fc_buf *out);

#endif
