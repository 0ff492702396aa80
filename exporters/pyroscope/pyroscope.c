/*
 * pyroscope exporter: pushes to a Grafana Pyroscope server (or another
 * flamecol) as its SDKs and Alloy's pyroscope.write do, through the shared
 * sending machinery (exporters/helper/sender.h: queue, retries, persistent
 * queue).
 *
 *   protocol: push (default)  POST <endpoint>/push.v1.PusherService/Push, Connect,
 *                             application/proto: one request per batch, one
 *                             series per profile.
 *   protocol: ingest          POST <endpoint>/ingest?name=...&format=pprof, one
 *                             request per profile, the gzipped pprof as body.
 *
 * What goes on the wire, and what /ingest cannot carry (refused, named,
 * counted as send_failed{error_type="unrepresentable"}), is in
 * formats/pyroscope_push.h. The tenant is tenant_id when set, else the
 * batch's own (X-Scope-OrgID; none for the default tenant). Answers are
 * read as Pyroscope gives them: 2xx OK, Connect errors as JSON
 * {code, message} (fc_http_result).
 */
#include "core/buf.h"
#include "core/component.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "exporters/helper/client.h"
#include "exporters/helper/http_client.h"
#include "exporters/helper/sender.h"
#include "formats/pyroscope_push.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum protocol { PROTOCOL_PUSH, PROTOCOL_INGEST };

struct basic_auth {
    const char *username;
    const char *password;
};

struct pyro_config {
    const char *endpoint;
    int protocol; /* enum protocol */
    struct basic_auth basic_auth;
    const char *bearer_token;
    const char *tenant_id;
    struct fc_str_map headers;
    struct fc_tls_client_config tls;
    struct fc_sender_config sender;
};

struct pyro_exporter {
    struct fc_sender *sender; /* first: fc_sender_exporter_* find it there */
    const struct pyro_config *cfg;
    struct fc_exporter *self;
    char *base;                       /* endpoint without a trailing '/' */
    char *push_url;                   /* base + FC_PYRO_PUSH_PATH */
    _Atomic int64_t *unrepresentable; /* samples of batches /ingest cannot carry */
    struct fc_log_limit refused_log;
};

static const struct fc_field basic_fields[] = {
    {"username", FC_FIELD_STR, "", offsetof(struct basic_auth, username), "HTTP basic auth user"},
    {"password", FC_FIELD_STR, "", offsetof(struct basic_auth, password),
     "HTTP basic auth password"},
    {NULL},
};

static const struct fc_field pyro_fields[] = {
    {"endpoint", FC_FIELD_STR, NULL, offsetof(struct pyro_config, endpoint),
     "the server: http(s)://host:port[/prefix]", .flags = FC_FIELD_REQUIRED},
    {"protocol", FC_FIELD_ENUM, "push", offsetof(struct pyro_config, protocol),
     "`push`: Connect push.v1.PusherService/Push (every series label); `ingest`: /ingest with "
     "format=pprof, one request per profile",
     .choices = "push|ingest"},
    {"basic_auth", FC_FIELD_OBJECT, NULL, offsetof(struct pyro_config, basic_auth),
     "HTTP basic auth, when a username is set", .sub = basic_fields},
    {"bearer_token", FC_FIELD_STR, "", offsetof(struct pyro_config, bearer_token),
     "sent as Authorization: Bearer (not with basic_auth)"},
    {"tenant_id", FC_FIELD_STR, "", offsetof(struct pyro_config, tenant_id),
     "X-Scope-OrgID of every request; empty: each batch's own tenant (none for the "
     "default tenant, anonymous: the peer's credential decides)"},
    {"headers", FC_FIELD_STR_MAP, NULL, offsetof(struct pyro_config, headers),
     "extra HTTP headers (they win over the ones above)"},
    {"tls", FC_FIELD_OBJECT, NULL, offsetof(struct pyro_config, tls),
     "client TLS (an https endpoint)", .sub = fc_tls_client_fields},
    FC_SENDER_FIELDS(struct pyro_config, sender),
    {NULL},
};

