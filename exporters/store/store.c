/*
 * store exporter: writes profiles into the segment-tree store (storage/)
 * and serves Pyroscope's query API on query.endpoint.
 *
 * One writer thread owns the write side. Exporting threads queue their
 * batch and wait; the writer takes everything queued, writes it in one
 * transaction and commits (with sync: batch, one fsync for all of them),
 * then wakes them: a request is acknowledged only once its profiles are
 * durable. On shutdown, what is queued is committed until the deadline:
 * no group is begun that would end past it (judged by the last commit's
 * time), and what is left is refused (retryable, 503).
 */
#include "exporters/store/store.h"
#include "exporters/store/source.h"
#include "exporters/store/ui.h"

#include "core/auth.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OFF(f) offsetof(struct store_config, f)

static const struct fc_field query_fields[] = {
    {"endpoint", FC_FIELD_STR, "127.0.0.1:4040", OFF(query.endpoint) - OFF(query),
     "host:port of the query API (shared with the pprof receiver when both name it)"},
    FC_TLS_SERVER_FIELD(OFF(query.tls) - OFF(query)),
    FC_SERVER_AUTH_FIELD(OFF(query.auth) - OFF(query)),
    {"max_query_length", FC_FIELD_DURATION, "31d", OFF(query.max_query_length) - OFF(query),
     "longest from..until a query may span (0 = no limit)"},
    {"max_nodes", FC_FIELD_INT, "8192", OFF(query.max_nodes) - OFF(query),
     "flame graph nodes when a query does not say (maxNodes)"},
    {"ui", FC_FIELD_OBJECT, NULL, OFF(query.ui) - OFF(query), "the web UI", .sub = store_ui_fields},
    {NULL},
};

static const struct fc_field store_fields[] = {
    {"path", FC_FIELD_STR, "./data", OFF(path), "directory of the database (created if missing)"},
    {"retention", FC_FIELD_DURATION, "30d", OFF(retention),
     "windows older than this are deleted, finest first as their end passes (0 = keep all)"},
    {"fine_retention", FC_FIELD_DURATION, "24h", OFF(fine_retention),
     "10 s windows older than this are compacted away: that past is queried at 100 s "
     "resolution (0 = keep them as long as `retention`)"},
    {"bundle_after", FC_FIELD_DURATION, "5m", OFF(bundle_after),
     "each pod's 100 s span that ended this long ago (its 10 s windows and its 100 s window) "
     "is compressed as one value by the retention pass; answers are unchanged (0 = never)"},
    {"retention_interval", FC_FIELD_DURATION, "1m", OFF(retention_interval),
     "how often retention runs"},
    {"max_size", FC_FIELD_SIZE, "0", OFF(max_size),
     "pages in use past which writes are refused with 503 + Retry-After; past 90% of it "
     "retention deletes the oldest data down to 80% (0 = no limit; the file may pass it by "
     "one write group, within a headroom of max_size/4 (64 MiB to 4 GiB) kept for deletes)"},
    {"open_windows_max_size", FC_FIELD_SIZE, "16MiB", OFF(open_windows_max_size),
     "memory the open windows (what was written since the last flush, merged in memory "
     "beside the write-ahead log; flushed into the database every 2 s) may hold before a "
     "write flushes them early"},
    {"id_cache_max_size", FC_FIELD_SIZE, "4MiB", OFF(id_cache_max_size),
     "memory of the cache of ids (symbols, series) writes find without a database lookup; "
     "full, it is emptied and refills (0 = no cache)"},
    {"bundle_cache_max_size", FC_FIELD_SIZE, "16MiB", OFF(bundle_cache_max_size),
     "memory of the bundles (see bundle_after) that queries keep loaded, all queries "
     "together; past it a query empties its own before loading more (0 = a query keeps only "
     "the bundle it is reading)"},
    {"rebuild_max_size", FC_FIELD_SIZE, "8MiB", OFF(rebuild_max_size),
     "memory of the coarse windows (100 s and up) one flush builds as they close: their "
     "encoded size plus a page each, held by its transaction until it commits; the closed "
     "windows past it wait, and queries read their finer windows meanwhile (0 = no limit)"},
    {"rebuild_max_time", FC_FIELD_DURATION, "50ms", OFF(rebuild_max_time),
     "time one flush or one slice between write groups spends building closed coarse "
     "windows (checked after each, at least one is built), and so about the longest writes "
     "wait for it; the windows past it are built in the next slices, while writes get at "
     "least four fifths of the writer (0 = no limit)"},
    {"sync", FC_FIELD_ENUM, "batch", OFF(sync),
     "`batch`: requests arriving together share one fsync before any is acknowledged; "
     "`always`: one fsync per request; `none`: left to the OS (unsafe on power loss)",
     .choices = "batch|always|none"},
    {"query", FC_FIELD_OBJECT, NULL, OFF(query), "the query API", .sub = query_fields},
    {NULL},
};

