/*
 * downsample `window`: merging a series' profiles over a window, with an
 * optional durable buffer. See window.h.
 */
#include "processors/downsample/window.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "exporters/helper/persist.h"
#include "exporters/helper/sender.h"
#include "formats/otlp.h"
#include "processors/downsample/fold.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define N_SLOTS 4096u
#define RETRY_MIN_NS 1000000000LL
#define RETRY_MAX_NS 30000000000LL
#define TICK_MAX_NS 1000000000LL
#define MAX_GROUP 1024 /* windows sent in one batch */
#define MAX_GROUP_BYTES (16LL << 20)

/* A persisted request: done once every window holding its profiles is. */
struct rec {
    struct fc_persist_ref ref;
    uint32_t pending; /* windows holding it, plus the request while it is added */
};

/* One series' window: its merged profile and where it came from. */
struct acc {
    struct acc *chain; /* table bucket while open; due list once closed */
    uint64_t hash;
    char *key; /* tenant, labels, types (see series_key) */
    size_t key_len;
    int64_t start;    /* window start, unix ns */
    int64_t deadline; /* CLOCK_MONOTONIC ns: closes then */
    int64_t retry_at; /* CLOCK_MONOTONIC ns: next attempt once due */
    int attempts;
    bool alone;             /* sent in a batch of its own (its batch was refused for good) */
    struct fc_batch *batch; /* one profile */
    uint64_t samples_in;
    struct rec **recs;
    uint32_t n_recs, cap_recs;
};

struct fc_dswin {
    struct fc_processor *self;
    struct fc_dswin_options o;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC */
    struct acc **table;
    struct acc *due, *due_tail;
    size_t n_windows; /* open and due */
    int64_t bytes;    /* arena bytes of every window */
    bool stopping, started;
    int64_t stop_deadline; /* CLOCK_MONOTONIC ns */
    int64_t grace_ns;
    pthread_t thread;
    struct fc_persist *persist;
    pthread_mutex_t plock; /* append + take of one request */
    struct fc_log_limit log_refused;
    _Atomic int64_t *profiles_in, *profiles_out, *samples_merged, *refused_profiles;
    _Atomic int64_t *retries, *replayed, *buffer_bytes, *buffer_windows, *lost_at_shutdown;
    _Atomic int64_t *corrupt, *redelivered, *fsyncs;
};

/* ---- merging ------------------------------------------------------------------------------ */

int fc_dswin_merge(struct fc_batch *acc, const struct fc_batch *src, uint32_t profile,
                   uint64_t *merged, struct fc_error *err)
{
    struct fc_profile *dst, *np;
    uint32_t n_samples, n_nums;
    int64_t start, end;
    int rc;

    if (merged != NULL) {
        *merged = 0;
    }
    if (acc->n_profiles > 1 || profile >= src->n_profiles) {
        return fc_errorf(err, FC_EINVAL, "downsample window: bad merge");
    }
    rc = fc_batch_merge_profiles(acc, src, &profile, 1, err);
    if (rc != FC_OK) {
        return rc;
    }
    if (acc->n_profiles == 1) {
        dst = &acc->profiles[0];
        dst->original_payload = NULL; /* not that payload once merged */
        dst->original_payload_len = 0;
        dst->original_payload_format = 0;
        uint64_t m = fc_fold_merge_equal(acc, dst);
        if (merged != NULL) {
            *merged = m;
        }
        return FC_OK;
    }
    dst = &acc->profiles[0];
    np = &acc->profiles[1];
    n_samples = dst->n_samples;
    n_nums = dst->n_nums;
    for (uint32_t i = 0; i < np->n_samples; i++) {
        const struct fc_sample *s = &np->samples[i];
        rc = fc_profile_add_sample(acc, dst, s, np->nums + s->values_off, s->n_values,
                                   s->n_ts > 0 ? np->nums + s->ts_off : NULL, s->n_ts);
        if (rc != FC_OK) {
            dst->n_samples = n_samples;
            dst->n_nums = n_nums;
            acc->n_profiles = 1;
            return fc_errorf(err, rc, "downsample window: the merged profile is too large");
        }
    }
    start = dst->time_ns < np->time_ns ? dst->time_ns : np->time_ns;
    end = dst->time_ns + (dst->duration_ns > 0 ? dst->duration_ns : 0);
    if (np->time_ns + (np->duration_ns > 0 ? np->duration_ns : 0) > end) {
        end = np->time_ns + (np->duration_ns > 0 ? np->duration_ns : 0);
    }
    dst->time_ns = start;
    dst->duration_ns = end - start;
    acc->n_profiles = 1;
    {
        uint64_t m = fc_fold_merge_equal(acc, dst);
        if (merged != NULL) {
            *merged = m;
        }
    }
    return FC_OK;
}

