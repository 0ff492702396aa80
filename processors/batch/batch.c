/*
 * batch processor: the Collector's batch processor for profiles. Requests
 * are merged (fc_batch_merge: one string table, one function table, ...) into
 * a pending batch per key, which the rest of the pipeline (the processors
 * after this one, then the exporters) gets as one batch.
 *
 * Keys: the tenant, always (tenants never share a batch), then the values of
 * the series labels named in metadata_keys (missing = ""): a request whose
 * profiles have different values is split into one part per key. At most
 * metadata_cardinality_limit keys are pending at once; a request that would
 * open more is refused as retryable (429 / RESOURCE_EXHAUSTED).
 *
 * Acknowledgement: process() blocks the receiver's thread until every
 * pending batch the request joined has been through the exporters, and
 * returns their answer (the worst, as a pipeline does) after setting *batchp
 * to NULL (the request's own batch is not exported again). So a client is
 * answered only once its data is accepted downstream, and the processor never
 * holds acknowledged data.
 *
 * A pending batch is sent when it holds send_batch_size samples (size
 * trigger), or timeout after its first request joined (timeout trigger). The
 * thread that sends it is one of its own waiters (whichever gets there
 * first), so no thread of the processor's own is needed and nothing is
 * pending without a thread waiting for it. A request's added latency is thus
 * bounded by timeout (plus the export itself). With send_batch_max_size a
 * pending batch that a request would take over it is sent first, and the
 * request opens a new one; a request larger than the cap alone is sent alone,
 * unsplit. Shutdown sends whatever is pending at once.
 *
 * Concurrency is bounded by the listeners: a request waiting here holds its
 * listener's in-flight slot (service.http.max_in_flight), so at most that
 * many requests per listener join one batch.
 */
#include "core/component.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define MAX_CARDINALITY (1 << 20)

struct batch_config {
    int64_t send_batch_size;
    int64_t send_batch_max_size;
    int64_t timeout;
    struct fc_str_list metadata_keys;
    int64_t metadata_cardinality_limit;
};

static const struct fc_field batch_fields[] = {
    {"send_batch_size", FC_FIELD_INT, "8192", offsetof(struct batch_config, send_batch_size),
     "samples that send a pending batch at once (0 = only timeout sends)"},
    {"send_batch_max_size", FC_FIELD_INT, "0", offsetof(struct batch_config, send_batch_max_size),
     "largest batch sent, in samples (0 = no cap; else at least send_batch_size): a pending "
     "batch a request would take over it is sent first; a request larger alone is sent alone"},
    {"timeout", FC_FIELD_DURATION, "200ms", offsetof(struct batch_config, timeout),
     "a pending batch is sent this long after its first request joined: the most a request "
     "waits before its batch is exported (its answer waits for the exporters)"},
    {"metadata_keys", FC_FIELD_STR_LIST, NULL, offsetof(struct batch_config, metadata_keys),
     "series labels whose values also key batches (the tenant always does: tenants never "
     "share a batch); a request with several values is split"},
    {"metadata_cardinality_limit", FC_FIELD_INT, "1000",
     offsetof(struct batch_config, metadata_cardinality_limit),
     "keys (tenant and metadata_keys values) pending at once; a request that would add one "
     "more is refused with 429 / RESOURCE_EXHAUSTED"},
    {NULL},
};

enum trigger { T_NONE, T_SIZE, T_TIMEOUT };

/* A pending batch: one key's merged requests, and the answer once sent. */
struct pend {
    struct pend *chain; /* table bucket, while open */
    uint64_t hash;
    char *key; /* tenant \0 value \0 value ... */
    size_t key_len;
    struct fc_batch *batch;
    uint64_t samples;
    int64_t deadline; /* CLOCK_MONOTONIC ns */
    bool open;        /* in the table: requests may join */
    bool due;         /* to be sent now (size, cap, shutdown) */
    bool taken;       /* a waiter is sending it */
    bool done;
    enum trigger trigger;
    int refs; /* waiters holding it */
    int rc;
    struct fc_error err;
};