static int store_create(struct fc_exporter *self, struct fc_error *err)
{
    const struct store_config *cfg = self->config;
    struct store_exporter *x;
    char labels[256];

    if (cfg->retention < 0 || cfg->retention_interval <= 0 || cfg->fine_retention < 0 ||
        cfg->bundle_after < 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "retention, fine_retention and bundle_after must be >= 0 and "
                         "retention_interval > 0");
    }
    if (cfg->bundle_cache_max_size < 0) {
        return fc_errorf(err, FC_ECONFIG, "bundle_cache_max_size must be >= 0");
    }
    if (cfg->rebuild_max_size < 0 || cfg->rebuild_max_time < 0) {
        return fc_errorf(err, FC_ECONFIG, "rebuild_max_size and rebuild_max_time must be >= 0");
    }
    if (cfg->id_cache_max_size < 0) {
        return fc_errorf(err, FC_ECONFIG, "id_cache_max_size must be >= 0");
    }
    if (cfg->open_windows_max_size < 1 << 20) {
        return fc_errorf(err, FC_ECONFIG, "open_windows_max_size must be at least 1MiB");
    }
    if (cfg->path[0] == '\0') {
        return fc_errorf(err, FC_ECONFIG, "path must not be empty");
    }
    if (cfg->query.max_nodes < 1 || cfg->query.max_nodes > 1048576) {
        return fc_errorf(err, FC_ECONFIG, "query.max_nodes must be between 1 and 1048576");
    }
    if (cfg->query.ui.max_source_size < 1 || cfg->query.ui.max_source_size > (int64_t)1 << 30) {
        return fc_errorf(err, FC_ECONFIG, "query.ui.max_source_size must be between 1 and 1GiB");
    }
    if (fc_tls_server_check(&cfg->query.tls, err) != FC_OK) {
        return fc_error_wrap(err, "query");
    }
    x = fc_xcalloc(1, sizeof(*x));
    x->self = self;
    x->cfg = cfg;
    pthread_mutex_init(&x->lock, NULL);
    pthread_cond_init(&x->wake, NULL);
    snprintf(labels, sizeof(labels), "exporter=\"%s\"", self->id);
    x->nodes_merged = fc_metrics_counter("flamecol_store_nodes_merged_total", labels,
                                         "Stack trees the store read and merged for queries.");
    x->queries = fc_metrics_counter("flamecol_store_queries_total", labels, "Queries answered.");
    x->disk_bytes = fc_metrics_gauge("flamecol_store_disk_bytes", labels,
                                     "Bytes the store's database takes on disk.");
    x->commits = fc_metrics_counter("flamecol_store_commits_total", labels,
                                    "Write transactions committed (one per group of requests).");
    x->corrupt =
        fc_metrics_counter("flamecol_store_corrupt_windows_total", labels,
                           "Stored windows skipped by queries because they did not decode.");
    x->used_bytes = fc_metrics_gauge("flamecol_store_used_bytes", labels,
                                     "Bytes of database pages holding data (free pages excluded).");
    x->retention_deleted = fc_metrics_counter(
        "flamecol_store_retention_deleted_total", labels,
        "Windows deleted by retention (age, size, or fine_retention compaction).");
    x->rebuild_slices = fc_metrics_counter(
        "flamecol_store_rebuild_slices_total", labels,
        "Slices between write groups that built closed coarse windows flushes left waiting.");
    x->bundled = fc_metrics_counter(
        "flamecol_store_bundled_windows_total", labels,
        "Windows (10 s and 100 s) compressed together with the others of their 100 s span "
        "(bundle_after).");
    x->forgotten_pods = fc_metrics_counter(
        "flamecol_store_pods_forgotten_total", labels,
        "Pods (a profile's own label sets) deleted with their series and label index entries "
        "once retention left them no window.");
    x->forgotten_series = fc_metrics_counter("flamecol_store_series_forgotten_total", labels,
                                             "Series deleted with their forgotten pods.");
    x->forget_due = true; /* at the first pass: what an earlier run emptied */
    x->open_bytes = fc_metrics_gauge(
        "flamecol_store_open_windows_bytes", labels,
        "Memory of the open windows: written since the last flush, kept merged beside the log.");
    x->open_max_bytes = fc_metrics_gauge("flamecol_store_open_windows_max_bytes", labels,
                                         "open_windows_max_size: past it a write flushes.");
    x->log_bytes = fc_metrics_gauge(
        "flamecol_store_log_bytes", labels,
        "Bytes of write-ahead log records since the last flush (each flush starts it over).");
    x->log_file_bytes = fc_metrics_gauge(
        "flamecol_store_log_file_bytes", labels,
        "Size of the write-ahead log's file: kept between flushes, cut back to twice "
        "open_windows_max_size (at least 4 MiB) by each.");
    x->id_cache_bytes = fc_metrics_gauge("flamecol_store_id_cache_bytes", labels,
                                         "Memory of the id cache (symbols, series) of writes.");
    x->id_cache_max_bytes = fc_metrics_gauge("flamecol_store_id_cache_max_bytes", labels,
                                             "id_cache_max_size: full there, it is emptied.");
    x->bundle_cache_bytes =
        fc_metrics_gauge("flamecol_store_bundle_cache_bytes", labels,
                         "Memory of the bundles queries hold loaded now (indexes, contents).");
    x->bundle_cache_max_bytes =
        fc_metrics_gauge("flamecol_store_bundle_cache_max_bytes", labels,
                         "bundle_cache_max_size: past it a query empties its own bundles.");
    x->rebuilds_deferred = fc_metrics_gauge(
        "flamecol_store_rebuilds_deferred", labels,
        "Closed coarse windows the last flush left past rebuild_max_size or rebuild_max_time, "
        "built in slices between write groups; queries read their finer windows meanwhile.");
    x->rebuild_max_bytes =
        fc_metrics_gauge("flamecol_store_rebuild_max_bytes", labels,
                         "rebuild_max_size: what one flush builds of closed coarse windows.");
    x->rebuild_peak_bytes = fc_metrics_gauge(
        "flamecol_store_rebuild_peak_bytes", labels,
        "The most one flush has built of coarse windows since the start, counted as "
        "rebuild_max_size counts (their encoded size plus a page each).");
    {
        char l[300];
        snprintf(l, sizeof(l), "%s,result=\"hit\"", labels);
        x->id_cache_hits =
            fc_metrics_counter("flamecol_store_id_cache_lookups_total", l,
                               "Id lookups of writes, answered by the cache or not.");
        snprintf(l, sizeof(l), "%s,result=\"miss\"", labels);
        x->id_cache_misses =
            fc_metrics_counter("flamecol_store_id_cache_lookups_total", l,
                               "Id lookups of writes, answered by the cache or not.");
    }
    x->log_damaged = fc_metrics_counter(
        "flamecol_store_log_damaged_total", labels,
        "Damaged write-ahead log records skipped at start (a write cut short by a crash).");
    for (int k = 0; k < FC_STORE_FAILURE_KINDS; k++) {
        static const char *const reason[] = {"full", "no_space", "io"};
        char l[300];
        snprintf(l, sizeof(l), "%s,reason=\"%s\"", labels, reason[k]);
        x->refused[k] = fc_metrics_counter(
            "flamecol_store_refused_writes_total", l,
            "Write groups the store refused (retryable: 503): max_size reached, disk full, "
            "other I/O errors.");
    }
    self->ctx = x;
    return FC_OK;
}

