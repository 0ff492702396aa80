#include "core/http_server.h"
#include "core/http_server_int.h"

#include "core/auth.h"
#include "core/batch.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "core/tls_server.h"
#include "core/workpool.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

/* How often connections are checked against their header/body deadlines. */
#define SWEEP_INTERVAL_NS (200 * FC_NS_PER_MS)

/*
 * Per connection, from accept to close: the deadline by which the client
 * must have sent what it owes (headers, then the body). 0 = none (a request
 * is being handled or answered: not the client's time).
 */
struct conn_state {
    struct fc_http_server *srv;
    int fd;
    struct sockaddr_storage addr;
    socklen_t addr_len;
    int64_t deadline_ns;      /* CLOCK_MONOTONIC */
    bool in_body;             /* which deadline: headers or body */
    bool cut;                 /* shut down by the sweeper or a cap; counted once */
    struct fc_tls_cred *cred; /* TLS: the credentials its handshake uses (a reference) */
    struct conn_state *prev, *next;
};

struct fc_http_registry {
    struct fc_http_options opts;
    struct fc_http_server *servers;
    pthread_t sweeper;
    bool sweeper_running;
    pthread_mutex_t lock;
    pthread_cond_t stop;
    bool stopping;
};

/* Per-request state, from the first callback until MHD reports completion. */
struct request_state {
    struct fc_work work; /* first: the worker gets back to the state from it */
    struct fc_http_server *srv;
    struct MHD_Connection *conn;
    const struct route *route;
    char *method, *url;
    struct fc_buf body;
    int early_status; /* 401 / 413 / 404 / 405 / 429 decided before the body arrived */
    struct fc_auth_decision decision; /* early 401: why */
    bool admitted;                    /* holds a slot of the listener's workpool */
    bool answered;                    /* resp is ready (the worker ran the handler) */
    struct fc_http_response resp;
};

int fc_parse_endpoint(const char *endpoint, char *host, size_t host_size, uint16_t *port,
                      struct fc_error *err)
{
    const char *colon;
    const char *h = endpoint;
    size_t hlen;
    char *end;
    long p;

    if (endpoint[0] == '[') {
        const char *close = strchr(endpoint, ']');
        if (close == NULL || close[1] != ':') {
            return fc_errorf(err, FC_ECONFIG, "endpoint \"%s\": expected [ipv6]:port", endpoint);
        }
        h = endpoint + 1;
        hlen = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(endpoint, ':');
        if (colon == NULL) {
            return fc_errorf(err, FC_ECONFIG, "endpoint \"%s\": expected host:port", endpoint);
        }
        hlen = (size_t)(colon - endpoint);
    }
    p = strtol(colon + 1, &end, 10);
    if (colon[1] == '\0' || *end != '\0' || p < 0 || p > 65535) {
        return fc_errorf(err, FC_ECONFIG, "endpoint \"%s\": invalid port", endpoint);
    }
    if (hlen == 0) {
        h = "0.0.0.0";
        hlen = 7;
    }
    if (hlen + 1 > host_size) {
        return fc_errorf(err, FC_ECONFIG, "endpoint \"%s\": host too long", endpoint);
    }
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *port = (uint16_t)p;
    return FC_OK;
}

struct fc_http_registry *fc_http_registry_new(const struct fc_http_options *opts)
{
    struct fc_http_registry *reg = fc_xcalloc(1, sizeof(*reg));

    if (opts != NULL) {
        reg->opts = *opts;
    }
    if (reg->opts.threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        reg->opts.threads = n > 0 ? (int)(n < 16 ? n : 16) : 2;
    }
    if (reg->opts.read_timeout_ns <= 0) {
        reg->opts.read_timeout_ns = 30 * FC_NS_PER_SEC;
    }
    if (reg->opts.header_timeout_ns <= 0) {
        reg->opts.header_timeout_ns = 10 * FC_NS_PER_SEC;
    }
    if (reg->opts.body_timeout_ns <= 0) {
        reg->opts.body_timeout_ns = 60 * FC_NS_PER_SEC;
    }
    if (reg->opts.max_connections == 0) {
        reg->opts.max_connections = 4096;
    }
    if (reg->opts.max_connections_per_client == 0 ||
        reg->opts.max_connections_per_client > reg->opts.max_connections) {
        reg->opts.max_connections_per_client = reg->opts.max_connections;
    }
    if (reg->opts.max_in_flight == 0) {
        reg->opts.max_in_flight = 64;
    }
    pthread_mutex_init(&reg->lock, NULL);
    pthread_cond_init(&reg->stop, NULL);
    return reg;
}