struct batcher {
    const struct batch_config *cfg;
    struct fc_processor *self;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* CLOCK_MONOTONIC; broadcast when a batch is due or done */
    struct pend **table;
    size_t n_slots; /* power of two */
    size_t n_open;
    bool stopping;
    _Atomic int64_t *send_size_sum, *send_size_count, *size_trigger, *timeout_trigger;
    _Atomic int64_t *cardinality;
};

/* One part of a request: the profiles with one key. */
struct part {
    char *key;
    size_t key_len;
    uint64_t hash;
    uint32_t *which; /* profile indices */
    uint32_t n;
    uint64_t samples;
    struct pend *pend;
};

/* ---- keys --------------------------------------------------------------------------------- */

static char *profile_key(const struct batcher *B, const struct fc_batch *b,
                         const struct fc_profile *p, size_t *len)
{
    size_t n = strlen(b->tenant) + 1;
    char *key;
    size_t at;

    for (size_t i = 0; i < B->cfg->metadata_keys.n; i++) {
        const char *v = fc_profile_label(b, p, B->cfg->metadata_keys.items[i]);
        n += (v != NULL ? strlen(v) : 0) + 1;
    }
    key = fc_xcalloc(1, n);
    at = strlen(b->tenant) + 1;
    memcpy(key, b->tenant, at);
    for (size_t i = 0; i < B->cfg->metadata_keys.n; i++) {
        const char *v = fc_profile_label(b, p, B->cfg->metadata_keys.items[i]);
        size_t l = v != NULL ? strlen(v) : 0;
        if (l > 0) {
            memcpy(key + at, v, l);
        }
        at += l + 1;
    }
    *len = n;
    return key;
}

static void free_parts(struct part *parts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(parts[i].key);
        free(parts[i].which);
    }
    free(parts);
}

/*
 * Groups the batch's profiles by key; returns the number of parts, or
 * SIZE_MAX (and no parts) when they are more than `limit`: no set of pending
 * batches could ever take such a request. Memory grows with what is found,
 * so a request of many profiles with distinct keys costs no more than `limit` parts.
 */
static size_t split(const struct batcher *B, const struct fc_batch *b, size_t limit,
                    struct part **out)
{
    size_t cap = 4, n = 0;
    struct part *parts = fc_xcalloc(cap, sizeof(*parts));
    uint32_t *caps = fc_xcalloc(cap, sizeof(*caps)); /* room in each part's `which` */

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        size_t len, j;
        char *key = profile_key(B, b, &b->profiles[i], &len);
        uint64_t h = XXH3_64bits(key, len);
        for (j = 0; j < n; j++) {
            if (parts[j].hash == h && parts[j].key_len == len &&
                memcmp(parts[j].key, key, len) == 0) {
                break;
            }
        }
        if (j < n) {
            free(key);
        } else {
            if (n == limit) {
                free(key);
                free(caps);
                free_parts(parts, n);
                *out = NULL;
                return SIZE_MAX;
            }
            if (n == cap) {
                parts = fc_xrealloc(parts, 2 * cap * sizeof(*parts));
                caps = fc_xrealloc(caps, 2 * cap * sizeof(*caps));
                memset(parts + cap, 0, cap * sizeof(*parts));
                memset(caps + cap, 0, cap * sizeof(*caps));
                cap *= 2;
            }
            parts[n].key = key;
            parts[n].key_len = len;
            parts[n].hash = h;
            n++;
        }
        if (parts[j].n == caps[j]) {
            caps[j] = caps[j] ? 2 * caps[j] : 4;
            parts[j].which = fc_xrealloc(parts[j].which, caps[j] * sizeof(uint32_t));
        }
        parts[j].which[parts[j].n++] = i;
        parts[j].samples += b->profiles[i].n_samples;
    }
    free(caps);
    *out = parts;
    return n;
}

/* ---- pending batches (caller holds the lock) ---------------------------------------------- */

