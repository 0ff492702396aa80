/*
 * The authenticator (see auth.h). Bearer tokens are compared in constant
 * time against every configured token. Basic credentials are checked with
 * libxcrypt's bcrypt; bcrypt is slow on purpose (tens of ms at cost 10), so
 * a verified (user, password) is remembered by its SHA-256 in a small
 * direct-mapped cache, and failures are limited per client address before
 * any hash is computed.
 */
#include "core/auth.h"

#include "core/arena.h"
#include "core/batch.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "formats/json.h"

#include <crypt.h>
#include <errno.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

#define FAILURE_SLOTS 1024 /* client addresses whose failures are counted */
#define FAILURE_WINDOW_NS (60LL * 1000000000LL)
#define CACHE_SLOTS 256 /* verified basic credentials remembered */
#define MAX_HTPASSWD_LINE 4096
#define MAX_CREDENTIAL 4096 /* longest Authorization value looked at */

struct credential {
    char *name;   /* the token (bearer) or the user name (basic) */
    char *hash;   /* basic: the bcrypt hash; NULL for a token */
    char *tenant; /* NULL: may claim any tenant */
    unsigned roles;
};

struct failure_slot {
    uint64_t client; /* XXH3 of the address; 0 = empty */
    int64_t since_ns;
    uint32_t count;
};

struct cache_slot {
    uint8_t digest[32]; /* SHA-256 of user, password and hash; all zero = empty */
};

struct fc_auth {
    struct credential *tokens;
    size_t n_tokens;
    struct credential *users;
    size_t n_users;
    int64_t max_failures; /* per client per minute; 0 = no limit */

    pthread_mutex_t lock;
    struct failure_slot failures[FAILURE_SLOTS];
    struct cache_slot cache[CACHE_SLOTS];
};

static const char *const outcome_names[FC_AUTH_OUTCOMES] = {
    "ok", "missing", "bad_credentials", "throttled", "role", "tenant",
};

const char *fc_auth_outcome_name(enum fc_auth_outcome o)
{
    return (unsigned)o < FC_AUTH_OUTCOMES ? outcome_names[o] : "unknown";
}

/* ---- config ------------------------------------------------------------------------------- */

static int at(struct fc_error *err, const struct fc_node *n, const char *fmt, const char *what)
{
    return fc_errorf(err, FC_ECONFIG, "%s:%u:%u: auth: %s%s", n->file ? n->file : "?", n->line,
                     n->col, fmt, what ? what : "");
}

static int parse_roles(const struct fc_node *n, unsigned *roles, struct fc_error *err)
{
    *roles = 0;
    if (n->kind != FC_NODE_SEQ || n->n_items == 0) {
        return at(err, n, "roles: expected a list of read and/or write", NULL);
    }
    for (size_t i = 0; i < n->n_items; i++) {
        const struct fc_node *r = n->items[i];
        if (r->kind == FC_NODE_SCALAR && strcmp(r->str, "read") == 0) {
            *roles |= FC_AUTH_READ;
        } else if (r->kind == FC_NODE_SCALAR && strcmp(r->str, "write") == 0) {
            *roles |= FC_AUTH_WRITE;
        } else {
            return at(err, r, "roles: each is read or write", NULL);
        }
    }
    return FC_OK;
}

static int parse_tenant(const struct fc_node *n, char **out, struct fc_error *err)
{
    struct fc_error why = {0};

    if (n->kind != FC_NODE_SCALAR || fc_tenant_check(n->str, strlen(n->str), &why) != FC_OK) {
        return at(err, n, "tenant: not a valid tenant id: ", why.msg);
    }
    *out = fc_xstrdup(n->str);
    return FC_OK;
}

