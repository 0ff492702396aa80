/*
 * A hand-written decoder of opentelemetry.proto.collector.profiles.
 * v1development.ExportProfilesServiceRequest into the structs protobuf-c
 * generates for it, in one arena: what fc_pb_check_depth() followed by
 * protobuf_c_message_unpack() give, in one pass per message and without
 * descriptor lookups (the fields are a table indexed by field number).
 *
 * It accepts exactly what that pair accepts, and fills the structs the
 * same way (tests/fuzz/fuzz_otlp_unpack.c compares the two on any bytes):
 *  - unknown fields are kept in unknown_fields (protobuf_c_message_pack
 *    writes them back: array and kvlist attribute values are kept packed);
 *  - repeated scalars packed or not; a scalar given twice: the last wins;
 *    a singular message given twice: merged as protobuf-c merges (repeated
 *    fields concatenated, the latter's scalars, the earlier's strings when
 *    the latter has none; a oneof given twice in one message: the last);
 *  - a bool takes any wire type and is true when any byte of its encoding
 *    has a low bit set, as protobuf-c reads it;
 *  - field numbers 1..2^29-1 in tags of at most 5 bytes, length prefixes
 *    of at most 5 bytes, varints of at most 10 bytes;
 *  - messages nest at most max_depth deep (the request is depth 1; 0 or
 *    over FC_PB_MAX_DEPTH_CEILING means the ceiling). The recursion through
 *    AnyValue arrays and kvlists is bounded by that depth, checked before
 *    each nested message.
 * On failure it says nothing about why: the caller asks fc_pb_check_depth()
 * for the message the pre-pass gave (too deep, or malformed at byte N) and
 * fc_arena_over_budget() for a memory limit, as it did before.
 */
#ifndef FC_FORMATS_OTLP_UNPACK_H
#define FC_FORMATS_OTLP_UNPACK_H

#include "core/arena.h"

#include <stddef.h>
#include <stdint.h>

/* An ExportProfilesServiceRequest in arena a, or NULL (malformed, too deep, or over budget). */
void *fc_otlp_unpack(struct fc_arena *a, const uint8_t *data, size_t len, unsigned max_depth);

#endif