#define LOG_INTERVAL_NS (60 * 1000000000LL)

/* The store's sizes and counts into /metrics (after each write group, flush and query). */
static void store_gauges(struct store_exporter *x)
{
    fc_metric_set(x->disk_bytes, fc_store_disk_bytes(x->store));
    fc_metric_set(x->corrupt, (int64_t)fc_store_corrupt_windows(x->store));
    fc_metric_set(x->open_bytes, fc_store_open_bytes(x->store));
    fc_metric_set(x->open_max_bytes, fc_store_open_max_bytes(x->store));
    fc_metric_set(x->log_bytes, fc_store_log_bytes(x->store));
    fc_metric_set(x->log_file_bytes, fc_store_log_file_bytes(x->store));
    fc_metric_set(x->log_damaged, (int64_t)fc_store_log_damaged(x->store));
    {
        uint64_t hits, misses, emptied;
        fc_store_id_cache_lookups(x->store, &hits, &misses, &emptied);
        fc_metric_set(x->id_cache_hits, (int64_t)hits);
        fc_metric_set(x->id_cache_misses, (int64_t)misses);
        fc_metric_set(x->id_cache_bytes, fc_store_id_cache_bytes(x->store));
        fc_metric_set(x->id_cache_max_bytes, fc_store_id_cache_max_bytes(x->store));
        fc_metric_set(x->bundle_cache_bytes, fc_store_bundle_cache_bytes(x->store));
        fc_metric_set(x->bundle_cache_max_bytes, fc_store_bundle_cache_max_bytes(x->store));
        fc_metric_set(x->rebuilds_deferred, fc_store_rebuilds_deferred(x->store));
        fc_metric_set(x->rebuild_max_bytes, fc_store_rebuild_max_bytes(x->store));
        fc_metric_set(x->rebuild_peak_bytes, fc_store_rebuild_peak_bytes(x->store));
    }
}

