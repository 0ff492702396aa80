/* Serves the embedded web UI. */
#include "exporters/store/ui.h"

#include "core/http_server.h"

#include <stdio.h>
#include <string.h>

const struct fc_ui_asset *fc_ui_asset(const char *name)
{
    for (const struct fc_ui_asset *a = fc_ui_assets; a->name != NULL; a++) {
        if (strcmp(a->name, name) == 0) {
            return a;
        }
    }
    return NULL;
}

static const char *content_type(const char *name)
{
    const char *dot = strrchr(name, '.');

    if (dot == NULL) {
        return "application/octet-stream";
    }
    if (strcmp(dot, ".html") == 0) {
        return "text/html; charset=utf-8";
    }
    if (strcmp(dot, ".css") == 0) {
        return "text/css; charset=utf-8";
    }
    if (strcmp(dot, ".js") == 0) {
        return "text/javascript; charset=utf-8";
    }
    return "application/octet-stream";
}

/* The tab icon: a small flame graph, as SVG (browsers ask for /favicon.ico on every load). */
static const char favicon_svg[] =
    "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 16 16\">"
    "<rect x=\"0\" y=\"12\" width=\"16\" height=\"4\" fill=\"#d0643c\"/>"
    "<rect x=\"0\" y=\"8\" width=\"11\" height=\"3.5\" fill=\"#e08a3c\"/>"
    "<rect x=\"11.5\" y=\"8\" width=\"4.5\" height=\"3.5\" fill=\"#e0b03c\"/>"
    "<rect x=\"0\" y=\"4\" width=\"7\" height=\"3.5\" fill=\"#e0b03c\"/>"
    "<rect x=\"0\" y=\"0\" width=\"4\" height=\"3.5\" fill=\"#e8cf5c\"/>"
    "</svg>";

static void on_favicon(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    (void)ctx;
    (void)req;
    resp->content_type = "image/svg+xml";
    fc_buf_append(&resp->body, favicon_svg, sizeof(favicon_svg) - 1);
    fc_http_response_header(resp, "Cache-Control", "max-age=86400");
}

static void on_asset(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    const char *name = strcmp(req->path, "/") == 0 ? "index.html" : req->path + strlen("/ui/");
    const struct fc_ui_asset *a = fc_ui_asset(name);

    (void)ctx;
    if (a == NULL) {
        fc_http_response_text(resp, 404, "no such file in the UI: %s", req->path);
        return;
    }
    resp->content_type = content_type(a->name);
    fc_buf_append(&resp->body, a->data, a->len);
    fc_http_response_header(resp, "Cache-Control", "no-cache");
}

/*
 * The static files hold no data: they are public even behind auth
 * (fc_http_route_public), so that the login form loads; every API call of
 * the UI carries the user's credential.
 */
int store_ui_routes(struct fc_http_server *srv, const char *owner, struct fc_error *err)
{
    if (fc_http_route_public(srv, "GET", "/", on_asset, NULL, owner, err) != FC_OK ||
        fc_http_route_public(srv, "GET", "/ui/*", on_asset, NULL, owner, err) != FC_OK ||
        fc_http_route_public(srv, "GET", "/favicon.ico", on_favicon, NULL, owner, err) != FC_OK) {
        return FC_ECONFIG;
    }
    return FC_OK;
}