/*
 * Every connection is a descriptor: lift the soft RLIMIT_NOFILE to the hard
 * one (as Go does at start), and say so when max_connections cannot fit.
 */
static void raise_fd_limit(const struct fc_http_registry *reg)
{
    struct rlimit rl;
    unsigned n = 0;

    for (const struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        n++;
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur != RLIM_INFINITY &&
        (uint64_t)n * reg->opts.max_connections + 256 > (uint64_t)rl.rlim_cur) {
        fc_log_warn("http",
                    "%u listeners x max_connections %u need more descriptors than "
                    "RLIMIT_NOFILE (%llu): connections past it are refused by the kernel",
                    n, reg->opts.max_connections, (unsigned long long)rl.rlim_cur);
    }
}

static void server_free(struct fc_http_server *s)
{
    for (size_t i = 0; i < s->n_routes; i++) {
        free(s->routes[i].method);
        free(s->routes[i].path);
        free(s->routes[i].owner);
    }
    free(s->routes);
    for (size_t i = 0; i < s->n_owners; i++) {
        free(s->owners[i].owner);
    }
    free(s->owners);
    free(s->endpoint);
    free(s->tls_owner);
    pthread_mutex_destroy(&s->conns_lock);
    pthread_mutex_destroy(&s->tls_lock);
    free(s);
}

void fc_http_registry_free(struct fc_http_registry *reg)
{
    if (reg == NULL) {
        return;
    }
    fc_http_registry_stop(reg, 0);
    for (struct fc_http_server *s = reg->servers; s != NULL;) {
        struct fc_http_server *next = s->next;
        server_free(s);
        s = next;
    }
    pthread_mutex_destroy(&reg->lock);
    pthread_cond_destroy(&reg->stop);
    free(reg);
}