/* Writer-thread errors that can repeat: one line per kind per minute, with a count. */
static void log_limited(struct store_exporter *x, int kind, const char *msg)
{
    fc_log_limited(&x->log_limits[kind], LOG_INTERVAL_NS, FC_LOG_ERROR, x->self->id, "%s", msg);
}

/* After a write group: the refusal counters and, once a minute per cause, a log line. */
static void account_write(struct store_exporter *x, int rc, const struct fc_error *err)
{
    for (int k = 0; k < FC_STORE_FAILURE_KINDS; k++) {
        uint64_t now = fc_store_failures(x->store, (enum fc_store_failure)k);
        if (now > x->refused_seen[k]) {
            fc_metric_add(x->refused[k], (int64_t)(now - x->refused_seen[k]));
            x->refused_seen[k] = now;
            log_limited(x, k, err->msg);
        }
    }
    if (rc != FC_OK && fc_store_full(x->store)) {
        /* Full: retention runs at once (at most once a second) rather than at its interval. */
        int64_t soon = fc_now_mono_ns() + 1000000000LL;
        if (x->next_retention_ns > soon) {
            x->next_retention_ns = soon;
        }
    }
}

/*
 * How long a slice of background work (the coarse windows flushes left to
 * build, a retention pass) runs: the longest writes wait for it (plus a
 * transaction: the steps stop between theirs). While writes are queued, a
 * slice follows a write group only once SLICE_GAP_NS have passed since the
 * last ended, so that writes keep at least four fifths of the writer; with
 * none queued, slices follow each other.
 */
#define SLICE_NS (50 * 1000000LL)
#define SLICE_GAP_NS (4 * SLICE_NS)
/* What a pass spends at most forgetting pods and bundling; the next pass goes on. */
#define FORGET_PASS_NS (250 * 1000000LL)
#define BUNDLE_PASS_NS 1000000000LL

static int64_t min_i64(int64_t a, int64_t b)
{
    return a < b ? a : b;
}

/*
 * Forgets empty pods within what is left of the slice and of the pass's
 * cap. FC_EAGAIN: more to do in this pass.
 */
static int forget_step(struct store_exporter *x, struct retention_run *r, int64_t budget_ns)
{
    struct fc_error err = {0};
    uint64_t pods = 0, series = 0;
    int64_t t0 = fc_now_mono_ns();
    int rc = fc_store_forget_empty(x->store, min_i64(budget_ns, FORGET_PASS_NS - r->forget_ns),
                                   &pods, &series, &err);

    r->forget_ns += fc_now_mono_ns() - t0;
    x->forget_due = rc != FC_OK; /* stopped by its budget, or failed: again next pass */
    fc_metric_add(x->forgotten_pods, (int64_t)pods);
    fc_metric_add(x->forgotten_series, (int64_t)series);
    r->forgot_pods += pods; /* logged at the pass's end */
    r->forgot_series += series;
    if (rc != FC_OK && rc != FC_EAGAIN) {
        char msg[600];
        snprintf(msg, sizeof(msg), "retention: forgetting pods: %s", err.msg);
        log_limited(x, FC_STORE_FAILURE_KINDS + 1, msg); /* its own line: retention's too */
    }
    return rc == FC_EAGAIN && r->forget_ns < FORGET_PASS_NS ? FC_EAGAIN : FC_OK;
}

/*
 * Bundles within what is left of the slice and of the pass's cap (a backlog,
 * such as a day of windows of a store of an older format, is bundled a
 * second a retention_interval). Not on a full store, and after the trim: a
 * bundling transaction writes its bundles before their windows' pages are
 * freed, from the headroom deletes need.
 */
