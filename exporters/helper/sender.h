/*
 * The sending machinery every network exporter shares (otlp, otlphttp,
 * pyroscope), configured as the OpenTelemetry Collector's exporterhelper:
 *
 *     export() -> encode -> fc_sender_submit -> queue (memory or disk)
 *              -> num_consumers threads -> retry -> ops->send (one attempt,
 *                 bounded by `timeout`)
 *
 * An exporter encodes a batch into items (the bytes that go on the wire) on
 * the receiver's thread; the queue holds items, never batches, so the
 * in-memory and the persistent queue hold the same thing and a retry
 * re-sends the same bytes.
 *
 * Acknowledgement: fc_sender_submit returns FC_OK once every item is queued
 * in memory, or written and fsynced to the persistent queue (fsyncs of
 * concurrent submitters are grouped). A full queue answers FC_EAGAIN (the
 * receiver turns it into 429 / RESOURCE_EXHAUSTED with Retry-After) unless
 * block_on_overflow. Without a queue (`sending_queue.enabled: false`) the
 * caller's thread sends and retries, and the answer is the send's outcome.
 *
 * Metrics (labels exporter="<id>"), the Collector's names with our prefix:
 *   flamecol_exporter_sent_profile_samples_total / _sent_requests_total
 *   flamecol_exporter_send_failed_profile_samples_total{error_type} / _requests_total
 *   flamecol_exporter_enqueue_failed_profile_samples_total / _requests_total
 *   flamecol_exporter_queue_size, _queue_capacity, _in_flight_requests,
 *   flamecol_exporter_retries_total, and for a persistent queue
 *   flamecol_exporter_persistent_queue_{corrupt_records,redelivered_requests,fsyncs}_total
 * error_type is the peer's (http_400, grpc_UNAVAILABLE, timeout...), or
 * partial_success, or shutdown (still queued in memory at the deadline).
 */
#ifndef FC_EXPORTERS_HELPER_SENDER_H
#define FC_EXPORTERS_HELPER_SENDER_H

#include "config/schema.h"
#include "core/component.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- configuration: the Collector's keys and defaults ---------------------------------- */

enum fc_queue_sizer { FC_SIZER_REQUESTS, FC_SIZER_SAMPLES, FC_SIZER_BYTES };

struct fc_retry_config {
    bool enabled;                /* true */
    int64_t initial_interval;    /* 5s */
    double randomization_factor; /* 0.5 */
    double multiplier;           /* 1.5 */
    int64_t max_interval;        /* 30s */
    int64_t max_elapsed_time;    /* 300s; 0 = retry for ever */
};

struct fc_queue_config {
    bool enabled;                /* true */
    int64_t num_consumers;       /* 10 */
    int64_t queue_size;          /* 1000, in units of sizer */
    int sizer;                   /* enum fc_queue_sizer; requests */
    bool block_on_overflow;      /* false */
    const char *storage;         /* "" = in memory; else a directory: persistent queue */
    const struct fc_node *batch; /* the Collector's sending_queue.batch: refused, not built */
};

struct fc_sender_config {
    int64_t timeout; /* per attempt, 5s */
    struct fc_retry_config retry_on_failure;
    struct fc_queue_config sending_queue;
};

extern const struct fc_field fc_retry_fields[];
extern const struct fc_field fc_queue_fields[];

/* The three schema rows of the machinery, inside an exporter's field table. */
#define FC_SENDER_FIELDS(cfg_type, member)                                                         \
    {"timeout", FC_FIELD_DURATION, "5s", offsetof(cfg_type, member.timeout),                       \
     "time limit of one attempt to send a request"},                                               \
        {"retry_on_failure",                                                                       \
         FC_FIELD_OBJECT,                                                                          \
         NULL,                                                                                     \
         offsetof(cfg_type, member.retry_on_failure),                                              \
         "retries with exponential backoff and jitter (exporterhelper)",                           \
         .sub = fc_retry_fields},                                                                  \
    {                                                                                              \
        "sending_queue", FC_FIELD_OBJECT, NULL, offsetof(cfg_type, member.sending_queue),          \
            "the queue between receivers and senders (exporterhelper)", .sub = fc_queue_fields     \
    }

