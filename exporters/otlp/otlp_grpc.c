/*
 * otlp exporter (the Collector's otlp, alias otlp_grpc): calls
 * ProfilesService/Export on gRPC core. One channel per exporter, a
 * completion queue per consumer thread (grpc_client.h). The queue holds the
 * encoded protobuf, gzipped (ISA-L's igzip, FC_GZIP_FASTEST) when compression is gzip,
 * the Collector's default: we compress once at enqueue, which is cheaper
 * than gRPC's zlib, keeps the persistent queue small, and gRPC sends the
 * bytes as they are. Statuses are classified by fc_grpc_result (client.h), with
 * RetryInfo from the grpc-status-details-bin trailer; an OK answer is read
 * for partial success.
 */
#include "core/component.h"
#include "core/log.h"
#include "core/mem.h"
#include "exporters/helper/client.h"
#include "exporters/helper/grpc_client.h"
#include "exporters/helper/sender.h"
#include "exporters/otlp/otlp_exp.h"
#include "formats/gzip.h"
#include "formats/otlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_METHOD "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

enum compression { COMP_GZIP, COMP_NONE };

struct keepalive_config {
    int64_t time;
    int64_t timeout;
    bool permit_without_stream;
};

struct otlp_grpc_config {
    const char *endpoint;
    struct fc_tls_client_config tls;
    struct fc_str_map headers;
    int compression; /* enum compression */
    struct keepalive_config keepalive;
    struct fc_sender_config sender;
};

struct otlp_grpc {
    struct fc_sender *sender; /* first: fc_sender_exporter_* find it there */
    const struct otlp_grpc_config *cfg;
    char *target; /* endpoint without its scheme */
    bool use_tls;
    char component[128];
    struct fc_grpc_channel *channel;
    struct fc_log_limit warn;
};

struct conn {
    struct fc_grpc_conn *grpc;
    struct fc_buf answer;
    struct fc_buf plain; /* a queued gzipped record, gunzipped for a channel without gzip */
};

static const struct fc_field keepalive_fields[] = {
    {"time", FC_FIELD_DURATION, "10s", offsetof(struct keepalive_config, time),
     "ping the peer after this long without activity (0 = never)"},
    {"timeout", FC_FIELD_DURATION, "10s", offsetof(struct keepalive_config, timeout),
     "close the connection when a ping is not answered within this"},
    {"permit_without_stream", FC_FIELD_BOOL, "false",
     offsetof(struct keepalive_config, permit_without_stream),
     "ping also when no call is under way"},
    {NULL},
};

static const struct fc_field otlp_grpc_fields[] = {
    {"endpoint", FC_FIELD_STR, NULL, offsetof(struct otlp_grpc_config, endpoint),
     "host:port of the peer's OTLP gRPC service (TLS unless tls.insecure); or "
     "`https://host:port` (TLS), `http://host:port` (plaintext)",
     .flags = FC_FIELD_REQUIRED},
    {"tls", FC_FIELD_OBJECT, NULL, offsetof(struct otlp_grpc_config, tls),
     "TLS to the peer (on unless `insecure: true` or an http:// endpoint)",
     .sub = fc_tls_client_fields},
    {"headers", FC_FIELD_STR_MAP, NULL, offsetof(struct otlp_grpc_config, headers),
     "metadata sent with every call (an x-scope-orgid here replaces the batch's tenant, "
     "which is sent as x-scope-orgid unless it is the default one, anonymous)"},
    {"compression", FC_FIELD_ENUM, "gzip", offsetof(struct otlp_grpc_config, compression),
     "message compression: gzip or none", .choices = "gzip|none"},
    {"keepalive", FC_FIELD_OBJECT, NULL, offsetof(struct otlp_grpc_config, keepalive),
     "HTTP/2 keepalive pings", .sub = keepalive_fields},
    FC_SENDER_FIELDS(struct otlp_grpc_config, sender),
    {NULL},
};