static int bundle_step(struct store_exporter *x, struct retention_run *r, int64_t budget_ns)
{
    uint64_t bundled = 0;
    int64_t t0 = fc_now_mono_ns();
    int rc;

    if (x->cfg->bundle_after <= 0 || fc_store_full(x->store)) {
        return FC_OK;
    }
    rc = fc_store_bundle_before(x->store, r->now_s - x->cfg->bundle_after / 1000000000LL,
                                min_i64(budget_ns, BUNDLE_PASS_NS - r->bundle_ns), &bundled,
                                &r->err);
    r->bundle_ns += fc_now_mono_ns() - t0;
    if ((rc == FC_OK || rc == FC_EAGAIN) && bundled > 0) {
        fc_metric_add(x->bundled, (int64_t)bundled);
    }
    return rc == FC_EAGAIN && r->bundle_ns < BUNDLE_PASS_NS ? FC_EAGAIN : FC_OK;
}

/* One step of the pass, within budget_ns: FC_EAGAIN when it is not done. */
static int retention_step(struct store_exporter *x, struct retention_run *r, int64_t budget_ns)
{
    uint64_t deleted = 0;
    int rc = FC_OK;

    switch (r->step) {
    case RETENTION_DELETE:
        if (x->cfg->retention > 0) {
            rc = fc_store_delete_before(x->store, r->now_s - x->cfg->retention / 1000000000LL,
                                        budget_ns, &deleted, &r->err);
        }
        break;
    case RETENTION_COMPACT:
        if (x->cfg->fine_retention > 0) {
            rc = fc_store_compact_before(x->store, r->now_s - x->cfg->fine_retention / 1000000000LL,
                                         budget_ns, &deleted, &r->err);
        }
        break;
    case RETENTION_TRIM:
        /* At once when it must: the store refuses writes until it is done. */
        if (x->cfg->max_size > 0) {
            rc = fc_store_trim(x->store, x->cfg->max_size / 10 * 9, x->cfg->max_size / 10 * 8,
                               &deleted, &r->err);
        }
        break;
    case RETENTION_FORGET:
        if (r->deleted > 0) {
            x->forget_due = true;
        }
        rc = x->forget_due ? forget_step(x, r, budget_ns) : FC_OK;
        break;
    case RETENTION_BUNDLE:
        rc = bundle_step(x, r, budget_ns);
        break;
    case RETENTION_DONE:
        break;
    }
    r->deleted += deleted; /* what a step stopped by its budget deleted counts too */
    return rc;
}

/*
 * Runs the retention pass (age, compaction, size, forgetting, bundling) for
 * about SLICE_NS, starting one if none is under way; on the writer
 * thread, between write groups. True when the pass ended.
 */
static bool retention_slice(struct store_exporter *x)
{
    struct retention_run *r = &x->retention;
    int64_t t0 = fc_now_mono_ns(), left;

    if (!r->running) {
        *r = (struct retention_run){.running = true, .now_s = fc_now_ns() / 1000000000LL};
    }
    while (r->step < RETENTION_DONE && (left = SLICE_NS - (fc_now_mono_ns() - t0)) > 0) {
        if (retention_step(x, r, left) != FC_EAGAIN) {
            r->step++; /* done, or failed (r->err): the pass goes on with the next */
        }
    }
    x->slice_end_ns = fc_now_mono_ns();
    if (r->step < RETENTION_DONE) {
        return false;
    }
    if (r->err.code != FC_OK) {
        char msg[600];
        snprintf(msg, sizeof(msg), "retention: %s", r->err.msg);
        log_limited(x, FC_STORE_FAILURE_KINDS, msg);
    }
    if (r->deleted > 0) {
        fc_metric_add(x->retention_deleted, (int64_t)r->deleted);
        fc_log_info(x->self->id, "retention deleted %llu windows", (unsigned long long)r->deleted);
    }
    if (r->forgot_pods > 0) {
        fc_log_info(x->self->id, "retention forgot %llu pods (%llu series) left without data",
                    (unsigned long long)r->forgot_pods, (unsigned long long)r->forgot_series);
    }
    fc_metric_set(x->disk_bytes, fc_store_disk_bytes(x->store));
    fc_metric_set(x->used_bytes, fc_store_used_bytes(x->store));
    r->running = false;
    return true;
}

/* A slice of retention is due: a pass under way, or the next one's time. */
static bool retention_due(struct store_exporter *x, int64_t now_ns)
{
    return x->deadline_ns == 0 && (x->retention.running || now_ns >= x->next_retention_ns);
}

