/*
 * memory_limiter processor: the Collector's memory_limiter. Hard limit =
 * limit_mib (or limit_percentage of the cgroup's memory.max, else of
 * MemTotal); soft limit = hard - spike_limit_mib (default 20 % of the hard
 * limit). Above the soft limit every batch is refused with a retryable error
 * (FC_EAGAIN: the receivers answer 429 / RESOURCE_EXHAUSTED with their
 * Retry-After) until memory is back under it. Nothing is changed or dropped:
 * a batch passes as it came or is refused whole.
 *
 * What "memory in use" means here. The Collector measures the Go heap in use
 * (runtime.MemStats.Alloc). A C process has no collector; what the kernel
 * (and a cgroup's OOM killer) charges is the resident set, so a checker
 * thread reads, every check_interval:
 *   - RSS, /proc/self/statm `resident`, which includes memory freed but kept
 *     by malloc, and file pages mapped by the store: the number the limit is
 *     about (it is what `flamecol_process_memory_rss_bytes` reports);
 *   - the bytes every live arena holds (fc_arena_live_bytes(): requests in
 *     flight, batches queued by exporters), which is what flamecol itself
 *     holds and can change between two reads of RSS.
 * in use = max(RSS, live arena bytes). Above the hard limit the checker also
 * calls malloc_trim(0) (the Collector forces a GC) and reads again; above the
 * soft limit it trims too, at most once a second (the Collector forces a GC
 * when crossing it, at most every 10 s, and its GC keeps running on its own;
 * malloc keeps freed memory until trimmed, so without this the process could
 * stay above the soft limit, refusing, with nothing in use).
 *
 * On the request path (many receiver threads at once) the check costs two
 * atomic loads: the checker's verdict, and the live arena bytes, so that a
 * burst between two checks is caught: estimate = in use at the last check +
 * growth of the arena bytes since then; at or above the soft limit the batch
 * is refused, without changing the checker's verdict.
 *
 * As in the Collector, data is decoded before the limiter sees it: put it
 * first in the pipeline (`flamecol validate` warns otherwise) and keep the
 * receivers' own caps (body size, in-flight calls) for what comes before.
 */
#include "core/arena.h"
#include "core/component.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MIB ((int64_t)1024 * 1024)
#define MIN_TRIM_INTERVAL_SOFT FC_NS_PER_SEC
#define COMPONENT "memory_limiter"

struct ml_config {
    int64_t check_interval;
    int64_t limit_mib;
    int64_t limit_percentage;
    int64_t spike_limit_mib;
    int64_t spike_limit_percentage;
};

#define OFF(m) offsetof(struct ml_config, m)
static const struct fc_field ml_fields[] = {
    {"check_interval", FC_FIELD_DURATION, "1s", OFF(check_interval),
     "time between two reads of the memory in use (RSS and live arena bytes)"},
    {"limit_mib", FC_FIELD_INT, "0", OFF(limit_mib),
     "hard limit in MiB: above it malloc_trim(0) is called at each check; exactly one of "
     "limit_mib and limit_percentage is required"},
    {"limit_percentage", FC_FIELD_INT, "0", OFF(limit_percentage),
     "hard limit as a percentage (1-100) of the cgroup's memory.max, or of MemTotal when "
     "there is no cgroup limit"},
    {"spike_limit_mib", FC_FIELD_INT, "0", OFF(spike_limit_mib),
     "headroom below limit_mib: the soft limit is limit_mib - spike_limit_mib; above it every "
     "batch is refused (429 / RESOURCE_EXHAUSTED with Retry-After); 0 = 20 % of the limit"},
    {"spike_limit_percentage", FC_FIELD_INT, "0", OFF(spike_limit_percentage),
     "the same headroom as a percentage of the memory, with limit_percentage; 0 = 20 % of the "
     "limit"},
    {NULL},
};
#undef OFF

struct limiter {
    const struct ml_config *cfg;
    const char *id, *pipeline;
    int64_t hard, spike, soft; /* bytes, set at start */

