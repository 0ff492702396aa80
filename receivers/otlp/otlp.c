/*
 * otlp receiver: OTLP profiles over gRPC and HTTP, as the OpenTelemetry
 * Collector's otlp receiver takes them.
 */
#include "receivers/otlp/otlp.h"

#include "core/http_server.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "formats/otlp_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(struct otlp_config, f)

static const struct fc_field grpc_fields[] = {
    {"endpoint", FC_FIELD_STR, "127.0.0.1:4317", OFF(protocols.grpc.endpoint) - OFF(protocols.grpc),
     "host:port of the gRPC listener"},
    FC_TLS_SERVER_FIELD(OFF(protocols.grpc.tls) - OFF(protocols.grpc)),
    {"max_recv_msg_size", FC_FIELD_SIZE, "16MiB",
     OFF(protocols.grpc.max_recv_msg_size) - OFF(protocols.grpc),
     "larger messages get RESOURCE_EXHAUSTED"},
    {"threads", FC_FIELD_INT, "1", OFF(protocols.grpc.threads) - OFF(protocols.grpc),
     "threads that poll gRPC's completion queue (1-16); a call is decoded and run through "
     "the pipelines on the thread that received it while another polls (started when none "
     "is free: at most one more per call in flight, see max_in_flight)"},
    {"max_in_flight", FC_FIELD_INT, "64", OFF(protocols.grpc.max_in_flight) - OFF(protocols.grpc),
     "calls handled at once (1-4096); more get RESOURCE_EXHAUSTED with RetryInfo at once, "
     "never queued"},
    FC_SERVER_AUTH_FIELD(OFF(protocols.grpc.auth) - OFF(protocols.grpc)),
    {NULL},
};

static const struct fc_field http_fields[] = {
    {"endpoint", FC_FIELD_STR, "127.0.0.1:4318", OFF(protocols.http.endpoint) - OFF(protocols.http),
     "host:port of the HTTP listener (shared with components naming the same one)"},
    FC_TLS_SERVER_FIELD(OFF(protocols.http.tls) - OFF(protocols.http)),
    {"max_request_body_size", FC_FIELD_SIZE, "16MiB",
     OFF(protocols.http.max_request_body_size) - OFF(protocols.http), "larger bodies get 413"},
    FC_SERVER_AUTH_FIELD(OFF(protocols.http.auth) - OFF(protocols.http)),
    {NULL},
};

static const struct fc_field protocols_fields[] = {
    {"grpc", FC_FIELD_OBJECT, NULL, OFF(protocols.grpc) - OFF(protocols),
     "ProfilesService/Export over gRPC; on when the key is present", .sub = grpc_fields,
     .flags = FC_FIELD_PRESENCE},
    {"http", FC_FIELD_OBJECT, NULL, OFF(protocols.http) - OFF(protocols),
     "POST /v1development/profiles (protobuf or JSON); on when the key is present",
     .sub = http_fields, .flags = FC_FIELD_PRESENCE},
    {NULL},
};

static const struct fc_field otlp_fields[] = {
    {"protocols", FC_FIELD_OBJECT, NULL, OFF(protocols), "at least one of grpc and http",
     .sub = protocols_fields},
    {"max_decompressed_size", FC_FIELD_SIZE, "64MiB", OFF(max_decompressed_size),
     "a request that inflates past this is refused (413 / RESOURCE_EXHAUSTED)"},
    FC_INPUT_LIMITS_FIELDS(OFF(limits)),
    {"retry_after", FC_FIELD_DURATION, "5s", OFF(retry_after),
     "Retry-After / RetryInfo sent when the pipeline pushes back"},
    {NULL},
};

