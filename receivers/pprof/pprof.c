/*
 * pprof receiver: accepts what Grafana Pyroscope's SDKs push (POST /ingest
 * and the Connect push.v1.PusherService/Push), unchanged, on one HTTP port.
 */
#include "receivers/pprof/pprof.h"

#include "core/auth.h"
#include "core/extensions.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct fc_field basic_fields[] = {
    {"username", FC_FIELD_STR, "",
     offsetof(struct pprof_config, auth.basic.username) - offsetof(struct pprof_config, auth.basic),
     "HTTP basic auth user"},
    {"password", FC_FIELD_STR, "",
     offsetof(struct pprof_config, auth.basic.password) - offsetof(struct pprof_config, auth.basic),
     "HTTP basic auth password"},
    {NULL},
};

static const struct fc_field auth_fields[] = {
    {"authenticator", FC_FIELD_STR, "",
     offsetof(struct pprof_config, auth.authenticator) - offsetof(struct pprof_config, auth),
     "the id of an auth extension (tokens and users bound to tenants and roles; every route "
     "needs `write`); exclusive with the legacy bearer_token and basic below"},
    {"bearer_token", FC_FIELD_STR, "",
     offsetof(struct pprof_config, auth.bearer_token) - offsetof(struct pprof_config, auth),
     "legacy: when set, requests must send `Authorization: Bearer <token>`; checked by the "
     "authenticator an extension builds (failure limit, flamecol_auth_refusals_total), bound to "
     "no tenant (X-Scope-OrgID decides)"},
    {"basic", FC_FIELD_OBJECT, NULL,
     offsetof(struct pprof_config, auth.basic) - offsetof(struct pprof_config, auth),
     "legacy: when a username is set, requests must send matching basic auth (checked as "
     "bearer_token is)",
     .sub = basic_fields},
    {NULL},
};

static const struct fc_field pprof_fields[] = {
    {"endpoint", FC_FIELD_STR, "127.0.0.1:4040", offsetof(struct pprof_config, endpoint),
     "host:port to listen on (shared with other components naming the same endpoint)"},
    FC_TLS_SERVER_FIELD(offsetof(struct pprof_config, tls)),
    {"max_request_body_size", FC_FIELD_SIZE, "16MiB",
     offsetof(struct pprof_config, max_request_body_size), "larger request bodies get 413"},
    {"max_decompressed_size", FC_FIELD_SIZE, "128MiB",
     offsetof(struct pprof_config, max_decompressed_size),
     "a gzipped profile that inflates past this gets 413 (decompression bombs)"},
    FC_INPUT_LIMITS_FIELDS(offsetof(struct pprof_config, limits)),
    {"retry_after", FC_FIELD_DURATION, "5s", offsetof(struct pprof_config, retry_after),
     "Retry-After sent with 429/503 when the pipeline pushes back"},
    {"auth", FC_FIELD_OBJECT, NULL, offsetof(struct pprof_config, auth),
     "optional authentication: an authenticator, or (legacy) one bearer token or basic user",
     .sub = auth_fields},
    {NULL},
};

static int pprof_create(struct fc_receiver *self, struct fc_error *err)
{
    const struct pprof_config *cfg = self->config;
    struct pprof_receiver *r;
    char host[256];
    uint16_t port;

    if (fc_parse_endpoint(cfg->endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return err->code;
    }
    if (cfg->max_request_body_size <= 0 || cfg->max_decompressed_size <= 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "max_request_body_size and max_decompressed_size must "
                         "be positive");
    }
    if (fc_input_limits_validate(&cfg->limits, err) != FC_OK) {
        return err->code;
    }
    if (fc_tls_server_check(&cfg->tls, err) != FC_OK) {
        return err->code;
    }
    if (cfg->auth.bearer_token[0] != '\0' && cfg->auth.basic.username[0] != '\0') {
        return fc_errorf(err, FC_ECONFIG, "auth: set bearer_token or basic, not both");
    }
    if (cfg->auth.authenticator[0] != '\0' &&
        (cfg->auth.bearer_token[0] != '\0' || cfg->auth.basic.username[0] != '\0')) {
        return fc_errorf(err, FC_ECONFIG,
                         "auth: set authenticator or the legacy bearer_token/basic, not both");
    }
    r = fc_xcalloc(1, sizeof(*r));
    r->self = self;
    r->cfg = cfg;
    r->limits.max_decompressed = (size_t)cfg->max_decompressed_size;
    r->truncated_stacks = fc_input_limits_truncated_counter(self->id);
    /* The legacy keys: one credential, checked by the authenticator extensions use. */
    if ((cfg->auth.bearer_token[0] != '\0' || cfg->auth.basic.username[0] != '\0') &&
        fc_auth_new_single(cfg->auth.bearer_token, cfg->auth.basic.username,
                           cfg->auth.basic.password, &r->legacy_auth, err) != FC_OK) {
        free(r);
        return err->code;
    }
    self->ctx = r;
    return FC_OK;
}

