/*
 * Unary gRPC calls on gRPC core's C API, for the otlp exporter. One channel
 * per exporter (it holds the HTTP/2 connections, TLS and keepalive); one
 * conn per consumer thread, holding a completion queue on which that
 * thread waits for its own calls. A call is bounded by its deadline.
 */
#ifndef FC_EXPORTERS_HELPER_GRPC_CLIENT_H
#define FC_EXPORTERS_HELPER_GRPC_CLIENT_H

#include "config/schema.h"
#include "core/buf.h"
#include "core/err.h"
#include "exporters/helper/client.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_grpc_channel_config {
    const char *target; /* host:port */
    bool use_tls;
    const struct fc_tls_client_config *tls; /* files and names, when use_tls */
    bool gzip;                              /* compress every message with gzip */
    int64_t keepalive_time_ns;              /* 0: no keepalive pings */
    int64_t keepalive_timeout_ns;
    bool keepalive_permit_without_stream;
    const struct fc_str_map *headers; /* metadata of every call (keys sent in lower case) */
};

struct fc_grpc_channel;
struct fc_grpc_conn;

/*
 * Once, in main, before anything calls grpc_init(): gRPC's client channels
 * make progress on a reconnect only while something polls them, and a call
 * that fails fast does not; its backup poller runs every 5 s by default,
 * which held delivery up to ~20 s after a peer came back. 100 ms (unless the
 * user set GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS) brings that to ~2 s.
 */
void fc_grpc_client_global_init(void);

/* FC_ECONFIG naming a header gRPC cannot send as metadata (checked again by channel_new). */
int fc_grpc_headers_check(const struct fc_str_map *headers, struct fc_error *err);

/* Reads the TLS files (FC_ECONFIG naming one that cannot be read); connects lazily. */
int fc_grpc_channel_new(const struct fc_grpc_channel_config *cfg, const char *method,
                        struct fc_grpc_channel **out, struct fc_error *err);
void fc_grpc_channel_free(struct fc_grpc_channel *ch);

struct fc_grpc_conn *fc_grpc_conn_new(struct fc_grpc_channel *ch);
void fc_grpc_conn_free(struct fc_grpc_conn *c);

struct fc_grpc_request {
    const char *tenant; /* x-scope-orgid unless NULL/"" or the channel's headers set it */
    const uint8_t *body;
    size_t body_len;
    bool gzipped;       /* body is already gzip-compressed: gRPC sends it as is */
    int64_t timeout_ns; /* the call's deadline */
};

/*
 * One call of the channel's method. res: fc_grpc_result of the status and
 * its grpc-status-details-bin trailer; the deadline passing locally is
 * error_type "timeout". answer (may be NULL) receives the response message
 * of an OK call.
 */
void fc_grpc_unary(struct fc_grpc_conn *c, const struct fc_grpc_request *rq,
                   struct fc_send_result *res, struct fc_buf *answer);

#endif
