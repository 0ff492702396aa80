/*
 * The sending machinery (sender.h): a bounded queue in memory or on disk
 * (persist.h), num_consumers threads taking the oldest item first, retries
 * with backoff.h's schedule, and the Collector's exporter metrics.
 *
 * Capacity counts an item from the moment it is accepted until it is done
 * (sent, or dropped), so items being sent or waiting for a retry still take
 * their room: queue_size bounds everything the exporter holds. The
 * flamecol_exporter_queue_size gauge shows the same number, in sizer units.
 *
 * Locks: s->mu guards the ring, `used`, the deadlines, the stack of idle
 * consumers and the failure counters' cache. It is never held across a send, a wait for a retry or
 * disk I/O. Order: s->mu, then the persistent queue's own locks.
 */
#include "exporters/helper/sender.h"

#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "exporters/helper/backoff.h"
#include "exporters/helper/persist.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_INTERVAL_NS (10 * FC_NS_PER_SEC)
#define MAX_ERROR_TYPES 32
#define NO_DEADLINE INT64_MAX

/* ---- configuration --------------------------------------------------------------------- */

const struct fc_field fc_retry_fields[] = {
    {"enabled", FC_FIELD_BOOL, "true", offsetof(struct fc_retry_config, enabled),
     "retry a request that failed with a retryable error"},
    {"initial_interval", FC_FIELD_DURATION, "5s",
     offsetof(struct fc_retry_config, initial_interval), "wait before the first retry"},
    {"randomization_factor", FC_FIELD_FLOAT, "0.5",
     offsetof(struct fc_retry_config, randomization_factor),
     "jitter: each wait is random in [interval*(1-f), interval*(1+f)], 0 to 1"},
    {"multiplier", FC_FIELD_FLOAT, "1.5", offsetof(struct fc_retry_config, multiplier),
     "the interval grows by this factor after each retry (at least 1)"},
    {"max_interval", FC_FIELD_DURATION, "30s", offsetof(struct fc_retry_config, max_interval),
     "upper bound of the interval between retries"},
    {"max_elapsed_time", FC_FIELD_DURATION, "300s",
     offsetof(struct fc_retry_config, max_elapsed_time),
     "give up on a request after this long since its first attempt (0 = never)"},
    {NULL},
};

const struct fc_field fc_queue_fields[] = {
    {"enabled", FC_FIELD_BOOL, "true", offsetof(struct fc_queue_config, enabled),
     "queue requests and send them from consumer threads; false: the receiver's thread sends "
     "and waits for the peer"},
    {"num_consumers", FC_FIELD_INT, "10", offsetof(struct fc_queue_config, num_consumers),
     "threads sending from the queue, each with its own connection"},
    {"queue_size", FC_FIELD_INT, "1000", offsetof(struct fc_queue_config, queue_size),
     "capacity of the queue in units of `sizer`, counting requests being sent or retried; a "
     "full queue refuses (429 / RESOURCE_EXHAUSTED) unless block_on_overflow"},
    {"sizer", FC_FIELD_ENUM, "requests", offsetof(struct fc_queue_config, sizer),
     "what queue_size counts: requests, profile samples (`items` is the Collector's name for "
     "it) or bytes of encoded requests",
     .choices = "requests|samples|bytes|items"},
    {"block_on_overflow", FC_FIELD_BOOL, "false",
     offsetof(struct fc_queue_config, block_on_overflow),
     "when the queue is full, wait for room (until shutdown) instead of refusing"},
    {"storage", FC_FIELD_STR, "", offsetof(struct fc_queue_config, storage),
     "a directory: a persistent queue there (fsynced before acknowledging, replayed at start; "
     "one flamecol per directory); \"\" = in memory"},
    {"batch", FC_FIELD_NODE, "", offsetof(struct fc_queue_config, batch),
     "not implemented (the Collector's batching inside the exporter): a config that sets it is "
     "refused; the `batch` processor before the exporter merges requests"},
    {NULL},
};

/* `items` (the Collector's spelling) is samples. */
static int sizer_of(const struct fc_queue_config *q)
{
    return q->sizer == FC_SIZER_BYTES      ? FC_SIZER_BYTES
           : q->sizer == FC_SIZER_REQUESTS ? FC_SIZER_REQUESTS
                                           : FC_SIZER_SAMPLES;
}