static struct pend *find_open(struct batcher *B, const struct part *pt)
{
    for (struct pend *p = B->table[pt->hash & (B->n_slots - 1)]; p != NULL; p = p->chain) {
        if (p->hash == pt->hash && p->key_len == pt->key_len &&
            memcmp(p->key, pt->key, pt->key_len) == 0) {
            return p;
        }
    }
    return NULL;
}

/* Takes p out of the table: no request joins it any more. */
static void close_pend(struct batcher *B, struct pend *p, bool due, enum trigger t)
{
    if (p->open) {
        struct pend **pp = &B->table[p->hash & (B->n_slots - 1)];
        while (*pp != p) {
            pp = &(*pp)->chain;
        }
        *pp = p->chain;
        p->open = false;
        B->n_open--;
        fc_metric_set(B->cardinality, (int64_t)B->n_open);
        p->trigger = t;
    }
    if (due) {
        p->due = true;
        pthread_cond_broadcast(&B->cond);
    }
}

static struct pend *open_pend(struct batcher *B, const struct part *pt, const char *tenant)
{
    struct pend *p = fc_xcalloc(1, sizeof(*p));
    size_t slot = pt->hash & (B->n_slots - 1);

    p->batch = fc_batch_new(0);
    if (p->batch == NULL || fc_batch_set_tenant(p->batch, tenant) != FC_OK) {
        fc_batch_unref(p->batch);
        free(p);
        return NULL;
    }
    p->key = fc_xcalloc(1, pt->key_len);
    memcpy(p->key, pt->key, pt->key_len);
    p->key_len = pt->key_len;
    p->hash = pt->hash;
    p->deadline = fc_now_mono_ns() + B->cfg->timeout;
    p->open = true;
    p->chain = B->table[slot];
    B->table[slot] = p;
    B->n_open++;
    fc_metric_set(B->cardinality, (int64_t)B->n_open);
    return p;
}

static void pend_release(struct pend *p)
{
    if (--p->refs == 0) {
        fc_batch_unref(p->batch);
        free(p->key);
        free(p);
    }
}

/* Sends p through the rest of the pipeline; called with the lock held, drops it meanwhile. */
static void send_pend(struct batcher *B, struct pend *p, enum trigger t)
{
    struct fc_batch *b = p->batch;
    struct fc_error err = {0};
    int rc;

    close_pend(B, p, false, t);
    p->taken = true;
    p->batch = NULL;
    pthread_mutex_unlock(&B->lock);
    fc_metric_add(B->send_size_sum, (int64_t)p->samples);
    fc_metric_add(B->send_size_count, 1);
    if (p->trigger == T_SIZE) {
        fc_metric_add(B->size_trigger, 1);
    } else if (p->trigger == T_TIMEOUT) {
        fc_metric_add(B->timeout_trigger, 1);
    }
    rc = fc_processor_next(B->self, b, &err);
    pthread_mutex_lock(&B->lock);
    p->rc = rc;
    p->err = err;
    p->done = true;
    pthread_cond_broadcast(&B->cond);
}

/* Waits until every part's batch has been sent, sending those that are due. */
static void wait_parts(struct batcher *B, struct part *parts, size_t n)
{
    for (;;) {
        int64_t now = fc_now_mono_ns();
        int64_t next = INT64_MAX;
        struct pend *send = NULL;
        enum trigger t = T_NONE;
        bool all_done = true;

        for (size_t i = 0; i < n && send == NULL; i++) {
            struct pend *p = parts[i].pend;
            if (p == NULL || p->done) {
                continue;
            }
            all_done = false;
            if (p->taken) {
                continue;
            }
            if (p->due || B->stopping) {
                send = p;
                t = p->open ? T_NONE : p->trigger;
            } else if (now >= p->deadline) {
                send = p;
                t = T_TIMEOUT;
            } else if (p->deadline < next) {
                next = p->deadline;
            }
        }
        if (all_done) {
            return;
        }
        if (send != NULL) {
            send_pend(B, send, t);
            continue;
        }
        if (next == INT64_MAX) {
            pthread_cond_wait(&B->cond, &B->lock);
        } else {
            struct timespec ts = {(time_t)(next / 1000000000), (long)(next % 1000000000)};
            pthread_cond_timedwait(&B->cond, &B->lock, &ts);
        }
    }
}