static int parse_tokens(struct fc_auth *a, const struct fc_node *n, struct fc_error *err)
{
    if (n->kind != FC_NODE_SEQ) {
        return at(err, n, "bearer_tokens: expected a list of {token, tenant, roles}", NULL);
    }
    a->tokens = fc_xcalloc(n->n_items + 1, sizeof(*a->tokens));
    for (size_t i = 0; i < n->n_items; i++) {
        const struct fc_node *t = n->items[i];
        struct credential *c = &a->tokens[a->n_tokens];
        if (t->kind != FC_NODE_MAP) {
            return at(err, t, "bearer_tokens: each entry is a map {token, tenant, roles}", NULL);
        }
        c->roles = FC_AUTH_READ | FC_AUTH_WRITE;
        a->n_tokens++; /* counted before the checks: freed with the rest on error */
        for (size_t j = 0; j < t->n_pairs; j++) {
            const struct fc_node *k = t->pairs[j].key, *v = t->pairs[j].value;
            if (strcmp(k->str, "token") == 0) {
                if (v->kind != FC_NODE_SCALAR || v->str[0] == '\0') {
                    return at(err, v, "token: must not be empty", NULL);
                }
                free(c->name);
                c->name = fc_xstrdup(v->str);
            } else if (strcmp(k->str, "tenant") == 0) {
                free(c->tenant);
                c->tenant = NULL;
                if (parse_tenant(v, &c->tenant, err) != FC_OK) {
                    return err->code;
                }
            } else if (strcmp(k->str, "roles") == 0) {
                if (parse_roles(v, &c->roles, err) != FC_OK) {
                    return err->code;
                }
            } else {
                return at(err, k,
                          "bearer_tokens: unknown key (valid: token, tenant, roles): ", k->str);
            }
        }
        if (c->name == NULL) {
            return at(err, t, "bearer_tokens: an entry without token", NULL);
        }
        for (size_t j = 0; j + 1 < a->n_tokens; j++) {
            if (strcmp(a->tokens[j].name, c->name) == 0) {
                return at(err, t, "bearer_tokens: the same token is given twice", NULL);
            }
        }
    }
    return FC_OK;
}

static struct credential *find_user(struct fc_auth *a, const char *name, size_t len)
{
    for (size_t i = 0; i < a->n_users; i++) {
        if (strlen(a->users[i].name) == len && memcmp(a->users[i].name, name, len) == 0) {
            return &a->users[i];
        }
    }
    return NULL;
}

static bool is_bcrypt(const char *h)
{
    return strlen(h) == 60 && h[0] == '$' && h[1] == '2' &&
           (h[2] == 'a' || h[2] == 'b' || h[2] == 'y') && h[3] == '$';
}

/* user:hash lines; blank lines and # comments skipped; bcrypt only. */
static int load_htpasswd(struct fc_auth *a, const struct fc_node *n, struct fc_error *err)
{
    char line[MAX_HTPASSWD_LINE + 2];
    unsigned lineno = 0;
    size_t cap = 0;
    FILE *f;

    if (n->kind != FC_NODE_SCALAR || n->str[0] == '\0') {
        return at(err, n, "basic.htpasswd_file: a file name is required", NULL);
    }
    if ((f = fopen(n->str, "r")) == NULL) {
        return fc_errorf(err, FC_ECONFIG, "%s:%u:%u: auth: basic.htpasswd_file %s: %s", n->file,
                         n->line, n->col, n->str, strerror(errno));
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        size_t len = strlen(line);
        char *colon;
        lineno++;
        if (len > MAX_HTPASSWD_LINE) {
            fclose(f);
            return fc_errorf(err, FC_ECONFIG, "%s line %u: line too long", n->str, lineno);
        }
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) {
            line[--len] = '\0';
        }
        if (len == 0 || line[0] == '#') {
            continue;
        }
        colon = strchr(line, ':');
        if (colon == NULL || colon == line) {
            fclose(f);
            return fc_errorf(err, FC_ECONFIG, "%s line %u: expected user:hash", n->str, lineno);
        }
        *colon = '\0';
        if (!is_bcrypt(colon + 1)) {
            fclose(f);
            return fc_errorf(err, FC_ECONFIG,
                             "%s line %u (user %s): only bcrypt hashes are supported "
                             "(htpasswd -B; $2y$, $2b$ or $2a$)",
                             n->str, lineno, line);
        }
        if (find_user(a, line, strlen(line)) != NULL) {
            fclose(f);
            return fc_errorf(err, FC_ECONFIG, "%s line %u: user %s given twice", n->str, lineno,
                             line);
        }
        if (a->n_users == cap) {
            cap = cap ? cap * 2 : 8;
            a->users = fc_xrealloc(a->users, cap * sizeof(*a->users));
        }
        a->users[a->n_users++] = (struct credential){fc_xstrdup(line), fc_xstrdup(colon + 1), NULL,
                                                     FC_AUTH_READ | FC_AUTH_WRITE};
    }
    fclose(f);
    return FC_OK;
}