int fc_sender_config_check(const struct fc_sender_config *cfg, struct fc_error *err)
{
    const struct fc_retry_config *r = &cfg->retry_on_failure;
    const struct fc_queue_config *q = &cfg->sending_queue;

    if (cfg->timeout <= 0) {
        return fc_errorf(err, FC_ECONFIG, "timeout: must be positive");
    }
    if (r->enabled) {
        if (r->initial_interval < 0) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.initial_interval: must not be "
                             "negative");
        }
        if (r->randomization_factor < 0 || r->randomization_factor > 1) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.randomization_factor: must be in [0, 1], got %g",
                             r->randomization_factor);
        }
        if (!(r->multiplier >= 1)) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.multiplier: must be at least 1, got %g",
                             r->multiplier);
        }
        if (r->max_interval < 0) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.max_interval: must not be "
                             "negative");
        }
        if (r->max_elapsed_time < 0) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.max_elapsed_time: must not be "
                             "negative (0 = retry for ever)");
        }
        if (r->max_elapsed_time > 0 && r->max_elapsed_time < r->initial_interval) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.max_elapsed_time: must not be "
                             "less than initial_interval");
        }
        if (r->max_elapsed_time > 0 && r->max_elapsed_time < r->max_interval) {
            return fc_errorf(err, FC_ECONFIG,
                             "retry_on_failure.max_elapsed_time: must not be "
                             "less than max_interval");
        }
    }
    if (q->batch != NULL) {
        /*
         * Merging requests costs more CPU than the sends it saves here
         * (README, Performance: forwarding), so it is not built.
         */
        return fc_errorf(err, FC_ECONFIG,
                         "sending_queue.batch: not implemented in flamecol; put the `batch` "
                         "processor before this exporter to merge requests");
    }
    if (q->enabled) {
        if (q->num_consumers < 1 || q->num_consumers > 1000) {
            return fc_errorf(err, FC_ECONFIG,
                             "sending_queue.num_consumers: must be in [1, 1000], got %lld",
                             (long long)q->num_consumers);
        }
        if (q->queue_size < 1) {
            return fc_errorf(err, FC_ECONFIG,
                             "sending_queue.queue_size: must be positive, got %lld",
                             (long long)q->queue_size);
        }
    } else if (q->storage != NULL && q->storage[0] != '\0') {
        return fc_errorf(err, FC_ECONFIG,
                         "sending_queue.storage: a persistent queue needs sending_queue.enabled");
    }
    return FC_OK;
}

/* ---- items ----------------------------------------------------------------------------- */

struct fc_send_item *fc_send_item_new(const char *tenant, const char *target, size_t body_len)
{
    size_t tl, gl;
    struct fc_send_item *it;
    char *p;

    tenant = tenant != NULL ? tenant : "";
    target = target != NULL ? target : "";
    tl = strlen(tenant) + 1;
    gl = strlen(target) + 1;
    /* body first after the struct: it keeps the struct's alignment */
    it = fc_xmalloc(sizeof(*it) + body_len + tl + gl);
    memset(it, 0, sizeof(*it));
    it->body = (uint8_t *)(it + 1);
    it->body_len = body_len;
    p = (char *)it->body + body_len;
    memcpy(p, tenant, tl);
    it->tenant = p;
    memcpy(p + tl, target, gl);
    it->target = p + tl;
    return it;
}

void fc_send_item_free(struct fc_send_item *item)
{
    free(item);
}

/* ---- the sender ------------------------------------------------------------------------- */

/*
 * A consumer thread. When idle it waits on its own semaphore, on the
 * s->sleepers stack: a submit wakes one consumer per item (the one idle
 * most recently, whose caches are warm), not every idle one, and posts
 * after releasing s->mu so that the consumer does not wake into a held lock.
 */
struct consumer {
    struct fc_sender *s;
    sem_t wake;
    struct consumer *next; /* on s->sleepers */
};

struct failed_counter {
    char error_type[48];
    _Atomic int64_t *samples;
    _Atomic int64_t *requests;
};

struct fc_sender {
    struct fc_sender_config cfg;
    struct fc_exporter *e;
    const struct fc_sender_ops *ops;
    void *ctx;
    char component[128]; /* "exporter/<id>" for logs */
    char labels[192];    /* exporter="<id>" */
    int sizer;
    int64_t capacity; /* queue_size, in sizer units */

    pthread_mutex_t mu;
    struct consumer *sleepers; /* idle consumers, the most recent first: an item, or shutdown */
    pthread_cond_t space;      /* blocked submitters: room, or the deadline moved */
    size_t space_waiters;
    pthread_cond_t wake; /* retry waits: shutdown began */
    /* The memory queue: a ring of items, oldest at head. Owns the items. */
    struct fc_send_item **ring;
    size_t head, count, ring_cap;
    int64_t used;           /* sizer units accepted and not done */
    int64_t stop_deadline;  /* submits refused after this (stopping) */
    bool draining;          /* shutdown began: consumers exit when empty */
    int64_t drain_deadline; /* and at this time in any case */
    bool started, shut_down;
    struct fc_persist *persist; /* storage set: the queue is on disk */

    pthread_t *threads;
    struct consumer *consumers; /* one per thread */
    size_t n_threads;
    /* Connections of callers' threads when the queue is off: a free list. */
    void **idle_conns;
    size_t n_idle, idle_cap;

    struct failed_counter failed[MAX_ERROR_TYPES];
    size_t n_failed;

    _Atomic int64_t *sent_samples, *sent_requests;
    _Atomic int64_t *enq_failed_samples, *enq_failed_requests;
    _Atomic int64_t *queue_size, *queue_capacity, *in_flight, *retries;
    _Atomic int64_t *corrupt, *redelivered, *fsyncs;
    struct fc_log_limit log_permanent, log_exhausted, log_partial, log_refused, log_retry;
};

static void cond_init_mono(pthread_cond_t *c)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(c, &a);
    pthread_condattr_destroy(&a);
}

