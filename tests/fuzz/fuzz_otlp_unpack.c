/*
 * Differential: the hand-written ExportProfilesServiceRequest decoder
 * (formats/otlp_unpack.h) against what it replaces, fc_pb_check_depth()
 * then protobuf_c_message_unpack(). Byte 0 picks max_depth (0: the
 * default 100, else its value), the rest is the request. Both must accept
 * or both refuse; when both accept, the two results must be equal field by
 * field (unknown fields included) and pack to the same bytes.
 */
#include "core/arena.h"
#include "formats/otlp_unpack.h"
#include "formats/pb.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REQ_DESC                                                                                   \
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor

static void *arena_alloc(void *data, size_t size)
{
    return fc_arena_alloc(data, size);
}

static void arena_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

static void differ(const char *what, const char *name)
{
    fprintf(stderr, "fuzz_otlp_unpack: %s differs (%s)\n", what, name);
    abort();
}

static void same_message(const ProtobufCMessage *a, const ProtobufCMessage *b, unsigned depth);

/* One value of field f: a (protobuf-c) and b (ours) point at it. */
static void same_value(const ProtobufCFieldDescriptor *f, const void *a, const void *b,
                       unsigned depth)
{
    switch (f->type) {
    case PROTOBUF_C_TYPE_STRING:
        if (*(char *const *)a == NULL || *(char *const *)b == NULL ||
            strcmp(*(char *const *)a, *(char *const *)b) != 0) {
            differ("string", f->name);
        }
        break;
    case PROTOBUF_C_TYPE_BYTES: {
        const ProtobufCBinaryData *x = a, *y = b;
        if (x->len != y->len || (x->len > 0 && memcmp(x->data, y->data, x->len) != 0)) {
            differ("bytes", f->name);
        }
        break;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
        const ProtobufCMessage *x = *(const ProtobufCMessage *const *)a;
        const ProtobufCMessage *y = *(const ProtobufCMessage *const *)b;
        if ((x == NULL) != (y == NULL)) {
            differ("presence", f->name);
        }
        if (x != NULL) {
            same_message(x, y, depth + 1);
        }
        break;
    }
    case PROTOBUF_C_TYPE_BOOL:
        if (*(const protobuf_c_boolean *)a != *(const protobuf_c_boolean *)b) {
            differ("bool", f->name);
        }
        break;
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        if (memcmp(a, b, 8) != 0) {
            differ("64-bit value", f->name);
        }
        break;
    default:
        if (memcmp(a, b, 4) != 0) {
            differ("32-bit value", f->name);
        }
        break;
    }
}

static size_t elt_size(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT64:
    case PROTOBUF_C_TYPE_UINT64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 8;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_MESSAGE:
        return sizeof(void *);
    case PROTOBUF_C_TYPE_BYTES:
        return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_BOOL:
        return sizeof(protobuf_c_boolean);
    default:
        return 4;
    }
}

/* Field by field, by the descriptors; depth is bounded by the decoders' max_depth. */
static void same_message(const ProtobufCMessage *a, const ProtobufCMessage *b, unsigned depth)
{
    const ProtobufCMessageDescriptor *d = a->descriptor;

    if (depth > FC_PB_MAX_DEPTH_CEILING + 1 || b->descriptor != d) {
        differ("descriptor", d->name);
    }
    if (a->n_unknown_fields != b->n_unknown_fields) {
        differ("unknown field count", d->name);
    }
    for (size_t i = 0; i < a->n_unknown_fields; i++) {
        const ProtobufCMessageUnknownField *x = &a->unknown_fields[i], *y = &b->unknown_fields[i];
        if (x->tag != y->tag || x->wire_type != y->wire_type || x->len != y->len ||
            memcmp(x->data, y->data, x->len) != 0) {
            differ("unknown field", d->name);
        }
    }
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        const char *pa = (const char *)a + f->offset, *pb = (const char *)b + f->offset;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            uint32_t ca = *(const uint32_t *)((const char *)a + f->quantifier_offset);
            uint32_t cb = *(const uint32_t *)((const char *)b + f->quantifier_offset);
            if (ca != cb) {
                differ("oneof case", f->name);
            }
            if (ca == f->id) {
                same_value(f, pa, pb, depth);
            }
        } else if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t na = *(const size_t *)((const char *)a + f->quantifier_offset);
            size_t nb = *(const size_t *)((const char *)b + f->quantifier_offset);
            size_t sz = elt_size(f->type);
            if (na != nb) {
                differ("repeated count", f->name);
            }
            for (size_t j = 0; j < na; j++) {
                same_value(f, *(char *const *)pa + j * sz, *(char *const *)pb + j * sz, depth);
            }
        } else {
            same_value(f, pa, pb, depth);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_arena *ra = fc_arena_new(256u << 20), *oa = fc_arena_new(256u << 20);
    ProtobufCAllocator alloc = {arena_alloc, arena_free, ra};
    unsigned max_depth;
    ProtobufCMessage *ref = NULL, *ours;

    if (size == 0) {
        fc_arena_free(ra);
        fc_arena_free(oa);
        return 0;
    }
    max_depth = data[0] == 0 ? FC_PB_DEFAULT_MAX_DEPTH : data[0];
    data++;
    size--;
    if (fc_pb_check_depth(&REQ_DESC, data, size, max_depth, NULL) == FC_OK) {
        ref = protobuf_c_message_unpack(&REQ_DESC, &alloc, size, data);
    }
    ours = fc_otlp_unpack(oa, data, size, max_depth);
    if (fc_arena_over_budget(ra) || fc_arena_over_budget(oa)) {
        goto out; /* the memory each takes differs; only a limit this large is left alone */
    }
    if ((ref == NULL) != (ours == NULL)) {
        fprintf(stderr, "fuzz_otlp_unpack: protobuf-c %s, ours %s\n", ref ? "accepts" : "refuses",
                ours ? "accepts" : "refuses");
        abort();
    }
    if (ref != NULL) {
        size_t n = protobuf_c_message_get_packed_size(ref);
        uint8_t *x = malloc(n + 1), *y = malloc(n + 1);
        same_message(ref, ours, 1);
        if (protobuf_c_message_get_packed_size(ours) != n || protobuf_c_message_pack(ref, x) != n ||
            protobuf_c_message_pack(ours, y) != n || memcmp(x, y, n) != 0) {
            differ("packed bytes", "request");
        }
        free(x);
        free(y);
    }
out:
    fc_arena_free(ra);
    fc_arena_free(oa);
    return 0;
}
