/* The server `tls` block: its fields, checks, and the files read (and re-read) from disk. */
#include "core/tls_server.h"

#include "core/http_server.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OFF(f) offsetof(struct fc_tls_server_config, f)

const struct fc_field fc_tls_server_fields[] = {
    {"cert_file", FC_FIELD_STR, "", OFF(cert_file),
     "PEM certificate chain the server shows (required with tls)"},
    {"key_file", FC_FIELD_STR, "", OFF(key_file), "PEM private key of cert_file (required)"},
    {"ca_file", FC_FIELD_STR, "", OFF(ca_file),
     "accepted for the Collector's shape; a server does not use it (see client_ca_file)"},
    {"client_ca_file", FC_FIELD_STR, "", OFF(client_ca_file),
     "PEM CAs that sign client certificates: when set, clients must present a certificate "
     "they signed (mTLS), else the handshake is refused"},
    {"min_version", FC_FIELD_STR, "1.2", OFF(min_version),
     "lowest TLS version accepted: `1.2` or `1.3`"},
    {"reload_interval", FC_FIELD_DURATION, "0s", OFF(reload_interval),
     "re-read cert_file, key_file and client_ca_file this often (new connections get the new "
     "certificate; 0 = read once at start)"},
    {NULL},
};

static bool set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

bool fc_tls_server_on(const struct fc_tls_server_config *cfg)
{
    return cfg != NULL && cfg->enabled;
}

bool fc_tls_server_min13(const struct fc_tls_server_config *cfg)
{
    return set(cfg->min_version) && strcmp(cfg->min_version, "1.3") == 0;
}

/* The whole file, NUL-terminated. */
static int read_file(const char *key, const char *path, char **out, size_t *len,
                     struct fc_error *err)
{
    FILE *f = fopen(path, "rb");
    char *data = NULL;
    size_t n = 0, cap = 0;

    if (f == NULL) {
        return fc_errorf(err, FC_ECONFIG, "tls.%s: cannot read %s: %s", key, path, strerror(errno));
    }
    for (;;) {
        size_t got;
        if (cap - n < 4096) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (16u << 20)) {
                free(data);
                fclose(f);
                return fc_errorf(err, FC_ECONFIG, "tls.%s: %s is larger than 16 MiB", key, path);
            }
            data = fc_xrealloc(data, cap);
        }
        got = fread(data + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) {
            break;
        }
    }
    if (ferror(f)) {
        free(data);
        fclose(f);
        return fc_errorf(err, FC_ECONFIG, "tls.%s: cannot read %s", key, path);
    }
    fclose(f);
    data[n] = '\0';
    if (n == 0) {
        free(data);
        return fc_errorf(err, FC_ECONFIG, "tls.%s: %s is empty", key, path);
    }
    *out = data;
    *len = n;
    return FC_OK;
}

void fc_tls_pem_free(struct fc_tls_pem *p)
{
    free(p->cert);
    free(p->key);
    free(p->client_ca);
    memset(p, 0, sizeof(*p));
}

static int read_pem(const struct fc_tls_server_config *cfg, struct fc_tls_pem *p,
                    struct fc_error *err)
{
    memset(p, 0, sizeof(*p));
    if (read_file("cert_file", cfg->cert_file, &p->cert, &p->cert_len, err) != FC_OK ||
        read_file("key_file", cfg->key_file, &p->key, &p->key_len, err) != FC_OK ||
        (set(cfg->client_ca_file) && read_file("client_ca_file", cfg->client_ca_file, &p->client_ca,
                                               &p->client_ca_len, err) != FC_OK)) {
        fc_tls_pem_free(p);
        return err->code;
    }
    return FC_OK;
}