/* Waits on c (s->mu held) until signalled or the CLOCK_MONOTONIC time until_ns. */
static void cond_wait_until(pthread_cond_t *c, pthread_mutex_t *mu, int64_t until_ns)
{
    struct timespec ts;
    if (until_ns == NO_DEADLINE) {
        pthread_cond_wait(c, mu);
        return;
    }
    ts.tv_sec = (time_t)(until_ns / FC_NS_PER_SEC);
    ts.tv_nsec = (long)(until_ns % FC_NS_PER_SEC);
    pthread_cond_timedwait(c, mu, &ts);
}

/*
 * s->mu held: this consumer waits until a submit or the shutdown wakes it.
 * s->mu is released while it sleeps and held again on return.
 */
static void consumer_sleep(struct fc_sender *s, struct consumer *me)
{
    me->next = s->sleepers;
    s->sleepers = me;
    pthread_mutex_unlock(&s->mu);
    while (sem_wait(&me->wake) != 0 && errno == EINTR) {
    }
    pthread_mutex_lock(&s->mu);
}

/*
 * s->mu held: takes up to n idle consumers off s->sleepers into *woken (a
 * list); wake_posted() posts them once s->mu is released.
 */
static void wake_take(struct fc_sender *s, size_t n, struct consumer **woken)
{
    while (n-- > 0 && s->sleepers != NULL) {
        struct consumer *c = s->sleepers;
        s->sleepers = c->next;
        c->next = *woken;
        *woken = c;
    }
}

/* s->mu not held. The consumers live as long as the sender: posting after the unlock is safe. */
static void wake_posted(struct consumer *woken)
{
    while (woken != NULL) {
        struct consumer *next = woken->next;
        sem_post(&woken->wake);
        woken = next;
    }
}

static int64_t units_of(const struct fc_sender *s, const struct fc_send_item *it)
{
    switch (s->sizer) {
    case FC_SIZER_SAMPLES:
        return (int64_t)it->samples;
    case FC_SIZER_BYTES:
        return (int64_t)it->body_len;
    default:
        return 1;
    }
}

static const char *sizer_name(const struct fc_sender *s)
{
    return s->sizer == FC_SIZER_SAMPLES ? "samples"
           : s->sizer == FC_SIZER_BYTES ? "bytes"
                                        : "requests";
}

static int64_t ref_units(const struct fc_sender *s, const struct fc_persist_ref *r)
{
    return s->sizer == FC_SIZER_SAMPLES ? (int64_t)r->samples
           : s->sizer == FC_SIZER_BYTES ? (int64_t)r->bytes
                                        : 1;
}

int fc_sender_create(const struct fc_sender_config *cfg, struct fc_exporter *e,
                     const struct fc_sender_ops *ops, void *ops_ctx, struct fc_sender **out,
                     struct fc_error *err)
{
    struct fc_sender *s;
    int rc = fc_sender_config_check(cfg, err);

    if (rc != FC_OK) {
        return rc;
    }
    s = fc_xcalloc(1, sizeof(*s));
    s->cfg = *cfg;
    s->e = e;
    s->ops = ops;
    s->ctx = ops_ctx;
    snprintf(s->component, sizeof(s->component), "exporter/%s", e->id);
    snprintf(s->labels, sizeof(s->labels), "exporter=\"%s\"", e->id);
    s->sizer = sizer_of(&cfg->sending_queue);
    s->capacity = cfg->sending_queue.queue_size;
    s->stop_deadline = NO_DEADLINE;
    s->drain_deadline = NO_DEADLINE;
    pthread_mutex_init(&s->mu, NULL);
    cond_init_mono(&s->space);
    cond_init_mono(&s->wake);

    s->sent_samples = fc_metrics_counter("flamecol_exporter_sent_profile_samples_total", s->labels,
                                         "Samples the peer accepted.");
    s->sent_requests = fc_metrics_counter("flamecol_exporter_sent_requests_total", s->labels,
                                          "Requests the peer accepted.");
    s->enq_failed_samples =
        fc_metrics_counter("flamecol_exporter_enqueue_failed_profile_samples_total", s->labels,
                           "Samples the sending queue refused (full, too big, shutting down).");
    s->enq_failed_requests =
        fc_metrics_counter("flamecol_exporter_enqueue_failed_requests_total", s->labels,
                           "Requests the sending queue refused (full, too big, shutting down).");
    s->queue_size = fc_metrics_gauge("flamecol_exporter_queue_size", s->labels,
                                     "Sizer units in the sending queue, being sent included.");
    s->queue_capacity = fc_metrics_gauge("flamecol_exporter_queue_capacity", s->labels,
                                         "Capacity of the sending queue, in sizer units.");
    s->in_flight = fc_metrics_gauge("flamecol_exporter_in_flight_requests", s->labels,
                                    "Requests being sent (one attempt under way).");
    s->retries = fc_metrics_counter("flamecol_exporter_retries_total", s->labels,
                                    "Retries of requests that failed with a retryable error.");
    fc_metric_set(s->queue_capacity, cfg->sending_queue.enabled ? s->capacity : 0);
    fc_metric_set(s->queue_size, 0);
    if (cfg->sending_queue.enabled && cfg->sending_queue.storage != NULL &&
        cfg->sending_queue.storage[0] != '\0') {
        s->corrupt =
            fc_metrics_counter("flamecol_exporter_persistent_queue_corrupt_records_total",
                               s->labels, "Damaged records of the persistent queue, skipped.");
        s->redelivered = fc_metrics_counter(
            "flamecol_exporter_persistent_queue_redelivered_requests_total", s->labels,
            "Requests sent again after a restart because their send may not have finished.");
        s->fsyncs = fc_metrics_counter("flamecol_exporter_persistent_queue_fsyncs_total", s->labels,
                                       "fsync / fdatasync calls of the persistent queue.");
    }
    e->metrics.ok_samples = s->sent_samples;
    e->metrics.ok_batches = s->sent_requests;
    e->queue_size = s->queue_size;
    *out = s;
    return FC_OK;
}