/* tenants: {user: tenant} or roles: {user: [..]}: every user named must be in the file. */
static int parse_user_map(struct fc_auth *a, const struct fc_node *n, bool roles,
                          struct fc_error *err)
{
    if (n->kind != FC_NODE_MAP) {
        return at(err, n,
                  roles ? "basic.roles: expected {user: [read, write]}"
                        : "basic.tenants: expected {user: tenant}",
                  NULL);
    }
    for (size_t i = 0; i < n->n_pairs; i++) {
        const struct fc_node *k = n->pairs[i].key, *v = n->pairs[i].value;
        struct credential *u = find_user(a, k->str, strlen(k->str));
        if (u == NULL) {
            return at(err, k, "basic: a user that is not in htpasswd_file: ", k->str);
        }
        if (roles ? parse_roles(v, &u->roles, err) : parse_tenant(v, &u->tenant, err)) {
            return err->code;
        }
    }
    return FC_OK;
}

static int parse_basic(struct fc_auth *a, const struct fc_node *n, struct fc_error *err)
{
    const struct fc_node *file = fc_node_get(n, "htpasswd_file");

    if (n->kind != FC_NODE_MAP) {
        return at(err, n, "basic: expected {htpasswd_file, tenants, roles}", NULL);
    }
    for (size_t i = 0; i < n->n_pairs; i++) {
        const char *k = n->pairs[i].key->str;
        if (strcmp(k, "htpasswd_file") != 0 && strcmp(k, "tenants") != 0 &&
            strcmp(k, "roles") != 0) {
            return at(err, n->pairs[i].key,
                      "basic: unknown key (valid: htpasswd_file, tenants, roles): ", k);
        }
    }
    if (file == NULL) {
        return at(err, n, "basic: htpasswd_file is required", NULL);
    }
    if (load_htpasswd(a, file, err) != FC_OK) {
        return err->code;
    }
    if (fc_node_get(n, "tenants") && parse_user_map(a, fc_node_get(n, "tenants"), false, err)) {
        return err->code;
    }
    if (fc_node_get(n, "roles") && parse_user_map(a, fc_node_get(n, "roles"), true, err)) {
        return err->code;
    }
    return FC_OK;
}

int fc_auth_new(const struct fc_node *cfg, struct fc_auth **out, struct fc_error *err)
{
    struct fc_auth *a = fc_xcalloc(1, sizeof(*a));
    int rc = FC_OK;

    *out = NULL;
    pthread_mutex_init(&a->lock, NULL);
    a->max_failures = 10;
    if (cfg == NULL || cfg->kind != FC_NODE_MAP) {
        fc_auth_free(a);
        return fc_errorf(err, FC_ECONFIG, "auth: expected a map of bearer_tokens and/or basic");
    }
    for (size_t i = 0; rc == FC_OK && i < cfg->n_pairs; i++) {
        const struct fc_node *k = cfg->pairs[i].key, *v = cfg->pairs[i].value;
        if (strcmp(k->str, "bearer_tokens") == 0) {
            rc = parse_tokens(a, v, err);
        } else if (strcmp(k->str, "basic") == 0) {
            rc = parse_basic(a, v, err);
        } else if (strcmp(k->str, "max_failures_per_minute") == 0) {
            char *end = NULL;
            long long m = v->kind == FC_NODE_SCALAR ? strtoll(v->str, &end, 10) : -1;
            if (end == NULL || *end != '\0' || end == v->str || m < 0 || m > 1000000) {
                rc = at(err, v, "max_failures_per_minute: a number from 0 (no limit) up", NULL);
            }
            a->max_failures = m;
        } else {
            rc = at(err, k,
                    "unknown key (valid: bearer_tokens, basic, max_failures_per_minute): ", k->str);
        }
    }
    if (rc == FC_OK && a->n_tokens == 0 && a->n_users == 0) {
        rc = at(err, cfg, "no credential configured (bearer_tokens or basic users)", NULL);
    }
    if (rc != FC_OK) {
        fc_auth_free(a);
        return rc;
    }
    *out = a;
    return FC_OK;
}

