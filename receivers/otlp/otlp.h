/* Private to receivers/otlp: config, state, and the path both transports share. */
#ifndef FC_RECEIVERS_OTLP_H
#define FC_RECEIVERS_OTLP_H

#include "core/component.h"
#include "core/extensions.h"
#include "core/limits.h"
#include "core/tls_server.h"
#include "formats/otlp.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct otlp_config {
    struct {
        struct {
            bool enabled; /* first: FC_FIELD_PRESENCE */
            const char *endpoint;
            struct fc_tls_server_config tls;
            int64_t max_recv_msg_size;
            int64_t threads;
            int64_t max_in_flight;
            struct fc_server_auth_config auth;
        } grpc;
        struct {
            bool enabled;
            const char *endpoint;
            struct fc_tls_server_config tls;
            int64_t max_request_body_size;
            struct fc_server_auth_config auth;
        } http;
    } protocols;
    int64_t max_decompressed_size;
    struct fc_input_limits limits; /* the caps every receiver shares (core/limits.h) */
    int64_t retry_after;
};

struct otlp_grpc;

struct otlp_receiver {
    struct fc_receiver *self;
    const struct otlp_config *cfg;
    _Atomic int64_t *rejected_profiles; /* partial success, counted per profile */
    _Atomic int64_t *truncated_stacks;  /* stacks cut to max_stack_depth */
    _Atomic int64_t *time_replaced;     /* profiles stamped at receive time (otlp_fix_times) */
    struct otlp_grpc *grpc;             /* NULL unless protocols.grpc is on */
    struct fc_auth *grpc_auth;          /* protocols.grpc.auth's authenticator, or NULL */
};

struct otlp_request {
    const uint8_t *body; /* the request, decompressed */
    size_t len;
    bool json;
    const uint8_t *gzip; /* body as the client gzipped it, or NULL */
    size_t gzip_len;
    const char *tenant; /* NULL = anonymous */
};

/*
 * Decodes one request (protobuf or JSON, already decompressed), applies the
 * input caps (max_message_depth before anything is unpacked, the others on
 * the decoded batch) and sends it down the pipelines. Both transports come
 * through here, so HTTP and gRPC refuse the same requests. A protobuf
 * request the caps left untouched travels with its bytes (fc_batch.wire).
 * Returns FC_OK (res says what was rejected) or the error code for the
 * transport to map; err names the problem. A refusal is counted here
 * (otlp_count_refused).
 */
int otlp_export(struct otlp_receiver *r, const struct otlp_request *rq, struct fc_otlp_result *res,
                struct fc_error *err);
/* The gRPC status code for an outcome (OTLP: retryable refusals are
 * UNAVAILABLE/RESOURCE_EXHAUSTED). */
int otlp_grpc_code(int rc);
/* Counts a request refused before it reached the pipeline. */
void otlp_count_refused(struct otlp_receiver *r);

/*
 * Profiles without a plausible time get the receive time `now`, as
 * Pyroscope's ingest gives time.Now() to a profile whose time is 0:
 * time_unix_nano 0, negative, or before OTLP_MIN_PLAUSIBLE_NS
 * (2000-01-01T00:00:00Z), which is where a stamp in seconds, milliseconds or
 * microseconds sent as nanoseconds lands (in 1970). Returns how many.
 */
#define OTLP_MIN_PLAUSIBLE_NS (946684800LL * 1000000000LL)
uint32_t otlp_fix_times(struct fc_batch *b, int64_t now);

int otlp_http_start(struct otlp_receiver *r, struct fc_host *host, struct fc_error *err);
int otlp_grpc_start(struct otlp_receiver *r, struct fc_error *err);
void otlp_grpc_stop(struct otlp_receiver *r);

#endif
