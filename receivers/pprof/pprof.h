/* Private to receivers/pprof: the config and what its .c files share. */
#ifndef FC_RECEIVERS_PPROF_H
#define FC_RECEIVERS_PPROF_H

#include "core/component.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/limits.h"
#include "core/tls_server.h"
#include "core/metrics.h"
#include "formats/pprof.h"

#include <stdint.h>

struct fc_auth;

struct pprof_config {
    const char *endpoint;
    struct fc_tls_server_config tls;
    int64_t max_request_body_size;
    int64_t max_decompressed_size;
    struct fc_input_limits limits; /* the caps every receiver shares (core/limits.h) */
    int64_t retry_after;
    struct {
        const char *authenticator; /* an auth extension (core/extensions.h); exclusive with: */
        const char *bearer_token;  /* the legacy keys */
        struct {
            const char *username;
            const char *password;
        } basic;
    } auth;
};

struct pprof_receiver {
    struct fc_receiver *self;
    const struct pprof_config *cfg;
    struct fc_pprof_limits limits;     /* what the pprof decoder enforces itself */
    _Atomic int64_t *truncated_stacks; /* stacks cut to max_stack_depth */
    struct fc_log_limit refused_log;   /* 429/503 lines: one per 10 s under a flood */
    struct fc_auth *legacy_auth;       /* from auth.bearer_token/basic (owned), or NULL */
};

/* X-Scope-OrgID (credentials are checked before); on failure fills resp, returns non-zero. */
int pprof_check_request(struct pprof_receiver *r, const struct fc_http_request *req,
                        struct fc_http_response *resp, const char **tenant);
/* A new batch with the receiver's memory budget and the request's tenant. */
struct fc_batch *pprof_new_batch(struct pprof_receiver *r, const char *tenant);
/* Renames pprof label profile_id to span_id (what Pyroscope does). */
int pprof_profile_id_to_span_id(struct fc_batch *b);
/*
 * Applies the input caps (core/limits.h: a refusal is answered 400 and
 * counted), then sends the batch down the pipelines and maps the outcome to
 * an HTTP answer.
 */
void pprof_deliver(struct pprof_receiver *r, struct fc_batch *b, struct fc_http_response *resp);
/*
 * Refuses a request that did not reach the pipeline: counts it, and answers
 * JSON {code,message} with the status from err->code (or `status` when not 0).
 */
void pprof_error(struct pprof_receiver *r, struct fc_http_response *resp, int status,
                 const struct fc_error *err);

void pprof_handle_ingest(void *ctx, const struct fc_http_request *req,
                         struct fc_http_response *resp);
void pprof_handle_push(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp);

#endif
