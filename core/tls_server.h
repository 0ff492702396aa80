/*
 * The OpenTelemetry Collector's server `tls` block, one config and one parser
 * for every listener (the shared HTTP server, the otlp receiver's gRPC
 * server, the telemetry endpoint). This file only reads and checks the
 * files; the handshakes are libmicrohttpd's (GnuTLS) and gRPC core's.
 *
 * Certificates are re-read lazily: when a new connection arrives and
 * reload_interval has passed since the last read, the files are read again;
 * a change bumps the generation, and the server builds new credentials for
 * that connection and the ones after it. Connections already open keep
 * theirs. (Authentication is a separate, later piece: see the README.)
 */
#ifndef FC_TLS_SERVER_H
#define FC_TLS_SERVER_H

#include "config/schema.h"
#include "core/err.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fc_tls_server_config {
    bool enabled; /* first: FC_FIELD_PRESENCE (the `tls` key is present) */
    const char *cert_file;
    const char *key_file;
    const char *ca_file;        /* accepted for the Collector's shape; a server does not use it */
    const char *client_ca_file; /* set: client certificates required and verified (mTLS) */
    const char *min_version;    /* "1.2" or "1.3" */
    int64_t reload_interval;    /* ns; 0 = read once at start */
};

extern const struct fc_field fc_tls_server_fields[];

/* The `tls` key of a server's config, at offset `off` of a struct fc_tls_server_config. */
#define FC_TLS_SERVER_FIELD(off)                                                                   \
    {                                                                                              \
        "tls", FC_FIELD_OBJECT, NULL, (off),                                                       \
            "serve TLS (the Collector's server tls block: cert_file, key_file, client_ca_file "    \
            "for "                                                                                 \
            "mTLS, min_version, reload_interval); absent: plaintext",                              \
            .sub = fc_tls_server_fields, .flags = FC_FIELD_PRESENCE                                \
    }

/* True when the block turns TLS on (the key is present). */
bool fc_tls_server_on(const struct fc_tls_server_config *cfg);
/* Config checks: cert_file and key_file given and readable, min_version known, interval >= 0. */
int fc_tls_server_check(const struct fc_tls_server_config *cfg, struct fc_error *err);
/* Two blocks that configure the same TLS (both off, or the same files and settings). */
bool fc_tls_server_same(const struct fc_tls_server_config *a, const struct fc_tls_server_config *b);
/* True for "1.3". */
bool fc_tls_server_min13(const struct fc_tls_server_config *cfg);

/* The PEM texts of one read of the files (NUL-terminated; client_ca NULL without mTLS). */
struct fc_tls_pem {
    char *cert, *key, *client_ca;
    size_t cert_len, key_len, client_ca_len;
};

/* A server's certificates, re-read from disk every reload_interval. */
struct fc_tls_server {
    struct fc_tls_server_config cfg; /* strings borrowed from the config arena */
    pthread_mutex_t lock;
    struct fc_tls_pem pem;
    uint64_t generation;  /* bumped when the files' content changed */
    int64_t last_read_ns; /* CLOCK_MONOTONIC */
};

/* Reads the files once (they must be readable). NULL with err set. */
struct fc_tls_server *fc_tls_server_new(const struct fc_tls_server_config *cfg,
                                        struct fc_error *err);
void fc_tls_server_free(struct fc_tls_server *t);
/*
 * Re-reads the files when reload_interval has passed since the last read
 * (never when it is 0) and returns the generation. A file that cannot be
 * read keeps the previous certificates (logged).
 */
uint64_t fc_tls_server_refresh(struct fc_tls_server *t);
/* A copy of the current PEM texts; returns their generation. */
uint64_t fc_tls_server_pem(struct fc_tls_server *t, struct fc_tls_pem *out);
void fc_tls_pem_free(struct fc_tls_pem *p);

/*
 * GnuTLS certificate credentials of one generation of the files, for the
 * HTTP server. Each TLS connection holds a reference from accept to close,
 * so a reload swaps in new credentials for new connections while older ones
 * finish. With client_ca, the handshake verifies the client's certificate
 * (gnutls_certificate_set_verify_function) and fails when it does not chain
 * to client_ca (expired, other CA).
 */
struct fc_tls_cred {
    void *x; /* gnutls_certificate_credentials_t */
    uint64_t generation;
    _Atomic int refs;
};
struct fc_tls_cred *fc_tls_cred_build(const struct fc_tls_pem *pem, uint64_t generation,
                                      struct fc_error *err);
void fc_tls_cred_unref(struct fc_tls_cred *c);

/* Logs one warning when endpoint's host is not loopback and TLS or authentication is off. */
void fc_tls_warn_plaintext(const char *what, const char *endpoint, bool tls, bool auth);

#endif
