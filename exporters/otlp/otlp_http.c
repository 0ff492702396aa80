/*
 * otlphttp exporter (the Collector's otlphttp, alias otlp_http): POSTs
 * ExportProfilesServiceRequest to <endpoint>/v1development/profiles (or
 * profiles_endpoint) in protobuf or JSON, compressed when the batch is
 * encoded, so the queue (and a retry) holds the bytes that go on the wire.
 * Answers are classified by fc_http_result (client.h); a 2xx body is read
 * for partial success.
 */
#include "core/component.h"
#include "core/log.h"
#include "core/mem.h"
#include "exporters/helper/http_client.h"
#include "exporters/helper/sender.h"
#include "exporters/otlp/otlp_exp.h"
#include "formats/gzip.h"
#include "formats/zstd.h"
#include "formats/otlp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROFILES_PATH "v1development/profiles"

enum encoding { ENC_PROTO, ENC_JSON };
enum compression { COMP_GZIP, COMP_ZSTD, COMP_NONE };

struct otlphttp_config {
    const char *endpoint;
    const char *profiles_endpoint;
    int encoding;    /* enum encoding */
    int compression; /* enum compression */
    struct fc_str_map headers;
    struct fc_tls_client_config tls;
    struct fc_sender_config sender;
};

struct otlphttp {
    struct fc_sender *sender; /* first: fc_sender_exporter_* find it there */
    struct fc_exporter *self;
    const struct otlphttp_config *cfg;
    char *url;
    char component[128];
    struct fc_log_limit warn;
};

/* A consumer thread's connection, and the answer it reads partial success from. */
struct conn {
    struct fc_http_conn *http;
    struct fc_buf answer;
};

static const struct fc_field otlphttp_fields[] = {
    {"endpoint", FC_FIELD_STR, "", offsetof(struct otlphttp_config, endpoint),
     "base URL of the peer (http:// or https://); profiles go to "
     "<endpoint>/" PROFILES_PATH},
    {"profiles_endpoint", FC_FIELD_STR, "", offsetof(struct otlphttp_config, profiles_endpoint),
     "full URL for profiles, instead of the one derived from endpoint"},
    {"encoding", FC_FIELD_ENUM, "proto", offsetof(struct otlphttp_config, encoding),
     "request body: `proto` (application/x-protobuf) or `json` (application/json)",
     .choices = "proto|json"},
    {"compression", FC_FIELD_ENUM, "gzip", offsetof(struct otlphttp_config, compression),
     "Content-Encoding of requests: gzip, zstd or none", .choices = "gzip|zstd|none"},
    {"headers", FC_FIELD_STR_MAP, NULL, offsetof(struct otlphttp_config, headers),
     "headers added to every request (an X-Scope-OrgID here replaces the batch's tenant, "
     "which is sent as X-Scope-OrgID unless it is the default one, anonymous)"},
    {"tls", FC_FIELD_OBJECT, NULL, offsetof(struct otlphttp_config, tls),
     "TLS for https:// endpoints", .sub = fc_tls_client_fields},
    FC_SENDER_FIELDS(struct otlphttp_config, sender),
    {NULL},
};

static bool has_scheme(const char *url)
{
    return strncmp(url, "http://", 7) == 0 || strncmp(url, "https://", 8) == 0;
}

static int otlphttp_create(struct fc_exporter *self, struct fc_error *err)
{
    const struct otlphttp_config *cfg = self->config;
    struct otlphttp *x;
    const char *url = cfg->profiles_endpoint;
    int rc;

    if (url[0] == '\0') {
        if (cfg->endpoint[0] == '\0') {
            return fc_errorf(err, FC_ECONFIG, "endpoint: required (or profiles_endpoint)");
        }
        url = cfg->endpoint;
    }
    if (!has_scheme(url)) {
        return fc_errorf(err, FC_ECONFIG, "%s: %s is not an http:// or https:// URL",
                         url == cfg->endpoint ? "endpoint" : "profiles_endpoint", url);
    }
    if ((rc = fc_tls_client_check(&cfg->tls, err)) != FC_OK ||
        (rc = fc_sender_config_check(&cfg->sender, err)) != FC_OK) {
        return rc;
    }
    x = fc_xcalloc(1, sizeof(*x));
    x->self = self;
    x->cfg = cfg;
    snprintf(x->component, sizeof(x->component), "exporter/%s", self->id);
    if (cfg->profiles_endpoint[0] != '\0') {
        x->url = fc_xstrdup(cfg->profiles_endpoint);
    } else {
        size_t n = strlen(cfg->endpoint);
        x->url = fc_xasprintf("%s%s" PROFILES_PATH, cfg->endpoint,
                              n > 0 && cfg->endpoint[n - 1] == '/' ? "" : "/");
    }
    self->ctx = x;
    return FC_OK;
}

static void *conn_new(void *ctx)
{
    struct otlphttp *x = ctx;
    struct conn *c = fc_xcalloc(1, sizeof(*c));

    c->http = fc_http_conn_new(&x->cfg->tls);
    fc_buf_init(&c->answer, 0);
    return c;
}

static void conn_free(void *ctx, void *conn)
{
    struct conn *c = conn;

    (void)ctx;
    if (c != NULL) {
        fc_http_conn_free(c->http);
        fc_buf_release(&c->answer);
        free(c);
    }
}

static struct fc_otlp_form configured_form(const struct otlphttp_config *cfg)
{
    struct fc_otlp_form f = {cfg->encoding == ENC_JSON,
                             cfg->compression == COMP_GZIP   ? FC_OTLP_COMP_GZIP
                             : cfg->compression == COMP_ZSTD ? FC_OTLP_COMP_ZSTD
                                                             : FC_OTLP_COMP_NONE};
    return f;
}

