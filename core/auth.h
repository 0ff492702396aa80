/*
 * The authenticator: an Authorization header (Bearer token or Basic with an
 * htpasswd file of bcrypt hashes) -> the credential's tenant and roles, or
 * the reason for a refusal. Built once from its config (the `auth`
 * extension's YAML node) and shared by every server: it keeps no state
 * but a bounded cache of verified basic credentials and a bounded table of
 * failed attempts per client address, both behind one lock.
 *
 * Credentials never leave this file: messages name the reason, the user
 * name at most, never a token or a password.
 */
#ifndef FC_CORE_AUTH_H
#define FC_CORE_AUTH_H

#include "config/node.h"
#include "core/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum { FC_AUTH_READ = 1u, FC_AUTH_WRITE = 2u };

enum fc_auth_outcome {
    FC_AUTH_OK,
    FC_AUTH_MISSING,      /* 401: no credentials */
    FC_AUTH_BAD,          /* 401: malformed, unknown or wrong credentials */
    FC_AUTH_THROTTLED,    /* 429: too many failures from this client address */
    FC_AUTH_NO_ROLE,      /* 403: the credential lacks the role the route needs */
    FC_AUTH_WRONG_TENANT, /* 403: X-Scope-OrgID names another tenant than the credential's */
    FC_AUTH_OUTCOMES
};

/* Metric label of an outcome ("ok", "missing", "bad_credentials", ...). */
const char *fc_auth_outcome_name(enum fc_auth_outcome o);

struct fc_auth_decision {
    enum fc_auth_outcome outcome;
    /*
     * FC_AUTH_OK: the request's tenant: the credential's, or, for a
     * credential bound to no tenant, the claimed one (NULL: none claimed).
     * Owned by the authenticator, valid while it lives.
     */
    const char *tenant;
    char message[160]; /* why, for the answer and the log; never a secret */
    bool bound;        /* FC_AUTH_OK: tenant is the credential's own (not a claim) */
};

/*
 * Registers flamecol_auth_refusals_total{listener,reason} for each refusal
 * outcome of one listener (out[FC_AUTH_OK] stays NULL).
 */
void fc_auth_refusal_counters(const char *listener, _Atomic int64_t *out[FC_AUTH_OUTCOMES]);

/* What a throttled client is told to wait (Retry-After): the failure window. */
#define FC_AUTH_RETRY_AFTER_S 60

struct fc_auth;

enum { FC_AUTH_SCHEME_BEARER = 1u, FC_AUTH_SCHEME_BASIC = 2u };
/* The schemes a has credentials for (FC_AUTH_SCHEME_*), for WWW-Authenticate. */
unsigned fc_auth_schemes(const struct fc_auth *a);

/*
 * Builds an authenticator from its config node:
 *
 *   bearer_tokens: [{token: "...", tenant: team-a, roles: [read, write]}]
 *   basic: {htpasswd_file: users.htpasswd, tenants: {alice: team-a},
 *           roles: {alice: [read]}}
 *   max_failures_per_minute: 10
 *
 * roles default to [read, write]; a credential without tenant may claim
 * any tenant (X-Scope-OrgID). Errors name the node's file:line:col.
 */
int fc_auth_new(const struct fc_node *cfg, struct fc_auth **out, struct fc_error *err);
/*
 * An authenticator of one credential bound to no tenant, with both roles:
 * a bearer token, or else a basic user and password given in the clear
 * (hashed with bcrypt here). For the pprof receiver's legacy auth keys, so
 * that they are checked, limited and counted as an extension's are.
 */
int fc_auth_new_single(const char *bearer_token, const char *user, const char *password,
                       struct fc_auth **out, struct fc_error *err);
void fc_auth_free(struct fc_auth *a);

/*
 * Decides one request. authorization: the header's value or NULL; client:
 * the peer's address (for the failure limit); need: FC_AUTH_READ or
 * FC_AUTH_WRITE; claimed_tenant: X-Scope-OrgID or NULL; now_ns: a
 * monotonic clock.
 */
void fc_auth_check(struct fc_auth *a, const char *authorization, const char *client, unsigned need,
                   const char *claimed_tenant, int64_t now_ns, struct fc_auth_decision *out);

#endif
