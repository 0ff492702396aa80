/*
 * Extensions, in the Collector's shape: defined once under the top-level
 * `extensions:` key ("auth" or "auth/<name>"), started when listed in
 * `service.extensions`, and named by the components that use them
 * (`auth: {authenticator: auth}`). The one extension type is `auth`, the
 * authenticator of core/auth.h.
 *
 * An extension defined but not listed in service.extensions is checked,
 * warned about and not started; a component naming an authenticator that
 * is not started is a config error at the name's file:line:col.
 */
#ifndef FC_CORE_EXTENSIONS_H
#define FC_CORE_EXTENSIONS_H

#include "config/diag.h"
#include "config/node.h"
#include "config/schema.h"
#include "core/err.h"

/* A server's `auth` block: `auth: {authenticator: <id of an auth extension>}`. */
struct fc_server_auth_config {
    const char *authenticator; /* "" = no authentication */
};

extern const struct fc_field fc_server_auth_fields[];

#define FC_SERVER_AUTH_FIELD(off)                                                                  \
    {                                                                                              \
        "auth", FC_FIELD_OBJECT, NULL, (off),                                                      \
            "require credentials: `authenticator` names an auth extension (see Authentication); "  \
            "absent: no authentication",                                                           \
            .sub = fc_server_auth_fields                                                           \
    }

struct fc_auth;
struct fc_extensions;

/*
 * Builds every extension of root's `extensions:` map (the authenticators
 * read their files here, so `validate` reports them) and keeps those
 * service.extensions lists. Problems go to diag; never NULL.
 */
struct fc_extensions *fc_extensions_build(const struct fc_node *root, struct fc_diag *diag);
void fc_extensions_free(struct fc_extensions *x);

/*
 * Checks every `authenticator: <id>` inside an `auth:` map of a component's
 * config (at any depth) names a started auth extension; errors at the id.
 */
void fc_extensions_check_refs(const struct fc_extensions *x, const struct fc_node *config,
                              const char *path, struct fc_diag *diag);

/* *out: the started authenticator `id`, or NULL for "" or NULL (no auth). Error when absent. */
int fc_extensions_auth(const struct fc_extensions *x, const char *id, struct fc_auth **out,
                       struct fc_error *err);

#endif
