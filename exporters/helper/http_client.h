/*
 * One HTTP POST at a time over libcurl, for the otlphttp and pyroscope
 * exporters. A connection (one per consumer thread) is a curl easy handle:
 * it keeps its connections alive between requests (HTTP/1.1 keep-alive, or
 * HTTP/2 when the peer offers it over TLS).
 */
#ifndef FC_EXPORTERS_HELPER_HTTP_CLIENT_H
#define FC_EXPORTERS_HELPER_HTTP_CLIENT_H

#include "config/schema.h"
#include "core/buf.h"
#include "exporters/helper/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_http_request {
    const char *url;                  /* full URL: scheme, host, port, path, query */
    const char *content_type;         /* "application/x-protobuf", ... */
    const char *content_encoding;     /* "gzip", "zstd" or NULL */
    const struct fc_str_map *headers; /* user headers, may be NULL */
    const char *tenant;               /* X-Scope-OrgID unless NULL or headers set it */
    const char *basic_user;           /* basic auth when not NULL */
    const char *basic_password;
    const char *bearer_token; /* Authorization: Bearer when not NULL/"" */
    const uint8_t *body;
    size_t body_len;
    int64_t timeout_ns;
    bool json; /* the peer answers errors in JSON */
};

struct fc_http_conn;

/* curl_global_init happens once, in main (not thread-safe). */
void fc_http_global_init(void);
struct fc_http_conn *fc_http_conn_new(const struct fc_tls_client_config *tls);
void fc_http_conn_free(struct fc_http_conn *c);

/*
 * Makes one attempt. res is filled by fc_http_result (a transport error:
 * retryable, error_type "transport" or "timeout"). answer (may be NULL)
 * receives at most 64 KiB of a 2xx body, for partial success.
 */
void fc_http_post(struct fc_http_conn *c, const struct fc_http_request *rq,
                  struct fc_send_result *res, struct fc_buf *answer);

#endif