    _Atomic int refusing;       /* the checker's verdict */
    _Atomic int64_t base_inuse; /* in use at the last check */
    _Atomic int64_t base_arena; /* live arena bytes at the last check */
    int64_t last_trim_ns;

    _Atomic int64_t *refused;     /* samples refused */
    _Atomic int64_t *inuse_gauge; /* bytes in use, as last measured */
    _Atomic int64_t *limit_gauge; /* hard limit, bytes */

    pthread_t thread;
    bool running;
    bool stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct fc_log_limit refuse_log, hard_log;
};

/* ---- measuring ---------------------------------------------------------------------------- */

static int64_t read_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, resident = 0;
    int n;

    if (f == NULL) {
        return 0;
    }
    n = fscanf(f, "%lld %lld", &size, &resident);
    fclose(f);
    return n == 2 ? resident * (int64_t)sysconf(_SC_PAGESIZE) : 0;
}

static int64_t in_use(int64_t *arena)
{
    int64_t rss = read_rss();

    *arena = fc_arena_live_bytes();
    return rss > *arena ? rss : *arena;
}

/* The machine's memory as a limit: the cgroup v2 memory.max when set, else MemTotal. */
static int64_t total_memory(struct fc_error *err)
{
    long long total = 0, cg = 0;
    char line[256];
    FILE *f = fopen("/proc/meminfo", "r");

    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "MemTotal: %lld kB", &total) == 1) {
            total *= 1024;
            break;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    f = fopen("/sys/fs/cgroup/memory.max", "r");
    if (f != NULL) {
        if (fgets(line, sizeof(line), f) != NULL && sscanf(line, "%lld", &cg) == 1 && cg > 0 &&
            (total == 0 || cg < total)) {
            total = cg;
        }
        fclose(f);
    }
    if (total <= 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "failed to get total memory, use fixed memory settings (limit_mib): "
                         "neither /sys/fs/cgroup/memory.max nor /proc/meminfo could be read");
    }
    return (int64_t)total;
}

/* ---- the checker -------------------------------------------------------------------------- */

static void trim(struct limiter *L)
{
    malloc_trim(0);
    L->last_trim_ns = fc_now_mono_ns();
}

static void check(struct limiter *L)
{
    int64_t arena, used = in_use(&arena);
    int was = atomic_load(&L->refusing);
    int must;

    if (used >= L->hard) {
        fc_log_limited(&L->hard_log, 10 * FC_NS_PER_SEC, FC_LOG_WARN, COMPONENT,
                       "%s: memory in use %" PRId64 " MiB is above the hard limit (%" PRId64
                       " MiB): trimming the heap",
                       L->id, used / MIB, L->hard / MIB);
        trim(L);
        used = in_use(&arena);
    }
    must = used >= L->soft;
    if (must && fc_now_mono_ns() - L->last_trim_ns > MIN_TRIM_INTERVAL_SOFT) {
        trim(L);
        used = in_use(&arena);
        must = used >= L->soft;
    }
    if (!was && must) {
        fc_log_warn(COMPONENT,
                    "%s: memory in use %" PRId64 " MiB is above the soft limit (%" PRId64
                    " MiB): refusing data",
                    L->id, used / MIB, L->soft / MIB);
    } else if (was && !must) {
        fc_log_info(COMPONENT,
                    "%s: memory in use %" PRId64
                    " MiB is back under the soft limit: resuming normal operation",
                    L->id, used / MIB);
    }
    atomic_store(&L->base_inuse, used);
    atomic_store(&L->base_arena, arena);
    atomic_store(&L->refusing, must);
    fc_metric_set(L->inuse_gauge, used);
}

static void *checker(void *arg)
{
    struct limiter *L = arg;
    struct timespec until;

    pthread_mutex_lock(&L->lock);
    while (!L->stop) {
        pthread_mutex_unlock(&L->lock);
        check(L);
        pthread_mutex_lock(&L->lock);
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += (time_t)(L->cfg->check_interval / FC_NS_PER_SEC);
        until.tv_nsec += (long)(L->cfg->check_interval % FC_NS_PER_SEC);
        if (until.tv_nsec >= FC_NS_PER_SEC) {
            until.tv_sec++;
            until.tv_nsec -= FC_NS_PER_SEC;
        }
        while (!L->stop && pthread_cond_timedwait(&L->wake, &L->lock, &until) != ETIMEDOUT) {
        }
    }
    pthread_mutex_unlock(&L->lock);
    return NULL;
}