/*
 * TLS or not: the endpoint's scheme decides when it has one (https:// TLS,
 * http:// plaintext); a bare host:port uses TLS unless tls.insecure, as the
 * Collector's otlp exporter.
 */
static bool wants_tls(const char *endpoint, const struct fc_tls_client_config *tls)
{
    if (strncmp(endpoint, "https://", 8) == 0) {
        return true;
    }
    if (strncmp(endpoint, "http://", 7) == 0) {
        return false;
    }
    return !tls->insecure;
}

static int otlp_grpc_create(struct fc_exporter *self, struct fc_error *err)
{
    const struct otlp_grpc_config *cfg = self->config;
    const char *target = cfg->endpoint;
    struct otlp_grpc *x;
    int rc;

    if (strncmp(target, "https://", 8) == 0) {
        target += 8;
    } else if (strncmp(target, "http://", 7) == 0) {
        target += 7;
    }
    if (target[0] == '\0' || strchr(target, '/') != NULL) {
        return fc_errorf(err, FC_ECONFIG, "endpoint: %s is not host:port", cfg->endpoint);
    }
    if ((rc = fc_tls_client_check(&cfg->tls, err)) != FC_OK ||
        (rc = fc_grpc_headers_check(&cfg->headers, err)) != FC_OK ||
        (rc = fc_sender_config_check(&cfg->sender, err)) != FC_OK) {
        return rc;
    }
    if (cfg->keepalive.time < 0 || cfg->keepalive.timeout < 0) {
        return fc_errorf(err, FC_ECONFIG, "keepalive: durations must not be negative");
    }
    x = fc_xcalloc(1, sizeof(*x));
    x->cfg = cfg;
    x->target = fc_xstrdup(target);
    x->use_tls = wants_tls(cfg->endpoint, &cfg->tls);
    snprintf(x->component, sizeof(x->component), "exporter/%s", self->id);
    self->ctx = x;
    return FC_OK;
}

static void *conn_new(void *ctx)
{
    struct otlp_grpc *x = ctx;
    struct conn *c = fc_xcalloc(1, sizeof(*c));

    c->grpc = fc_grpc_conn_new(x->channel);
    fc_buf_init(&c->answer, 0);
    fc_buf_init(&c->plain, 0);
    return c;
}

static void conn_free(void *ctx, void *conn)
{
    struct conn *c = conn;

    (void)ctx;
    if (c != NULL) {
        fc_grpc_conn_free(c->grpc);
        fc_buf_release(&c->answer);
        fc_buf_release(&c->plain);
        free(c);
    }
}

static void otlp_grpc_send(void *ctx, void *conn, const struct fc_send_item *item,
                           int64_t timeout_ns, struct fc_send_result *res)
{
    struct otlp_grpc *x = ctx;
    struct conn *c = conn;
    bool channel_gzip = x->cfg->compression == COMP_GZIP;
    struct fc_otlp_form form,
        configured = {false, channel_gzip ? FC_OTLP_COMP_GZIP : FC_OTLP_COMP_NONE};
    struct fc_grpc_request rq = {
        .tenant = item->tenant,
        .body = item->body,
        .body_len = item->body_len,
        .timeout_ns = timeout_ns,
    };
    struct fc_error err = {0};

    /*
     * Sent as the body was encoded (a queued record may predate a change of
     * `compression`): a gzipped one is flagged compressed when the channel
     * speaks gzip, else gunzipped; a plain one is compressed by the channel.
     */
    memset(res, 0, sizeof(*res));
    if (!fc_otlp_form_parse(item->target, &configured, &form) || form.json ||
        form.compression == FC_OTLP_COMP_ZSTD) {
        res->outcome = FC_SEND_PERMANENT;
        snprintf(res->error_type, sizeof(res->error_type), "bad_target");
        snprintf(res->message, sizeof(res->message),
                 "queued record of an encoding gRPC cannot send: %.64s", item->target);
        return;
    }
    rq.gzipped = form.compression == FC_OTLP_COMP_GZIP;
    if (rq.gzipped && !channel_gzip) {
        fc_buf_reset(&c->plain);
        if (fc_gunzip(item->body, item->body_len, SIZE_MAX, &c->plain, &err) != FC_OK) {
            res->outcome = FC_SEND_PERMANENT;
            snprintf(res->error_type, sizeof(res->error_type), "bad_target");
            snprintf(res->message, sizeof(res->message), "queued record: %s", err.msg);
            return;
        }
        rq.body = c->plain.data;
        rq.body_len = c->plain.len;
        rq.gzipped = false;
    }
    fc_grpc_unary(c->grpc, &rq, res, &c->answer);
    fc_otlp_exp_partial(&c->answer, false, x->component, &x->warn, res);
}