/* ---- series keys -------------------------------------------------------------------------- */

static void key_put(struct fc_buf *k, const char *s, size_t n)
{
    fc_buf_append(k, s, n);
    fc_buf_append(k, "", 1);
}

static void key_str(struct fc_buf *k, const struct fc_batch *b, uint32_t i)
{
    key_put(k, fc_str(b, i), b->dict.str_len[i]);
}

/* tenant, series labels, sample types, period type, period, cpu-as-ns flag; NUL separated. */
static char *series_key(const struct fc_batch *b, const struct fc_profile *p, size_t *len)
{
    struct fc_buf k;
    char num[48];

    fc_buf_init(&k, 0);
    key_put(&k, b->tenant, strlen(b->tenant));
    for (uint32_t i = 0; i < p->n_labels; i++) {
        key_str(&k, b, p->labels[i].name);
        key_str(&k, b, p->labels[i].value);
    }
    key_put(&k, "\x01", 1);
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        key_str(&k, b, p->sample_types[t].type);
        key_str(&k, b, p->sample_types[t].unit);
    }
    key_str(&k, b, p->period_type.type);
    key_str(&k, b, p->period_type.unit);
    snprintf(num, sizeof(num), "%lld/%d", (long long)p->period, (int)p->cpu_samples_as_ns);
    key_put(&k, num, strlen(num));
    return (char *)fc_buf_detach(&k, len);
}

/* ---- windows (caller holds the lock) ------------------------------------------------------ */

static int64_t arena_bytes(const struct acc *a)
{
    return a->batch != NULL ? (int64_t)a->batch->arena->used : 0;
}

static void gauges(struct fc_dswin *w)
{
    fc_metric_set(w->buffer_bytes, w->bytes);
    fc_metric_set(w->buffer_windows, (int64_t)w->n_windows);
}

static void unlink_open(struct fc_dswin *w, struct acc *a)
{
    struct acc **pp = &w->table[a->hash & (N_SLOTS - 1)];
    while (*pp != a) {
        pp = &(*pp)->chain;
    }
    *pp = a->chain;
    a->chain = NULL;
}

static void push_due(struct fc_dswin *w, struct acc *a)
{
    a->chain = NULL;
    if (w->due_tail != NULL) {
        w->due_tail->chain = a;
    } else {
        w->due = a;
    }
    w->due_tail = a;
    pthread_cond_broadcast(&w->cond);
}

static struct acc *new_acc(struct fc_dswin *w, const char *tenant, char *key, size_t key_len,
                           uint64_t h, int64_t start)
{
    struct acc *a = fc_xcalloc(1, sizeof(*a));
    int64_t now = fc_now_ns(), end = start + w->o.window_ns, wait;

    a->batch = fc_batch_new(0);
    if (a->batch == NULL || fc_batch_set_tenant(a->batch, tenant) != FC_OK) {
        fc_batch_unref(a->batch);
        free(a);
        return NULL;
    }
    a->key = key;
    a->key_len = key_len;
    a->hash = h;
    a->start = start;
    wait = end > now ? end - now : w->o.window_ns;
    if (wait > w->o.window_ns) {
        wait = w->o.window_ns;
    }
    a->deadline = fc_now_mono_ns() + wait + w->o.window_ns / 4;
    w->n_windows++;
    w->bytes += arena_bytes(a); /* the new batch's own arena, taken off when it is freed */
    return a;
}

