/*
 * What every network exporter's client shares: the Collector's `tls` block
 * for clients, `headers`, and reading a peer's answer (HTTP status,
 * Retry-After, gRPC status and RetryInfo) into a struct fc_send_result.
 * The HTTP transport (libcurl) lives in http_client.h, gRPC in grpc_client.h.
 */
#ifndef FC_EXPORTERS_HELPER_CLIENT_H
#define FC_EXPORTERS_HELPER_CLIENT_H

#include "config/schema.h"
#include "exporters/helper/sender.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The Collector's configtls client settings. */
struct fc_tls_client_config {
    bool insecure;         /* false; gRPC: plaintext. HTTP: the URL scheme decides */
    const char *ca_file;   /* "" = the system's CAs */
    const char *cert_file; /* client certificate (mTLS) */
    const char *key_file;
    bool insecure_skip_verify; /* false */
    const char *server_name_override;
};

extern const struct fc_field fc_tls_client_fields[];

/* Checks that cert_file and key_file come together and that files are readable. */
int fc_tls_client_check(const struct fc_tls_client_config *tls, struct fc_error *err);

/*
 * Retry-After: delay-seconds or an HTTP-date (RFC 9110). Returns the delay
 * in ns (>= 0), or -1 when the value is not valid. now_s: unix seconds.
 */
int64_t fc_parse_retry_after(const char *value, int64_t now_s);

/*
 * Classifies an HTTP answer as the Collector's otlphttp exporter does:
 * 2xx OK; 429/502/503/504 retryable (Retry-After honoured on 429/503); every
 * other status permanent. body (at most 64 KiB read) gives the message when
 * it is a google.rpc.Status (proto or JSON) or text.
 */
void fc_http_result(long status, const char *retry_after, const uint8_t *body, size_t len,
                    bool json, struct fc_send_result *res);

/*
 * Classifies a gRPC status as the OTLP spec says: OK; CANCELLED,
 * DEADLINE_EXCEEDED, ABORTED, OUT_OF_RANGE, UNAVAILABLE, DATA_LOSS retryable;
 * RESOURCE_EXHAUSTED retryable only with RetryInfo; the rest permanent.
 * details: the grpc-status-details-bin trailer (a google.rpc.Status), may be NULL.
 */
void fc_grpc_result(int code, const char *message, const uint8_t *details, size_t details_len,
                    struct fc_send_result *res);

#endif
