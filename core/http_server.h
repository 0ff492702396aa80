/*
 * The shared HTTP server (libmicrohttpd). There is one listener per distinct
 * endpoint; components register routes on it, so two components naming the
 * same host:port share one port (the pprof receiver and the store's query
 * API answer on :4040 together, like a Pyroscope server).
 *
 * Routes are registered before fc_http_registry_start(). A handler runs on
 * a worker thread of its listener (core/workpool.h) with the whole body in
 * memory (bounded by the route's max_body: larger bodies get 413 without
 * reaching the handler), so a slow handler never stalls the socket threads.
 *
 * Overload is refused, not queued: a listener admits at most max_in_flight
 * requests at once (from complete headers to the answer); more get 429 with
 * Retry-After at once. Clients cannot hold connections: headers must arrive
 * within header_timeout and the body within body_timeout (absolute, however
 * slowly bytes trickle in), and one client address may hold at most
 * max_connections_per_client connections. Listeners never share a port
 * (no SO_REUSEPORT): a second bind fails with the reason.
 */
#ifndef FC_HTTP_SERVER_H
#define FC_HTTP_SERVER_H

#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_http_registry;
struct fc_http_server;

struct fc_http_request {
    const char *method;
    const char *path;
    const uint8_t *body;
    size_t body_len;
    void *conn;         /* struct MHD_Connection *, for the accessors below */
    const char *tenant; /* the tenant a credential is bound to (auth); NULL: none */
};

#define FC_HTTP_MAX_HEADERS 8

struct fc_http_response {
    int status;
    const char *content_type; /* static string */
    struct fc_buf body;
    int n_headers;
    char *headers[FC_HTTP_MAX_HEADERS][2]; /* owned, freed after sending */
};

typedef void (*fc_http_handler_fn)(void *ctx, const struct fc_http_request *req,
                                   struct fc_http_response *resp);

/* A request header or query parameter, or NULL. Valid during the handler. */
const char *fc_http_header(const struct fc_http_request *req, const char *name);
const char *fc_http_query(const struct fc_http_request *req, const char *name);
/*
 * The tenant of a request: the tenant of its credential when the route
 * requires one bound to a tenant (fc_http_server_auth), else X-Scope-OrgID
 * (1-150 characters of A-Z a-z 0-9 ! - _ . * ' ( ), as Cortex and Pyroscope
 * accept), or "anonymous".
 */
int fc_http_tenant(const struct fc_http_request *req, const char **tenant, struct fc_error *err);
void fc_http_response_header(struct fc_http_response *resp, const char *name, const char *value);
/* Sets status and a text/plain body (a message naming the problem). */
void fc_http_response_text(struct fc_http_response *resp, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

struct fc_http_options {
    int threads;               /* socket threads per listener; 0 = one per CPU */
    int64_t read_timeout_ns;   /* idle connection timeout */
    int64_t header_timeout_ns; /* from connection (or previous answer) to complete headers */
    int64_t body_timeout_ns;   /* from headers to the complete body */
    unsigned max_connections;  /* open connections per listener */
    unsigned max_connections_per_client; /* per client address; 0 = max_connections */
    unsigned max_in_flight;              /* requests admitted at once per listener; more get 429 */
};

struct fc_http_registry *fc_http_registry_new(const struct fc_http_options *opts);
void fc_http_registry_free(struct fc_http_registry *reg);

/* The server for endpoint ("host:port", ":port"), created on first use. */
struct fc_http_server *fc_http_server_get(struct fc_http_registry *reg, const char *endpoint,
                                          struct fc_error *err);

/*
 * The endpoint's `tls` block (NULL = plaintext). Every component serving on
 * an endpoint calls this before its routes: the first sets it, the others
 * must configure the same one (same files and settings), else an error
 * naming both. See core/tls_server.h.
 */
struct fc_tls_server_config;
int fc_http_server_tls(struct fc_http_server *srv, const struct fc_tls_server_config *tls,
                       const char *owner, struct fc_error *err);

/*
 * The routes `owner` registers on srv (before or after this call) require
 * credentials that auth (core/auth.h) accepts with the role `need`
 * (FC_AUTH_READ or FC_AUTH_WRITE); auth NULL: none. The check runs in the
 * server before the handler: 401 (WWW-Authenticate) / 403 / 429, counted in
 * flamecol_auth_refusals_total{listener,reason}; on success the request's
 * tenant is the credential's (fc_http_tenant). Each route is logged at
 * debug level at start, with its owner and the role it needs.
 */
struct fc_auth;
void fc_http_server_auth(struct fc_http_server *srv, const char *owner, struct fc_auth *auth,
                         unsigned need);

/*
 * Registers a route. path: exact ("/ingest"), or a prefix when it ends in
 * '*' ("/querier.v1.QuerierService/" + "*"). method: "POST", or NULL for any.
 * A path registered twice on one server is a configuration error.
 */
int fc_http_route(struct fc_http_server *srv, const char *method, const char *path, size_t max_body,
                  fc_http_handler_fn fn, void *ctx, const char *owner, struct fc_error *err);
/*
 * The same, for a route that holds no data (the web UI's static files): it is
 * served without credentials even when its owner has an authenticator, so
 * that the UI's login form can load.
 */
int fc_http_route_public(struct fc_http_server *srv, const char *method, const char *path,
                         fc_http_handler_fn fn, void *ctx, const char *owner, struct fc_error *err);

/* Starts listening on every endpoint; fails (and listens nowhere) if one cannot bind. */
int fc_http_registry_start(struct fc_http_registry *reg, struct fc_error *err);
/* Stops accepting, lets in-flight requests finish until grace_ns, then stops. */
void fc_http_registry_stop(struct fc_http_registry *reg, int64_t grace_ns);

/*
 * A listening TCP socket on endpoint: SO_REUSEADDR (a restart while old
 * connections linger) but never SO_REUSEPORT, so a second process on the
 * same port fails here, with the reason, instead of silently taking a share
 * of the traffic. -1 with err set on failure.
 */
int fc_listen_socket(const char *endpoint, struct fc_error *err);

/* Parses "host:port" / ":port" / "[v6]:port" into host and port. */
int fc_parse_endpoint(const char *endpoint, char *host, size_t host_size, uint16_t *port,
                      struct fc_error *err);

#endif