/* A retention slice (under x->lock, released meanwhile); a pass that ended schedules the next. */
static void run_retention_slice(struct store_exporter *x)
{
    bool ended;

    pthread_mutex_unlock(&x->lock);
    ended = retention_slice(x);
    pthread_mutex_lock(&x->lock);
    if (ended) {
        /*
         * A store that filled while the pass ran (writes come between its
         * slices) gets the next within a second, as after a refused write.
         */
        x->next_retention_ns =
            fc_now_mono_ns() +
            (fc_store_full(x->store) ? 1000000000LL : x->cfg->retention_interval);
    }
}

/* Closed coarse windows wait to be built (a flush left them past its budget). */
static bool rebuilds_due(struct store_exporter *x, int64_t now_ns)
{
    return x->deadline_ns == 0 && now_ns >= x->rebuild_retry_ns &&
           fc_store_rebuilds_deferred(x->store) > 0;
}

/*
 * A slice of background work (under x->lock, released meanwhile): the
 * windows flushes left to build, or retention, in turn when both are due
 * (a pass's flushes build those windows too, but its deletions must not
 * wait behind a backlog that writes keep feeding).
 */
static void run_background_slice(struct store_exporter *x)
{
    struct fc_error err = {0};
    int64_t now = fc_now_mono_ns();
    int rc;

    if (!rebuilds_due(x, now) || (x->last_slice_rebuilt && retention_due(x, now))) {
        x->last_slice_rebuilt = false;
        run_retention_slice(x);
        return;
    }
    x->last_slice_rebuilt = true;
    pthread_mutex_unlock(&x->lock);
    rc = fc_store_rebuild_deferred(x->store, now + SLICE_NS, &err);
    fc_metric_add(x->rebuild_slices, 1);
    if (rc != FC_OK && rc != FC_EAGAIN) {
        char msg[600];
        snprintf(msg, sizeof(msg), "building closed coarse windows: %s", err.msg);
        log_limited(x, FC_STORE_FAILURE_KINDS + 2, msg);
    }
    store_gauges(x);
    pthread_mutex_lock(&x->lock);
    if (rc != FC_OK && rc != FC_EAGAIN) {
        x->rebuild_retry_ns = fc_now_mono_ns() + 1000000000LL; /* not slice after failing slice */
    }
    x->slice_end_ns = fc_now_mono_ns();
}

/*
 * Shutting down, and a commit begun now would not end by the deadline (judged by
 * the last one): what is queued is refused instead, so that the refusals reach
 * their clients while the HTTP server still waits for requests in flight.
 */
static bool too_late(struct store_exporter *x)
{
    return x->deadline_ns > 0 && fc_now_mono_ns() + atomic_load(&x->commit_ns) >= x->deadline_ns;
}

#define SHUTDOWN_MSG "store: shutting down: not committed within service.shutdown_timeout; retry"

/* At the shutdown deadline: every queued request is answered as refused. Under x->lock. */
static void refuse_queued(struct store_exporter *x)
{
    size_t n = 0;

    while (x->head != NULL) {
        struct pending *p = x->head;
        x->head = p->next;
        p->rc = FC_EUNAVAIL;
        fc_errorf(&p->err, FC_EUNAVAIL, SHUTDOWN_MSG);
        p->done = true;
        pthread_cond_signal(&p->served); /* under x->lock: p is still there */
        n++;
    }
    x->tail = NULL;
    x->shutdown_refused += n;
}