static void free_acc(struct acc *a)
{
    fc_batch_unref(a->batch);
    free(a->key);
    free(a->recs);
    free(a);
}

/* Releases a's hold on its records: done once no window holds them. */
static void release_recs(struct fc_dswin *w, struct acc *a)
{
    for (uint32_t i = 0; i < a->n_recs; i++) {
        struct rec *r = a->recs[i];
        if (--r->pending == 0) {
            fc_persist_done(w->persist, &r->ref);
            free(r);
        }
    }
    a->n_recs = 0;
}

static void hold_rec(struct acc *a, struct rec *r)
{
    if (r == NULL || (a->n_recs > 0 && a->recs[a->n_recs - 1] == r)) {
        return;
    }
    for (uint32_t i = 0; i < a->n_recs; i++) {
        if (a->recs[i] == r) {
            return;
        }
    }
    if (a->n_recs == a->cap_recs) {
        a->cap_recs = a->cap_recs ? 2 * a->cap_recs : 4;
        a->recs = fc_xrealloc(a->recs, a->cap_recs * sizeof(*a->recs));
    }
    a->recs[a->n_recs++] = r;
    r->pending++;
}

static int64_t window_start(int64_t t, int64_t win)
{
    return (t >= 0 ? t / win : (t - win + 1) / win) * win;
}

/* Puts every profile of b into its window; r (may be NULL) is the record holding b. */
static int ingest(struct fc_dswin *w, const struct fc_batch *b, struct rec *r, struct fc_error *err)
{
    int rc = FC_OK;

    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        const struct fc_profile *p = &b->profiles[i];
        size_t len;
        char *key = series_key(b, p, &len);
        uint64_t h = XXH3_64bits(key, len), merged = 0;
        int64_t start = window_start(p->time_ns, w->o.window_ns), before;
        struct acc *a, *late = NULL;

        for (a = w->table[h & (N_SLOTS - 1)]; a != NULL; a = a->chain) {
            if (a->hash == h && a->key_len == len && memcmp(a->key, key, len) == 0) {
                break;
            }
        }
        if (a != NULL && a->start < start) {
            /* The series moved on: its window is over. */
            unlink_open(w, a);
            push_due(w, a);
            a = NULL;
        }
        if (a != NULL && a->start > start) {
            /* Late: a window of its own, due at once. */
            late = a = new_acc(w, b->tenant, key, len, h, start);
        } else if (a == NULL) {
            a = new_acc(w, b->tenant, key, len, h, start);
            if (a != NULL) {
                a->chain = w->table[h & (N_SLOTS - 1)];
                w->table[h & (N_SLOTS - 1)] = a;
            }
        } else {
            free(key);
        }
        if (a == NULL) {
            return fc_errorf(err, FC_ETOOBIG, "downsample window: cannot open a window");
        }
        before = arena_bytes(a);
        rc = fc_dswin_merge(a->batch, b, i, &merged, err);
        w->bytes += arena_bytes(a) - before;
        if (rc == FC_OK) {
            a->samples_in += p->n_samples;
            hold_rec(a, r);
            fc_metric_add(w->profiles_in, 1);
            fc_metric_add(w->samples_merged, (int64_t)merged);
        }
        if (late != NULL) {
            if (late->batch->n_profiles > 0) {
                push_due(w, late);
            } else {
                w->bytes -= arena_bytes(late);
                w->n_windows--;
                free_acc(late);
            }
        }
    }
    gauges(w);
    return rc;
}

/* ---- emitting ----------------------------------------------------------------------------- */

/*
 * Sends the windows of the list g (off every other list, one tenant) downstream as one batch;
 * called with the lock held, drops it meanwhile. Retryable refusals keep them all; a permanent
 * refusal of several windows sends each again alone (one bad window, or a batch too large for
 * the peer, must not take the others with it), of one window drops it.
 */
