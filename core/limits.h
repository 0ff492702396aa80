/*
 * Caps on outside input, one set for every receiver: each receiver embeds a
 * struct fc_input_limits in its config, declares the same keys through
 * FC_INPUT_LIMITS_FIELDS (same names, defaults and descriptions everywhere)
 * and runs fc_input_limits_apply() on every decoded batch before the
 * pipeline sees it, whatever the transport (HTTP or gRPC).
 *
 * Refusals are FC_EPROTO (400 / INVALID_ARGUMENT) with a message naming the
 * limit, its value and what exceeded it. A stack deeper than
 * max_stack_depth is not refused: it keeps its root-most frames, as pprof
 * tools do, and is counted.
 *
 * Request body and decompressed sizes stay with each receiver's transport
 * keys (max_request_body_size, max_recv_msg_size, max_decompressed_size).
 * max_message_depth is applied by the decoders (fc_pb_check_depth,
 * fc_pbjson_read_depth), before anything is unpacked.
 */
#ifndef FC_CORE_LIMITS_H
#define FC_CORE_LIMITS_H

#include "config/schema.h"
#include "core/batch.h"
#include "core/err.h"
#include "formats/pb.h"

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Every member is int64_t, as the schema binds FC_FIELD_INT; 0 = no limit unless noted. */
struct fc_input_limits {
    int64_t max_message_depth;      /* protobuf/JSON message nesting, 1..FC_PB_MAX_DEPTH_CEILING */
    int64_t max_stack_depth;        /* frames per stack; deeper stacks are cut, root kept */
    int64_t max_sample_labels;      /* labels (attributes) per sample */
    int64_t max_labels;             /* series labels per profile, at least 1 */
    int64_t max_label_name_length;  /* bytes, series and sample labels */
    int64_t max_label_value_length; /* bytes, series and sample labels */
    int64_t max_attributes;         /* OTLP resource + scope + profile attributes per profile */
};

#define FC_LIMITS_STR_(x) #x
#define FC_LIMITS_STR(x) FC_LIMITS_STR_(x)

/*
 * The schema fields of struct fc_input_limits, at offset `base` of the
 * receiver's config struct: `FC_INPUT_LIMITS_FIELDS(offsetof(struct
 * my_config, limits)),` inside its field table. Keys sit at the top level of
 * the receiver's config (the pprof receiver's keys kept their names).
 */
#define FC_INPUT_LIMIT_FIELD_(base, key, def, help)                                                \
    {                                                                                              \
#key, FC_FIELD_INT, def, (base) + offsetof(struct fc_input_limits, key), help              \
    }
#define FC_INPUT_LIMITS_FIELDS(base)                                                               \
    FC_INPUT_LIMIT_FIELD_(base, max_message_depth, FC_LIMITS_STR(FC_PB_DEFAULT_MAX_DEPTH),         \
                          "deepest nesting of protobuf or JSON messages (the request itself is "   \
                          "1); deeper requests are refused, checked before or while they are "     \
                          "decoded (1-1000)"),                                                     \
        FC_INPUT_LIMIT_FIELD_(base, max_stack_depth, "1024",                                       \
                              "deeper stacks keep their root-most frames (0 = no limit)"),         \
        FC_INPUT_LIMIT_FIELD_(base, max_sample_labels, "100",                                      \
                              "a sample with more labels (pprof labels, OTLP sample attributes) "  \
                              "is refused (0 = no limit)"),                                        \
        FC_INPUT_LIMIT_FIELD_(base, max_labels, "30",                                              \
                              "series labels per profile, including service_name and __name__"),   \
        FC_INPUT_LIMIT_FIELD_(base, max_label_name_length, "1024",                                 \
                              "longest label name in bytes, series and sample labels (0 = no "     \
                              "limit)"),                                                           \
        FC_INPUT_LIMIT_FIELD_(base, max_label_value_length, "2048",                                \
                              "longest label value in bytes, series and sample labels (0 = no "    \
                              "limit)"),                                                           \
        FC_INPUT_LIMIT_FIELD_(base, max_attributes, "128",                                         \
                              "OTLP resource, scope and profile attributes of one profile, "       \
                              "together (0 = no limit)")

/* The defaults of FC_INPUT_LIMITS_FIELDS, for code that has no config (tests, fuzzing, tools). */
extern const struct fc_input_limits fc_input_limits_default;

/* Checks the values a config gave (FC_ECONFIG naming the key). */
int fc_input_limits_validate(const struct fc_input_limits *l, struct fc_error *err);

/*
 * Applies the caps to a decoded batch that is still the receiver's own:
 * refuses it (FC_EPROTO, err names the profile, sample, limit and value) or
 * cuts stacks deeper than max_stack_depth to their root-most frames, in
 * place, adding how many stacks were cut to *truncated (may be NULL).
 */
int fc_input_limits_apply(const struct fc_input_limits *l, struct fc_batch *b, uint64_t *truncated,
                          struct fc_error *err);

/* flamecol_receiver_truncated_stacks_total{receiver="id"}, registered once per receiver. */
_Atomic int64_t *fc_input_limits_truncated_counter(const char *receiver_id);

#endif