static void *writer_main(void *arg)
{
    struct store_exporter *x = arg;

    pthread_mutex_lock(&x->lock);
    for (;;) {
        struct fc_batch *batches[256];
        struct pending *items[256];
        size_t n = 0;
        int64_t t0;
        while (x->head == NULL && !x->stopping) {
            struct timespec until;
            int64_t due = x->retention.running ? 0 : x->next_retention_ns - fc_now_mono_ns();
            int64_t flush = fc_store_flush_in(x->store);
            if (x->deadline_ns == 0 && flush == 0) {
                /* Idle: the open windows are written, the dirty coarse ones rebuilt. */
                struct fc_error ignored = {0};
                pthread_mutex_unlock(&x->lock);
                fc_store_flush(x->store, &ignored);
                store_gauges(x);
                pthread_mutex_lock(&x->lock);
                continue;
            }
            if (x->deadline_ns > 0) {
                due = 1000000000LL; /* shutting down: no retention any more */
            } else if (due <= 0 || rebuilds_due(x, fc_now_mono_ns())) {
                run_background_slice(x); /* idle: slice after slice, until a write comes */
                continue;
            }
            if (flush > 0 && flush < due) {
                due = flush; /* wakes for the flush */
            }
            /* A timed wait: retention runs even when nothing is written. */
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_sec += (time_t)(due / 1000000000LL);
            until.tv_nsec += (long)(due % 1000000000LL);
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&x->wake, &x->lock, &until);
        }
        if (too_late(x)) {
            refuse_queued(x); /* no new group that would end past the shutdown deadline */
        }
        if (x->head == NULL && x->stopping) {
            break;
        }
        if (x->head == NULL) {
            continue;
        }
        if ((rebuilds_due(x, fc_now_mono_ns()) || retention_due(x, fc_now_mono_ns())) &&
            fc_now_mono_ns() - x->slice_end_ns >= SLICE_GAP_NS) {
            /*
             * Due under a steady load too (a full store must free space to
             * accept again), a slice at a time between groups.
             */
            run_background_slice(x);
        }
        /* Everything queued now goes into one transaction (group commit). */
        while (x->head != NULL && n < 256) {
            items[n] = x->head;
            batches[n] = x->head->batch;
            x->head = x->head->next;
            n++;
        }
        if (x->head == NULL) {
            x->tail = NULL;
        }
        pthread_mutex_unlock(&x->lock);
        if (x->cfg->sync == FC_SYNC_ALWAYS) {
            for (size_t i = 0; i < n; i++) {
                bool late;
                pthread_mutex_lock(&x->lock);
                late = too_late(x);
                x->shutdown_refused += late;
                pthread_mutex_unlock(&x->lock);
                if (late) { /* one commit per request: the deadline may pass within a group */
                    items[i]->rc = fc_errorf(&items[i]->err, FC_EUNAVAIL, SHUTDOWN_MSG);
                    continue;
                }
                t0 = fc_now_mono_ns();
                items[i]->rc = fc_store_write(x->store, &batches[i], 1, &items[i]->err);
                atomic_store(&x->commit_ns, fc_now_mono_ns() - t0);
                fc_metric_add(x->commits, 1);
                account_write(x, items[i]->rc, &items[i]->err);
            }
        } else {
            struct fc_error err = {0};
            int rc;
            t0 = fc_now_mono_ns();
            rc = fc_store_write(x->store, batches, n, &err);
            atomic_store(&x->commit_ns, fc_now_mono_ns() - t0);
            fc_metric_add(x->commits, 1);
            account_write(x, rc, &err);
            for (size_t i = 0; i < n; i++) {
                items[i]->rc = rc;
                items[i]->err = err;
            }
        }
        store_gauges(x);
        pthread_mutex_lock(&x->lock);
        /*
         * Each request's own waiter, under x->lock (it cannot return, and
         * its pending go, before the unlock): a broadcast also woke those
         * queued after this group, to wait again.
         */
        for (size_t i = 0; i < n; i++) {
            items[i]->done = true;
            pthread_cond_signal(&items[i]->served);
        }
    }
    pthread_mutex_unlock(&x->lock);
    return NULL;
}

/* A cap of 0 in the config is none; for the library 0 is its default and < 0 none. */
static int64_t no_cap_is_none(int64_t config_bytes)
{
    return config_bytes > 0 ? config_bytes : -1;
}

static int store_start(struct fc_exporter *self, struct fc_host *host, struct fc_error *err)
{
    struct store_exporter *x = self->ctx;
    struct fc_store_options o = {x->cfg->path, (enum fc_store_sync)x->cfg->sync, x->cfg->max_size,
                                 x->cfg->open_windows_max_size};
    struct fc_http_server *srv;
    struct fc_auth *auth = NULL;

    o.id_cache_max_bytes = no_cap_is_none(x->cfg->id_cache_max_size);
    o.bundle_cache_max_bytes = no_cap_is_none(x->cfg->bundle_cache_max_size);
    o.rebuild_max_bytes = no_cap_is_none(x->cfg->rebuild_max_size);
    o.rebuild_max_ns = x->cfg->rebuild_max_time; /* 0: none, for both */

    if (fc_store_open(&o, &x->store, err) != FC_OK) {
        return err->code;
    }
    srv = fc_http_server_get(host->http, x->cfg->query.endpoint, err);
    if (srv == NULL || fc_extensions_auth(host->extensions, x->cfg->query.auth.authenticator, &auth,
                                          err) != FC_OK) {
        return fc_error_wrap(err, "query");
    }
    /* Every route the store serves (queries, Connect, labels, findings, the UI) reads. */
    fc_http_server_auth(srv, x->self->id, auth, FC_AUTH_READ);
    if (fc_http_server_tls(srv, &x->cfg->query.tls, x->self->id, err) != FC_OK ||
        store_query_routes(x, srv, err) != FC_OK ||
        store_ui_routes(srv, x->self->id, err) != FC_OK ||
        store_source_routes(x, srv, err) != FC_OK) {
        return fc_error_wrap(err, "query");
    }
    x->next_retention_ns = fc_now_mono_ns(); /* a first pass at start */
    store_gauges(x); /* caps and sizes from the start, not from the first write group */
    if (pthread_create(&x->writer, NULL, writer_main, x) != 0) {
        return fc_errorf(err, FC_EIO, "cannot start the writer thread");
    }
    x->writer_started = true;
    fc_metric_set(x->used_bytes, fc_store_used_bytes(x->store));
    fc_log_info(self->id, "store at %s (sync %s)", x->cfg->path,
                x->cfg->sync == FC_SYNC_BATCH    ? "batch"
                : x->cfg->sync == FC_SYNC_ALWAYS ? "always"
                                                 : "none");
    return FC_OK;
}