static int otlp_create(struct fc_receiver *self, struct fc_error *err)
{
    const struct otlp_config *cfg = self->config;
    struct otlp_receiver *r;
    char host[256];
    uint16_t port;
    char labels[256];

    if (!cfg->protocols.grpc.enabled && !cfg->protocols.http.enabled) {
        return fc_errorf(err, FC_ECONFIG,
                         "protocols: enable grpc and/or http (e.g. protocols: {grpc:, http:})");
    }
    if (cfg->protocols.grpc.enabled &&
        fc_parse_endpoint(cfg->protocols.grpc.endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return fc_error_wrap(err, "protocols.grpc");
    }
    if (cfg->protocols.http.enabled &&
        fc_parse_endpoint(cfg->protocols.http.endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return fc_error_wrap(err, "protocols.http");
    }
    if (cfg->protocols.grpc.threads < 1 || cfg->protocols.grpc.threads > 16) {
        return fc_errorf(err, FC_ECONFIG, "protocols.grpc.threads must be between 1 and 16");
    }
    if (cfg->protocols.grpc.max_in_flight < 1 || cfg->protocols.grpc.max_in_flight > 4096) {
        return fc_errorf(err, FC_ECONFIG,
                         "protocols.grpc.max_in_flight must be between 1 and 4096");
    }
    if (cfg->max_decompressed_size <= 0 || cfg->protocols.grpc.max_recv_msg_size <= 0 ||
        cfg->protocols.http.max_request_body_size <= 0) {
        return fc_errorf(err, FC_ECONFIG, "sizes must be positive");
    }
    if (fc_input_limits_validate(&cfg->limits, err) != FC_OK) {
        return err->code;
    }
    if (cfg->protocols.grpc.enabled &&
        fc_tls_server_check(&cfg->protocols.grpc.tls, err) != FC_OK) {
        return fc_error_wrap(err, "protocols.grpc");
    }
    if (cfg->protocols.grpc.enabled && fc_tls_server_on(&cfg->protocols.grpc.tls) &&
        fc_tls_server_min13(&cfg->protocols.grpc.tls)) {
        /* gRPC core 1.51's C API has no minimum version for its SSL server credentials. */
        return fc_errorf(err, FC_ECONFIG,
                         "protocols.grpc.tls.min_version: 1.3 cannot be enforced with this gRPC "
                         "(1.51: its server accepts TLS 1.2 and 1.3); use 1.2");
    }
    if (cfg->protocols.http.enabled &&
        fc_tls_server_check(&cfg->protocols.http.tls, err) != FC_OK) {
        return fc_error_wrap(err, "protocols.http");
    }
    r = fc_xcalloc(1, sizeof(*r));
    r->self = self;
    r->cfg = cfg;
    snprintf(labels, sizeof(labels), "receiver=\"%s\"", self->id);
    r->rejected_profiles = fc_metrics_counter("flamecol_receiver_refused_profiles_total", labels,
                                              "Profiles rejected inside accepted requests "
                                              "(OTLP partial success).");
    r->truncated_stacks = fc_input_limits_truncated_counter(self->id);
    r->time_replaced = fc_metrics_counter(
        "flamecol_receiver_profiles_time_replaced_total", labels,
        "Profiles stored at their receive time: time_unix_nano 0 or before 2000-01-01.");
    self->ctx = r;
    return FC_OK;
}

static int otlp_start(struct fc_receiver *self, struct fc_host *host, struct fc_error *err)
{
    struct otlp_receiver *r = self->ctx;

    if (r->cfg->protocols.grpc.enabled &&
        fc_extensions_auth(host->extensions, r->cfg->protocols.grpc.auth.authenticator,
                           &r->grpc_auth, err) != FC_OK) {
        return fc_error_wrap(err, "protocols.grpc.auth");
    }
    if (r->cfg->protocols.http.enabled && otlp_http_start(r, host, err) != FC_OK) {
        return err->code;
    }
    if (r->cfg->protocols.grpc.enabled && otlp_grpc_start(r, err) != FC_OK) {
        return err->code;
    }
    return FC_OK;
}

static void otlp_shutdown(struct fc_receiver *self)
{
    otlp_grpc_stop(self->ctx);
}

static void otlp_destroy(struct fc_receiver *self)
{
    otlp_grpc_stop(self->ctx);
    free(self->ctx);
    self->ctx = NULL;
}

void otlp_count_refused(struct otlp_receiver *r)
{
    fc_metric_add(r->self->metrics.failed_batches, 1);
}

uint32_t otlp_fix_times(struct fc_batch *b, int64_t now)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        if (b->profiles[i].time_ns < OTLP_MIN_PLAUSIBLE_NS) {
            b->profiles[i].time_ns = now;
            n++;
        }
    }
    return n;
}