/* ---- counting outcomes ------------------------------------------------------------------ */

static void failed_add(struct fc_sender *s, const char *error_type, int64_t samples,
                       int64_t requests)
{
    char type[48];
    struct failed_counter *f = NULL;
    size_t i, n = 0;

    /* A label value: keep it to [A-Za-z0-9_.-]. */
    for (const char *p = error_type != NULL && error_type[0] ? error_type : "unknown";
         *p && n + 1 < sizeof(type); p++) {
        char c = *p;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';
        type[n++] = ok ? c : '_';
    }
    type[n] = '\0';
    pthread_mutex_lock(&s->mu);
    for (i = 0; i < s->n_failed && strcmp(s->failed[i].error_type, type) != 0; i++) {
    }
    if (i == s->n_failed && s->n_failed >= MAX_ERROR_TYPES - 1) {
        /* The last slot is "other": a label per kind of error, never per message. */
        snprintf(type, sizeof(type), "other");
        for (i = 0; i < s->n_failed && strcmp(s->failed[i].error_type, type) != 0; i++) {
        }
    }
    if (i == s->n_failed) {
        char labels[256];
        f = &s->failed[s->n_failed++];
        snprintf(f->error_type, sizeof(f->error_type), "%s", type);
        snprintf(labels, sizeof(labels), "%s,error_type=\"%s\"", s->labels, type);
        f->samples = fc_metrics_counter("flamecol_exporter_send_failed_profile_samples_total",
                                        labels, "Samples that could not be sent, by error type.");
        f->requests = fc_metrics_counter("flamecol_exporter_send_failed_requests_total", labels,
                                         "Requests that could not be sent, by error type.");
    }
    f = &s->failed[i];
    pthread_mutex_unlock(&s->mu);
    fc_metric_add(f->samples, samples);
    fc_metric_add(f->requests, requests);
}

/* The peer accepted the request, maybe rejecting some profiles (never retried). */
static void count_ok(struct fc_sender *s, const struct fc_send_item *it,
                     const struct fc_send_result *res)
{
    int64_t rejected = 0;

    if (res->rejected_profiles > 0) {
        /*
         * The peer counts profiles, the metrics count samples: estimate the
         * rejected samples as samples * rejected / profiles (all of them when
         * the item does not know its profiles). The request counts as sent
         * and once under send_failed{error_type="partial_success"}.
         */
        uint32_t rej = it->profiles > 0 && res->rejected_profiles > it->profiles
                           ? it->profiles
                           : res->rejected_profiles;
        rejected = it->profiles > 0 ? (int64_t)((long double)it->samples * rej / it->profiles)
                                    : (int64_t)it->samples;
        failed_add(s, "partial_success", rejected, 1);
        fc_log_limited(&s->log_partial, LOG_INTERVAL_NS, FC_LOG_WARN, s->component,
                       "partial success: the peer rejected %u of %u profiles: %s",
                       res->rejected_profiles, it->profiles,
                       res->message[0] ? res->message : "(no message)");
    }
    fc_metric_add(s->sent_samples, (int64_t)it->samples - rejected);
    fc_metric_add(s->sent_requests, 1);
}

static void count_failed(struct fc_sender *s, const struct fc_send_item *it,
                         const struct fc_send_result *res, bool permanent)
{
    failed_add(s, res->error_type, (int64_t)it->samples, 1);
    if (permanent) {
        fc_log_limited(&s->log_permanent, LOG_INTERVAL_NS, FC_LOG_ERROR, s->component,
                       "dropped a request of %llu samples: permanent error (%s): %s",
                       (unsigned long long)it->samples, res->error_type,
                       res->message[0] ? res->message : "(no message)");
    } else {
        fc_log_limited(&s->log_exhausted, LOG_INTERVAL_NS, FC_LOG_ERROR, s->component,
                       "dropped a request of %llu samples: no more retries (%s): %s",
                       (unsigned long long)it->samples, res->error_type,
                       res->message[0] ? res->message : "(no message)");
    }
}

/* ---- one item: attempts and retries ------------------------------------------------------ */

enum end { END_SENT, END_PERMANENT, END_EXHAUSTED, END_ABANDONED };

