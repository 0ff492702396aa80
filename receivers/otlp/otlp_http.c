/*
 * OTLP/HTTP: POST /v1development/profiles with application/x-protobuf or
 * application/json (the answer in the request's encoding), gzip and zstd bodies,
 * google.rpc.Status bodies on errors, Retry-After on 429/503.
 */
#include "receivers/otlp/otlp.h"

#include "core/auth.h"
#include "core/http_server.h"
#include "formats/gzip.h"
#include "formats/zstd.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static void answer_error(struct otlp_receiver *r, struct fc_http_response *resp, int status, int rc,
                         const char *message, bool json)
{
    int64_t retry = (status == 429 || status == 503) ? r->cfg->retry_after : 0;

    resp->status = status;
    resp->content_type = json ? "application/json" : "application/x-protobuf";
    fc_buf_reset(&resp->body);
    fc_otlp_status(otlp_grpc_code(rc), message, retry, json, &resp->body);
    if (retry > 0) {
        char secs[32];
        snprintf(secs, sizeof(secs), "%lld", (long long)((retry + 999999999LL) / 1000000000LL));
        fc_http_response_header(resp, "Retry-After", secs);
    }
}

static int http_status(int rc)
{
    switch (rc) {
    case FC_EPROTO:
    case FC_EINVAL:
        return 400;
    case FC_ETOOBIG:
        return 413;
    case FC_EAGAIN:
        return 429;
    case FC_EUNAVAIL:
        return 503;
    default:
        return fc_err_http_status(rc);
    }
}

static void handle(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct otlp_receiver *r = ctx;
    const char *ct = fc_http_header(req, "Content-Type");
    const char *ce = fc_http_header(req, "Content-Encoding");
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_buf plain;
    struct otlp_request rq = {0};
    const uint8_t *body = req->body;
    size_t len = req->body_len;
    bool json;
    int rc;

    if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0) {
        json = true;
    } else if (ct != NULL && (strncasecmp(ct, "application/x-protobuf", 22) == 0 ||
                              strncasecmp(ct, "application/protobuf", 20) == 0)) {
        json = false;
    } else {
        otlp_count_refused(r);
        answer_error(r, resp, 415, FC_EPROTO,
                     "unsupported Content-Type (use application/x-protobuf or application/json)",
                     true);
        return;
    }
    fc_buf_init(&plain, 0);
    if (ce != NULL && strcasecmp(ce, "gzip") == 0) {
        size_t trailing = 0;
        rc =
            fc_gunzip_ex(body, len, (size_t)r->cfg->max_decompressed_size, &plain, &trailing, &err);
        if (rc != FC_OK) {
            otlp_count_refused(r);
            answer_error(r, resp, http_status(rc), rc, err.msg, json);
            fc_buf_release(&plain);
            return;
        }
        if (trailing == 0) {
            rq.gzip = body; /* one clean gzip stream: may be forwarded as it came */
            rq.gzip_len = len;
        }
        body = plain.data;
        len = plain.len;
    } else if (ce != NULL && strcasecmp(ce, "zstd") == 0) {
        rc = fc_unzstd(body, len, (size_t)r->cfg->max_decompressed_size, &plain, &err);
        if (rc != FC_OK) {
            otlp_count_refused(r);
            answer_error(r, resp, http_status(rc), rc, err.msg, json);
            fc_buf_release(&plain);
            return;
        }
        body = plain.data;
        len = plain.len;
    } else if (ce != NULL && ce[0] != '\0' && strcasecmp(ce, "identity") != 0) {
        otlp_count_refused(r);
        answer_error(r, resp, 415, FC_EPROTO, "unsupported Content-Encoding (use gzip or zstd)",
                     json);
        return;
    }
    rc = fc_http_tenant(req, &rq.tenant, &err);
    if (rc != FC_OK) {
        otlp_count_refused(r);
    } else {
        rq.body = body ? body : (const uint8_t *)"";
        rq.len = len;
        rq.json = json;
        rc = otlp_export(r, &rq, &res, &err);
    }
    if (rc != FC_OK) {
        answer_error(r, resp, http_status(rc), rc, err.msg, json);
    } else {
        resp->status = 200;
        resp->content_type = json ? "application/json" : "application/x-protobuf";
        fc_otlp_response(res.rejected_profiles, res.message, json, &resp->body);
    }
    fc_buf_release(&plain);
}

int otlp_http_start(struct otlp_receiver *r, struct fc_host *host, struct fc_error *err)
{
    struct fc_http_server *srv =
        fc_http_server_get(host->http, r->cfg->protocols.http.endpoint, err);

    struct fc_auth *auth = NULL;

    if (srv == NULL || fc_http_server_tls(srv, &r->cfg->protocols.http.tls, r->self->id, err) ||
        fc_extensions_auth(host->extensions, r->cfg->protocols.http.auth.authenticator, &auth,
                           err)) {
        return fc_error_wrap(err, "protocols.http");
    }
    fc_http_server_auth(srv, r->self->id, auth, FC_AUTH_WRITE); /* OTLP export writes */
    return fc_http_route(srv, "POST", "/v1development/profiles",
                         (size_t)r->cfg->protocols.http.max_request_body_size, handle, r,
                         r->self->id, err);
}