/*
 * A password's bcrypt hash with a fresh salt, for a credential given in the
 * clear (the pprof receiver's legacy basic user). Cost 5: the hash stays in
 * memory, so its cost only slows a guesser who must ask over the network,
 * and the failure limit bounds that anyway.
 */
static char *bcrypt_hash(const char *password, struct fc_error *err)
{
    struct crypt_data *data = fc_xcalloc(1, sizeof(*data));
    char salt[CRYPT_GENSALT_OUTPUT_SIZE];
    char *out = NULL;

    if (crypt_gensalt_rn("$2b$", 5, NULL, 0, salt, (int)sizeof(salt)) == NULL ||
        crypt_rn(password, salt, data, (int)sizeof(*data)) == NULL || !is_bcrypt(data->output)) {
        fc_errorf(err, FC_ECONFIG, "auth: cannot hash the basic password (bcrypt): %s",
                  strerror(errno));
    } else {
        out = fc_xstrdup(data->output);
    }
    explicit_bzero(data, sizeof(*data));
    free(data);
    return out;
}

int fc_auth_new_single(const char *bearer_token, const char *user, const char *password,
                       struct fc_auth **out, struct fc_error *err)
{
    struct fc_auth *a = fc_xcalloc(1, sizeof(*a));
    bool token = bearer_token != NULL && bearer_token[0] != '\0';

    *out = NULL;
    pthread_mutex_init(&a->lock, NULL);
    a->max_failures = 10;
    if (token) {
        a->tokens = fc_xcalloc(1, sizeof(*a->tokens));
        a->tokens[a->n_tokens++] =
            (struct credential){fc_xstrdup(bearer_token), NULL, NULL, FC_AUTH_READ | FC_AUTH_WRITE};
    } else if (password != NULL && strlen(password) > 72) {
        /* bcrypt reads 72 bytes: a longer password would pass on its prefix alone. */
        fc_auth_free(a);
        return fc_errorf(err, FC_ECONFIG, "auth: the basic password is longer than 72 bytes");
    } else if (user != NULL && user[0] != '\0' && strchr(user, ':') == NULL) {
        char *hash = bcrypt_hash(password != NULL ? password : "", err);
        if (hash == NULL) {
            fc_auth_free(a);
            return err->code;
        }
        a->users = fc_xcalloc(1, sizeof(*a->users));
        a->users[a->n_users++] =
            (struct credential){fc_xstrdup(user), hash, NULL, FC_AUTH_READ | FC_AUTH_WRITE};
    } else {
        fc_auth_free(a);
        return fc_errorf(err, FC_ECONFIG,
                         "auth: a bearer token, or a basic user name without ':', is required");
    }
    *out = a;
    return FC_OK;
}

static void free_credentials(struct credential *c, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        /* Secrets are wiped before they go back to the allocator. */
        if (c[i].name != NULL) {
            explicit_bzero(c[i].name, strlen(c[i].name));
        }
        free(c[i].name);
        free(c[i].hash);
        free(c[i].tenant);
    }
    free(c);
}

void fc_auth_free(struct fc_auth *a)
{
    if (a == NULL) {
        return;
    }
    free_credentials(a->tokens, a->n_tokens);
    free_credentials(a->users, a->n_users);
    pthread_mutex_destroy(&a->lock);
    explicit_bzero(a->cache, sizeof(a->cache));
    free(a);
}

/* ---- checking ----------------------------------------------------------------------------- */

static bool secret_equal(const uint8_t *x, size_t nx, const uint8_t *y, size_t ny)
{
    unsigned char diff = (unsigned char)(nx != ny);

    for (size_t i = 0; i < nx && i < ny; i++) {
        diff |= (unsigned char)(x[i] ^ y[i]);
    }
    return diff == 0;
}

