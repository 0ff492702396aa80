/*
 * Connect query requests as the store reads them (exporters/store/connect.c):
 * byte 0 picks the request message, byte 1 JSON (odd) or protobuf (even),
 * the rest is the body, checked with fc_pb_check_depth() before protobuf-c
 * unpacks it, as the store does. A decoded request must pack and unpack again.
 */
#include "core/arena.h"
#include "core/err.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ProtobufCMessageDescriptor *const requests[] = {
    &querier__v1__profile_types_request__descriptor,
    &types__v1__label_names_request__descriptor,
    &types__v1__label_values_request__descriptor,
    &querier__v1__series_request__descriptor,
    &querier__v1__select_merge_stacktraces_request__descriptor,
    &querier__v1__select_merge_profile_request__descriptor,
    &querier__v1__select_series_request__descriptor,
    &querier__v1__diff_request__descriptor,
    &querier__v1__select_merge_span_profile_request__descriptor,
};

static void *arena_alloc(void *a, size_t size)
{
    return fc_arena_alloc(a, size);
}

static void arena_keep(void *a, void *p)
{
    (void)a;
    (void)p; /* freed with the arena */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const ProtobufCMessageDescriptor *d;
    struct fc_arena *a;
    ProtobufCAllocator alloc;
    ProtobufCMessage *m = NULL;
    struct fc_error err = {0};

    if (size < 2) {
        return 0;
    }
    d = requests[data[0] % (sizeof(requests) / sizeof(requests[0]))];
    a = fc_arena_new(16 << 20);
    alloc = (ProtobufCAllocator){arena_alloc, arena_keep, a};
    if (data[1] & 1) {
        void *out = NULL;
        if (fc_pbjson_read(a, d, (const char *)data + 2, size - 2, &out, &err) == FC_OK) {
            m = out;
        }
    } else if (fc_pb_check_depth(d, data + 2, size - 2, FC_PB_DEFAULT_MAX_DEPTH, &err) == FC_OK) {
        /* As the store does: bounded nesting and well-formed tags before protobuf-c. */
        m = protobuf_c_message_unpack(d, &alloc, size - 2, data + 2);
    }
    if (m != NULL) {
        size_t n = protobuf_c_message_get_packed_size(m);
        uint8_t *buf = fc_arena_alloc(a, n + 1);
        if (buf == NULL || protobuf_c_message_pack(m, buf) != n ||
            protobuf_c_message_unpack(d, &alloc, n, buf) == NULL) {
            abort();
        }
    }
    fc_arena_free(a);
    return 0;
}