/* "localhost:80" and "127.0.0.1:80" are one endpoint; ":80" is "0.0.0.0:80". */
static char *canonical_endpoint(const char *endpoint, struct fc_error *err)
{
    char host[256];
    uint16_t port = 0;

    if (fc_parse_endpoint(endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return NULL;
    }
    if (strcmp(host, "localhost") == 0) {
        return fc_xasprintf("127.0.0.1:%u", port);
    }
    return fc_xasprintf(strchr(host, ':') ? "[%s]:%u" : "%s:%u", host, port);
}

struct fc_http_server *fc_http_server_get(struct fc_http_registry *reg, const char *endpoint,
                                          struct fc_error *err)
{
    char *canon = canonical_endpoint(endpoint, err);
    struct fc_http_server *s;

    if (canon == NULL) {
        return NULL;
    }
    for (s = reg->servers; s != NULL; s = s->next) {
        if (strcmp(s->endpoint, canon) == 0) {
            free(canon);
            return s;
        }
    }
    s = fc_xcalloc(1, sizeof(*s));
    s->reg = reg;
    s->endpoint = canon;
    s->listen_fd = -1;
    pthread_mutex_init(&s->conns_lock, NULL);
    pthread_mutex_init(&s->tls_lock, NULL);
    s->next = reg->servers;
    reg->servers = s;
    return s;
}

int fc_http_server_tls(struct fc_http_server *srv, const struct fc_tls_server_config *tls,
                       const char *owner, struct fc_error *err)
{
    struct fc_tls_server_config off = {0};

    if (tls == NULL) {
        tls = &off;
    }
    if (srv->tls_owner == NULL) {
        srv->tls_cfg = *tls;
        srv->tls_owner = fc_xstrdup(owner);
        return FC_OK;
    }
    if (!fc_tls_server_same(&srv->tls_cfg, tls)) {
        return fc_errorf(err, FC_ECONFIG,
                         "%s and %s share %s but configure different tls blocks (%s vs %s); "
                         "give them the same one",
                         srv->tls_owner, owner, srv->endpoint,
                         fc_tls_server_on(&srv->tls_cfg) ? srv->tls_cfg.cert_file : "none",
                         fc_tls_server_on(tls) ? tls->cert_file : "none");
    }
    return FC_OK;
}

void fc_http_server_auth(struct fc_http_server *srv, const char *owner, struct fc_auth *auth,
                         unsigned need)
{
    srv->owners = fc_xrealloc(srv->owners, (srv->n_owners + 1) * sizeof(*srv->owners));
    srv->owners[srv->n_owners++] = (struct owner_auth){fc_xstrdup(owner), auth, need};
}

int fc_http_route(struct fc_http_server *srv, const char *method, const char *path, size_t max_body,
                  fc_http_handler_fn fn, void *ctx, const char *owner, struct fc_error *err)
{
    size_t len = strlen(path);
    bool prefix = len > 0 && path[len - 1] == '*';
    struct route *r;

    for (size_t i = 0; i < srv->n_routes; i++) {
        struct route *o = &srv->routes[i];
        bool same_method = o->method == NULL || method == NULL || strcmp(o->method, method) == 0;
        if (same_method && strcmp(o->path, path) == 0 && o->prefix == prefix) {
            return fc_errorf(err, FC_ECONFIG, "%s and %s both serve %s on %s", o->owner, owner,
                             path, srv->endpoint);
        }
    }
    srv->routes = fc_xrealloc(srv->routes, (srv->n_routes + 1) * sizeof(*srv->routes));
    r = &srv->routes[srv->n_routes++];
    r->method = method ? fc_xstrdup(method) : NULL;
    r->path = fc_xstrndup(path, prefix ? len - 1 : len);
    r->prefix = prefix;
    r->max_body = max_body;
    r->fn = fn;
    r->ctx = ctx;
    r->owner = fc_xstrdup(owner);
    r->public_route = false;
    return FC_OK;
}

int fc_http_route_public(struct fc_http_server *srv, const char *method, const char *path,
                         fc_http_handler_fn fn, void *ctx, const char *owner, struct fc_error *err)
{
    if (fc_http_route(srv, method, path, 0, fn, ctx, owner, err) != FC_OK) {
        return FC_ECONFIG;
    }
    srv->routes[srv->n_routes - 1].public_route = true;
    return FC_OK;
}

const char *fc_http_header(const struct fc_http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, name);
}

const char *fc_http_query(const struct fc_http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->conn, MHD_GET_ARGUMENT_KIND, name);
}

int fc_http_tenant(const struct fc_http_request *req, const char **tenant, struct fc_error *err)
{
    const char *org;

    if (req->tenant != NULL) {
        *tenant = req->tenant; /* proved by the credential (checked against the header) */
        return FC_OK;
    }
    org = fc_http_header(req, "X-Scope-OrgID");
    *tenant = FC_DEFAULT_TENANT;
    if (org == NULL) {
        return FC_OK;
    }
    if (fc_tenant_check(org, strlen(org), err) != FC_OK) {
        return fc_error_wrap(err, "X-Scope-OrgID");
    }
    *tenant = org;
    return FC_OK;
}

void fc_http_response_header(struct fc_http_response *resp, const char *name, const char *value)
{
    if (resp->n_headers < FC_HTTP_MAX_HEADERS) {
        resp->headers[resp->n_headers][0] = fc_xstrdup(name);
        resp->headers[resp->n_headers][1] = fc_xstrdup(value);
        resp->n_headers++;
    }
}

void fc_http_response_text(struct fc_http_response *resp, int status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    resp->status = status;
    resp->content_type = "text/plain; charset=utf-8";
    fc_buf_reset(&resp->body);
    fc_buf_puts(&resp->body, msg);
    fc_buf_puts(&resp->body, "\n");
}