/* ---- the request path --------------------------------------------------------------------- */

static int ml_process(struct fc_processor *self, struct fc_batch **batchp, struct fc_error *err)
{
    struct limiter *L = self->ctx;
    int64_t estimate;

    if (!atomic_load_explicit(&L->refusing, memory_order_relaxed)) {
        /* A burst since the last check: the arena bytes it added. */
        estimate = atomic_load_explicit(&L->base_inuse, memory_order_relaxed) +
                   fc_arena_live_bytes() -
                   atomic_load_explicit(&L->base_arena, memory_order_relaxed);
        if (estimate < L->soft) {
            return FC_OK;
        }
    } else {
        estimate = atomic_load_explicit(&L->base_inuse, memory_order_relaxed);
    }
    fc_metric_add(L->refused, (int64_t)fc_batch_sample_count(*batchp));
    fc_log_limited(&L->refuse_log, 10 * FC_NS_PER_SEC, FC_LOG_WARN, COMPONENT,
                   "%s: data refused due to high memory usage (%" PRId64
                   " MiB in use, soft limit %" PRId64 " MiB)",
                   L->id, estimate / MIB, L->soft / MIB);
    return fc_errorf(err, FC_EAGAIN,
                     "data refused due to high memory usage: %" PRId64
                     " MiB in use, soft limit %" PRId64 " MiB (limit %" PRId64
                     " MiB - spike %" PRId64 " MiB)",
                     estimate / MIB, L->soft / MIB, L->hard / MIB, L->spike / MIB);
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static int ml_create(struct fc_processor *self, struct fc_error *err)
{
    const struct ml_config *c = self->config;
    struct limiter *L;
    char labels[512];

    /* The Collector's checks and messages, in its order. */
    if (c->check_interval <= 0) {
        return fc_errorf(err, FC_ECONFIG, "'check_interval' must be greater than zero");
    }
    if (c->limit_mib < 0 || c->limit_percentage < 0 || c->spike_limit_mib < 0 ||
        c->spike_limit_percentage < 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "'limit_mib', 'limit_percentage', 'spike_limit_mib' and "
                         "'spike_limit_percentage' must not be negative");
    }
    if (c->limit_mib == 0 && c->limit_percentage == 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "'limit_mib' or 'limit_percentage' must be greater than zero");
    }
    if (c->limit_mib > 0 && c->limit_percentage > 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "'limit_mib' and 'limit_percentage' must not be set together");
    }
    if (c->limit_percentage > 100 || c->spike_limit_percentage > 100) {
        return fc_errorf(err, FC_ECONFIG,
                         "'limit_percentage' and 'spike_limit_percentage' must be greater than "
                         "zero and less than or equal to hundred");
    }
    if (c->limit_mib > 0 && c->limit_mib <= c->spike_limit_mib) {
        return fc_errorf(err, FC_ECONFIG, "'spike_limit_mib' must be smaller than 'limit_mib'");
    }
    if (c->limit_percentage > 0 && c->limit_percentage <= c->spike_limit_percentage) {
        return fc_errorf(err, FC_ECONFIG,
                         "'spike_limit_percentage' must be smaller than 'limit_percentage'");
    }
    if ((c->limit_mib > 0 && c->spike_limit_percentage > 0) ||
        (c->limit_percentage > 0 && c->spike_limit_mib > 0)) {
        return fc_errorf(err, FC_ECONFIG,
                         "'spike_limit_mib' goes with 'limit_mib' and 'spike_limit_percentage' "
                         "with 'limit_percentage'");
    }
    if (c->limit_mib > (INT64_MAX / MIB) / 2) {
        return fc_errorf(err, FC_ECONFIG, "'limit_mib' is too large");
    }
    L = fc_xcalloc(1, sizeof(*L));
    L->cfg = c;
    L->id = self->id;
    L->pipeline = self->pipeline;
    pthread_mutex_init(&L->lock, NULL);
    {
        pthread_condattr_t attr;
        pthread_condattr_init(&attr);
        pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
        pthread_cond_init(&L->wake, &attr);
        pthread_condattr_destroy(&attr);
    }
    L->last_trim_ns = fc_now_mono_ns() - MIN_TRIM_INTERVAL_SOFT - 1;
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
    L->refused = fc_metrics_counter(
        "flamecol_processor_memory_limiter_refused_profile_samples_total", labels,
        "Samples the memory_limiter refused (retryable) because memory in use was above its "
        "soft limit.");
    L->inuse_gauge = fc_metrics_gauge(
        "flamecol_processor_memory_limiter_memory_in_use_bytes", labels,
        "Memory in use as the memory_limiter last measured it: max(RSS, live arena bytes).");
    L->limit_gauge = fc_metrics_gauge("flamecol_processor_memory_limiter_limit_bytes", labels,
                                      "The memory_limiter's hard limit in bytes.");
    self->ctx = L;
    return FC_OK;
}