static void otlphttp_send(void *ctx, void *conn, const struct fc_send_item *item,
                          int64_t timeout_ns, struct fc_send_result *res)
{
    struct otlphttp *x = ctx;
    struct conn *c = conn;
    const struct otlphttp_config *cfg = x->cfg;
    struct fc_otlp_form form, configured = configured_form(cfg);
    struct fc_http_request rq = {
        .url = x->url,
        .headers = &cfg->headers,
        .tenant = item->tenant,
        .body = item->body,
        .body_len = item->body_len,
        .timeout_ns = timeout_ns,
    };

    if (c == NULL || c->http == NULL) {
        memset(res, 0, sizeof(*res));
        res->outcome = FC_SEND_RETRY;
        snprintf(res->error_type, sizeof(res->error_type), "transport");
        snprintf(res->message, sizeof(res->message), "cannot create a curl handle");
        return;
    }
    /* Labelled as the body was encoded (a queued record may predate a config change). */
    if (!fc_otlp_form_parse(item->target, &configured, &form)) {
        memset(res, 0, sizeof(*res));
        res->outcome = FC_SEND_PERMANENT;
        snprintf(res->error_type, sizeof(res->error_type), "bad_target");
        snprintf(res->message, sizeof(res->message), "queued record of unknown encoding %.64s",
                 item->target);
        return;
    }
    rq.json = form.json;
    rq.content_type = form.json ? "application/json" : "application/x-protobuf";
    rq.content_encoding = form.compression == FC_OTLP_COMP_GZIP   ? "gzip"
                          : form.compression == FC_OTLP_COMP_ZSTD ? "zstd"
                                                                  : NULL;
    fc_http_post(c->http, &rq, res, &c->answer);
    fc_otlp_exp_partial(&c->answer, form.json, x->component, &x->warn, res);
}

static const struct fc_sender_ops otlphttp_ops = {
    .conn_new = conn_new,
    .conn_free = conn_free,
    .send = otlphttp_send,
};

static int otlphttp_start(struct fc_exporter *self, struct fc_host *host, struct fc_error *err)
{
    struct otlphttp *x = self->ctx;
    int rc;

    (void)host;
    rc = fc_sender_create(&x->cfg->sender, self, &otlphttp_ops, x, &x->sender, err);
    if (rc == FC_OK) {
        rc = fc_sender_start(x->sender, err);
    }
    if (rc == FC_OK) {
        fc_log_info(x->component, "sending to %s", x->url);
    }
    return rc;
}

static int otlphttp_export(struct fc_exporter *self, struct fc_batch *b, struct fc_error *err)
{
    struct otlphttp *x = self->ctx;
    const struct otlphttp_config *cfg = x->cfg;
    struct fc_buf raw, packed;
    struct fc_send_item *item = NULL;
    const uint8_t *body = NULL;
    size_t len = 0;
    uint32_t profiles = 0;
    int rc;

    if (b->n_profiles == 0) {
        return FC_OK;
    }
    if (cfg->encoding == ENC_PROTO && cfg->compression != COMP_ZSTD) {
        rc = fc_otlp_exp_protobuf_item(b, cfg->compression == COMP_GZIP, &item, err);
        return rc == FC_OK ? fc_sender_submit(x->sender, &item, 1, err) : rc;
    }
    fc_buf_init(&raw, 0);
    fc_buf_init(&packed, 0);
    if (cfg->encoding == ENC_JSON) {
        rc = fc_otlp_encode_json(b, &raw, err);
        body = raw.data;
        len = raw.len;
        profiles = fc_otlp_exp_profiles(b);
    } else {
        rc = fc_otlp_exp_protobuf(b, &raw, &body, &len, &profiles, err);
    }
    if (rc == FC_OK && cfg->compression == COMP_GZIP) {
        rc = fc_gzip(body, len, FC_GZIP_FASTEST, &packed, err);
        body = packed.data;
        len = packed.len;
    } else if (rc == FC_OK && cfg->compression == COMP_ZSTD) {
        rc = fc_zstd(body, len, 3, &packed, err);
        body = packed.data;
        len = packed.len;
    }
    if (rc == FC_OK) {
        struct fc_otlp_form form = configured_form(cfg);
        item = fc_otlp_exp_item(b, body, len, profiles, &form);
    }
    fc_buf_release(&raw);
    fc_buf_release(&packed);
    return rc == FC_OK ? fc_sender_submit(x->sender, &item, 1, err) : rc;
}

static void otlphttp_destroy(struct fc_exporter *self)
{
    struct otlphttp *x = self->ctx;

    if (x == NULL) {
        return;
    }
    fc_sender_free(x->sender);
    free(x->url);
    free(x);
    self->ctx = NULL;
}

const struct fc_exporter_type fc_otlphttp_exporter = {
    .info =
        {
            .name = "otlphttp",
            .description = "forwards profiles to an OTLP/HTTP peer (the Collector's otlphttp "
                           "exporter), with a sending queue and retries",
            .stability = FC_STABILITY_ALPHA,
            .fields = otlphttp_fields,
            .config_size = sizeof(struct otlphttp_config),
        },
    .counts_sent = true,
    .create = otlphttp_create,
    .start = otlphttp_start,
    .export = otlphttp_export,
    .stopping = fc_sender_exporter_stopping,
    .shutdown = fc_sender_exporter_shutdown,
    .destroy = otlphttp_destroy,
};