/* The route for path: exact matches win over the longest prefix. */
static const struct route *find_route(const struct fc_http_server *s, const char *method,
                                      const char *path, bool *method_mismatch)
{
    const struct route *best = NULL;
    size_t best_len = 0;

    *method_mismatch = false;
    for (size_t i = 0; i < s->n_routes; i++) {
        const struct route *r = &s->routes[i];
        size_t n = strlen(r->path);
        bool match = r->prefix ? strncmp(path, r->path, n) == 0 : strcmp(path, r->path) == 0;
        if (!match) {
            continue;
        }
        if (r->method != NULL && strcmp(r->method, method) != 0) {
            *method_mismatch = true;
            continue;
        }
        if (!r->prefix) {
            return r;
        }
        if (n >= best_len) {
            best = r;
            best_len = n;
        }
    }
    if (best != NULL) {
        *method_mismatch = false;
    }
    return best;
}

static enum MHD_Result send_response(struct MHD_Connection *conn, struct fc_http_response *resp)
{
    size_t len = 0;
    uint8_t *data = fc_buf_detach(&resp->body, &len);
    struct MHD_Response *r = MHD_create_response_from_buffer(
        len, data ? data : (uint8_t *)"", data ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (resp->content_type != NULL) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, resp->content_type);
    }
    for (int i = 0; i < resp->n_headers; i++) {
        MHD_add_response_header(r, resp->headers[i][0], resp->headers[i][1]);
        free(resp->headers[i][0]);
        free(resp->headers[i][1]);
    }
    resp->n_headers = 0;
    ret = MHD_queue_response(conn, (unsigned)resp->status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, int status, const char *msg,
                                 const char *allow)
{
    struct fc_http_response resp = {0};

    fc_buf_init(&resp.body, 0);
    fc_http_response_text(&resp, status, "%s", msg);
    if (allow != NULL) {
        fc_http_response_header(&resp, "Allow", allow);
    }
    return send_response(conn, &resp);
}

/* ---- connections: deadlines and the per-client cap ----------------------------------------- */

static int64_t header_deadline(const struct fc_http_server *s, int64_t after_idle_ns)
{
    return fc_now_mono_ns() + after_idle_ns + s->reg->opts.header_timeout_ns;
}

static bool same_address(const struct conn_state *a, const struct conn_state *b)
{
    const struct sockaddr *x = (const struct sockaddr *)&a->addr;
    const struct sockaddr *y = (const struct sockaddr *)&b->addr;

    if (x->sa_family != y->sa_family) {
        return false;
    }
    if (x->sa_family == AF_INET) {
        return ((const struct sockaddr_in *)x)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)y)->sin_addr.s_addr;
    }
    if (x->sa_family == AF_INET6) {
        return memcmp(&((const struct sockaddr_in6 *)x)->sin6_addr,
                      &((const struct sockaddr_in6 *)y)->sin6_addr, sizeof(struct in6_addr)) == 0;
    }
    return false;
}

/* Closes the connection under MHD's feet: its next read sees EOF. Caller holds conns_lock. */
static void cut_connection(struct conn_state *c, _Atomic int64_t *counter)
{
    if (!c->cut) {
        c->cut = true;
        shutdown(c->fd, SHUT_RDWR);
        fc_metric_add(counter, 1);
    }
}

/* ---- TLS credentials ------------------------------------------------------------------------ */

/* The credentials for a new connection: rebuilt first when the files changed (reload). */
static struct fc_tls_cred *cred_current(struct fc_http_server *s)
{
    uint64_t gen = fc_tls_server_refresh(s->tls);
    struct fc_tls_cred *c;

    pthread_mutex_lock(&s->tls_lock);
    if (s->cred->generation != gen) {
        struct fc_tls_pem pem;
        struct fc_error err = {0};
        uint64_t got = fc_tls_server_pem(s->tls, &pem);
        struct fc_tls_cred *n = fc_tls_cred_build(&pem, got, &err);
        fc_tls_pem_free(&pem);
        if (n != NULL) {
            fc_tls_cred_unref(s->cred);
            s->cred = n;
            fc_log_info("http", "%s: new certificate in use for new connections", s->endpoint);
        } else {
            /* Not retried until the files change again. */
            s->cred->generation = got;
            fc_log_warn("http", "%s: reloaded certificate refused (%s); keeping the previous one",
                        s->endpoint, err.msg);
        }
    }
    c = s->cred;
    atomic_fetch_add(&c->refs, 1);
    pthread_mutex_unlock(&s->tls_lock);
    return c;
}