static void send_group(struct fc_dswin *w, struct acc *g)
{
    struct fc_batch *out = NULL;
    struct fc_error err = {0};
    int rc = FC_OK;
    bool several = g->chain != NULL;

    pthread_mutex_unlock(&w->lock);
    if (g->chain == NULL) {
        rc = fc_batch_clone(g->batch, &out, &err);
    } else {
        out = fc_batch_new(0);
        rc = out != NULL ? fc_batch_set_tenant(out, g->batch->tenant) : FC_ETOOBIG;
        for (struct acc *a = g; rc == FC_OK && a != NULL; a = a->chain) {
            rc = fc_batch_merge(out, a->batch, &err);
        }
        if (rc != FC_OK) {
            fc_batch_unref(out);
        }
    }
    if (rc == FC_OK) {
        rc = fc_processor_next(w->self, out, &err);
    }
    pthread_mutex_lock(&w->lock);
    while (g != NULL) {
        struct acc *a = g;
        g = a->chain;
        a->chain = NULL;
        if (rc == FC_OK) {
            fc_metric_add(w->profiles_out, 1);
        } else if (fc_err_retryable(rc)) {
            int64_t d = RETRY_MIN_NS << (a->attempts < 5 ? a->attempts : 5);
            a->attempts++;
            a->retry_at = fc_now_mono_ns() + (d < RETRY_MAX_NS ? d : RETRY_MAX_NS);
            fc_metric_add(w->retries, 1);
            push_due(w, a);
            continue;
        } else if (several) {
            a->alone = true;
            a->retry_at = 0;
            push_due(w, a);
            continue;
        } else {
            fc_metric_add(w->self->dropped_samples, (int64_t)a->samples_in);
            fc_log(FC_LOG_ERROR, "processor/downsample",
                   "%s: a window of %llu samples was refused for good, dropped: %s", w->self->id,
                   (unsigned long long)a->samples_in, err.msg);
        }
        release_recs(w, a);
        w->bytes -= arena_bytes(a);
        w->n_windows--;
        free_acc(a);
    }
    if (rc != FC_OK && !fc_err_retryable(rc) && several) {
        fc_log(FC_LOG_WARN, "processor/downsample",
               "%s: a batch of windows was refused for good, sending each alone: %s", w->self->id,
               err.msg);
    }
    if (fc_err_retryable(rc)) {
        fc_log_limited(&w->log_refused, 10000000000LL, FC_LOG_WARN, "processor/downsample",
                       "%s: windows were refused downstream, retrying: %s", w->self->id, err.msg);
    }
    gauges(w);
}

/* Moves the open windows past their deadline (all of them when all) to the due list. */
static void close_expired(struct fc_dswin *w, int64_t now, bool all)
{
    for (size_t s = 0; s < N_SLOTS; s++) {
        struct acc **pp = &w->table[s];
        while (*pp != NULL) {
            struct acc *a = *pp;
            if (all || a->deadline <= now) {
                *pp = a->chain;
                push_due(w, a);
            } else {
                pp = &a->chain;
            }
        }
    }
}

/*
 * The due windows whose retry time has come, of the first one's tenant, at most MAX_GROUP
 * (and about MAX_GROUP_BYTES), taken off the list as a chain; NULL when none.
 */
static struct acc *take_due(struct fc_dswin *w, int64_t now, int64_t *next)
{
    struct acc *prev = NULL, *head = NULL, *tail = NULL, *a = w->due;
    size_t n = 0;
    int64_t bytes = 0;

    while (a != NULL) {
        struct acc *following = a->chain;
        if (a->retry_at > now) {
            if (a->retry_at < *next) {
                *next = a->retry_at;
            }
        } else if (n < MAX_GROUP && bytes < MAX_GROUP_BYTES &&
                   (head == NULL || (!head->alone && !a->alone &&
                                     strcmp(head->batch->tenant, a->batch->tenant) == 0))) {
            if (prev != NULL) {
                prev->chain = following;
            } else {
                w->due = following;
            }
            if (w->due_tail == a) {
                w->due_tail = prev;
            }
            a->chain = NULL;
            if (tail != NULL) {
                tail->chain = a;
            } else {
                head = a;
            }
            tail = a;
            n++;
            bytes += arena_bytes(a);
            a = following;
            continue;
        }
        prev = a;
        a = following;
    }
    return head;
}