static int store_export(struct fc_exporter *self, struct fc_batch *b, struct fc_error *err)
{
    struct store_exporter *x = self->ctx;
    struct pending p = {0};

    p.batch = b; /* borrowed: this thread waits until the writer is done with it */
    pthread_mutex_lock(&x->lock);
    if (x->stopping || !x->writer_started || too_late(x)) {
        x->shutdown_refused++;
        pthread_mutex_unlock(&x->lock);
        return fc_errorf(err, FC_EUNAVAIL, SHUTDOWN_MSG);
    }
    pthread_cond_init(&p.served, NULL);
    if (x->tail != NULL) {
        x->tail->next = &p;
    } else {
        x->head = &p;
    }
    x->tail = &p;
    pthread_cond_signal(&x->wake);
    while (!p.done) {
        pthread_cond_wait(&p.served, &x->lock);
    }
    pthread_mutex_unlock(&x->lock);
    pthread_cond_destroy(&p.served);
    if (p.rc != FC_OK) {
        *err = p.err;
        /* Full (retention frees it) or a failing disk: clients retry after Retry-After. */
        return p.rc == FC_EIO ? FC_EUNAVAIL : p.rc;
    }
    return FC_OK;
}

/*
 * Shutdown has begun: what is queued, and what requests still in flight
 * queue, is committed until deadline_ns; what would end later is refused.
 * Does not wait.
 */
static void store_stopping(struct fc_exporter *self, int64_t deadline_ns)
{
    struct store_exporter *x = self->ctx;

    pthread_mutex_lock(&x->lock);
    if (x->deadline_ns == 0 || deadline_ns < x->deadline_ns) {
        x->deadline_ns = deadline_ns > 0 ? deadline_ns : 1;
    }
    pthread_cond_signal(&x->wake);
    pthread_mutex_unlock(&x->lock);
}

static void store_shutdown(struct fc_exporter *self, int64_t deadline_ns)
{
    struct store_exporter *x = self->ctx;
    uint64_t refused;

    store_stopping(self, deadline_ns);
    pthread_mutex_lock(&x->lock);
    x->stopping = true;
    pthread_cond_signal(&x->wake);
    pthread_mutex_unlock(&x->lock);
    if (x->writer_started) {
        /* The writer commits what is queued until the deadline, refuses the rest, stops. */
        pthread_join(x->writer, NULL);
        x->writer_started = false;
    }
    pthread_mutex_lock(&x->lock);
    refused = x->shutdown_refused;
    pthread_mutex_unlock(&x->lock);
    if (refused > 0) {
        fc_log_warn(self->id,
                    "refused %llu requests at the shutdown deadline (service.shutdown_timeout): "
                    "not committed, answered 503",
                    (unsigned long long)refused);
    }
}

static void store_destroy(struct fc_exporter *self)
{
    struct store_exporter *x = self->ctx;

    if (x->writer_started) {
        store_shutdown(self, 0);
    }
    fc_store_close(x->store);
    pthread_mutex_destroy(&x->lock);
    pthread_cond_destroy(&x->wake);
    free(x);
    self->ctx = NULL;
}

const struct fc_exporter_type fc_store_exporter = {
    .info =
        {
            .name = "store",
            .description = "segment-tree profile store with Pyroscope's query API",
            .stability = FC_STABILITY_ALPHA,
            .fields = store_fields,
            .config_size = sizeof(struct store_config),
        },
    .create = store_create,
    .start = store_start,
    .export = store_export,
    .stopping = store_stopping,
    .shutdown = store_shutdown,
    .destroy = store_destroy,
};