/* Gives a new connection's TLS session the listener's current credentials. */
static void tls_attach(struct fc_http_server *s, struct MHD_Connection *conn, struct conn_state *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    gnutls_session_t session = i != NULL ? (gnutls_session_t)i->tls_session : NULL;

    if (session == NULL) {
        cut_connection(c, s->cut_client_cap); /* cannot happen with MHD_USE_TLS */
        return;
    }
    c->cred = cred_current(s);
    gnutls_credentials_set(session, GNUTLS_CRD_CERTIFICATE,
                           (gnutls_certificate_credentials_t)c->cred->x);
    if (s->tls->cfg.client_ca_file != NULL && s->tls->cfg.client_ca_file[0] != '\0') {
        gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    }
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct fc_http_server *s = cls;
    struct conn_state *c = *socket_context;

    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *fd =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        const union MHD_ConnectionInfo *ad =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        unsigned same = 0;

        c = fc_xcalloc(1, sizeof(*c));
        c->srv = s;
        c->fd = fd != NULL ? fd->connect_fd : -1;
        if (ad != NULL && ad->client_addr != NULL) {
            c->addr_len = ad->client_addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                                 : sizeof(struct sockaddr_in);
            memcpy(&c->addr, ad->client_addr, c->addr_len);
        }
        c->deadline_ns = header_deadline(s, 0);
        pthread_mutex_lock(&s->conns_lock);
        for (struct conn_state *o = s->conns; o != NULL; o = o->next) {
            same += !o->cut && same_address(o, c);
        }
        c->next = s->conns;
        if (s->conns != NULL) {
            s->conns->prev = c;
        }
        s->conns = c;
        if (same >= s->reg->opts.max_connections_per_client) {
            cut_connection(c, s->cut_client_cap);
        }
        pthread_mutex_unlock(&s->conns_lock);
        if (s->tls != NULL) {
            tls_attach(s, conn, c);
        }
        *socket_context = c;
        return;
    }
    if (c == NULL) {
        return;
    }
    /* MHD_CONNECTION_NOTIFY_CLOSED: the descriptor is still open, so the sweeper may not
     * shut it down once this returns. */
    pthread_mutex_lock(&s->conns_lock);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        s->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    pthread_mutex_unlock(&s->conns_lock);
    fc_tls_cred_unref(c->cred);
    free(c);
    *socket_context = NULL;
}

static struct conn_state *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

    return i != NULL ? i->socket_context : NULL;
}

static void set_deadline(struct fc_http_server *s, struct MHD_Connection *conn, int64_t deadline,
                         bool in_body)
{
    struct conn_state *c = conn_of(conn);

    if (c != NULL) {
        pthread_mutex_lock(&s->conns_lock);
        c->deadline_ns = deadline;
        c->in_body = in_body;
        pthread_mutex_unlock(&s->conns_lock);
    }
}

/* One thread for all listeners: cuts connections whose client is late. */
static void *sweeper(void *arg)
{
    struct fc_http_registry *reg = arg;

    pthread_mutex_lock(&reg->lock);
    while (!reg->stopping) {
        struct timespec until;
        int64_t now = fc_now_mono_ns();

        pthread_mutex_unlock(&reg->lock);
        for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
            pthread_mutex_lock(&s->conns_lock);
            for (struct conn_state *c = s->conns; c != NULL; c = c->next) {
                if (c->deadline_ns != 0 && now > c->deadline_ns) {
                    cut_connection(c, c->in_body ? s->cut_body : s->cut_header);
                }
            }
            pthread_mutex_unlock(&s->conns_lock);
        }
        pthread_mutex_lock(&reg->lock);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += SWEEP_INTERVAL_NS;
        if (until.tv_nsec >= FC_NS_PER_SEC) {
            until.tv_sec++;
            until.tv_nsec -= FC_NS_PER_SEC;
        }
        if (!reg->stopping) {
            pthread_cond_timedwait(&reg->stop, &reg->lock, &until);
        }
    }
    pthread_mutex_unlock(&reg->lock);
    return NULL;
}

