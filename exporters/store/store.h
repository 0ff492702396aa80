/* Private to exporters/store: config, state, and the query routes. */
#ifndef FC_EXPORTERS_STORE_H
#define FC_EXPORTERS_STORE_H

#include "core/component.h"
#include "core/extensions.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/tls_server.h"
#include "storage/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct store_config {
    const char *path;
    int64_t retention;
    int64_t fine_retention;
    int64_t bundle_after; /* ns: 10 s windows of spans that ended this long ago are bundled */
    int64_t retention_interval;
    int64_t max_size;
    int64_t open_windows_max_size;
    int64_t id_cache_max_size;
    int64_t bundle_cache_max_size;
    int64_t rebuild_max_size;
    int64_t rebuild_max_time; /* ns */
    int sync;                 /* enum fc_store_sync, in the order of the schema's choices */
    struct {
        const char *endpoint;
        struct fc_tls_server_config tls;
        struct fc_server_auth_config auth;
        int64_t max_query_length;
        int64_t max_nodes;
        struct {
            struct fc_str_map source_roots; /* exporters/store/source.h */
            int64_t max_source_size;
        } ui;
    } query;
};

/* The steps of a retention pass, in order (exporters/store/store.c). */
enum retention_step {
    RETENTION_DELETE,  /* by age: retention */
    RETENTION_COMPACT, /* fine_retention */
    RETENTION_TRIM,    /* by size: max_size */
    RETENTION_FORGET,  /* pods left without data */
    RETENTION_BUNDLE,  /* bundle_after */
    RETENTION_DONE
};

/*
 * A retention pass under way. It runs on the writer thread in slices of
 * about SLICE_NS, between write groups, so that writes wait for a slice at
 * most rather than for the whole pass.
 */
struct retention_run {
    bool running;
    enum retention_step step;
    int64_t now_s;                /* the clock at the pass's start: its cutoffs */
    int64_t forget_ns, bundle_ns; /* spent this pass, against their caps */
    uint64_t deleted;             /* windows, all steps */
    uint64_t forgot_pods, forgot_series;
    struct fc_error err; /* the pass's last error (logged at its end) */
};

/* A batch waiting for the writer; the exporting thread waits on `done`. */
struct pending {
    struct fc_batch *batch;
    struct pending *next;
    pthread_cond_t served; /* signalled when done (under the exporter's lock) */
    bool done;
    int rc;
    struct fc_error err;
};

struct store_exporter {
    struct fc_exporter *self;
    const struct store_config *cfg;
    struct fc_store *store;
    pthread_t writer;
    bool writer_started;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the writer: work arrived or stop */
    struct pending *head, *tail;
    bool stopping;       /* the writer ends once the queue is empty */
    int64_t deadline_ns; /* shutdown: all done by then (CLOCK_MONOTONIC; 0 = not stopping) */
    _Atomic int64_t
        commit_ns; /* how long the last commit took: none is begun that would end late */
    uint64_t shutdown_refused; /* requests refused (503) because the deadline had passed */
    _Atomic int64_t *nodes_merged;
    _Atomic int64_t *queries;
    _Atomic int64_t *disk_bytes;
    _Atomic int64_t *commits;
    _Atomic int64_t *corrupt;
    _Atomic int64_t *used_bytes;
    _Atomic int64_t *retention_deleted;
    _Atomic int64_t *bundled; /* flamecol_store_bundled_windows_total */
    _Atomic int64_t *forgotten_pods, *forgotten_series;
    bool forget_due; /* retention deleted windows (or a pass stopped): pods may be empty */
    _Atomic int64_t *open_bytes, *open_max_bytes, *log_bytes, *log_file_bytes, *log_damaged;
    _Atomic int64_t *id_cache_bytes, *id_cache_max_bytes, *id_cache_hits, *id_cache_misses;
    _Atomic int64_t *bundle_cache_bytes, *bundle_cache_max_bytes;
    _Atomic int64_t *rebuilds_deferred, *rebuild_max_bytes, *rebuild_peak_bytes, *rebuild_slices;
    _Atomic int64_t *refused[FC_STORE_FAILURE_KINDS]; /* writes refused, by cause */
    uint64_t refused_seen[FC_STORE_FAILURE_KINDS];    /* the store's counts already added */
    int64_t next_retention_ns;                        /* CLOCK_MONOTONIC */
    struct retention_run retention;                   /* the writer's */
    /* Background work (deferred rebuilds, retention) in slices between write groups. */
    int64_t slice_end_ns;     /* CLOCK_MONOTONIC: when the last slice ended */
    int64_t rebuild_retry_ns; /* CLOCK_MONOTONIC: no rebuild slice before (one failed) */
    bool last_slice_rebuilt;  /* the last slice built windows: retention's turn if due */
    /* Writer-thread log lines under a lasting failure: one per kind per minute. */
    struct fc_log_limit
        log_limits[FC_STORE_FAILURE_KINDS + 3]; /* then retention, forget, rebuild */
};

/* A growable list of u64: the work list of the (iterative) tree walks. */
struct fc_u64s {
    uint64_t *v;
    size_t n, cap;
};

static inline void fc_u64s_push(struct fc_u64s *s, uint64_t x)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = fc_xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = x;
}

/*
 * SelectSeries' step (seconds; 0 = 15 s) over [start_ms, end_ms] into a step
 * of whole 10 s windows (ms) and a number of points. Refused (FC_EPROTO,
 * naming the field): a step that is not finite or negative, times beyond
 * +-4e12 ms, and, as Prometheus, more than 11,000 points at the requested step.
 */
int store_series_step(double step, int64_t start_ms, int64_t end_ms, int64_t *step_ms,
                      size_t *points, struct fc_error *err);

/* Whether a profile type id has Pyroscope's 5 (or 6, `:delta`) colon-separated parts. */
bool store_profile_type_valid(const char *id);

int store_query_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err);
int store_connect_routes(struct store_exporter *x, struct fc_http_server *srv,
                         struct fc_error *err);
/* The merged tree as an uncompressed pprof (one sample per node with self). */
int store_tree_to_pprof(const struct fc_store_result *r, const char *type_id, struct fc_buf *out,
                        struct fc_error *err);

#endif