static int check_endpoint(const char *endpoint, struct fc_error *err)
{
    const char *host;

    if (strncasecmp(endpoint, "http://", 7) == 0) {
        host = endpoint + 7;
    } else if (strncasecmp(endpoint, "https://", 8) == 0) {
        host = endpoint + 8;
    } else {
        return fc_errorf(err, FC_ECONFIG,
                         "endpoint \"%.200s\": expected http(s)://host:port[/prefix]", endpoint);
    }
    if (host[0] == '\0' || host[0] == '/' || strpbrk(endpoint, "?# \t\r\n") != NULL) {
        return fc_errorf(err, FC_ECONFIG,
                         "endpoint \"%.200s\": expected http(s)://host:port[/prefix] (a host, no "
                         "query)",
                         endpoint);
    }
    return FC_OK;
}

static int pyro_create(struct fc_exporter *self, struct fc_error *err)
{
    const struct pyro_config *cfg = self->config;
    struct pyro_exporter *x;
    size_t n;
    int rc;

    if ((rc = check_endpoint(cfg->endpoint, err)) != FC_OK) {
        return rc;
    }
    if (cfg->bearer_token[0] != '\0' && cfg->basic_auth.username[0] != '\0') {
        return fc_errorf(err, FC_ECONFIG, "set bearer_token or basic_auth, not both");
    }
    if (cfg->basic_auth.password[0] != '\0' && cfg->basic_auth.username[0] == '\0') {
        return fc_errorf(err, FC_ECONFIG, "basic_auth.password needs basic_auth.username");
    }
    if (cfg->tenant_id[0] != '\0' &&
        fc_tenant_check(cfg->tenant_id, strlen(cfg->tenant_id), err) != FC_OK) {
        return fc_error_wrap(err, "tenant_id");
    }
    if ((rc = fc_tls_client_check(&cfg->tls, err)) != FC_OK ||
        (rc = fc_sender_config_check(&cfg->sender, err)) != FC_OK) {
        return rc;
    }
    x = fc_xcalloc(1, sizeof(*x));
    x->cfg = cfg;
    x->self = self;
    x->base = fc_xstrdup(cfg->endpoint);
    n = strlen(x->base);
    while (n > 0 && x->base[n - 1] == '/') {
        x->base[--n] = '\0';
    }
    x->push_url = fc_xasprintf("%s%s", x->base, FC_PYRO_PUSH_PATH);
    self->ctx = x;
    return FC_OK;
}

static void *pyro_conn_new(void *ctx)
{
    struct pyro_exporter *x = ctx;

    return fc_http_conn_new(&x->cfg->tls);
}

static void pyro_conn_free(void *ctx, void *conn)
{
    (void)ctx;
    fc_http_conn_free(conn);
}

static void pyro_send(void *ctx, void *conn, const struct fc_send_item *item, int64_t timeout_ns,
                      struct fc_send_result *res)
{
    struct pyro_exporter *x = ctx;
    const struct pyro_config *cfg = x->cfg;
    bool ingest = item->target[0] != '\0';
    char *url;

    if (conn == NULL || (ingest && strncmp(item->target, "/ingest?", 8) != 0)) {
        /* No curl handle, or a queued target that is not ours (a damaged queue record). */
        memset(res, 0, sizeof(*res));
        res->outcome = conn == NULL ? FC_SEND_RETRY : FC_SEND_PERMANENT;
        snprintf(res->error_type, sizeof(res->error_type),
                 conn == NULL ? "transport" : "bad_target");
        snprintf(res->message, sizeof(res->message), "%s",
                 conn == NULL ? "cannot make an HTTP client" : "queued target is not /ingest?...");
        return;
    }
    url = ingest ? fc_xasprintf("%s%s", x->base, item->target) : NULL;
    struct fc_http_request rq = {
        .url = ingest ? url : x->push_url,
        /* /ingest reads format=pprof, not the type; Connect needs application/proto. */
        .content_type = ingest ? "application/octet-stream" : "application/proto",
        .headers = &cfg->headers,
        .tenant = item->tenant,
        .basic_user = cfg->basic_auth.username[0] ? cfg->basic_auth.username : NULL,
        .basic_password = cfg->basic_auth.password,
        .bearer_token = cfg->bearer_token,
        .body = item->body,
        .body_len = item->body_len,
        .timeout_ns = timeout_ns,
        .json = true, /* Connect errors, and v1 /ingest's, are {"code","message"} */
    };

    fc_http_post(conn, &rq, res, NULL);
    free(url);
}

static const struct fc_sender_ops pyro_ops = {
    .conn_new = pyro_conn_new,
    .conn_free = pyro_conn_free,
    .send = pyro_send,
};

