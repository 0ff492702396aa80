/*
 * Authentication in the shared HTTP server (see fc_http_server_auth): each
 * route carries its owner's authenticator and the role it needs; a request
 * is decided before its handler runs.
 */
#include "core/http_server_int.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

/* The peer's IP address (the key of the authenticator's failure limit). */
static void client_address(struct MHD_Connection *conn, char *out, size_t size)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = i != NULL ? i->client_addr : NULL;

    snprintf(out, size, "?");
    if (sa != NULL && sa->sa_family == AF_INET) {
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)size);
    } else if (sa != NULL && sa->sa_family == AF_INET6) {
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)size);
    }
}

/* Decides a request of an authenticated route. */
void fc_http_authorize(const struct route *r, struct MHD_Connection *conn,
                       struct fc_auth_decision *d)
{
    char client[INET6_ADDRSTRLEN + 1];

    client_address(conn, client, sizeof(client));
    fc_auth_check(r->auth, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization"),
                  client, r->need,
                  MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Scope-OrgID"),
                  fc_now_mono_ns(), d);
}

/* A refusal: 401 + WWW-Authenticate, 403, or 429 + Retry-After; counted; a Connect error body. */
void fc_http_auth_refusal(struct fc_http_server *s, const struct route *r, const char *method,
                          const char *path, const struct fc_auth_decision *d,
                          struct fc_http_response *resp)
{
    static const char *const codes[] = {"unauthenticated", "permission_denied",
                                        "resource_exhausted"};
    int status = d->outcome == FC_AUTH_THROTTLED                              ? 429
                 : d->outcome == FC_AUTH_MISSING || d->outcome == FC_AUTH_BAD ? 401
                                                                              : 403;
    unsigned schemes = fc_auth_schemes(r->auth);
    char secs[24];

    fc_metric_add(s->auth_refused[d->outcome], 1);
    fc_log_debug("http", "refused %s %s on %s (%s): %s", method, path, s->endpoint,
                 fc_auth_outcome_name(d->outcome), d->message);
    resp->status = status;
    resp->content_type = "application/json";
    fc_buf_reset(&resp->body);
    fc_buf_printf(&resp->body, "{\"code\":\"%s\",\"message\":\"",
                  codes[status == 401   ? 0
                        : status == 403 ? 1
                                        : 2]);
    fc_buf_json_escape(&resp->body, d->message, strlen(d->message));
    fc_buf_puts(&resp->body, "\"}");
    if (status == 401 && (schemes & FC_AUTH_SCHEME_BEARER)) {
        fc_http_response_header(resp, "WWW-Authenticate", "Bearer realm=\"flamecol\"");
    }
    if (status == 401 && (schemes & FC_AUTH_SCHEME_BASIC)) {
        fc_http_response_header(resp, "WWW-Authenticate", "Basic realm=\"flamecol\"");
    }
    if (status == 429) {
        snprintf(secs, sizeof(secs), "%d", FC_AUTH_RETRY_AFTER_S);
        fc_http_response_header(resp, "Retry-After", secs);
    }
}

/* At start: each route takes its owner's authenticator; every route is logged. */
void fc_http_resolve_routes(struct fc_http_server *s)
{
    const char *open_owner = NULL, *auth_owner = NULL;

    for (size_t i = 0; i < s->n_routes; i++) {
        struct route *r = &s->routes[i];
        bool public_route = r->public_route;

        r->auth = NULL;
        r->need = 0;
        for (size_t j = 0; j < s->n_owners && !public_route; j++) {
            if (strcmp(s->owners[j].owner, r->owner) == 0 && s->owners[j].auth != NULL) {
                r->auth = s->owners[j].auth;
                r->need = s->owners[j].need;
            }
        }
        if (r->auth != NULL) {
            auth_owner = r->owner;
        } else if (!public_route) {
            open_owner = r->owner;
        }
        fc_log_debug("http", "route %s %s%s on %s owner=%s auth=%s", r->method ? r->method : "*",
                     r->path, r->prefix ? "*" : "", s->endpoint, r->owner,
                     public_route              ? "public"
                     : r->auth == NULL         ? "none"
                     : r->need & FC_AUTH_WRITE ? "write"
                                               : "read");
    }
    if (auth_owner != NULL && open_owner != NULL) {
        fc_log_warn("http",
                    "%s: the routes of %s require credentials but those of %s do not (give "
                    "it auth too)",
                    s->endpoint, auth_owner, open_owner);
    }
    if (auth_owner != NULL) {
        fc_auth_refusal_counters(s->endpoint, s->auth_refused);
    }
}