/* ---- requests ------------------------------------------------------------------------------ */

/* On a worker: runs the handler, then hands the connection back to MHD to send the answer. */
static void run_handler(struct fc_work *w)
{
    struct request_state *st = (struct request_state *)w;
    struct fc_http_request req = {st->method, st->url, st->body.data, st->body.len, st->conn, NULL};

    fc_buf_init(&st->resp.body, 0);
    st->resp.status = 200;
    if (st->route->auth != NULL) {
        struct fc_auth_decision d;
        fc_http_authorize(st->route, st->conn, &d);
        if (d.outcome != FC_AUTH_OK) {
            fc_http_auth_refusal(st->srv, st->route, st->method, st->url, &d, &st->resp);
            st->answered = true;
            MHD_resume_connection(st->conn);
            return;
        }
        req.tenant = d.bound ? d.tenant : NULL;
    }
    st->route->fn(st->route->ctx, &req, &st->resp);
    st->answered = true;
    MHD_resume_connection(st->conn);
}

static enum MHD_Result refuse_overload(struct MHD_Connection *conn, const struct fc_http_server *s)
{
    struct fc_http_response resp = {0};
    char secs[24];

    fc_buf_init(&resp.body, 0);
    fc_http_response_text(&resp, 429,
                          "%s is handling %u requests (service.http.max_in_flight); retry later",
                          s->endpoint, s->reg->opts.max_in_flight);
    snprintf(secs, sizeof(secs), "%lld", FC_OVERLOAD_RETRY_AFTER_NS / FC_NS_PER_SEC);
    fc_http_response_header(&resp, "Retry-After", secs);
    return send_response(conn, &resp);
}

/* First callback of a request: its headers are complete. */
static struct request_state *begin_request(struct fc_http_server *s, struct MHD_Connection *conn,
                                           const char *url, const char *method)
{
    struct request_state *st = fc_xcalloc(1, sizeof(*st));
    bool mismatch;
    const char *cl;

    st->srv = s;
    st->conn = conn;
    st->method = fc_xstrdup(method);
    st->url = fc_xstrdup(url);
    st->route = find_route(s, method, url, &mismatch);
    set_deadline(s, conn, fc_now_mono_ns() + s->reg->opts.body_timeout_ns, true);
    if (st->route == NULL) {
        st->early_status = mismatch ? 405 : 404;
        return st;
    }
    fc_buf_init(&st->body, st->route->max_body);
    if (st->route->auth != NULL &&
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization") == NULL) {
        /* No credentials at all: refused before the body is read (cheap, no hash). */
        fc_http_authorize(st->route, conn, &st->decision);
        st->early_status = 401;
        return st;
    }
    cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl != NULL && st->route->max_body > 0 &&
        strtoull(cl, NULL, 10) > (unsigned long long)st->route->max_body) {
        st->early_status = 413;
    } else if (!(st->admitted = fc_workpool_admit(s->pool))) {
        /* The body is read and dropped (bounded by body_timeout) so the client sees the
         * answer rather than a reset. */
        st->early_status = 429;
    }
    return st;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct fc_http_server *s = cls;
    struct request_state *st = *con_cls;

    (void)version;
    if (st == NULL) {
        *con_cls = begin_request(s, conn, url, method);
        return MHD_YES;
    }
    if (st->answered) {
        return send_response(conn, &st->resp);
    }
    if (*upload_data_size > 0) {
        if (st->early_status == 0 &&
            fc_buf_append(&st->body, upload_data, *upload_data_size) != FC_OK) {
            st->early_status = 413;
            fc_buf_release(&st->body);
        }
        *upload_data_size = 0; /* consumed (or discarded) */
        return MHD_YES;
    }
    set_deadline(s, conn, 0, false);
    switch (st->early_status) {
    case 0:
        break;
    case 404:
        return send_text(conn, 404, "not found", NULL);
    case 405: {
        const char *allow = "POST";
        for (size_t i = 0; i < s->n_routes; i++) {
            if (strcmp(s->routes[i].path, url) == 0 && s->routes[i].method != NULL) {
                allow = s->routes[i].method;
            }
        }
        return send_text(conn, 405, "method not allowed", allow);
    }
    case 429:
        return refuse_overload(conn, s);
    case 401:
        fc_buf_init(&st->resp.body, 0);
        fc_http_auth_refusal(s, st->route, method, url, &st->decision, &st->resp);
        return send_response(conn, &st->resp);
    default: {
        char msg[128];
        snprintf(msg, sizeof(msg), "request body larger than the limit of %zu bytes",
                 st->route->max_body);
        return send_text(conn, 413, msg, NULL);
    }
    }
    /* Suspended before the worker can resume it; MHD calls back once it is resumed. */
    MHD_suspend_connection(conn);
    st->work.fn = run_handler;
    fc_workpool_run(s->pool, &st->work);
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct fc_http_server *s = cls;
    struct request_state *st = *con_cls;

    (void)toe;
    if (st == NULL) {
        return;
    }
    /* Keep-alive: the next request's headers are due within the idle time plus header_timeout. */
    set_deadline(s, conn, header_deadline(s, s->reg->opts.read_timeout_ns), false);
    fc_buf_release(&st->body);
    fc_buf_release(&st->resp.body);
    for (int i = 0; i < st->resp.n_headers; i++) {
        free(st->resp.headers[i][0]);
        free(st->resp.headers[i][1]);
    }
    if (st->admitted) {
        fc_workpool_release(s->pool);
    }
    free(st->method);
    free(st->url);
    free(st);
    *con_cls = NULL;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    char msg[512];
    size_t n;

    (void)cls;
    vsnprintf(msg, sizeof(msg), fmt, ap);
    n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') {
        msg[--n] = '\0';
    }
    fc_log_debug("http", "%s", msg);
}