/* The time by which this thread must give up: consumers, the drain deadline; callers, stopping. */
static int64_t limit_of(struct fc_sender *s, bool caller)
{
    int64_t l;
    pthread_mutex_lock(&s->mu);
    l = caller ? s->stop_deadline : (s->draining ? s->drain_deadline : NO_DEADLINE);
    pthread_mutex_unlock(&s->mu);
    return l;
}

/* Waits until the CLOCK_MONOTONIC time `until`; false when the deadline comes first. */
static bool wait_retry(struct fc_sender *s, int64_t until, bool caller)
{
    bool ok = true;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int64_t limit = caller ? s->stop_deadline : (s->draining ? s->drain_deadline : NO_DEADLINE);
        int64_t now = fc_now_mono_ns();
        if (limit != NO_DEADLINE && until >= limit) {
            ok = false; /* the attempt would come after the deadline: give up now */
            break;
        }
        if (now >= until) {
            break;
        }
        cond_wait_until(&s->wake, &s->mu, until);
    }
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* Sends it until it is sent, fails for good, or the deadline ends the tries. Counts the outcome,
 * except END_ABANDONED (the caller knows whether that is a drop). */
static enum end send_item(struct fc_sender *s, void *conn, const struct fc_send_item *it,
                          bool caller, struct fc_send_result *res)
{
    struct fc_backoff b;
    int64_t start = fc_now_mono_ns();

    fc_backoff_init(&b, &s->cfg.retry_on_failure, start,
                    (uint64_t)start ^ (uint64_t)(uintptr_t)it ^ (uint64_t)(uintptr_t)&b);
    for (;;) {
        int64_t limit = limit_of(s, caller), now = fc_now_mono_ns(), timeout = s->cfg.timeout;
        int64_t wait;

        if (now >= limit) {
            return END_ABANDONED;
        }
        if (limit != NO_DEADLINE && limit - now < timeout) {
            timeout = limit - now;
        }
        memset(res, 0, sizeof(*res));
        fc_metric_add(s->in_flight, 1);
        s->ops->send(s->ctx, conn, it, timeout, res);
        fc_metric_add(s->in_flight, -1);
        switch (res->outcome) {
        case FC_SEND_OK:
            count_ok(s, it, res);
            return END_SENT;
        case FC_SEND_PERMANENT:
            count_failed(s, it, res, true);
            return END_PERMANENT;
        case FC_SEND_RETRY:
            break;
        }
        if (!s->cfg.retry_on_failure.enabled) {
            count_failed(s, it, res, false);
            return END_EXHAUSTED;
        }
        now = fc_now_mono_ns();
        wait = fc_backoff_next(&b, now, res->retry_after_ns);
        if (wait < 0) {
            count_failed(s, it, res, false);
            return END_EXHAUSTED;
        }
        /* An outage must show in the log, not only in the metrics. */
        fc_log_limited(&s->log_retry, LOG_INTERVAL_NS, FC_LOG_WARN, s->component,
                       "send failed, retrying in %lld ms (%s): %s", (long long)(wait / 1000000),
                       res->error_type, res->message);
        if (!wait_retry(s, now + wait, caller)) {
            return END_ABANDONED;
        }
        fc_metric_add(s->retries, 1);
    }
}

/* ---- consumers -------------------------------------------------------------------------- */

/* s->mu held. */
static void release_units_locked(struct fc_sender *s, int64_t units)
{
    s->used -= units;
    fc_metric_set(s->queue_size, s->used);
    if (s->space_waiters > 0) {
        pthread_cond_broadcast(&s->space);
    }
}

static void release_units(struct fc_sender *s, int64_t units)
{
    pthread_mutex_lock(&s->mu);
    release_units_locked(s, units);
    pthread_mutex_unlock(&s->mu);
}

/* With s->mu held: whether this consumer is to stop now. */
static bool must_stop(struct fc_sender *s)
{
    return s->draining && fc_now_mono_ns() >= s->drain_deadline;
}