static void *emitter(void *arg)
{
    struct fc_dswin *w = arg;
    int64_t tick = w->o.window_ns / 10;

    if (tick > TICK_MAX_NS) {
        tick = TICK_MAX_NS;
    }
    if (tick < 10000000) {
        tick = 10000000;
    }
    pthread_mutex_lock(&w->lock);
    for (;;) {
        int64_t now = fc_now_mono_ns(), next = now + tick;
        struct acc *a;

        if (w->stopping) {
            close_expired(w, now, true);
            if (now >= w->stop_deadline) {
                break;
            }
        } else {
            close_expired(w, now, false);
        }
        a = take_due(w, now, &next);
        if (a != NULL) {
            send_group(w, a);
            continue;
        }
        if (w->stopping && w->due == NULL) {
            break;
        }
        if (w->stopping && next > w->stop_deadline) {
            next = w->stop_deadline;
        }
        struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
    }
    /* Past the deadline: what is left stays on disk (storage) or is lost (counted). */
    while (w->due != NULL) {
        struct acc *a = w->due;
        w->due = a->chain;
        if (w->persist == NULL) {
            fc_metric_add(w->self->dropped_samples, (int64_t)a->samples_in);
            fc_metric_add(w->lost_at_shutdown, (int64_t)a->samples_in);
            fc_log(FC_LOG_ERROR, "processor/downsample",
                   "%s: shutdown deadline passed, a window of %llu samples is lost", w->self->id,
                   (unsigned long long)a->samples_in);
        } else {
            for (uint32_t i = 0; i < a->n_recs; i++) {
                if (--a->recs[i]->pending == 0) {
                    free(a->recs[i]); /* not done: replayed on the next start */
                }
            }
        }
        w->bytes -= arena_bytes(a);
        w->n_windows--;
        free_acc(a);
    }
    w->due_tail = NULL;
    gauges(w);
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

/* ---- storage ------------------------------------------------------------------------------ */

/*
 * Encodes the n batches and appends them as n records (one fsync); out[i] is the record of
 * bs[i], holding it once (the request's own hold, released once it is in the windows).
 */
static int persist_batches(struct fc_dswin *w, struct fc_batch *const *bs, uint32_t n,
                           struct rec **out, struct fc_error *err)
{
    struct fc_send_item **items = fc_xcalloc(n, sizeof(*items));
    int rc = FC_OK;

    for (uint32_t i = 0; i < n; i++) {
        out[i] = NULL;
    }
    for (uint32_t i = 0; i < n && rc == FC_OK; i++) {
        struct fc_buf body;
        fc_buf_init(&body, 0);
        rc = fc_otlp_encode(bs[i], &body, err);
        if (rc == FC_OK) {
            items[i] = fc_send_item_new(bs[i]->tenant, "", body.len);
            if (body.len > 0) {
                memcpy(items[i]->body, body.data, body.len);
            }
            items[i]->samples = fc_batch_sample_count(bs[i]);
            items[i]->profiles = bs[i]->n_profiles;
        }
        fc_buf_release(&body);
    }
    if (rc == FC_OK) {
        pthread_mutex_lock(&w->plock);
        rc = fc_persist_append(w->persist, items, n, err);
        for (uint32_t i = 0; i < n && rc == FC_OK; i++) {
            out[i] = fc_xcalloc(1, sizeof(*out[i]));
            out[i]->pending = 1;
            if (!fc_persist_take(w->persist, &out[i]->ref)) {
                rc = fc_errorf(err, FC_EIO,
                               "downsample storage: the record just written is missing");
            }
        }
        pthread_mutex_unlock(&w->plock);
    }
    for (uint32_t i = 0; i < n; i++) {
        if (items[i] != NULL) {
            fc_send_item_free(items[i]);
        }
    }
    free(items);
    if (rc != FC_OK) {
        for (uint32_t i = 0; i < n; i++) {
            free(out[i]);
            out[i] = NULL;
        }
        return rc == FC_EIO ? fc_errorf(err, FC_EUNAVAIL, "downsample storage: %s", err->msg) : rc;
    }
    return FC_OK;
}

static int ingest_request(struct fc_dswin *w, const struct fc_batch *b, struct rec *r,
                          struct fc_error *err);

static void replay(struct fc_dswin *w)
{
    struct fc_persist_ref ref;

    while (fc_persist_take(w->persist, &ref)) {
        struct fc_send_item *it = NULL;
        struct fc_error err = {0};
        struct fc_otlp_result res = {0};
        struct fc_batch *b;
        struct rec *r;
        int rc;

        if (fc_persist_load(w->persist, &ref, &it, &err) != FC_OK) {
            continue; /* counted corrupt and done by the queue */
        }
        b = fc_batch_new(0);
        rc = b != NULL ? fc_batch_set_tenant(b, it->tenant) : FC_ETOOBIG;
        if (rc == FC_OK) {
            rc = fc_otlp_decode(b, it->body, it->body_len, &res, &err);
        }
        r = fc_xcalloc(1, sizeof(*r));
        r->ref = ref;
        r->pending = 1;
        if (rc == FC_OK) {
            rc = ingest_request(w, b, r, &err);
        }
        if (rc != FC_OK) {
            fc_log(FC_LOG_ERROR, "processor/downsample",
                   "%s: a stored record cannot be replayed: %s", w->self->id, err.msg);
            fc_metric_add(w->self->dropped_samples, (int64_t)it->samples);
        }
        fc_metric_add(w->replayed, 1);
        pthread_mutex_lock(&w->lock);
        if (--r->pending == 0) {
            fc_persist_done(w->persist, &r->ref);
            free(r);
        }
        pthread_mutex_unlock(&w->lock);
        fc_batch_unref(b);
        fc_send_item_free(it);
    }
}

/*
 * Profile i of b alone in a batch of its own, holding only the dictionary rows it uses: the
 * OTLP encoders write only those, so it is encoded alone (a shallow one-profile view of b)
 * and decoded again. Without this every window would take every row of a request that
 * carries many series (fc_batch_merge_profiles copies all of them).
 */
static int compact_one(const struct fc_batch *b, uint32_t i, struct fc_batch **out,
                       struct fc_error *err)
{
    struct fc_batch view = *b;
    struct fc_otlp_result res = {0};
    struct fc_buf body;
    struct fc_batch *c;
    int rc;

    *out = NULL;
    view.profiles = &b->profiles[i];
    view.n_profiles = 1;
    view.cap_profiles = 1;
    memset(&view.wire, 0, sizeof(view.wire));
    fc_buf_init(&body, 0);
    rc = fc_otlp_encode(&view, &body, err);
    c = fc_batch_new(0);
    if (rc == FC_OK) {
        rc = c != NULL ? fc_batch_set_tenant(c, b->tenant) : FC_ETOOBIG;
    }
    if (rc == FC_OK) {
        rc = fc_otlp_decode(c, body.data, body.len, &res, err);
    }
    if (rc == FC_OK && res.rejected_profiles > 0) {
        rc = fc_errorf(err, FC_EPROTO, "downsample window: %s", res.message);
    }
    fc_buf_release(&body);
    if (rc != FC_OK) {
        fc_batch_unref(c);
        return rc;
    }
    *out = c;
    return FC_OK;
}

/* ingest(), each profile of a request of several from a compact copy of its own. */
static int ingest_request(struct fc_dswin *w, const struct fc_batch *b, struct rec *r,
                          struct fc_error *err)
{
    int rc = FC_OK;

    if (b->n_profiles <= 1) {
        pthread_mutex_lock(&w->lock);
        rc = ingest(w, b, r, err);
        pthread_mutex_unlock(&w->lock);
        return rc;
    }
    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        struct fc_batch *c;
        rc = compact_one(b, i, &c, err);
        if (rc == FC_OK) {
            pthread_mutex_lock(&w->lock);
            rc = ingest(w, c, r, err);
            pthread_mutex_unlock(&w->lock);
            fc_batch_unref(c);
        }
    }
    return rc;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/*
 * With storage, a request of several profiles: each profile (compacted, as ingest_request
 * does) is a record of its own, so a record is held by its series' window only. A record of
 * the whole request would be replayed whole while one of its windows is unsent, and the
 * windows already accepted downstream would be delivered again.
 */
static int add_split(struct fc_dswin *w, const struct fc_batch *b, struct fc_error *err)
{
    uint32_t n = 0, cap = b->n_profiles;
    struct fc_batch **parts = fc_xcalloc(cap, sizeof(*parts));
    struct rec **recs;
    int rc = FC_OK;

    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        struct fc_batch *c;
        rc = compact_one(b, i, &c, err);
        if (rc != FC_OK) {
            break;
        }
        if (c->n_profiles <= 1) {
            if (n == cap) {
                cap *= 2;
                parts = fc_xrealloc(parts, cap * sizeof(*parts));
            }
            parts[n++] = c;
            continue;
        }
        /* A pprof profile of several sample types came back as one OTLP profile per type:
         * one series (and window) each, so one record each too. */
        for (uint32_t j = 0; j < c->n_profiles && rc == FC_OK; j++) {
            if (n == cap) {
                cap *= 2;
                parts = fc_xrealloc(parts, cap * sizeof(*parts));
            }
            rc = compact_one(c, j, &parts[n], err);
            n += rc == FC_OK;
        }
        fc_batch_unref(c);
    }
    recs = fc_xcalloc(n > 0 ? n : 1, sizeof(*recs));
    if (rc == FC_OK) {
        rc = persist_batches(w, parts, n, recs, err);
    }
    for (uint32_t i = 0; i < n && rc == FC_OK; i++) {
        pthread_mutex_lock(&w->lock);
        rc = ingest(w, parts[i], recs[i], err);
        pthread_mutex_unlock(&w->lock);
    }
    pthread_mutex_lock(&w->lock);
    for (uint32_t i = 0; i < n; i++) {
        if (recs[i] != NULL && --recs[i]->pending == 0) {
            fc_persist_done(w->persist, &recs[i]->ref);
            free(recs[i]);
        }
    }
    pthread_mutex_unlock(&w->lock);
    for (uint32_t i = 0; i < n; i++) {
        fc_batch_unref(parts[i]);
    }
    free(parts);
    free(recs);
    return rc;
}