static int ml_start(struct fc_processor *self, struct fc_host *host, struct fc_error *err)
{
    struct limiter *L = self->ctx;
    const struct ml_config *c = L->cfg;
    int rc;

    (void)host;
    if (c->limit_mib > 0) {
        L->hard = c->limit_mib * MIB;
        L->spike = c->spike_limit_mib * MIB;
    } else {
        int64_t total = total_memory(err);
        if (total < 0) {
            return (int)total;
        }
        L->hard = total / 100 * c->limit_percentage;
        L->spike = total / 100 * c->spike_limit_percentage;
    }
    if (L->spike == 0) {
        L->spike = L->hard / 5; /* the Collector's default: 20 % of the limit */
    }
    L->soft = L->hard - L->spike;
    fc_metric_set(L->limit_gauge, L->hard);
    fc_log_info(COMPONENT,
                "%s: limit %" PRId64 " MiB, spike %" PRId64 " MiB (soft limit %" PRId64
                " MiB), check every %" PRId64 " ms",
                L->id, L->hard / MIB, L->spike / MIB, L->soft / MIB,
                (int64_t)(c->check_interval / FC_NS_PER_MS));
    check(L); /* a verdict before the first batch */
    rc = pthread_create(&L->thread, NULL, checker, L);
    if (rc != 0) {
        return fc_errorf(err, FC_EIO, "cannot start the checker thread: %s", strerror(rc));
    }
    L->running = true;
    return FC_OK;
}

static void ml_shutdown(struct fc_processor *self)
{
    struct limiter *L = self->ctx;

    if (L == NULL || !L->running) {
        return;
    }
    pthread_mutex_lock(&L->lock);
    L->stop = true;
    pthread_cond_signal(&L->wake);
    pthread_mutex_unlock(&L->lock);
    pthread_join(L->thread, NULL);
    L->running = false;
}

static void ml_destroy(struct fc_processor *self)
{
    struct limiter *L = self->ctx;

    if (L == NULL) {
        return;
    }
    ml_shutdown(self);
    pthread_cond_destroy(&L->wake);
    pthread_mutex_destroy(&L->lock);
    free(L);
    self->ctx = NULL;
}

const struct fc_processor_type fc_memory_limiter_processor = {
    .info = {"memory_limiter",
             "the Collector's memory_limiter: above a soft limit (RSS or live arena bytes) every "
             "batch is refused as retryable (429 / RESOURCE_EXHAUSTED with Retry-After)",
             FC_STABILITY_ALPHA, ml_fields, sizeof(struct ml_config)},
    .create = ml_create,
    .start = ml_start,
    .process = ml_process,
    .shutdown = ml_shutdown,
    .destroy = ml_destroy,
    /* A batch passes as it came (its request bytes too) or is refused whole. */
    .preserves_batch = true,
    .counts_dropped = true,
};