static int pprof_start(struct fc_receiver *self, struct fc_host *host, struct fc_error *err)
{
    struct pprof_receiver *r = self->ctx;
    struct fc_http_server *srv = fc_http_server_get(host->http, r->cfg->endpoint, err);
    size_t max = (size_t)r->cfg->max_request_body_size;
    struct fc_auth *auth = NULL;

    if (srv == NULL || fc_http_server_tls(srv, &r->cfg->tls, self->id, err) != FC_OK) {
        return err->code;
    }
    if (r->legacy_auth != NULL) {
        auth = r->legacy_auth;
    } else if (fc_extensions_auth(host->extensions, r->cfg->auth.authenticator, &auth, err) !=
               FC_OK) {
        return fc_error_wrap(err, "auth");
    }
    /* Every route of this receiver ingests: it needs the write role. */
    fc_http_server_auth(srv, self->id, auth, FC_AUTH_WRITE);
    if (fc_http_route(srv, "POST", "/ingest", max, pprof_handle_ingest, r, self->id, err) ||
        fc_http_route(srv, "POST", "/pyroscope/ingest", max, pprof_handle_ingest, r, self->id,
                      err) ||
        fc_http_route(srv, "POST", "/push.v1.PusherService/Push", max, pprof_handle_push, r,
                      self->id, err)) {
        return err->code;
    }
    return FC_OK;
}

static void pprof_destroy(struct fc_receiver *self)
{
    struct pprof_receiver *r = self->ctx;

    fc_auth_free(r->legacy_auth); /* the servers have stopped: no request uses it */
    free(r);
    self->ctx = NULL;
}

int pprof_check_request(struct pprof_receiver *r, const struct fc_http_request *req,
                        struct fc_http_response *resp, const char **tenant)
{
    struct fc_error err = {0};

    /* Credentials were checked before the handler (fc_http_server_auth). */
    if (fc_http_tenant(req, tenant, &err) != FC_OK) {
        pprof_error(r, resp, 400, &err);
        return -1;
    }
    return 0;
}

struct fc_batch *pprof_new_batch(struct pprof_receiver *r, const char *tenant)
{
    /* Decoded tables take a few times the wire size; the cap keeps one request bounded. */
    struct fc_batch *b = fc_batch_new((size_t)r->cfg->max_decompressed_size * 4);

    if (b != NULL && fc_batch_set_tenant(b, tenant) != FC_OK) {
        fc_batch_unref(b);
        return NULL;
    }
    return b;
}

int pprof_profile_id_to_span_id(struct fc_batch *b)
{
    uint32_t from, to;
    int rc = fc_dict_cstring(b, "profile_id", &from);

    rc = rc ? rc : fc_dict_cstring(b, "span_id", &to);
    if (rc != FC_OK) {
        return rc;
    }
    /* The batch is still the receiver's own, so its dictionary may change in place. */
    for (uint32_t i = 1; i < b->dict.n_attrs; i++) {
        if (b->dict.attrs[i].key == from) {
            b->dict.attrs[i].key = to;
        }
    }
    return FC_OK;
}

static const char *connect_code(int status)
{
    switch (status) {
    case 400:
        return "invalid_argument";
    case 401:
        return "unauthenticated";
    case 404:
        return "not_found";
    case 413:
    case 429:
        return "resource_exhausted";
    case 501:
        return "unimplemented";
    case 503:
        return "unavailable";
    case 500:
        return "internal";
    default:
        return "unknown";
    }
}

/* Writes the answer; counting is the caller's (see pprof_error). */
static void write_error(struct pprof_receiver *r, struct fc_http_response *resp, int status,
                        const struct fc_error *err)
{
    char secs[32];

    if (status == 0) {
        status = fc_err_http_status(err->code);
    }
    resp->status = status;
    resp->content_type = "application/json";
    fc_buf_reset(&resp->body);
    fc_buf_printf(&resp->body, "{\"code\":\"%s\",\"message\":\"", connect_code(status));
    fc_buf_json_escape(&resp->body, err->msg, strlen(err->msg));
    fc_buf_puts(&resp->body, "\"}");
    if (status == 429 || status == 503) {
        snprintf(secs, sizeof(secs), "%lld",
                 (long long)((r->cfg->retry_after + 999999999LL) / 1000000000LL));
        fc_http_response_header(resp, "Retry-After", secs);
    }
    if (status >= 500 || status == 429) {
        fc_log_limited(&r->refused_log, 10 * FC_NS_PER_SEC, FC_LOG_WARN, r->self->id,
                       "refused request: %s", err->msg);
    } else {
        fc_log_debug(r->self->id, "refused request (%d): %s", status, err->msg);
    }
}

void pprof_error(struct pprof_receiver *r, struct fc_http_response *resp, int status,
                 const struct fc_error *err)
{
    /* Every request refused before it reaches the pipeline is counted here, once. */
    fc_metric_add(r->self->metrics.failed_batches, 1);
    write_error(r, resp, status, err);
}

void pprof_deliver(struct pprof_receiver *r, struct fc_batch *b, struct fc_http_response *resp)
{
    struct fc_error err = {0};
    uint64_t truncated = 0;

    if (fc_input_limits_apply(&r->cfg->limits, b, &truncated, &err) != FC_OK) {
        fc_metric_add(r->self->metrics.failed_samples, (int64_t)fc_batch_sample_count(b));
        pprof_error(r, resp, 400, &err);
        return;
    }
    fc_metric_add(r->truncated_stacks, (int64_t)truncated);
    /* The pipeline counts its own accepted and refused requests. */
    if (fc_receiver_consume(r->self, b, &err) != FC_OK) {
        write_error(r, resp, 0, &err);
        return;
    }
    resp->status = 200;
}

const struct fc_receiver_type fc_pprof_receiver = {
    .info =
        {
            .name = "pprof",
            .description = "Pyroscope-compatible push: POST /ingest (pprof, multipart, folded) "
                           "and /push.v1.PusherService/Push",
            .stability = FC_STABILITY_BETA,
            .fields = pprof_fields,
            .config_size = sizeof(struct pprof_config),
        },
    .create = pprof_create,
    .start = pprof_start,
    .destroy = pprof_destroy,
};