int fc_listen_socket(const char *endpoint, struct fc_error *err)
{
    char host[256];
    char port_s[8];
    uint16_t port = 0;
    struct addrinfo hints = {0};
    struct addrinfo *ai = NULL;
    int one = 1;
    int fd, rc;

    if (fc_parse_endpoint(endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return -1;
    }
    snprintf(port_s, sizeof(port_s), "%u", port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, port_s, &hints, &ai);
    if (rc != 0) {
        fc_errorf(err, FC_ECONFIG, "endpoint %s: %s", endpoint, gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        (ai->ai_family == AF_INET6 &&
         setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one)) != 0) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 4096) != 0) {
        fc_errorf(err, FC_EIO, "cannot listen on %s: %s%s", endpoint, strerror(errno),
                  errno == EADDRINUSE ? " (is another flamecol or another program using it?)" : "");
        if (fd >= 0) {
            close(fd);
        }
        fd = -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static int start_server(struct fc_http_registry *reg, struct fc_http_server *s,
                        struct fc_error *err)
{
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;
    struct MHD_OptionItem tls_opts[4] = {{MHD_OPTION_END, 0, NULL}};
    struct fc_tls_pem *pem = &s->mhd_pem;

    if (fc_tls_server_on(&s->tls_cfg)) {
        /* The key and certificate MHD loads are only its defaults: every connection is given
         * the current generation's credentials as it starts (tls_attach). */
        s->tls = fc_tls_server_new(&s->tls_cfg, err);
        if (s->tls == NULL) {
            return fc_error_wrap(err, "%s", s->endpoint);
        }
        fc_tls_server_pem(s->tls, pem);
        s->cred = fc_tls_cred_build(pem, s->tls->generation, err);
        if (s->cred == NULL) {
            fc_tls_pem_free(pem);
            fc_tls_server_free(s->tls);
            s->tls = NULL;
            return fc_error_wrap(err, "%s", s->endpoint);
        }
        flags |= MHD_USE_TLS;
        tls_opts[0] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, pem->key};
        tls_opts[1] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, pem->cert};
        tls_opts[2] =
            (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0,
                                    (void *)(fc_tls_server_min13(&s->tls_cfg)
                                                 ? "NORMAL:-VERS-ALL:+VERS-TLS1.3"
                                                 : "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2")};
    }
    s->listen_fd = fc_listen_socket(s->endpoint, err);
    if (s->listen_fd < 0) {
        return err->code;
    }
    s->cut_header = fc_server_refused_counter("http", s->endpoint, "header_timeout");
    s->cut_body = fc_server_refused_counter("http", s->endpoint, "body_timeout");
    s->cut_client_cap =
        fc_server_refused_counter("http", s->endpoint, "max_connections_per_client");
    fc_http_resolve_routes(s);
    {
        bool auth = false;
        for (size_t i = 0; i < s->n_routes; i++) {
            auth = auth || s->routes[i].auth != NULL;
        }
        fc_tls_warn_plaintext("http", s->endpoint, fc_tls_server_on(&s->tls_cfg), auth);
    }
    s->pool = fc_workpool_new("http", s->endpoint, reg->opts.max_in_flight);
    s->daemon = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, s->listen_fd,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)reg->opts.threads, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)((reg->opts.read_timeout_ns + FC_NS_PER_SEC - 1) / FC_NS_PER_SEC),
        MHD_OPTION_CONNECTION_LIMIT, reg->opts.max_connections, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_log, NULL, MHD_OPTION_ARRAY, tls_opts, MHD_OPTION_END);
    if (s->daemon == NULL) {
        close(s->listen_fd);
        s->listen_fd = -1;
        fc_workpool_free(s->pool);
        s->pool = NULL;
        return fc_errorf(err, FC_EIO, "cannot start the HTTP server on %s", s->endpoint);
    }
    fc_log_info("http", "listening on %s (%zu routes%s)", s->endpoint, s->n_routes,
                s->tls == NULL                         ? ""
                : s->tls_cfg.client_ca_file[0] != '\0' ? ", TLS with client certificates"
                                                       : ", TLS");
    return FC_OK;
}