static int pyro_start(struct fc_exporter *self, struct fc_host *host, struct fc_error *err)
{
    struct pyro_exporter *x = self->ctx;
    char labels[256];
    int rc;

    (void)host;
    snprintf(labels, sizeof(labels), "exporter=\"%s\",error_type=\"unrepresentable\"", self->id);
    x->unrepresentable = fc_metrics_counter(
        "flamecol_exporter_send_failed_profile_samples_total", labels,
        "Samples an exporter could not send (permanent errors, retries given up).");
    rc = fc_sender_create(&x->cfg->sender, self, &pyro_ops, x, &x->sender, err);
    return rc == FC_OK ? fc_sender_start(x->sender, err) : rc;
}

/* Frees items[0..n) that were never submitted. */
static void free_items(struct fc_send_item **items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fc_send_item_free(items[i]);
    }
    free(items);
}

static struct fc_send_item *item_from(const char *tenant, const char *target, struct fc_buf *body,
                                      uint64_t samples, uint32_t profiles)
{
    struct fc_send_item *it = fc_send_item_new(tenant, target, body->len);

    if (body->len > 0) {
        memcpy(it->body, body->data, body->len);
    }
    it->samples = samples;
    it->profiles = profiles;
    return it;
}

static int pyro_export(struct fc_exporter *self, struct fc_batch *b, struct fc_error *err)
{
    struct pyro_exporter *x = self->ctx;
    /* tenant_id wins; the default tenant travels as none (core/batch.h). */
    const char *tenant = x->cfg->tenant_id[0]              ? x->cfg->tenant_id
                         : fc_tenant_is_default(b->tenant) ? ""
                                                           : b->tenant;
    struct fc_send_item **items;
    struct fc_buf body, target;
    size_t n = 0;
    int rc = FC_OK;

    if (b->n_profiles == 0) {
        return FC_OK; /* Pyroscope refuses an empty push ("no profiles received") */
    }
    items = fc_xcalloc(b->n_profiles, sizeof(*items));
    fc_buf_init(&body, 0);
    fc_buf_init(&target, 0);
    if (x->cfg->protocol == PROTOCOL_PUSH) {
        rc = fc_pyro_push_encode(b, 0, b->n_profiles, &body, err);
        if (rc == FC_OK) {
            items[n++] = item_from(tenant, "", &body, fc_batch_sample_count(b), b->n_profiles);
        }
    } else {
        for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
            const struct fc_profile *p = &b->profiles[i];
            fc_buf_reset(&body);
            fc_buf_reset(&target);
            rc = fc_pyro_ingest_target(b, p, &target, err);
            if (rc == FC_EPROTO) {
                fc_metric_add(x->unrepresentable, (int64_t)fc_batch_sample_count(b));
                fc_log_limited(&x->refused_log, 1000000000LL, FC_LOG_WARN, self->id,
                               "batch refused: %s", err->msg);
            }
            rc = rc ? rc : fc_pyro_raw_profile(b, p, false, &body, err);
            if (rc == FC_OK) {
                items[n++] = item_from(tenant, (const char *)target.data, &body, p->n_samples, 1);
            } else {
                fc_error_wrap(err, "profile %u", i);
            }
        }
    }
    fc_buf_release(&body);
    fc_buf_release(&target);
    if (rc != FC_OK) {
        free_items(items, n);
        return rc;
    }
    rc = fc_sender_submit(x->sender, items, n, err);
    free(items);
    return rc;
}

static void pyro_destroy(struct fc_exporter *self)
{
    struct pyro_exporter *x = self->ctx;

    if (x == NULL) {
        return;
    }
    if (x->sender != NULL) {
        fc_sender_free(x->sender);
    }
    free(x->base);
    free(x->push_url);
    free(x);
    self->ctx = NULL;
}

const struct fc_exporter_type fc_pyroscope_exporter = {
    .info =
        {
            .name = "pyroscope",
            .description = "pushes to Grafana Pyroscope (Connect push.v1 or /ingest), with "
                           "basic/bearer auth, X-Scope-OrgID, queue and retries",
            .stability = FC_STABILITY_ALPHA,
            .fields = pyro_fields,
            .config_size = sizeof(struct pyro_config),
        },
    .counts_sent = true,
    .create = pyro_create,
    .start = pyro_start,
    .export = pyro_export,
    .stopping = fc_sender_exporter_stopping,
    .shutdown = fc_sender_exporter_shutdown,
    .destroy = pyro_destroy,
};