/* Checks ranges (num_consumers >= 1, multiplier >= 1, ...); FC_ECONFIG names the key. */
int fc_sender_config_check(const struct fc_sender_config *cfg, struct fc_error *err);

/* ---- items: one request on the wire -------------------------------------------------- */

struct fc_send_item {
    const char *tenant; /* NUL-terminated, in this allocation; "": send no X-Scope-OrgID */
    const char *target; /* exporter-specific (a URL path + query for ingest); "" if none */
    uint8_t *body;      /* the encoded (and compressed, as configured) request */
    size_t body_len;
    uint64_t samples;  /* for metrics and the samples sizer */
    uint32_t profiles; /* for partial success (the peer counts profiles) */
    /* Owned by the sender once submitted. */
    uint64_t seq; /* persistent queue record id; 0 in memory */
};

/*
 * One allocation holding the item, tenant, target and a body of body_len
 * bytes (to be filled by the caller). Free with fc_send_item_free().
 */
struct fc_send_item *fc_send_item_new(const char *tenant, const char *target, size_t body_len);
void fc_send_item_free(struct fc_send_item *item);

/* ---- what one attempt produced ------------------------------------------------------- */

enum fc_send_outcome {
    FC_SEND_OK,        /* accepted (possibly with partial success: rejected_profiles > 0) */
    FC_SEND_RETRY,     /* retryable: 429/502/503/504, a gRPC retryable code, timeout, refused */
    FC_SEND_PERMANENT, /* never retried: 400/401/403/404/413, INVALID_ARGUMENT, ... */
};

struct fc_send_result {
    enum fc_send_outcome outcome;
    int64_t retry_after_ns;     /* the peer asked to wait this long (Retry-After, RetryInfo) */
    uint32_t rejected_profiles; /* partial success: permanent for those, the rest is sent */
    char error_type[48];        /* metric label: "http_400", "grpc_UNAVAILABLE", "timeout", ... */
    char message[256];          /* the peer's message (logged, rate-limited) */
};

/*
 * What an exporter gives the machinery. send() makes one attempt and must
 * return within timeout_ns; it runs on a consumer thread (or the caller's
 * when the queue is off) with that thread's connection state `conn`.
 */
struct fc_sender_ops {
    void *(*conn_new)(void *ctx); /* may return NULL (then conn is NULL) */
    void (*conn_free)(void *ctx, void *conn);
    void (*send)(void *ctx, void *conn, const struct fc_send_item *item, int64_t timeout_ns,
                 struct fc_send_result *res);
};

struct fc_sender;

/* e: the exporter (id for logs and metric labels, its counters). */
int fc_sender_create(const struct fc_sender_config *cfg, struct fc_exporter *e,
                     const struct fc_sender_ops *ops, void *ops_ctx, struct fc_sender **out,
                     struct fc_error *err);
/* Opens (and replays) the persistent queue, starts the consumers. */
int fc_sender_start(struct fc_sender *s, struct fc_error *err);
/*
 * Takes every item (all or none count against the queue; the sender owns
 * them in every case). FC_OK: queued / durable. FC_EAGAIN: the queue is
 * full. FC_EUNAVAIL: shutting down. Without a queue: sent (or a permanent
 * error, FC_EPROTO with the peer's message).
 */
int fc_sender_submit(struct fc_sender *s, struct fc_send_item **items, size_t n,
                     struct fc_error *err);
/* The exporter's stopping hook: refuse new items after deadline. Does not wait. */
void fc_sender_stopping(struct fc_sender *s, int64_t deadline_ns);
/* Drains the memory queue until deadline, then stops the consumers; what is
 * left in a persistent queue stays there for the next start. */
void fc_sender_shutdown(struct fc_sender *s, int64_t deadline_ns);
void fc_sender_free(struct fc_sender *s);

/*
 * The stopping and shutdown hooks of a network exporter whose ctx struct
 * begins with its `struct fc_sender *` (NULL before start): they pass
 * through to the sender.
 */
void fc_sender_exporter_stopping(struct fc_exporter *self, int64_t deadline_ns);
void fc_sender_exporter_shutdown(struct fc_exporter *self, int64_t deadline_ns);

#endif