static uint64_t client_key(const char *client)
{
    uint64_t h = XXH3_64bits(client ? client : "", client ? strlen(client) : 0);
    return h ? h : 1;
}

static bool throttled(struct fc_auth *a, uint64_t key, int64_t now)
{
    struct failure_slot *s = &a->failures[key % FAILURE_SLOTS];
    bool t;

    if (a->max_failures == 0) {
        return false;
    }
    pthread_mutex_lock(&a->lock);
    t = s->client == key && now - s->since_ns < FAILURE_WINDOW_NS &&
        s->count >= (uint64_t)a->max_failures;
    pthread_mutex_unlock(&a->lock);
    return t;
}

/* One failed attempt of client; another address may take the slot over (bounded memory). */
static void count_failure(struct fc_auth *a, uint64_t key, int64_t now)
{
    struct failure_slot *s = &a->failures[key % FAILURE_SLOTS];

    pthread_mutex_lock(&a->lock);
    if (s->client != key || now - s->since_ns >= FAILURE_WINDOW_NS) {
        s->client = key;
        s->since_ns = now;
        s->count = 0;
    }
    s->count++;
    pthread_mutex_unlock(&a->lock);
}

static const struct credential *check_token(const struct fc_auth *a, const char *token, size_t n)
{
    const struct credential *found = NULL;

    /* Every token is compared, so the time says nothing about which one nearly matched. */
    for (size_t i = 0; i < a->n_tokens; i++) {
        if (secret_equal((const uint8_t *)a->tokens[i].name, strlen(a->tokens[i].name),
                         (const uint8_t *)token, n)) {
            found = &a->tokens[i];
        }
    }
    return found;
}

static void digest_of(const struct credential *u, const uint8_t *pass, size_t n, uint8_t out[32])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned len = 0;

    memset(out, 0, 32);
    if (ctx != NULL && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) == 1 &&
        EVP_DigestUpdate(ctx, u->name, strlen(u->name) + 1) == 1 &&
        EVP_DigestUpdate(ctx, u->hash, strlen(u->hash) + 1) == 1 &&
        EVP_DigestUpdate(ctx, pass, n) == 1) {
        EVP_DigestFinal_ex(ctx, out, &len);
    }
    EVP_MD_CTX_free(ctx);
}

static bool bcrypt_matches(const char *hash, const uint8_t *pass, size_t n)
{
    struct crypt_data *data;
    char *phrase;
    bool ok = false;

    if (memchr(pass, '\0', n) != NULL) {
        return false; /* crypt() would stop at the NUL: never a match */
    }
    data = fc_xcalloc(1, sizeof(*data));
    phrase = fc_xmalloc(n + 1);
    memcpy(phrase, pass, n);
    phrase[n] = '\0';
    if (crypt_rn(phrase, hash, data, (int)sizeof(*data)) != NULL) {
        ok = secret_equal((const uint8_t *)data->output, strlen(data->output),
                          (const uint8_t *)hash, strlen(hash));
    }
    explicit_bzero(phrase, n);
    explicit_bzero(data, sizeof(*data));
    free(phrase);
    free(data);
    return ok;
}

static const struct credential *check_basic(struct fc_auth *a, const char *b64, size_t n)
{
    struct fc_arena *arena = fc_arena_new(0);
    const struct credential *found = NULL;
    uint8_t *raw = NULL, digest[32];
    size_t len = 0;
    const uint8_t *colon;
    struct credential *u;

    if (arena == NULL || fc_base64_decode(arena, b64, n, &raw, &len) != FC_OK ||
        (colon = memchr(raw, ':', len)) == NULL ||
        (u = find_user(a, (const char *)raw, (size_t)(colon - raw))) == NULL) {
        fc_arena_free(arena);
        return NULL;
    }
    colon++;
    digest_of(u, colon, len - (size_t)(colon - raw), digest);
    {
        struct cache_slot *s = &a->cache[digest[0] % CACHE_SLOTS];
        bool hit;
        pthread_mutex_lock(&a->lock);
        hit = secret_equal(s->digest, 32, digest, 32);
        pthread_mutex_unlock(&a->lock);
        if (hit || bcrypt_matches(u->hash, colon, len - (size_t)(colon - raw))) {
            found = u;
            if (!hit) {
                pthread_mutex_lock(&a->lock);
                memcpy(s->digest, digest, 32);
                pthread_mutex_unlock(&a->lock);
            }
        }
    }
    explicit_bzero(raw, len);
    fc_arena_free(arena);
    return found;
}