/* ---- process ------------------------------------------------------------------------------ */

static int batch_process(struct fc_processor *self, struct fc_batch **batchp, struct fc_error *err)
{
    struct batcher *B = self->ctx;
    const struct batch_config *cfg = B->cfg;
    struct fc_batch *b = *batchp;
    struct part *parts = NULL;
    size_t n_split, n_parts;
    size_t n_new = 0;
    int rc = FC_OK;

    if (b->n_profiles == 0) {
        return FC_OK; /* nothing to merge: on as it is */
    }
    n_split = n_parts = split(B, b, (size_t)cfg->metadata_cardinality_limit, &parts);
    if (n_split == SIZE_MAX) {
        /* Permanent: the request alone has more keys than may ever be pending. */
        return fc_errorf(err, FC_ETOOBIG,
                         "tenant \"%s\": one request holds more batcher metadata-value "
                         "combinations than metadata_cardinality_limit (%lld)",
                         b->tenant, (long long)cfg->metadata_cardinality_limit);
    }
    pthread_mutex_lock(&B->lock);
    for (size_t i = 0; i < n_parts; i++) {
        n_new += find_open(B, &parts[i]) == NULL;
    }
    if (B->n_open + n_new > (size_t)cfg->metadata_cardinality_limit) {
        rc = fc_errorf(err, FC_EAGAIN,
                       "tenant \"%s\": too many batcher metadata-value combinations (%zu pending, "
                       "metadata_cardinality_limit %lld)",
                       b->tenant, B->n_open, (long long)cfg->metadata_cardinality_limit);
        n_parts = 0;
    }
    for (size_t i = 0; i < n_parts && rc == FC_OK; i++) {
        struct part *pt = &parts[i];
        struct pend *p = find_open(B, pt);
        if (p != NULL && cfg->send_batch_max_size > 0 && p->samples > 0 &&
            p->samples + pt->samples > (uint64_t)cfg->send_batch_max_size) {
            close_pend(B, p, true, T_SIZE); /* its waiters send it; this part starts anew */
            p = NULL;
        }
        if (p == NULL && (p = open_pend(B, pt, b->tenant)) == NULL) {
            rc = fc_errorf(err, FC_ETOOBIG, "tenant \"%s\": cannot start a batch", b->tenant);
            break;
        }
        rc = fc_batch_merge_profiles(p->batch, b, pt->which, pt->n, err);
        if (rc != FC_OK) {
            if (p->samples == 0 && p->refs == 0) {
                close_pend(B, p, false, T_NONE);
                p->refs = 1;
                pend_release(p);
            }
            break;
        }
        p->samples += pt->samples;
        p->refs++;
        pt->pend = p;
        if (cfg->send_batch_size > 0 && p->samples >= (uint64_t)cfg->send_batch_size) {
            close_pend(B, p, true, T_SIZE);
        }
    }
    /* Parts already joined are sent with their batch: wait for them even after an error. */
    wait_parts(B, parts, n_parts);
    for (size_t i = 0; i < n_parts; i++) {
        struct pend *p = parts[i].pend;
        if (p != NULL) {
            if (p->rc != FC_OK && fc_err_worse(rc, p->rc) != rc) {
                rc = p->rc;
                *err = p->err;
            }
            pend_release(p);
        }
    }
    pthread_mutex_unlock(&B->lock);
    free_parts(parts, n_split);
    /* Sent within the merged batches (or refused): never again on its own. */
    fc_batch_unref(b);
    *batchp = NULL;
    return rc;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

static void batch_shutdown(struct fc_processor *self)
{
    struct batcher *B = self->ctx;

    pthread_mutex_lock(&B->lock);
    B->stopping = true; /* whatever is pending is sent now by its waiters */
    pthread_cond_broadcast(&B->cond);
    pthread_mutex_unlock(&B->lock);
}

static void batch_destroy(struct fc_processor *self)
{
    struct batcher *B = self->ctx;

    if (B == NULL) {
        return;
    }
    /* Every pending batch belongs to a request still waiting: none is left by now. */
    free(B->table);
    pthread_cond_destroy(&B->cond);
    pthread_mutex_destroy(&B->lock);
    free(B);
    self->ctx = NULL;
}

static int batch_create(struct fc_processor *self, struct fc_error *err)
{
    const struct batch_config *cfg = self->config;
    struct batcher *B;
    pthread_condattr_t attr;
    char labels[384];

    if (cfg->send_batch_size < 0 || cfg->send_batch_size > UINT32_MAX) {
        return fc_errorf(err, FC_ECONFIG, "send_batch_size: %lld is not between 0 and %u",
                         (long long)cfg->send_batch_size, UINT32_MAX);
    }
    if (cfg->send_batch_max_size < 0 ||
        (cfg->send_batch_max_size > 0 && cfg->send_batch_max_size < cfg->send_batch_size)) {
        return fc_errorf(err, FC_ECONFIG,
                         "send_batch_max_size (%lld) must be 0 (no cap) or greater or equal to "
                         "send_batch_size (%lld)",
                         (long long)cfg->send_batch_max_size, (long long)cfg->send_batch_size);
    }
    if (cfg->timeout <= 0) {
        return fc_errorf(err, FC_ECONFIG, "timeout: must be positive");
    }
    if (cfg->metadata_cardinality_limit < 1 || cfg->metadata_cardinality_limit > MAX_CARDINALITY) {
        return fc_errorf(err, FC_ECONFIG,
                         "metadata_cardinality_limit: %lld is not between 1 and %d",
                         (long long)cfg->metadata_cardinality_limit, MAX_CARDINALITY);
    }
    for (size_t i = 0; i < cfg->metadata_keys.n; i++) {
        if (cfg->metadata_keys.items[i][0] == '\0') {
            return fc_errorf(err, FC_ECONFIG, "metadata_keys[%zu]: empty label name", i);
        }
    }
    B = fc_xcalloc(1, sizeof(*B));
    B->cfg = cfg;
    B->self = self;
    pthread_mutex_init(&B->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&B->cond, &attr);
    pthread_condattr_destroy(&attr);
    B->n_slots = 64;
    while (B->n_slots < (size_t)cfg->metadata_cardinality_limit) {
        B->n_slots *= 2;
    }
    B->table = fc_xcalloc(B->n_slots, sizeof(*B->table));
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
    B->send_size_sum = fc_metrics_counter("flamecol_processor_batch_batch_send_size_sum", labels,
                                          "Samples in the batches the batch processor sent.");
    B->send_size_count = fc_metrics_counter("flamecol_processor_batch_batch_send_size_count",
                                            labels, "Batches the batch processor sent.");
    B->size_trigger =
        fc_metrics_counter("flamecol_processor_batch_batch_size_trigger_send_total", labels,
                           "Batches sent because they reached send_batch_size (or the next "
                           "request would take them over send_batch_max_size).");
    B->timeout_trigger = fc_metrics_counter("flamecol_processor_batch_timeout_trigger_send_total",
                                            labels, "Batches sent because timeout passed.");
    B->cardinality = fc_metrics_gauge("flamecol_processor_batch_metadata_cardinality", labels,
                                      "Keys (tenant and metadata_keys values) pending now.");
    self->ctx = B;
    return FC_OK;
}

const struct fc_processor_type fc_batch_processor = {
    .info = {"batch",
             "merges requests into larger batches (one dictionary) per tenant by size and time; "
             "a request is answered once its batch is exported",
             FC_STABILITY_ALPHA, batch_fields, sizeof(struct batch_config)},
    .create = batch_create,
    .process = batch_process,
    .shutdown = batch_shutdown,
    .destroy = batch_destroy,
    .preserves_batch = false,
    /* Requests sent within a merged batch are not drops. */
    .counts_dropped = true,
};
