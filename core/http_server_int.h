/*
 * Private to core/http_server.c and core/http_auth.c: a listener and its
 * routes, and the authentication of a request (http_auth.c).
 */
#ifndef FC_HTTP_SERVER_INT_H
#define FC_HTTP_SERVER_INT_H

#include "core/auth.h"
#include "core/http_server.h"
#include "core/tls_server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct MHD_Connection;
struct MHD_Daemon;
struct conn_state;
struct fc_workpool;

struct route {
    char *method; /* NULL = any */
    char *path;
    bool prefix;
    size_t max_body;
    fc_http_handler_fn fn;
    void *ctx;
    char *owner;
    bool public_route;    /* served without credentials even when its owner has an authenticator */
    struct fc_auth *auth; /* set at start from the owner's (fc_http_server_auth); NULL: none */
    unsigned need;        /* FC_AUTH_READ / FC_AUTH_WRITE */
};

/* What fc_http_server_auth recorded for one owner's routes. */
struct owner_auth {
    char *owner;
    struct fc_auth *auth;
    unsigned need;
};

struct fc_http_server {
    struct fc_http_registry *reg;
    char *endpoint;
    struct route *routes;
    size_t n_routes;
    struct MHD_Daemon *daemon;
    int listen_fd;
    struct fc_workpool *pool;
    pthread_mutex_t conns_lock;
    struct conn_state *conns; /* open connections */
    _Atomic int64_t *cut_header, *cut_body, *cut_client_cap;
    /* TLS: the block the components on this endpoint agreed on (tls_owner set it first). */
    struct fc_tls_server_config tls_cfg;
    char *tls_owner;
    struct fc_tls_server *tls; /* NULL: plaintext */
    pthread_mutex_t tls_lock;
    struct fc_tls_cred *cred;  /* current generation, for new connections */
    struct fc_tls_pem mhd_pem; /* what MHD was started with (it keeps the pointers) */
    struct owner_auth *owners; /* authentication per owner of routes */
    size_t n_owners;
    _Atomic int64_t *auth_refused[FC_AUTH_OUTCOMES];
    struct fc_http_server *next;
};

/* At start: each route takes its owner's authenticator (fc_http_server_auth); each is logged. */
void fc_http_resolve_routes(struct fc_http_server *s);
/* Decides a request of a route with an authenticator (the connection's peer is the client). */
void fc_http_authorize(const struct route *r, struct MHD_Connection *conn,
                       struct fc_auth_decision *d);
/* Fills resp with the refusal d (401 + WWW-Authenticate, 403, 429 + Retry-After); counted. */
void fc_http_auth_refusal(struct fc_http_server *s, const struct route *r, const char *method,
                          const char *path, const struct fc_auth_decision *d,
                          struct fc_http_response *resp);

#endif