/* The credential part after "<scheme> " (case-insensitive scheme), or NULL. */
static const char *after_scheme(const char *h, const char *scheme)
{
    size_t n = strlen(scheme);

    if (strncasecmp(h, scheme, n) != 0 || h[n] != ' ') {
        return NULL;
    }
    h += n;
    while (*h == ' ') {
        h++;
    }
    return h;
}

static void decide(struct fc_auth_decision *out, enum fc_auth_outcome o, const char *msg,
                   const char *detail)
{
    out->outcome = o;
    snprintf(out->message, sizeof(out->message), "%s%s", msg, detail ? detail : "");
}

void fc_auth_check(struct fc_auth *a, const char *authorization, const char *client, unsigned need,
                   const char *claimed_tenant, int64_t now_ns, struct fc_auth_decision *out)
{
    uint64_t key = client_key(client);
    const struct credential *c = NULL;
    const char *cred;
    size_t n;

    memset(out, 0, sizeof(*out));
    if (authorization == NULL || authorization[0] == '\0') {
        decide(out, FC_AUTH_MISSING, "credentials required (Authorization: Bearer or Basic)", NULL);
        return;
    }
    if (throttled(a, key, now_ns)) {
        decide(out, FC_AUTH_THROTTLED, "too many failed attempts from this address; retry later",
               NULL);
        return;
    }
    n = strnlen(authorization, MAX_CREDENTIAL + 1);
    if (n > MAX_CREDENTIAL) {
        c = NULL;
    } else if ((cred = after_scheme(authorization, "Bearer")) != NULL) {
        c = check_token(a, cred, strlen(cred));
    } else if ((cred = after_scheme(authorization, "Basic")) != NULL) {
        c = check_basic(a, cred, strlen(cred));
    }
    if (c == NULL) {
        count_failure(a, key, now_ns);
        decide(out, FC_AUTH_BAD, "unknown, wrong or malformed credentials", NULL);
        return;
    }
    if ((c->roles & need) != need) {
        decide(out, FC_AUTH_NO_ROLE,
               need & FC_AUTH_WRITE ? "this credential may not write"
                                    : "this credential may not read",
               NULL);
        return;
    }
    if (c->tenant != NULL && claimed_tenant != NULL && strcmp(c->tenant, claimed_tenant) != 0) {
        decide(out, FC_AUTH_WRONG_TENANT,
               "X-Scope-OrgID names another tenant than this "
               "credential's: ",
               c->tenant);
        return;
    }
    out->outcome = FC_AUTH_OK;
    out->tenant = c->tenant != NULL ? c->tenant : claimed_tenant;
    out->bound = c->tenant != NULL;
}

unsigned fc_auth_schemes(const struct fc_auth *a)
{
    return (a->n_tokens > 0 ? FC_AUTH_SCHEME_BEARER : 0u) |
           (a->n_users > 0 ? FC_AUTH_SCHEME_BASIC : 0u);
}

void fc_auth_refusal_counters(const char *listener, _Atomic int64_t *out[FC_AUTH_OUTCOMES])
{
    out[FC_AUTH_OK] = NULL;
    for (int o = FC_AUTH_OK + 1; o < FC_AUTH_OUTCOMES; o++) {
        char labels[300];
        snprintf(labels, sizeof(labels), "listener=\"%s\",reason=\"%s\"", listener,
                 outcome_names[o]);
        out[o] = fc_metrics_counter("flamecol_auth_refusals_total", labels,
                                    "Requests refused by authentication, by listener and reason "
                                    "(missing, bad_credentials, throttled, role, tenant).");
    }
}
