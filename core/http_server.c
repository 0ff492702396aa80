#include "core/http_server.h"

#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct route {
    char *method; /* NULL = any */
    char *path;
    bool prefix;
    size_t max_body;
    fc_http_handler_fn fn;
    void *ctx;
    char *owner;
};

struct fc_http_server {
    struct fc_http_registry *reg;
    char *endpoint;
    struct route *routes;
    size_t n_routes;
    struct MHD_Daemon *daemon;
    _Atomic int in_flight;
    struct fc_http_server *next;
};

struct fc_http_registry {
    struct fc_http_options opts;
    struct fc_http_server *servers;
};

/* Per-request state, from the first callback until MHD reports completion. */
struct request_state {
    struct fc_http_server *srv;
    const struct route *route;
    struct fc_buf body;
    int early_status; /* 413 / 404 / 405 decided before the body arrived */
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
    if (reg->opts.max_connections == 0) {
        reg->opts.max_connections = 1024;
    }
    return reg;
}

static void server_free(struct fc_http_server *s)
{
    for (size_t i = 0; i < s->n_routes; i++) {
        free(s->routes[i].method);
        free(s->routes[i].path);
        free(s->routes[i].owner);
    }
    free(s->routes);
    free(s->endpoint);
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
    atomic_init(&s->in_flight, 0);
    s->next = reg->servers;
    reg->servers = s;
    return s;
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
    const char *org = fc_http_header(req, "X-Scope-OrgID");
    size_t n;

    *tenant = "anonymous";
    if (org == NULL) {
        return FC_OK;
    }
    n = strlen(org);
    if (n == 0 || n > 150 || strcmp(org, ".") == 0 || strcmp(org, "..") == 0) {
        goto bad;
    }
    for (const char *p = org; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              strchr("!-_.*'()", *p) != NULL)) {
            goto bad;
        }
    }
    *tenant = org;
    return FC_OK;
bad:
    return fc_errorf(err, FC_EPROTO,
                     "X-Scope-OrgID \"%.64s\" is not a valid tenant id (1-150 characters of "
                     "A-Z a-z 0-9 ! - _ . * ' ( ))",
                     org);
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct fc_http_server *s = cls;
    struct request_state *st = *con_cls;

    (void)version;
    if (st == NULL) {
        bool mismatch;
        const char *cl;
        st = fc_xcalloc(1, sizeof(*st));
        st->srv = s;
        atomic_fetch_add(&s->in_flight, 1);
        *con_cls = st;
        st->route = find_route(s, method, url, &mismatch);
        if (st->route == NULL) {
            st->early_status = mismatch ? 405 : 404;
        } else {
            fc_buf_init(&st->body, st->route->max_body);
            cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl != NULL && st->route->max_body > 0 &&
                strtoull(cl, NULL, 10) > (unsigned long long)st->route->max_body) {
                st->early_status = 413;
            }
        }
        return MHD_YES;
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
    if (st->early_status == 404) {
        return send_text(conn, 404, "not found", NULL);
    }
    if (st->early_status == 405) {
        const char *allow = "POST";
        for (size_t i = 0; i < s->n_routes; i++) {
            if (strcmp(s->routes[i].path, url) == 0 && s->routes[i].method != NULL) {
                allow = s->routes[i].method;
            }
        }
        return send_text(conn, 405, "method not allowed", allow);
    }
    if (st->early_status == 413) {
        char msg[128];
        snprintf(msg, sizeof(msg), "request body larger than the limit of %zu bytes",
                 st->route->max_body);
        return send_text(conn, 413, msg, NULL);
    }
    {
        struct fc_http_request req = {method, url, st->body.data, st->body.len, conn};
        struct fc_http_response resp = {0};
        fc_buf_init(&resp.body, 0);
        resp.status = 200;
        st->route->fn(st->route->ctx, &req, &resp);
        return send_response(conn, &resp);
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct request_state *st = *con_cls;

    (void)cls;
    (void)conn;
    (void)toe;
    if (st == NULL) {
        return;
    }
    fc_buf_release(&st->body);
    atomic_fetch_sub(&st->srv->in_flight, 1);
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

static int start_server(struct fc_http_registry *reg, struct fc_http_server *s,
                        struct fc_error *err)
{
    char host[256];
    char port_s[8];
    uint16_t port = 0;
    struct addrinfo hints = {0};
    struct addrinfo *ai = NULL;
    int rc;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME;

    if (fc_parse_endpoint(s->endpoint, host, sizeof(host), &port, err) != FC_OK) {
        return err->code;
    }
    snprintf(port_s, sizeof(port_s), "%u", port);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, port_s, &hints, &ai);
    if (rc != 0) {
        return fc_errorf(err, FC_ECONFIG, "endpoint %s: %s", s->endpoint, gai_strerror(rc));
    }
    if (ai->ai_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    s->daemon = MHD_start_daemon(
        flags, port, NULL, NULL, on_request, s, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)reg->opts.threads, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)((reg->opts.read_timeout_ns + FC_NS_PER_SEC - 1) / FC_NS_PER_SEC),
        MHD_OPTION_CONNECTION_LIMIT, reg->opts.max_connections, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
        MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (s->daemon == NULL) {
        return fc_errorf(err, FC_EIO,
                         "cannot listen on %s (address in use or not available on this host)",
                         s->endpoint);
    }
    fc_log_info("http", "listening on %s (%zu routes)", s->endpoint, s->n_routes);
    return FC_OK;
}

int fc_http_registry_start(struct fc_http_registry *reg, struct fc_error *err)
{
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        if (s->daemon == NULL && start_server(reg, s, err) != FC_OK) {
            fc_http_registry_stop(reg, 0);
            return err->code;
        }
    }
    return FC_OK;
}

void fc_http_registry_stop(struct fc_http_registry *reg, int64_t grace_ns)
{
    int64_t deadline = fc_now_mono_ns() + grace_ns;

    /* Stop accepting everywhere first, then wait for what is in flight. */
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        if (s->daemon != NULL) {
            MHD_socket fd = MHD_quiesce_daemon(s->daemon);
            if (fd != MHD_INVALID_SOCKET) {
                close(fd);
            }
        }
    }
    for (struct fc_http_server *s = reg->servers; s != NULL; s = s->next) {
        while (s->daemon != NULL && atomic_load(&s->in_flight) > 0 && fc_now_mono_ns() < deadline) {
            fc_sleep_ns(5 * FC_NS_PER_MS);
        }
        if (s->daemon != NULL) {
            MHD_stop_daemon(s->daemon);
            s->daemon = NULL;
        }
    }
}