static const struct fc_sender_ops otlp_grpc_ops = {
    .conn_new = conn_new,
    .conn_free = conn_free,
    .send = otlp_grpc_send,
};

static int otlp_grpc_start(struct fc_exporter *self, struct fc_host *host, struct fc_error *err)
{
    struct otlp_grpc *x = self->ctx;
    const struct otlp_grpc_config *cfg = x->cfg;
    struct fc_grpc_channel_config cc = {
        .target = x->target,
        .use_tls = x->use_tls,
        .tls = &cfg->tls,
        .gzip = cfg->compression == COMP_GZIP,
        .keepalive_time_ns = cfg->keepalive.time,
        .keepalive_timeout_ns = cfg->keepalive.timeout,
        .keepalive_permit_without_stream = cfg->keepalive.permit_without_stream,
        .headers = &cfg->headers,
    };
    int rc;

    (void)host;
    rc = fc_grpc_channel_new(&cc, EXPORT_METHOD, &x->channel, err);
    if (rc == FC_OK) {
        rc = fc_sender_create(&cfg->sender, self, &otlp_grpc_ops, x, &x->sender, err);
    }
    if (rc == FC_OK) {
        rc = fc_sender_start(x->sender, err);
    }
    if (rc == FC_OK) {
        fc_log_info(x->component, "sending to %s (%s)", x->target,
                    x->use_tls ? "TLS" : "plaintext");
    }
    return rc;
}

static int otlp_grpc_export(struct fc_exporter *self, struct fc_batch *b, struct fc_error *err)
{
    struct otlp_grpc *x = self->ctx;
    struct fc_send_item *item;
    int rc;

    if (b->n_profiles == 0) {
        return FC_OK;
    }
    rc = fc_otlp_exp_protobuf_item(b, x->cfg->compression == COMP_GZIP, &item, err);
    return rc == FC_OK ? fc_sender_submit(x->sender, &item, 1, err) : rc;
}

static void otlp_grpc_destroy(struct fc_exporter *self)
{
    struct otlp_grpc *x = self->ctx;

    if (x == NULL) {
        return;
    }
    fc_sender_free(x->sender); /* frees the conns: before the channel */
    fc_grpc_channel_free(x->channel);
    free(x->target);
    free(x);
    self->ctx = NULL;
}

const struct fc_exporter_type fc_otlp_exporter = {
    .info =
        {
            .name = "otlp",
            .description = "forwards profiles to an OTLP gRPC peer (the Collector's otlp "
                           "exporter), with a sending queue and retries",
            .stability = FC_STABILITY_ALPHA,
            .fields = otlp_grpc_fields,
            .config_size = sizeof(struct otlp_grpc_config),
        },
    .counts_sent = true,
    .create = otlp_grpc_create,
    .start = otlp_grpc_start,
    .export = otlp_grpc_export,
    .stopping = fc_sender_exporter_stopping,
    .shutdown = fc_sender_exporter_shutdown,
    .destroy = otlp_grpc_destroy,
};
