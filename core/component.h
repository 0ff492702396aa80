/*
 * Components: receivers, processors and exporters. A component type is one
 * const struct of function pointers plus a config schema, listed once in
 * core/registry.c. An instance is created per component id ("pprof",
 * "relabel/drop_debug") and owns `ctx`; its config struct (filled from the
 * schema) lives as long as the instance.
 *
 * Lifecycle, driven by core/pipeline.c:
 *   create (all) -> start exporters -> start processors -> start receivers
 *   -> shared servers listen -> ... -> servers stop accepting
 *   -> shutdown receivers -> processors -> exporters (drain) -> destroy (all)
 */
#ifndef FC_COMPONENT_H
#define FC_COMPONENT_H

#include "config/schema.h"
#include "core/batch.h"
#include "core/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fc_extensions;
struct fc_http_registry;
struct fc_pipeline_fanout;

enum fc_stability {
    FC_STABILITY_DEVELOPMENT,
    FC_STABILITY_ALPHA,
    FC_STABILITY_BETA,
    FC_STABILITY_STABLE
};

/* What the service offers components at start. */
struct fc_host {
    struct fc_http_registry *http;    /* shared HTTP servers, one per endpoint */
    struct fc_extensions *extensions; /* started extensions: fc_extensions_auth() */
    int64_t shutdown_grace_ns;
};

struct fc_receiver;
struct fc_processor;
struct fc_exporter;

/* What every component type declares, first in each kind's type struct. */
struct fc_type_info {
    const char *name; /* the part of an id before '/' */
    const char *description;
    enum fc_stability stability;
    const struct fc_field *fields; /* config schema, terminated by {NULL} */
    size_t config_size;            /* the config struct the schema fills */
};

struct fc_receiver_type {
    struct fc_type_info info;
    /* Checks the bound config beyond its schema; must not open sockets or files. */
    int (*create)(struct fc_receiver *self, struct fc_error *err);
    /* Registers routes / opens listeners; batches go to fc_receiver_consume(). */
    int (*start)(struct fc_receiver *self, struct fc_host *host, struct fc_error *err);
    /* Stop accepting; in-flight requests finish. */
    void (*shutdown)(struct fc_receiver *self);
    /* Frees ctx; never fails. */
    void (*destroy)(struct fc_receiver *self);
};

struct fc_processor_type {
    struct fc_type_info info;
    int (*create)(struct fc_processor *self, struct fc_error *err);
    int (*start)(struct fc_processor *self, struct fc_host *host, struct fc_error *err);
    /*
     * Runs on the receiver's thread. May change *batchp in place (the
     * pipeline hands each processor chain a batch it owns), or replace it:
     * unref the old one and store the new. Returning an error refuses the batch.
     * Setting *batchp to NULL drops it (counted as dropped, not refused).
     */
    int (*process)(struct fc_processor *self, struct fc_batch **batchp, struct fc_error *err);
    void (*shutdown)(struct fc_processor *self);
    void (*destroy)(struct fc_processor *self);
    /*
     * true only when process() never changes a batch's profiles or
     * dictionary: the batch keeps the request bytes it was decoded from
     * (fc_batch.wire) for the otlp exporters to send as they came.
     */
    bool preserves_batch;
    /*
     * true when process() adds the samples it drops to self->dropped_samples
     * itself (a processor that merges equal samples shrinks a batch without
     * dropping anything); otherwise the service counts the rows that left.
     */
    bool counts_dropped;
};

struct fc_exporter_type {
    struct fc_type_info info;
    /*
     * The exporter counts sent / send_failed itself, when its peer answers
     * (queued exporters); otherwise the service counts export()'s answer.
     */
    bool counts_sent;
    int (*create)(struct fc_exporter *self, struct fc_error *err);
    int (*start)(struct fc_exporter *self, struct fc_host *host, struct fc_error *err);
    /*
     * Borrows batch (immutable). FC_OK = accepted: durable or queued.
     * FC_EAGAIN / FC_EUNAVAIL = retryable refusal; others are permanent.
     * Keep the batch past return only through fc_batch_ref().
     */
    int (*export)(struct fc_exporter *self, struct fc_batch *batch, struct fc_error *err);
    /*
     * Optional: shutdown has begun and must be over by deadline (CLOCK_MONOTONIC
     * ns). Called before the receivers stop, so requests still in flight may
     * export after it: work not done by the deadline is to be refused
     * (retryable), never left blocking them. Must not wait.
     */
    void (*stopping)(struct fc_exporter *self, int64_t deadline_ns);
    /* Drain what is queued until deadline (CLOCK_MONOTONIC ns), then stop. */
    void (*shutdown)(struct fc_exporter *self, int64_t deadline_ns);
    void (*destroy)(struct fc_exporter *self);
};

/* Counters every instance gets; names follow the Collector's (see README). */
struct fc_component_metrics {
    _Atomic int64_t *ok_samples;     /* receiver: accepted; exporter: sent */
    _Atomic int64_t *failed_samples; /* receiver: refused; exporter: send_failed */
    _Atomic int64_t *ok_batches;
    _Atomic int64_t *failed_batches;
};

struct fc_receiver {
    const struct fc_receiver_type *type;
    const char *id;                  /* "pprof", "pprof/apps" */
    void *config;                    /* the type's config struct, bound from the schema */
    void *ctx;                       /* owned by the type */
    struct fc_pipeline_fanout *next; /* every pipeline this receiver feeds */
    struct fc_component_metrics metrics;
};

struct fc_processor {
    const struct fc_processor_type *type;
    const char *id;
    const char *pipeline; /* processors are per pipeline */
    void *config;
    void *ctx;
    _Atomic int64_t *dropped_samples;
    /* Where it sits, for fc_processor_next(); set by the service. */
    void *pipe;
    size_t index;
};

struct fc_exporter {
    const struct fc_exporter_type *type;
    const char *id;
    void *config;
    void *ctx;
    struct fc_component_metrics metrics;
    _Atomic int64_t *queue_size; /* exporters with a queue set it */
};

/*
 * Where a receiver sends what it decoded: through every pipeline it feeds,
 * returning FC_OK only when every exporter accepted. Borrows batch. Updates
 * the receiver's accepted/refused counters.
 */
int fc_receiver_consume(struct fc_receiver *r, struct fc_batch *batch, struct fc_error *err);

/*
 * Runs the rest of self's pipeline on batch: the processors after self, then
 * the exporters, exactly as the service would have after self's process().
 * Takes the caller's reference to batch (which must be the caller's own: the
 * processors after self may change it). Returns the worst exporter answer, as
 * the receiver would have had it. For a processor that sends batches of its
 * own (batch) and then sets *batchp to NULL: it also sets counts_dropped.
 */
int fc_processor_next(struct fc_processor *self, struct fc_batch *batch, struct fc_error *err);

const char *fc_stability_name(enum fc_stability s);

#endif