int fc_dswin_add(struct fc_dswin *w, struct fc_batch *b, struct fc_error *err)
{
    struct rec *r = NULL;
    int64_t now = fc_now_ns();
    int rc;

    pthread_mutex_lock(&w->lock);
    if (w->stopping) {
        pthread_mutex_unlock(&w->lock);
        return fc_errorf(err, FC_EUNAVAIL, "downsample: shutting down");
    }
    if (w->bytes >= w->o.max_buffer_bytes) {
        int64_t bytes = w->bytes;
        pthread_mutex_unlock(&w->lock);
        fc_metric_add(w->refused_profiles, b->n_profiles);
        return fc_errorf(err, FC_EAGAIN,
                         "downsample: the window buffer is full (%lld bytes, max_buffer_bytes "
                         "%lld); retry later",
                         (long long)bytes, (long long)w->o.max_buffer_bytes);
    }
    pthread_mutex_unlock(&w->lock);
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        if (b->profiles[i].time_ns <= 0) {
            b->profiles[i].time_ns = now; /* as the store would file it */
            fc_batch_drop_wire(b);
        }
    }
    if (w->persist != NULL && b->n_profiles > 1) {
        return add_split(w, b, err);
    }
    if (w->persist != NULL) {
        rc = persist_batches(w, &b, 1, &r, err);
        if (rc != FC_OK) {
            return rc;
        }
    }
    rc = ingest_request(w, b, r, err);
    pthread_mutex_lock(&w->lock);
    if (r != NULL && --r->pending == 0) {
        fc_persist_done(w->persist, &r->ref);
        free(r);
    }
    pthread_mutex_unlock(&w->lock);
    return rc;
}