/* Decodes the request into b and applies every input cap; a refusal fills err. */
static int decode_capped(struct otlp_receiver *r, struct fc_batch *b, const struct otlp_request *rq,
                         struct fc_otlp_result *res, uint64_t *truncated, struct fc_error *err)
{
    const struct fc_input_limits *lim = &r->cfg->limits;
    unsigned depth = (unsigned)lim->max_message_depth;
    int rc = rq->json
                 ? fc_otlp_decode_json_depth(b, (const char *)rq->body, rq->len, depth, res, err)
                 : fc_otlp_decode_depth(b, rq->body, rq->len, depth, res, err);

    if (rc == FC_OK && (rc = fc_input_limits_apply(lim, b, truncated, err)) != FC_OK) {
        fc_metric_add(r->self->metrics.failed_samples, (int64_t)fc_batch_sample_count(b));
        fc_error_wrap(err, "otlp");
    }
    fc_metric_add(r->truncated_stacks, (int64_t)*truncated);
    return rc;
}

int otlp_export(struct otlp_receiver *r, const struct otlp_request *rq, struct fc_otlp_result *res,
                struct fc_error *err)
{
    /* Decoded tables take a few times the wire size; the cap bounds one request. */
    struct fc_batch *b = fc_batch_new((size_t)r->cfg->max_decompressed_size * 4);
    uint64_t truncated = 0;
    uint32_t replaced = 0;
    int rc;

    memset(res, 0, sizeof(*res));
    if (b == NULL) {
        return fc_errorf(err, FC_EUNAVAIL, "out of memory");
    }
    rc = fc_batch_set_tenant(b, rq->tenant ? rq->tenant : FC_DEFAULT_TENANT);
    if (rc == FC_OK) {
        rc = decode_capped(r, b, rq, res, &truncated, err);
    }
    if (rc != FC_OK) {
        otlp_count_refused(r);
        fc_batch_unref(b);
        return rc;
    }
    fc_metric_add(r->rejected_profiles, res->rejected_profiles);
    if (res->rejected_profiles > 0) {
        fc_log_debug(r->self->id, "rejected %u profiles: %s", res->rejected_profiles, res->message);
    }
    if (res->translated) {
        fc_log_debug(r->self->id, "%s", FC_OTLP_LAYOUT_TRANSLATED_NOTE);
    }
    replaced = otlp_fix_times(b, fc_now_ns());
    fc_metric_add(r->time_replaced, replaced);
    if (!rq->json && res->rejected_profiles == 0 && truncated == 0 && replaced == 0 &&
        !res->translated) {
        /* The batch is exactly the request: exporters may send its bytes as they came. */
        fc_batch_set_wire(b, rq->body, rq->len, rq->gzip, rq->gzip_len, res->profiles);
    }
    /* Nothing left to forward (empty, or every profile rejected): acknowledged as is. */
    if (b->n_profiles > 0) {
        rc = fc_receiver_consume(r->self, b, err);
    }
    fc_batch_unref(b);
    return rc;
}

int otlp_grpc_code(int rc)
{
    /* The Collector's mapping: a retryable refusal is UNAVAILABLE unless it is a limit. */
    return rc == FC_EAGAIN ? 8 : fc_err_grpc_status(rc);
}

const struct fc_receiver_type fc_otlp_receiver = {
    .info =
        {
            .name = "otlp",
            .description = "OTLP profiles over gRPC (ProfilesService/Export) and HTTP "
                           "(/v1development/profiles, protobuf or JSON)",
            .stability = FC_STABILITY_BETA,
            .fields = otlp_fields,
            .config_size = sizeof(struct otlp_config),
        },
    .create = otlp_create,
    .start = otlp_start,
    .shutdown = otlp_shutdown,
    .destroy = otlp_destroy,
};