static void consume_memory(struct fc_sender *s, struct consumer *me, void *conn)
{
    struct fc_send_result res;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        struct fc_send_item *it;
        int64_t units;
        enum end end;

        if (must_stop(s)) {
            break;
        }
        if (s->count == 0) {
            if (s->draining) {
                break;
            }
            consumer_sleep(s, me);
            continue;
        }
        /* FIFO: the oldest item first. */
        it = s->ring[s->head];
        s->head = (s->head + 1) % s->ring_cap;
        s->count--;
        pthread_mutex_unlock(&s->mu);

        units = units_of(s, it);
        end = send_item(s, conn, it, false, &res);
        if (end == END_ABANDONED) {
            failed_add(s, "shutdown", (int64_t)it->samples, 1);
            fc_log_limited(&s->log_exhausted, LOG_INTERVAL_NS, FC_LOG_WARN, s->component,
                           "dropped a request of %llu samples being retried: shutdown deadline",
                           (unsigned long long)it->samples);
        }
        fc_send_item_free(it);
        pthread_mutex_lock(&s->mu);
        release_units_locked(s, units); /* one lock for the release and the next item */
        if (end == END_ABANDONED) {
            /*
             * The peer is failing and the deadline is too close for another
             * try: taking the next items would only try each once and drop
             * it. fc_sender_shutdown drops what is left, counted and logged
             * at once.
             */
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void consume_disk(struct fc_sender *s, struct consumer *me, void *conn)
{
    struct fc_send_result res;
    struct fc_error err = {0};

    pthread_mutex_lock(&s->mu);
    for (;;) {
        struct fc_persist_ref ref;
        struct fc_send_item *it = NULL;
        enum end end;

        if (must_stop(s)) {
            break;
        }
        if (!fc_persist_take(s->persist, &ref)) {
            if (s->draining) {
                break;
            }
            consumer_sleep(s, me);
            continue;
        }
        pthread_mutex_unlock(&s->mu);

        if (fc_persist_load(s->persist, &ref, &it, &err) != FC_OK) {
            fc_log_limited(&s->log_exhausted, LOG_INTERVAL_NS, FC_LOG_ERROR, s->component,
                           "dropped request %llu of the persistent queue: %s",
                           (unsigned long long)ref.seq, err.msg);
            release_units(s, ref_units(s, &ref));
            pthread_mutex_lock(&s->mu);
            continue;
        }
        end = send_item(s, conn, it, false, &res);
        /* Done only once the peer answered for good: a crash before this redelivers it. */
        if (end != END_ABANDONED) {
            fc_persist_done(s->persist, &ref);
        }
        fc_send_item_free(it);
        release_units(s, ref_units(s, &ref));
        pthread_mutex_lock(&s->mu);
        if (end == END_ABANDONED) {
            /* As in consume_memory: the rest stays on disk, not marked dispatched. */
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
}

static void *consumer_main(void *arg)
{
    struct consumer *me = arg;
    struct fc_sender *s = me->s;
    void *conn = s->ops->conn_new != NULL ? s->ops->conn_new(s->ctx) : NULL;

    if (s->persist != NULL) {
        consume_disk(s, me, conn);
    } else {
        consume_memory(s, me, conn);
    }
    if (conn != NULL && s->ops->conn_free != NULL) {
        s->ops->conn_free(s->ctx, conn);
    }
    return NULL;
}

int fc_sender_start(struct fc_sender *s, struct fc_error *err)
{
    const struct fc_queue_config *q = &s->cfg.sending_queue;

    if (!q->enabled) {
        s->started = true;
        return FC_OK;
    }
    if (q->storage != NULL && q->storage[0] != '\0') {
        struct fc_persist_options o = {
            .dir = q->storage,
            .component = s->component,
            .corrupt_records = s->corrupt,
            .redelivered = s->redelivered,
            .fsyncs = s->fsyncs,
        };
        uint64_t req, samples, bytes;
        int rc = fc_persist_open(&o, &s->persist, err);
        if (rc != FC_OK) {
            return rc;
        }
        fc_persist_totals(s->persist, &req, &samples, &bytes);
        s->used = (int64_t)(s->sizer == FC_SIZER_SAMPLES ? samples
                            : s->sizer == FC_SIZER_BYTES ? bytes
                                                         : req);
        fc_metric_set(s->queue_size, s->used);
        if (req > 0) {
            fc_log_info(s->component, "persistent queue %s: %llu requests to send", q->storage,
                        (unsigned long long)req);
        }
    } else {
        s->ring_cap = 64;
        s->ring = fc_xcalloc(s->ring_cap, sizeof(*s->ring));
    }
    s->threads = fc_xcalloc((size_t)q->num_consumers, sizeof(*s->threads));
    s->consumers = fc_xcalloc((size_t)q->num_consumers, sizeof(*s->consumers));
    for (int64_t i = 0; i < q->num_consumers; i++) {
        s->consumers[i].s = s;
        sem_init(&s->consumers[i].wake, 0, 0);
    }
    for (int64_t i = 0; i < q->num_consumers; i++) {
        int e = pthread_create(&s->threads[i], NULL, consumer_main, &s->consumers[i]);
        if (e != 0) {
            fc_sender_shutdown(s, fc_now_mono_ns());
            return fc_errorf(err, FC_EIO, "%s: cannot start a consumer thread: %s", s->component,
                             strerror(e));
        }
        s->n_threads++;
    }
    s->started = true;
    return FC_OK;
}

/* ---- submit ----------------------------------------------------------------------------- */

static void free_items(struct fc_send_item **items, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fc_send_item_free(items[i]);
        items[i] = NULL;
    }
}

static void *conn_get(struct fc_sender *s)
{
    void *c = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->n_idle > 0) {
        c = s->idle_conns[--s->n_idle];
        pthread_mutex_unlock(&s->mu);
        return c;
    }
    pthread_mutex_unlock(&s->mu);
    return s->ops->conn_new != NULL ? s->ops->conn_new(s->ctx) : NULL;
}

static void conn_put(struct fc_sender *s, void *c)
{
    if (c == NULL) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (s->n_idle == s->idle_cap) {
        s->idle_cap = s->idle_cap ? s->idle_cap * 2 : 4;
        s->idle_conns = fc_xrealloc(s->idle_conns, s->idle_cap * sizeof(*s->idle_conns));
    }
    s->idle_conns[s->n_idle++] = c;
    pthread_mutex_unlock(&s->mu);
}

/* No queue: the caller's thread sends each item, with retries; the answer is the outcome. */
static int submit_direct(struct fc_sender *s, struct fc_send_item **items, size_t n,
                         struct fc_error *err)
{
    struct fc_send_result res;
    void *conn = conn_get(s);
    int rc = FC_OK;

    for (size_t i = 0; i < n; i++) {
        enum end end;
        if (rc == FC_EUNAVAIL) {
            /* The peer is down: the rest would wait as long again; the client will retry. */
            failed_add(s, res.error_type[0] ? res.error_type : "shutdown",
                       (int64_t)items[i]->samples, 1);
            continue;
        }
        end = send_item(s, conn, items[i], true, &res);
        if (end == END_PERMANENT && rc == FC_OK) {
            rc = fc_errorf(err, FC_EPROTO, "%s: the peer refused the request (%s): %s",
                           s->component, res.error_type, res.message);
        } else if (end == END_EXHAUSTED || end == END_ABANDONED) {
            if (end == END_ABANDONED) {
                memset(&res, 0, sizeof(res));
                snprintf(res.error_type, sizeof(res.error_type), "shutdown");
                failed_add(s, "shutdown", (int64_t)items[i]->samples, 1);
            }
            rc = fc_errorf(err, FC_EUNAVAIL, "%s: could not send (%s): %s", s->component,
                           res.error_type, res.message[0] ? res.message : "shutting down");
        }
    }
    conn_put(s, conn);
    free_items(items, n);
    return rc;
}

static void ring_push(struct fc_sender *s, struct fc_send_item *it)
{
    if (s->count == s->ring_cap) {
        size_t cap = s->ring_cap * 2;
        struct fc_send_item **r = fc_xcalloc(cap, sizeof(*r));
        for (size_t i = 0; i < s->count; i++) {
            r[i] = s->ring[(s->head + i) % s->ring_cap];
        }
        free(s->ring);
        s->ring = r;
        s->ring_cap = cap;
        s->head = 0;
    }
    s->ring[(s->head + s->count) % s->ring_cap] = it;
    s->count++;
}

static int refuse(struct fc_sender *s, struct fc_send_item **items, size_t n, int64_t samples,
                  int code, struct fc_error *err, const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static int refuse(struct fc_sender *s, struct fc_send_item **items, size_t n, int64_t samples,
                  int code, struct fc_error *err, const char *fmt, ...)
{
    char msg[384];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fc_metric_add(s->enq_failed_samples, samples);
    fc_metric_add(s->enq_failed_requests, (int64_t)n);
    free_items(items, n);
    return fc_errorf(err, code, "%s: %s", s->component, msg);
}

int fc_sender_submit(struct fc_sender *s, struct fc_send_item **items, size_t n,
                     struct fc_error *err)
{
    int64_t units = 0, samples = 0;
    int rc;

    if (n == 0) {
        return FC_OK;
    }
    if (!s->cfg.sending_queue.enabled) {
        if (!s->started || fc_now_mono_ns() >= limit_of(s, true)) {
            for (size_t i = 0; i < n; i++) {
                failed_add(s, "shutdown", (int64_t)items[i]->samples, 1);
            }
            free_items(items, n);
            return fc_errorf(err, FC_EUNAVAIL, "%s: shutting down", s->component);
        }
        return submit_direct(s, items, n, err);
    }
    for (size_t i = 0; i < n; i++) {
        units += units_of(s, items[i]);
        samples += (int64_t)items[i]->samples;
    }
    if (units > s->capacity) {
        return refuse(s, items, n, samples, FC_ETOOBIG, err,
                      "a request of %lld %s does not fit in the sending queue (queue_size %lld)",
                      (long long)units, sizer_name(s), (long long)s->capacity);
    }
    pthread_mutex_lock(&s->mu);
    for (;;) {
        int64_t now = fc_now_mono_ns();
        if (!s->started || s->shut_down || now >= s->stop_deadline) {
            pthread_mutex_unlock(&s->mu);
            return refuse(s, items, n, samples, FC_EUNAVAIL, err,
                          s->started ? "shutting down" : "not started");
        }
        if (s->used + units <= s->capacity) {
            break;
        }
        if (!s->cfg.sending_queue.block_on_overflow) {
            int64_t used = s->used;
            pthread_mutex_unlock(&s->mu);
            fc_log_limited(&s->log_refused, LOG_INTERVAL_NS, FC_LOG_WARN, s->component,
                           "sending queue is full (%lld of %lld %s): refusing requests",
                           (long long)used, (long long)s->capacity, sizer_name(s));
            return refuse(s, items, n, samples, FC_EAGAIN, err,
                          "sending queue is full (%lld of %lld %s)", (long long)used,
                          (long long)s->capacity, sizer_name(s));
        }
        s->space_waiters++;
        cond_wait_until(&s->space, &s->mu, s->stop_deadline);
        s->space_waiters--;
    }
    s->used += units; /* reserved: all or none */
    fc_metric_set(s->queue_size, s->used);
    if (s->persist == NULL) {
        struct consumer *woken = NULL;
        for (size_t i = 0; i < n; i++) {
            ring_push(s, items[i]);
            items[i] = NULL;
        }
        wake_take(s, n, &woken); /* one consumer per item; busy ones look at the ring next */
        pthread_mutex_unlock(&s->mu);
        wake_posted(woken);
        return FC_OK;
    }
    pthread_mutex_unlock(&s->mu);

    /* The persistent queue: write and sync outside s->mu, then wake the consumers. */
    rc = fc_persist_append(s->persist, items, n, err);
    if (rc != FC_OK) {
        release_units(s, units);
        /*
         * A disk that fails to write or sync is the collector's trouble, not
         * the request's: the client must keep the data and retry (503 /
         * UNAVAILABLE), never take it as a permanent 500.
         */
        return refuse(s, items, n, samples, rc == FC_ETOOBIG ? rc : FC_EUNAVAIL, err,
                      "persistent queue: %s", err->msg);
    }
    free_items(items, n);
    {
        struct consumer *woken = NULL;
        pthread_mutex_lock(&s->mu);
        wake_take(s, n, &woken);
        pthread_mutex_unlock(&s->mu);
        wake_posted(woken);
    }
    return FC_OK;
}

/* ---- stopping, shutdown ----------------------------------------------------------------- */

void fc_sender_stopping(struct fc_sender *s, int64_t deadline_ns)
{
    pthread_mutex_lock(&s->mu);
    if (deadline_ns < s->stop_deadline) {
        s->stop_deadline = deadline_ns;
    }
    /* Blocked submitters and callers' retries look at the new deadline. */
    pthread_cond_broadcast(&s->space);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
}

void fc_sender_shutdown(struct fc_sender *s, int64_t deadline_ns)
{
    struct consumer *woken = NULL;
    size_t left = 0;
    int64_t samples = 0;

    pthread_mutex_lock(&s->mu);
    if (s->shut_down) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->draining = true;
    s->drain_deadline = deadline_ns;
    if (deadline_ns < s->stop_deadline) {
        s->stop_deadline = deadline_ns;
    }
    wake_take(s, SIZE_MAX, &woken);
    pthread_cond_broadcast(&s->space);
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->mu);
    wake_posted(woken);

    /* Consumers leave when the queue is empty or at the deadline. Attempts begun after the
     * shutdown get a timeout that ends at the deadline; one begun before keeps its own
     * timeout (ops->send cannot be interrupted), so this may wait up to `timeout` more. */
    for (size_t i = 0; i < s->n_threads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    s->n_threads = 0;

    pthread_mutex_lock(&s->mu);
    s->shut_down = true;
    while (s->count > 0) {
        struct fc_send_item *it = s->ring[s->head];
        s->head = (s->head + 1) % s->ring_cap;
        s->count--;
        s->used -= units_of(s, it);
        samples += (int64_t)it->samples;
        left++;
        fc_send_item_free(it);
    }
    fc_metric_set(s->queue_size, s->persist != NULL ? s->used : 0);
    pthread_mutex_unlock(&s->mu);
    if (left > 0) {
        failed_add(s, "shutdown", samples, (int64_t)left);
        fc_log_warn(s->component,
                    "shutdown deadline: dropped %zu queued requests (%lld samples) not sent", left,
                    (long long)samples);
    }
    if (s->persist != NULL) {
        uint64_t req, sm, bytes;
        fc_persist_totals(s->persist, &req, &sm, &bytes);
        if (req > 0) {
            fc_log_info(s->component,
                        "persistent queue: %llu requests left on disk for the next start",
                        (unsigned long long)req);
        }
    }
}

void fc_sender_free(struct fc_sender *s)
{
    if (s == NULL) {
        return;
    }
    if (s->n_threads > 0) {
        fc_sender_shutdown(s, fc_now_mono_ns());
    }
    for (size_t i = 0; i < s->count; i++) {
        fc_send_item_free(s->ring[(s->head + i) % s->ring_cap]);
    }
    free(s->ring);
    for (size_t i = 0; i < s->n_idle; i++) {
        if (s->ops->conn_free != NULL) {
            s->ops->conn_free(s->ctx, s->idle_conns[i]);
        }
    }
    free(s->idle_conns);
    free(s->threads);
    for (size_t i = 0; s->consumers != NULL && i < (size_t)s->cfg.sending_queue.num_consumers;
         i++) {
        sem_destroy(&s->consumers[i].wake);
    }
    free(s->consumers);
    if (s->persist != NULL) {
        fc_persist_close(s->persist);
    }
    pthread_cond_destroy(&s->space);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* ---- the exporter hooks every network exporter shares --------------------------------------- */

static struct fc_sender *exporter_sender(struct fc_exporter *self)
{
    struct fc_sender **first = self->ctx; /* the ctx struct begins with its sender */

    return first != NULL ? *first : NULL;
}

void fc_sender_exporter_stopping(struct fc_exporter *self, int64_t deadline_ns)
{
    struct fc_sender *s = exporter_sender(self);

    if (s != NULL) {
        fc_sender_stopping(s, deadline_ns);
    }
}

void fc_sender_exporter_shutdown(struct fc_exporter *self, int64_t deadline_ns)
{
    struct fc_sender *s = exporter_sender(self);

    if (s != NULL) {
        fc_sender_shutdown(s, deadline_ns);
    }
}
