/*
 * OTLP profiles (opentelemetry.proto.collector.profiles.v1development,
 * the v1.10/v1.11 layout) <-> the batch model, in protobuf.
 *
 * Decoding checks every index against its table and that entry 0 of every
 * dictionary table is the zero value. A problem in the dictionary refuses
 * the whole request (FC_EPROTO); a problem inside one profile rejects that
 * profile only and is reported as partial success.
 *
 * Each OTLP profile becomes one batch profile. Its series labels are the
 * resource and scope attributes (`service.name` becomes `service_name`,
 * default `unknown_service`) and `__name__` (kept when an attribute carries
 * it, else derived as Pyroscope does: samples:count with a cpu period is
 * process_cpu, otherwise the period type).
 *
 * Encoding writes each batch profile of a multi-type pprof as one OTLP
 * profile per sample type; series labels travel as resource attributes.
 * pprof-only fields use the Collector's translator conventions
 * (`process.executable.build_id.gnu`, `pprof.mapping.has_*`,
 * `pprof.location.is_folded`, `pprof.profile.drop_frames`, ...), and the
 * pprof encoder reads them back. Sample labels span_id/trace_id become a Link.
 */
#ifndef FC_FORMATS_OTLP_H
#define FC_FORMATS_OTLP_H

#include "core/batch.h"
#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stdint.h>

struct fc_otlp_result {
    uint32_t profiles;          /* accepted into the batch */
    uint32_t rejected_profiles; /* partial success */
    char message[256];          /* why the first one was rejected */
    bool translated;            /* came in an older layout, translated (formats/otlp_layout.h) */
};

/* Messages nested deeper than FC_PB_DEFAULT_MAX_DEPTH are refused (FC_EPROTO). */
int fc_otlp_decode(struct fc_batch *b, const uint8_t *data, size_t len, struct fc_otlp_result *res,
                   struct fc_error *err);
/* The same with another nesting bound (a receiver's max_message_depth). */
int fc_otlp_decode_depth(struct fc_batch *b, const uint8_t *data, size_t len, unsigned max_depth,
                         struct fc_otlp_result *res, struct fc_error *err);

/* Appends an ExportProfilesServiceRequest holding every profile of b. */
int fc_otlp_encode(const struct fc_batch *b, struct fc_buf *out, struct fc_error *err);

/* The same in the OTLP JSON encoding (lowerCamelCase, int64 as strings, hex ids). */
int fc_otlp_decode_json(struct fc_batch *b, const char *text, size_t len,
                        struct fc_otlp_result *res, struct fc_error *err);
int fc_otlp_decode_json_depth(struct fc_batch *b, const char *text, size_t len, unsigned max_depth,
                              struct fc_otlp_result *res, struct fc_error *err);
int fc_otlp_encode_json(const struct fc_batch *b, struct fc_buf *out, struct fc_error *err);

/* A request already unpacked (a protobuf-c ExportProfilesServiceRequest in b's arena). */
int fc_otlp_decode_message(struct fc_batch *b, const void *request, struct fc_otlp_result *res,
                           struct fc_error *err);

/* ExportProfilesServiceResponse; partial_success only when something was rejected. */
int fc_otlp_response(uint32_t rejected, const char *message, bool json, struct fc_buf *out);
/* google.rpc.Status {code, message}, with a RetryInfo detail when retry_after_ns > 0. */
int fc_otlp_status(int grpc_code, const char *message, int64_t retry_after_ns, bool json,
                   struct fc_buf *out);

/* The attribute keys of the pprof <-> OTLP conventions, shared with the pprof encoder. */
#define FC_OTLP_BUILD_ID_KEY "process.executable.build_id.gnu"
#define FC_OTLP_HAS_FUNCTIONS_KEY "pprof.mapping.has_functions"
#define FC_OTLP_HAS_FILENAMES_KEY "pprof.mapping.has_filenames"
#define FC_OTLP_HAS_LINE_NUMBERS_KEY "pprof.mapping.has_line_numbers"
#define FC_OTLP_HAS_INLINE_FRAMES_KEY "pprof.mapping.has_inline_frames"
#define FC_OTLP_IS_FOLDED_KEY "pprof.location.is_folded"
#define FC_OTLP_DROP_FRAMES_KEY "pprof.profile.drop_frames"
#define FC_OTLP_KEEP_FRAMES_KEY "pprof.profile.keep_frames"
#define FC_OTLP_DEFAULT_TYPE_KEY "pprof.profile.default_sample_type"
#define FC_OTLP_COMMENT_KEY "pprof.profile.comment"

#endif
