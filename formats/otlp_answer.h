/*
 * What an OTLP peer answers an exporter, decoded (the encoders are in
 * formats/otlp.h):
 *   - ExportProfilesServiceResponse { partial_success = 1 {
 *         rejected_profiles = 1 (int64), error_message = 2 } }, in protobuf
 *     or OTLP JSON, the body of a 2xx / the message of a gRPC OK;
 *   - google.rpc.Status { code = 1, message = 2, details = 3 (Any) }, the
 *     body of an HTTP error or gRPC's `grpc-status-details-bin` trailer,
 *     with a google.rpc.RetryInfo { retry_delay = 1 (Duration) } detail.
 * Peers are outside input: every decoder is bounds-checked, allocates
 * nothing that outlives it, and cuts text to its fixed-size field.
 */
#ifndef FC_FORMATS_OTLP_ANSWER_H
#define FC_FORMATS_OTLP_ANSWER_H

#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_RETRY_INFO_TYPE "type.googleapis.com/google.rpc.RetryInfo"

struct fc_rpc_status {
    int32_t code;
    char message[256];      /* control characters replaced, cut at 255 bytes */
    bool has_retry_info;    /* a google.rpc.RetryInfo detail was there */
    int64_t retry_delay_ns; /* its retry_delay, >= 0 (a negative delay reads as 0) */
};

struct fc_partial_success {
    bool present; /* the response had a partial_success field */
    int64_t rejected_profiles;
    char message[256];
};

/*
 * protobuf. An empty input is a valid empty message. FC_EPROTO when the
 * bytes are not the message (truncated, a known field with the wrong wire type).
 */
int fc_rpc_status_decode(const uint8_t *data, size_t len, struct fc_rpc_status *st,
                         struct fc_error *err);
int fc_otlp_partial_decode(const uint8_t *data, size_t len, struct fc_partial_success *ps,
                           struct fc_error *err);

/*
 * JSON. A Status detail may be proto3 JSON's Any ({"@type": "...RetryInfo",
 * "retryDelay": "1.5s"}) or the plain message mapping flamecol writes
 * ({"typeUrl": ..., "value": base64 of the RetryInfo}). Empty input (or only
 * white space) is an empty message.
 */
int fc_rpc_status_decode_json(const char *text, size_t len, struct fc_rpc_status *st,
                              struct fc_error *err);
int fc_otlp_partial_decode_json(const char *text, size_t len, struct fc_partial_success *ps,
                                struct fc_error *err);

#endif