int fc_tls_server_check(const struct fc_tls_server_config *cfg, struct fc_error *err)
{
    struct fc_tls_pem p;
    FILE *f;

    if (!fc_tls_server_on(cfg)) {
        return FC_OK;
    }
    if (!set(cfg->cert_file) || !set(cfg->key_file)) {
        return fc_errorf(err, FC_ECONFIG, "tls: cert_file and key_file are required");
    }
    if (!set(cfg->min_version) ||
        (strcmp(cfg->min_version, "1.2") != 0 && strcmp(cfg->min_version, "1.3") != 0)) {
        return fc_errorf(err, FC_ECONFIG, "tls.min_version: \"%s\" is not 1.2 or 1.3",
                         cfg->min_version ? cfg->min_version : "");
    }
    if (cfg->reload_interval < 0) {
        return fc_errorf(err, FC_ECONFIG, "tls.reload_interval must be >= 0");
    }
    if (set(cfg->ca_file)) {
        f = fopen(cfg->ca_file, "r");
        if (f == NULL) {
            return fc_errorf(err, FC_ECONFIG, "tls.ca_file: cannot read %s: %s", cfg->ca_file,
                             strerror(errno));
        }
        fclose(f);
    }
    if (read_pem(cfg, &p, err) != FC_OK) {
        return err->code;
    }
    fc_tls_pem_free(&p);
    return FC_OK;
}

static bool same_str(const char *a, const char *b)
{
    return strcmp(a ? a : "", b ? b : "") == 0;
}

bool fc_tls_server_same(const struct fc_tls_server_config *a, const struct fc_tls_server_config *b)
{
    if (fc_tls_server_on(a) != fc_tls_server_on(b)) {
        return false;
    }
    if (!fc_tls_server_on(a)) {
        return true;
    }
    return same_str(a->cert_file, b->cert_file) && same_str(a->key_file, b->key_file) &&
           same_str(a->client_ca_file, b->client_ca_file) &&
           same_str(a->min_version, b->min_version) && a->reload_interval == b->reload_interval;
}

struct fc_tls_server *fc_tls_server_new(const struct fc_tls_server_config *cfg,
                                        struct fc_error *err)
{
    struct fc_tls_server *t = fc_xcalloc(1, sizeof(*t));