int fc_dswin_create(struct fc_processor *self, const struct fc_dswin_options *o,
                    struct fc_dswin **out, struct fc_error *err)
{
    struct fc_dswin *w;
    pthread_condattr_t attr;
    char labels[320];

    if (o->window_ns < 1000000) {
        return fc_errorf(err, FC_ECONFIG, "window: must be 0s (off) or at least 1ms");
    }
    if (o->max_buffer_bytes < 1) {
        return fc_errorf(err, FC_ECONFIG, "max_buffer_bytes: must be positive");
    }
    w = fc_xcalloc(1, sizeof(*w));
    w->self = self;
    w->o = *o;
    pthread_mutex_init(&w->lock, NULL);
    pthread_mutex_init(&w->plock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    w->table = fc_xcalloc(N_SLOTS, sizeof(*w->table));
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
#define C(var, name, help)                                                                         \
    w->var = fc_metrics_counter("flamecol_processor_downsample_" name, labels, help)
#define G(var, name, help)                                                                         \
    w->var = fc_metrics_gauge("flamecol_processor_downsample_" name, labels, help)
    C(profiles_in, "window_profiles_in_total", "Profiles put into a window.");
    C(profiles_out, "window_profiles_out_total",
      "Merged profiles (one per series and window) accepted downstream.");
    C(samples_merged, "window_merged_samples_total",
      "Samples summed into an equal sample of their window (nothing lost).");
    C(refused_profiles, "window_refused_profiles_total",
      "Profiles refused (retryable) because the buffer held max_buffer_bytes.");
    C(retries, "window_send_retries_total",
      "Retryable refusals downstream; the window is kept and sent again.");
    C(replayed, "window_replayed_records_total",
      "Stored requests replayed into the buffer at start.");
    C(lost_at_shutdown, "window_lost_samples_total",
      "Samples of in-memory windows not sent by the shutdown deadline (also counted dropped).");
    C(corrupt, "storage_corrupt_records_total", "Damaged regions of the storage skipped at start.");
    C(redelivered, "storage_redelivered_requests_total",
      "Stored requests replayed after they had been dispatched once.");
    C(fsyncs, "storage_fsyncs_total", "fdatasync calls of the storage.");
    G(buffer_bytes, "window_buffer_bytes", "Bytes held by open and unsent windows.");
    G(buffer_windows, "window_buffer_windows", "Open and unsent windows.");
#undef C
#undef G
    *out = w;
    return FC_OK;
}

int fc_dswin_start(struct fc_dswin *w, const struct fc_host *host, struct fc_error *err)
{
    w->grace_ns = host != NULL ? host->shutdown_grace_ns : 0;
    if (w->o.storage != NULL && w->o.storage[0] != '\0') {
        char component[200];
        struct fc_persist_options po = {0};
        int rc;
        snprintf(component, sizeof(component), "processor/%s", w->self->id);
        po.dir = w->o.storage;
        po.component = component;
        po.corrupt_records = w->corrupt;
        po.redelivered = w->redelivered;
        po.fsyncs = w->fsyncs;
        rc = fc_persist_open(&po, &w->persist, err);
        if (rc != FC_OK) {
            return fc_error_wrap(err, "storage");
        }
        replay(w);
    }
    if (pthread_create(&w->thread, NULL, emitter, w) != 0) {
        return fc_errorf(err, FC_EIO, "downsample: cannot start its thread");
    }
    w->started = true;
    return FC_OK;
}

void fc_dswin_shutdown(struct fc_dswin *w)
{
    if (w == NULL || !w->started) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->stopping = true;
    w->stop_deadline = fc_now_mono_ns() + (w->grace_ns > 0 ? w->grace_ns / 2 : 5000000000LL);
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    w->started = false;
}

void fc_dswin_destroy(struct fc_dswin *w)
{
    if (w == NULL) {
        return;
    }
    fc_dswin_shutdown(w);
    /* Not started, or stopped: only windows buffered without a thread may be left. */
    close_expired(w, 0, true);
    while (w->due != NULL) {
        struct acc *a = w->due;
        w->due = a->chain;
        for (uint32_t i = 0; i < a->n_recs; i++) {
            if (--a->recs[i]->pending == 0) {
                free(a->recs[i]);
            }
        }
        free_acc(a);
    }
    if (w->persist != NULL) {
        fc_persist_close(w->persist);
    }
    free(w->table);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    pthread_mutex_destroy(&w->plock);
    free(w);
}