int fc_http_registry_start(struct fc_http_registry *reg, struct fc_error *err)
{
    raise_fd_limit(reg);
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        if (s->daemon == NULL && start_server(reg, s, err) != FC_OK) {
            fc_http_registry_stop(reg, 0);
            return err->code;
        }
    }
    if (!reg->sweeper_running) {
        reg->stopping = false;
        reg->sweeper_running = pthread_create(&reg->sweeper, NULL, sweeper, reg) == 0;
    }
    return FC_OK;
}

void fc_http_registry_stop(struct fc_http_registry *reg, int64_t grace_ns)
{
    int64_t deadline = fc_now_mono_ns() + grace_ns;

    /* Stop accepting everywhere first, then wait for what is in flight. */
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        if (s->daemon != NULL) {
            MHD_quiesce_daemon(s->daemon);
        }
        if (s->listen_fd >= 0) {
            close(s->listen_fd);
            s->listen_fd = -1;
        }
    }
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        while (s->pool != NULL && fc_workpool_in_flight(s->pool) > 0 &&
               fc_now_mono_ns() < deadline) {
            fc_sleep_ns(5 * FC_NS_PER_MS);
        }
        /*
         * Workers first: a handler still running resumes its connection into the daemon.
         * The pool itself outlives the daemon, whose last callbacks release their slots.
         */
        fc_workpool_stop(s->pool);
        if (s->daemon != NULL) {
            MHD_stop_daemon(s->daemon);
            s->daemon = NULL;
        }
        fc_workpool_free(s->pool);
        s->pool = NULL;
        fc_tls_cred_unref(s->cred);
        s->cred = NULL;
        fc_tls_server_free(s->tls);
        s->tls = NULL;
        fc_tls_pem_free(&s->mhd_pem);
    }
    if (reg->sweeper_running) {
        pthread_mutex_lock(&reg->lock);
        reg->stopping = true;
        pthread_cond_broadcast(&reg->stop);
        pthread_mutex_unlock(&reg->lock);
        pthread_join(reg->sweeper, NULL);
        reg->sweeper_running = false;
    }
}