    t->cfg = *cfg;
    if (read_pem(cfg, &t->pem, err) != FC_OK) {
        free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->generation = 1;
    t->last_read_ns = fc_now_mono_ns();
    return t;
}

void fc_tls_server_free(struct fc_tls_server *t)
{
    if (t == NULL) {
        return;
    }
    fc_tls_pem_free(&t->pem);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

static bool same_bytes(const char *a, size_t alen, const char *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

uint64_t fc_tls_server_refresh(struct fc_tls_server *t)
{
    uint64_t gen;
    int64_t now;

    pthread_mutex_lock(&t->lock);
    now = fc_now_mono_ns();
    if (t->cfg.reload_interval > 0 && now - t->last_read_ns >= t->cfg.reload_interval) {
        struct fc_tls_pem p;
        struct fc_error err = {0};
        t->last_read_ns = now;
        if (read_pem(&t->cfg, &p, &err) != FC_OK) {
            fc_log_warn("tls", "reload: %s; keeping the certificates in use", err.msg);
        } else if (same_bytes(p.cert, p.cert_len, t->pem.cert, t->pem.cert_len) &&
                   same_bytes(p.key, p.key_len, t->pem.key, t->pem.key_len) &&
                   same_bytes(p.client_ca, p.client_ca_len, t->pem.client_ca,
                              t->pem.client_ca_len)) {
            fc_tls_pem_free(&p);
        } else {
            fc_tls_pem_free(&t->pem);
            t->pem = p;
            t->generation++;
            fc_log_info("tls", "reloaded %s (generation %llu)", t->cfg.cert_file,
                        (unsigned long long)t->generation);
        }
    }
    gen = t->generation;
    pthread_mutex_unlock(&t->lock);
    return gen;
}

static char *dup_bytes(const char *s, size_t n)
{
    char *d;

    if (s == NULL) {
        return NULL;
    }
    d = fc_xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

uint64_t fc_tls_server_pem(struct fc_tls_server *t, struct fc_tls_pem *out)
{
    uint64_t gen;

    pthread_mutex_lock(&t->lock);
    out->cert = dup_bytes(t->pem.cert, t->pem.cert_len);
    out->cert_len = t->pem.cert_len;
    out->key = dup_bytes(t->pem.key, t->pem.key_len);
    out->key_len = t->pem.key_len;
    out->client_ca = dup_bytes(t->pem.client_ca, t->pem.client_ca_len);
    out->client_ca_len = t->pem.client_ca_len;
    gen = t->generation;
    pthread_mutex_unlock(&t->lock);
    return gen;
}

void fc_tls_warn_plaintext(const char *what, const char *endpoint, bool tls, bool auth)
{
    char host[256];
    uint16_t port;
    struct fc_error err = {0};

    if ((tls && auth) || fc_parse_endpoint(endpoint, host, sizeof(host), &port, &err) != FC_OK) {
        return;
    }
    if (strcmp(host, "localhost") == 0 || strncmp(host, "127.", 4) == 0 ||
        strcmp(host, "::1") == 0) {
        return;
    }
    fc_log_warn(what, "%s listens on a non-loopback address without %s: %s", endpoint,
                !tls && !auth ? "tls and auth"
                : !tls        ? "tls"
                              : "auth",
                !auth ? "anyone who can reach it can read and send (add an auth extension)"
                      : "credentials and data travel in clear (add a tls block)");
}

/* ---- GnuTLS credentials (libmicrohttpd's TLS) ------------------------------------------ */

/* During the handshake, once the client's certificate arrived: refused unless client_ca signed it.
 */
static int verify_client(gnutls_session_t session)
{
    unsigned status = 0;

    if (gnutls_certificate_verify_peers2(session, &status) < 0 || status != 0) {
        return -1;
    }
    return 0;
}

struct fc_tls_cred *fc_tls_cred_build(const struct fc_tls_pem *pem, uint64_t generation,
                                      struct fc_error *err)
{
    struct fc_tls_cred *c = fc_xcalloc(1, sizeof(*c));
    gnutls_certificate_credentials_t x = NULL;
    gnutls_datum_t cert = {(unsigned char *)pem->cert, (unsigned)pem->cert_len};
    gnutls_datum_t key = {(unsigned char *)pem->key, (unsigned)pem->key_len};
    int rc;

    if (gnutls_certificate_allocate_credentials(&x) != GNUTLS_E_SUCCESS) {
        free(c);
        fc_errorf(err, FC_EIO, "tls: cannot allocate credentials");
        return NULL;
    }
    rc = gnutls_certificate_set_x509_key_mem2(x, &cert, &key, GNUTLS_X509_FMT_PEM, NULL, 0);
    if (rc < 0) {
        fc_errorf(err, FC_ECONFIG, "tls: cert_file/key_file: %s", gnutls_strerror(rc));
        goto fail;
    }
    if (pem->client_ca != NULL) {
        gnutls_datum_t ca = {(unsigned char *)pem->client_ca, (unsigned)pem->client_ca_len};
        rc = gnutls_certificate_set_x509_trust_mem(x, &ca, GNUTLS_X509_FMT_PEM);
        if (rc <= 0) {
            fc_errorf(err, FC_ECONFIG, "tls: client_ca_file: %s",
                      rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
            goto fail;
        }
        gnutls_certificate_set_verify_function(x, verify_client);
    }
    c->x = x;
    c->generation = generation;
    atomic_store(&c->refs, 1);
    return c;
fail:
    gnutls_certificate_free_credentials(x);
    free(c);
    return NULL;
}

void fc_tls_cred_unref(struct fc_tls_cred *c)
{
    if (c != NULL && atomic_fetch_sub(&c->refs, 1) == 1) {
        gnutls_certificate_free_credentials((gnutls_certificate_credentials_t)c->x);
        free(c);
    }
}
