/*
 * limits processor: Pyroscope's per-tenant limits, with its key names and
 * defaults, a `default:` set and `overrides: {tenant: {...}}` (an override
 * names only the keys it changes; the others are the default's).
 *
 * Per batch (one request, one tenant: batch->tenant), in this order:
 *   1. Size: every profile's size is estimated as the bytes of the
 *      uncompressed pprof it would encode to (see profile_size): its samples
 *      (location ids, values, labels, timestamps) plus every location,
 *      function, mapping and string it references, each once; plus its
 *      series labels. The request's size is the sum.
 *   2. Rate: a token bucket per tenant (ingestion_rate_mb MiB/s, holding at
 *      most ingestion_burst_size_mb MiB, full at first sight) pays for the
 *      request. Short of tokens the request is refused as retryable
 *      (FC_EAGAIN: 429 / RESOURCE_EXHAUSTED with the receiver's Retry-After),
 *      reason `rate_limited`. A request larger than the whole burst can never
 *      pass: it is refused as permanent (FC_ETOOBIG, 413), same reason.
 *   3. Validation, as Pyroscope's distributor: a profile with more series
 *      labels than max_label_names_per_series, a longer label name or value,
 *      or larger than max_profile_size_bytes refuses the whole request
 *      (FC_EPROTO 400 / INVALID_ARGUMENT, FC_ETOOBIG 413 for the size), so the
 *      client learns it; every sample and byte of the request is counted as
 *      discarded with the reason (`max_label_names_per_series`,
 *      `label_name_too_long`, `label_value_too_long`, `profile_size`).
 *   4. Changes that keep the data (counted, nothing discarded):
 *      - symbols (function name, system name and file name, mapping file
 *        name and build id) longer than max_profile_symbol_value_length keep
 *        their last bytes, as Pyroscope does (cut on a UTF-8 boundary);
 *      - stacks deeper than max_profile_stacktrace_depth keep their
 *        root-most depth-1 frames under one leaf frame named `other` that
 *        marks the cut (Pyroscope cuts without a mark);
 *      - a profile with more samples than max_profile_stacktrace_samples keeps
 *        its heaviest limit-1 samples (by the first sample type's value, ties
 *        by position) and sums the rest, per sample type, into one sample
 *        whose stack is the single frame `other`: totals are exact.
 *
 * Every limit is per tenant; 0 turns a limit off. Counters carry the tenant
 * as a label for at most max_tenant_labels tenants (metrics cardinality is a
 * DoS vector); later tenants are counted as tenant="other". Token buckets are
 * kept for at most max_tenants tenants, least recently used evicted (an
 * evicted tenant comes back with a full bucket, which an idle tenant would
 * have had anyway once burst/rate seconds passed).
 *
 * process() runs on many receiver threads at once: the buckets and the label
 * table are behind one mutex, held only for a lookup; everything else works on
 * the batch, which is this chain's own.
 */
#include "core/component.h"
#include "core/mem.h"
#include "core/sat.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>

#define BYTES_IN_MB 1048576.0 /* Pyroscope's bytesInMB */
#define MAX_TRACKED (1 << 22)

struct tenant_limits {
    int64_t max_label_names_per_series;
    int64_t max_label_name_length;
    int64_t max_label_value_length;
    int64_t max_profile_size_bytes;
    int64_t max_profile_stacktrace_samples;
    int64_t max_profile_stacktrace_depth;
    int64_t max_profile_symbol_value_length;
    double ingestion_rate_mb;
    double ingestion_burst_size_mb;
};

#define TL(m) offsetof(struct tenant_limits, m)
static const struct fc_field tenant_fields[] = {
    {"max_label_names_per_series", FC_FIELD_INT, "30", TL(max_label_names_per_series),
     "series labels a profile may have (including service_name and __name__); more refuses "
     "the request (reason `max_label_names_per_series`)"},
    {"max_label_name_length", FC_FIELD_INT, "1024", TL(max_label_name_length),
     "longest series label name in bytes; longer refuses the request (reason "
     "`label_name_too_long`)"},
    {"max_label_value_length", FC_FIELD_INT, "2048", TL(max_label_value_length),
     "longest series label value in bytes; longer refuses the request (reason "
     "`label_value_too_long`)"},
    {"max_profile_size_bytes", FC_FIELD_SIZE, "4MiB", TL(max_profile_size_bytes),
     "largest profile, as the bytes of the uncompressed pprof it encodes to (samples and "
     "every location, function, mapping and string they use, plus series labels); larger "
     "refuses the request with 413 (reason `profile_size`)"},
    {"max_profile_stacktrace_samples", FC_FIELD_INT, "16000", TL(max_profile_stacktrace_samples),
     "samples per profile: beyond it the heaviest limit-1 are kept and the rest summed into "
     "one `other` sample (totals exact)"},
    {"max_profile_stacktrace_depth", FC_FIELD_INT, "1000", TL(max_profile_stacktrace_depth),
     "frames per stack (0, or at least 2): deeper stacks keep their root-most depth-1 frames "
     "under a leaf frame `other`"},
    {"max_profile_symbol_value_length", FC_FIELD_INT, "65535", TL(max_profile_symbol_value_length),
     "longest function name, system name, file name, mapping file or build id in bytes; "
     "longer ones keep their last bytes, as Pyroscope does"},
    {"ingestion_rate_mb", FC_FIELD_FLOAT, "4", TL(ingestion_rate_mb),
     "MiB per second of profiles (as max_profile_size_bytes measures them) a tenant may send; "
     "over it requests get 429 / RESOURCE_EXHAUSTED with Retry-After (reason `rate_limited`)"},
    {"ingestion_burst_size_mb", FC_FIELD_FLOAT, "2", TL(ingestion_burst_size_mb),
     "MiB a tenant may send at once above the rate; a request larger than this can never "
     "pass (413), so set it at least to the largest request expected"},
    {NULL},
};
#undef TL

struct limits_config {
    struct tenant_limits dflt;
    const struct fc_node *overrides;
    int64_t max_tenants;
    int64_t max_tenant_labels;
};

static const struct fc_field limits_fields[] = {
    {"default", FC_FIELD_OBJECT, NULL, offsetof(struct limits_config, dflt),
     "the limits of every tenant without an override", tenant_fields},
    {"overrides", FC_FIELD_NODE, "{}", offsetof(struct limits_config, overrides),
     "per tenant (X-Scope-OrgID; `anonymous` without one): a map of the `default` keys it "
     "changes"},
    {"max_tenants", FC_FIELD_INT, "10000", offsetof(struct limits_config, max_tenants),
     "tenants whose rate-limit bucket is kept (least recently used evicted)"},
    {"max_tenant_labels", FC_FIELD_INT, "1000", offsetof(struct limits_config, max_tenant_labels),
     "tenants counted under their own `tenant` label; later ones are counted as "
     "tenant=\"other\""},
    {NULL},
};

/* ---- reasons and counters ----------------------------------------------------------------- */

enum reason {
    R_LABEL_NAMES,
    R_LABEL_NAME_LEN,
    R_LABEL_VALUE_LEN,
    R_PROFILE_SIZE,
    R_RATE,
    N_DISCARD,
    R_MAX_SAMPLES = N_DISCARD, /* truncations: counted, nothing discarded */
    R_DEPTH,
    R_SYMBOL,
    N_REASONS
};

static const char *const reason_names[N_REASONS] = {
    "max_label_names_per_series",
    "label_name_too_long",
    "label_value_too_long",
    "profile_size",
    "rate_limited",
    "max_samples",
    "stacktrace_depth",
    "symbol_value_length",
};

/* The counters of one tenant label value, registered when first used. */
struct tlabel {
    struct tlabel *chain;
    uint64_t hash;
    _Atomic int64_t *samples[N_REASONS]; /* discarded (< N_DISCARD) or truncated samples */
    _Atomic int64_t *bytes[N_DISCARD];
    char name[];
};

/* A tenant's token bucket. */
struct bucket {
    struct bucket *chain;
    struct bucket *prev, *next; /* LRU, most recent first */
    uint64_t hash;
    double tokens;
    int64_t last_ns;
    char name[];
};

struct override {
    const char *tenant;
    struct tenant_limits l;
};

struct limits {
    const struct limits_config *cfg;
    const char *id, *pipeline;
    struct override *overrides; /* sorted by tenant */
    size_t n_overrides;

    pthread_mutex_t lock;
    struct bucket **buckets;
    size_t n_bucket_slots; /* power of two */
    size_t n_buckets;
    struct bucket *head, *tail;
    struct tlabel **labels;
    size_t n_label_slots; /* power of two */
    size_t n_labels;
    struct tlabel *other; /* tenant="other" */
};

static size_t pow2_at_least(size_t n)
{
    size_t c = 16;

    while (c < n) {
        c *= 2;
    }
    return c;
}

static uint64_t name_hash(const char *s)
{
    return XXH3_64bits(s, strlen(s));
}

static struct tlabel *tlabel_new(const char *name, uint64_t h)
{
    size_t len = strlen(name);
    struct tlabel *t = fc_xcalloc(1, sizeof(*t) + len + 1);

    t->hash = h;
    memcpy(t->name, name, len + 1);
    return t;
}

/* The counter for (tenant, reason); bytes: the discarded bytes one. Caller holds no lock. */
static _Atomic int64_t *counter(struct limits *L, const char *tenant, enum reason r, bool bytes)
{
    uint64_t h = name_hash(tenant);
    struct tlabel *t;
    _Atomic int64_t **slot;
    _Atomic int64_t *c;

    pthread_mutex_lock(&L->lock);
    for (t = L->labels[h & (L->n_label_slots - 1)]; t != NULL; t = t->chain) {
        if (t->hash == h && strcmp(t->name, tenant) == 0) {
            break;
        }
    }
    if (t == NULL && L->n_labels < (size_t)L->cfg->max_tenant_labels) {
        t = tlabel_new(tenant, h);
        t->chain = L->labels[h & (L->n_label_slots - 1)];
        L->labels[h & (L->n_label_slots - 1)] = t;
        L->n_labels++;
    } else if (t == NULL) {
        t = L->other;
    }
    slot = bytes ? &t->bytes[r] : &t->samples[r];
    if (*slot == NULL) {
        char labels[512];
        snprintf(labels, sizeof(labels),
                 "processor=\"%s\",pipeline=\"%s\",reason=\"%s\",tenant=\"%s\"", L->id, L->pipeline,
                 reason_names[r], t->name);
        if (bytes) {
            *slot = fc_metrics_counter("flamecol_processor_discarded_bytes_total", labels,
                                       "Bytes (as max_profile_size_bytes measures them) of "
                                       "requests the limits processor refused, by reason and "
                                       "tenant.");
        } else if (r < N_DISCARD) {
            *slot = fc_metrics_counter("flamecol_processor_discarded_samples_total", labels,
                                       "Samples of requests the limits processor refused, by "
                                       "reason and tenant.");
        } else if (r == R_SYMBOL) {
            *slot = fc_metrics_counter("flamecol_processor_limits_truncated_symbols_total", labels,
                                       "Symbols cut to max_profile_symbol_value_length.");
        } else {
            *slot = fc_metrics_counter(
                "flamecol_processor_limits_truncated_samples_total", labels,
                "Samples the limits processor changed without discarding data: folded into "
                "`other` (max_samples) or whose stack was cut (stacktrace_depth).");
        }
    }
    c = *slot;
    pthread_mutex_unlock(&L->lock);
    return c;
}

static void count(struct limits *L, const char *tenant, enum reason r, int64_t samples,
                  int64_t bytes)
{
    fc_metric_add(counter(L, tenant, r, false), samples);
    if (r < N_DISCARD) {
        fc_metric_add(counter(L, tenant, r, true), bytes);
    }
}

/* ---- token buckets ------------------------------------------------------------------------ */

static void lru_unlink(struct limits *L, struct bucket *e)
{
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        L->head = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    } else {
        L->tail = e->prev;
    }
}

static void lru_push_front(struct limits *L, struct bucket *e)
{
    e->prev = NULL;
    e->next = L->head;
    if (L->head != NULL) {
        L->head->prev = e;
    } else {
        L->tail = e;
    }
    L->head = e;
}

/*
 * Takes size bytes from the tenant's bucket: FC_OK, or FC_EAGAIN with *wait_s
 * the seconds until it would have them. Caller holds no lock.
 */
static int bucket_take(struct limits *L, const char *tenant, double rate, double burst, double size,
                       double *wait_s)
{
    uint64_t h = name_hash(tenant);
    int64_t now = fc_now_mono_ns();
    struct bucket *e;
    int rc = FC_OK;

    pthread_mutex_lock(&L->lock);
    for (e = L->buckets[h & (L->n_bucket_slots - 1)]; e != NULL; e = e->chain) {
        if (e->hash == h && strcmp(e->name, tenant) == 0) {
            break;
        }
    }
    if (e == NULL) {
        size_t len = strlen(tenant);
        if (L->n_buckets == (size_t)L->cfg->max_tenants) {
            struct bucket *old = L->tail;
            struct bucket **pp = &L->buckets[old->hash & (L->n_bucket_slots - 1)];
            while (*pp != old) {
                pp = &(*pp)->chain;
            }
            *pp = old->chain;
            lru_unlink(L, old);
            free(old);
            L->n_buckets--;
        }
        e = fc_xcalloc(1, sizeof(*e) + len + 1);
        memcpy(e->name, tenant, len + 1);
        e->hash = h;
        e->tokens = burst;
        e->last_ns = now;
        e->chain = L->buckets[h & (L->n_bucket_slots - 1)];
        L->buckets[h & (L->n_bucket_slots - 1)] = e;
        L->n_buckets++;
    } else {
        lru_unlink(L, e);
    }
    lru_push_front(L, e);
    if (now > e->last_ns) {
        e->tokens += rate * (double)(now - e->last_ns) / 1e9;
        e->last_ns = now;
    }
    if (e->tokens > burst) {
        e->tokens = burst;
    }
    if (e->tokens >= size) {
        e->tokens -= size;
    } else {
        *wait_s = (size - e->tokens) / rate;
        rc = FC_EAGAIN;
    }
    pthread_mutex_unlock(&L->lock);
    return rc;
}

/* ---- sizes -------------------------------------------------------------------------------- */

static uint64_t varint_len(uint64_t v)
{
    uint64_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* A length-delimited field of n bytes: tag, length, payload. */
static uint64_t ld_len(uint64_t n)
{
    return 1 + varint_len(n) + n;
}

/* Stamps: which rows the profile being measured already paid for (stamp = profile + 1). */
struct marks {
    uint32_t *strings, *functions, *locations, *mappings, *stacks;
    uint64_t *stack_bytes; /* location ids of a stack, encoded */
};

static uint64_t str_bytes(const struct fc_batch *b, struct marks *m, uint32_t s, uint32_t stamp)
{
    if (s == 0 || m->strings[s] == stamp) {
        return 0;
    }
    m->strings[s] = stamp;
    return ld_len(b->dict.str_len[s]);
}

static uint64_t function_bytes(const struct fc_batch *b, struct marks *m, uint32_t f,
                               uint32_t stamp)
{
    const struct fc_function *fn = &b->dict.functions[f];

    if (f == 0 || m->functions[f] == stamp) {
        return 0;
    }
    m->functions[f] = stamp;
    /* Function{id, name, system_name, filename, start_line} + the strings */
    return ld_len(2 + varint_len(f) + 1 + varint_len(fn->name) + 1 + varint_len(fn->system_name) +
                  1 + varint_len(fn->filename) + 1 + varint_len((uint64_t)fn->start_line)) +
           str_bytes(b, m, fn->name, stamp) + str_bytes(b, m, fn->system_name, stamp) +
           str_bytes(b, m, fn->filename, stamp);
}

static uint64_t mapping_bytes(const struct fc_batch *b, struct marks *m, uint32_t i, uint32_t stamp)
{
    const struct fc_mapping *mp = &b->dict.mappings[i];

    if (i == 0 || m->mappings[i] == stamp) {
        return 0;
    }
    m->mappings[i] = stamp;
    return ld_len(1 + varint_len(i) + 1 + varint_len(mp->memory_start) + 1 +
                  varint_len(mp->memory_limit) + 1 + varint_len(mp->file_offset) + 1 +
                  varint_len(mp->filename) + 1 + varint_len(mp->build_id) + 4) +
           str_bytes(b, m, mp->filename, stamp) + str_bytes(b, m, mp->build_id, stamp);
}

static uint64_t location_bytes(const struct fc_batch *b, struct marks *m, uint32_t i,
                               uint32_t stamp)
{
    const struct fc_location *loc = &b->dict.locations[i];
    uint64_t n;

    if (m->locations[i] == stamp) {
        return 0;
    }
    m->locations[i] = stamp;
    n = 1 + varint_len(i) + 1 + varint_len(loc->mapping) + 1 + varint_len(loc->address);
    for (uint32_t j = 0; j < loc->n_lines; j++) {
        const struct fc_line *ln = &b->dict.lines[loc->lines_off + j];
        n += ld_len(1 + varint_len(ln->function) + 1 + varint_len((uint64_t)ln->line));
    }
    n = ld_len(n) + mapping_bytes(b, m, loc->mapping, stamp);
    for (uint32_t j = 0; j < loc->n_lines; j++) {
        n += function_bytes(b, m, b->dict.lines[loc->lines_off + j].function, stamp);
    }
    return n;
}

/* Sample.location_id of stack s (packed), and the locations the profile has not paid for yet. */
static uint64_t stack_bytes(const struct fc_batch *b, struct marks *m, uint32_t s, uint32_t stamp,
                            uint64_t *dict_bytes)
{
    struct fc_span span = b->dict.stacks[s].locations;
    const uint32_t *ids = fc_span_idx(b, span);
    uint64_t ids_len = 0;

    if (m->stacks[s] == stamp) {
        return m->stack_bytes[s];
    }
    m->stacks[s] = stamp;
    for (uint32_t i = 0; i < span.n; i++) {
        ids_len += varint_len(ids[i]);
        *dict_bytes += location_bytes(b, m, ids[i], stamp);
    }
    m->stack_bytes[s] = span.n > 0 ? ld_len(ids_len) : 0;
    return m->stack_bytes[s];
}

/*
 * The bytes of the uncompressed pprof profile p would encode to (its
 * dictionary rows counted once), plus its series labels as name=value pairs.
 */
static uint64_t profile_size(const struct fc_batch *b, const struct fc_profile *p, struct marks *m,
                             uint32_t stamp)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < p->n_labels; i++) {
        n += ld_len(ld_len(b->dict.str_len[p->labels[i].name]) +
                    ld_len(b->dict.str_len[p->labels[i].value]));
    }
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        n += ld_len(4) + str_bytes(b, m, p->sample_types[t].type, stamp) +
             str_bytes(b, m, p->sample_types[t].unit, stamp);
    }
    n += 16 + str_bytes(b, m, p->period_type.type, stamp) +
         str_bytes(b, m, p->period_type.unit, stamp);
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        const int64_t *v = p->nums + s->values_off;
        uint64_t sn = stack_bytes(b, m, s->stack, stamp, &n);
        uint64_t vn = 0;
        for (uint32_t j = 0; j < s->n_values + s->n_ts; j++) {
            vn += varint_len((uint64_t)v[j]);
        }
        sn += s->n_values + s->n_ts > 0 ? ld_len(vn) : 0;
        for (uint32_t j = 0; j < s->attrs.n; j++) {
            const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, s->attrs)[j]];
            sn += ld_len(1 + varint_len(a->key) + 1 + 5) + str_bytes(b, m, a->key, stamp);
            if (a->kind == FC_ATTR_STR) {
                sn += str_bytes(b, m, a->v.str, stamp);
            } else if (a->kind >= FC_ATTR_BYTES) {
                sn += a->v.blob.len;
            }
        }
        n += ld_len(sn);
    }
    return n;
}

/* ---- the processor ------------------------------------------------------------------------ */

static const struct tenant_limits *limits_of(const struct limits *L, const char *tenant)
{
    size_t lo = 0, hi = L->n_overrides;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(tenant, L->overrides[mid].tenant);
        if (c == 0) {
            return &L->overrides[mid].l;
        }
        if (c < 0) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    return &L->cfg->dflt;
}

static bool over(uint64_t n, int64_t cap)
{
    return cap > 0 && n > (uint64_t)cap;
}

/* Refuses the request: counts all of it as discarded for reason r. */
static int refuse(struct limits *L, const struct fc_batch *b, uint64_t bytes, enum reason r)
{
    count(L, b->tenant, r, (int64_t)fc_batch_sample_count(b), (int64_t)bytes);
    return r == R_PROFILE_SIZE ? FC_ETOOBIG : FC_EPROTO;
}

static int check_profile(struct limits *L, const struct tenant_limits *tl, const struct fc_batch *b,
                         uint32_t i, uint64_t size, uint64_t total, struct fc_error *err)
{
    const struct fc_profile *p = &b->profiles[i];
    const char *svc = fc_profile_label(b, p, "service_name");

    svc = svc != NULL ? svc : "";
    if (over(p->n_labels, tl->max_label_names_per_series)) {
        return fc_errorf(err, refuse(L, b, total, R_LABEL_NAMES),
                         "tenant \"%s\": profile %u (service_name \"%.64s\") has %u series "
                         "labels, more than max_label_names_per_series (%" PRId64 ")",
                         b->tenant, i, svc, p->n_labels, tl->max_label_names_per_series);
    }
    for (uint32_t j = 0; j < p->n_labels; j++) {
        uint32_t nl = b->dict.str_len[p->labels[j].name];
        uint32_t vl = b->dict.str_len[p->labels[j].value];
        if (over(nl, tl->max_label_name_length)) {
            return fc_errorf(err, refuse(L, b, total, R_LABEL_NAME_LEN),
                             "tenant \"%s\": profile %u has a label name \"%.32s...\" of %u "
                             "bytes, more than max_label_name_length (%" PRId64 ")",
                             b->tenant, i, fc_str(b, p->labels[j].name), nl,
                             tl->max_label_name_length);
        }
        if (over(vl, tl->max_label_value_length)) {
            return fc_errorf(err, refuse(L, b, total, R_LABEL_VALUE_LEN),
                             "tenant \"%s\": profile %u label \"%.64s\" has a value of %u bytes, "
                             "more than max_label_value_length (%" PRId64 ")",
                             b->tenant, i, fc_str(b, p->labels[j].name), vl,
                             tl->max_label_value_length);
        }
    }
    if (over(size, tl->max_profile_size_bytes)) {
        return fc_errorf(err, refuse(L, b, total, R_PROFILE_SIZE),
                         "tenant \"%s\": profile %u (service_name \"%.64s\") is %" PRIu64
                         " bytes, more than max_profile_size_bytes (%" PRId64 ")",
                         b->tenant, i, svc, size, tl->max_profile_size_bytes);
    }
    return FC_OK;
}

/* The tail of s in at most max bytes, starting on a UTF-8 boundary. */
static int cut_symbol(struct fc_batch *b, uint32_t *s, int64_t max, int64_t *cut)
{
    uint32_t len = b->dict.str_len[*s];
    const char *str = fc_str(b, *s);
    uint32_t from;

    if (*s == 0 || !over(len, max)) {
        return FC_OK;
    }
    from = len - (uint32_t)max;
    while (from < len && ((unsigned char)str[from] & 0xC0) == 0x80) {
        from++;
    }
    (*cut)++;
    return fc_dict_string(b, str + from, len - from, s);
}

static int cut_symbols(struct fc_batch *b, int64_t max, int64_t *cut)
{
    int rc = FC_OK;

    if (max <= 0) {
        return FC_OK;
    }
    for (uint32_t i = 1; i < b->dict.n_functions && rc == FC_OK; i++) {
        struct fc_function *f = &b->dict.functions[i];
        rc = cut_symbol(b, &f->name, max, cut);
        rc = rc ? rc : cut_symbol(b, &f->system_name, max, cut);
        rc = rc ? rc : cut_symbol(b, &f->filename, max, cut);
    }
    for (uint32_t i = 1; i < b->dict.n_mappings && rc == FC_OK; i++) {
        struct fc_mapping *mp = &b->dict.mappings[i];
        rc = cut_symbol(b, &mp->filename, max, cut);
        rc = rc ? rc : cut_symbol(b, &mp->build_id, max, cut);
    }
    return rc;
}

/* The location of a single frame named `other` (made once per batch). */
static int other_location(struct fc_batch *b, uint32_t *loc)
{
    struct fc_function f = {0};
    struct fc_location l = {0};
    struct fc_line line = {0};
    int rc;

    if (*loc != 0) {
        return FC_OK;
    }
    rc = fc_dict_cstring(b, "other", &f.name);
    f.system_name = f.name;
    rc = rc ? rc : fc_dict_function(b, &f, &line.function);
    return rc ? rc : fc_dict_location(b, &l, &line, 1, loc);
}

/* Cuts stacks deeper than max to `other` + their root-most max-1 frames; marks them in cut[]. */
static int cut_stacks(struct fc_batch *b, int64_t max, uint32_t *other_loc, bool *cut, bool *any)
{
    uint32_t *ids = NULL;
    int rc = FC_OK;

    *any = false;
    if (max <= 0) {
        return FC_OK;
    }
    for (uint32_t i = 1; i < b->dict.n_stacks && rc == FC_OK; i++) {
        struct fc_span s = b->dict.stacks[i].locations;
        if (s.n <= (uint64_t)max) {
            continue;
        }
        rc = other_location(b, other_loc);
        if (rc != FC_OK) {
            break;
        }
        if (ids == NULL) {
            ids = fc_xmalloc((size_t)max * sizeof(*ids));
        }
        /* Leaf first: the root-most frames are the last ones. */
        ids[0] = *other_loc;
        memcpy(ids + 1, fc_span_idx(b, s) + (s.n - (uint32_t)max + 1),
               (size_t)(max - 1) * sizeof(*ids));
        rc = fc_dict_span(b, ids, (uint32_t)max, &b->dict.stacks[i].locations);
        cut[i] = true;
        *any = true;
    }
    free(ids);
    return rc;
}

struct weighed {
    int64_t v;
    uint32_t i;
};

static int heavier_first(const void *x, const void *y)
{
    const struct weighed *a = x, *b = y;

    if (a->v != b->v) {
        return a->v > b->v ? -1 : 1;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Keeps the heaviest max-1 samples of p and sums the others into one `other` sample. */
static int fold_samples(struct fc_batch *b, struct fc_profile *p, int64_t max, uint32_t *other_loc,
                        int64_t *folded)
{
    uint32_t n = p->n_samples, keep = (uint32_t)max - 1, kept = 0;
    uint32_t types = p->n_sample_types;
    struct weighed *w;
    bool *keep_row;
    int64_t *sums;
    int64_t *vals;
    struct fc_sample other = {0};
    int rc;

    if (max <= 0 || n <= (uint64_t)max || types == 0) {
        return FC_OK;
    }
    rc = other_location(b, other_loc);
    rc = rc ? rc : fc_dict_stack(b, other_loc, 1, &other.stack);
    if (rc != FC_OK) {
        return rc;
    }
    w = fc_xmalloc(n * sizeof(*w));
    keep_row = fc_xcalloc(n, sizeof(*keep_row));
    sums = fc_xcalloc(types, sizeof(*sums));
    vals = fc_xmalloc(types * sizeof(*vals));
    for (uint32_t i = 0; i < n; i++) {
        w[i].v = fc_sample_value(p, &p->samples[i], 0);
        w[i].i = i;
    }
    qsort(w, n, sizeof(*w), heavier_first);
    for (uint32_t i = 0; i < keep; i++) {
        keep_row[w[i].i] = true;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct fc_sample *s = &p->samples[i];
        if (keep_row[i]) {
            p->samples[kept++] = *s;
            continue;
        }
        for (uint32_t t = 0; t < types; t++) {
            sums[t] = fc_sat_add(sums[t], fc_sample_value(p, s, t));
        }
    }
    for (uint32_t t = 0; t < types; t++) {
        vals[t] = sums[t];
    }
    p->n_samples = kept;
    rc = fc_profile_add_sample(b, p, &other, vals, types, NULL, 0);
    *folded += n - kept;
    free(w);
    free(keep_row);
    free(sums);
    free(vals);
    return rc;
}

static void marks_free(struct marks *m)
{
    free(m->strings);
    free(m->functions);
    free(m->locations);
    free(m->mappings);
    free(m->stacks);
    free(m->stack_bytes);
}

static int limits_process(struct fc_processor *self, struct fc_batch **batchp, struct fc_error *err)
{
    struct limits *L = self->ctx;
    struct fc_batch *b = *batchp;
    const struct tenant_limits *tl = limits_of(L, b->tenant);
    const struct fc_dict *d = &b->dict;
    struct marks m = {0};
    uint64_t *sizes, total = 0;
    uint32_t other_loc = 0;
    int64_t cut_syms = 0;
    bool *cut, any_cut = false;
    int rc = FC_OK;

    if (b->n_profiles == 0) {
        return FC_OK;
    }
    m.strings = fc_xcalloc(d->n_strings + 1, sizeof(uint32_t));
    m.functions = fc_xcalloc(d->n_functions + 1, sizeof(uint32_t));
    m.locations = fc_xcalloc(d->n_locations + 1, sizeof(uint32_t));
    m.mappings = fc_xcalloc(d->n_mappings + 1, sizeof(uint32_t));
    m.stacks = fc_xcalloc(d->n_stacks + 1, sizeof(uint32_t));
    m.stack_bytes = fc_xcalloc(d->n_stacks + 1, sizeof(uint64_t));
    sizes = fc_xcalloc(b->n_profiles, sizeof(*sizes));
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        sizes[i] = profile_size(b, &b->profiles[i], &m, i + 1);
        total += sizes[i];
    }
    marks_free(&m);

    if (tl->ingestion_rate_mb > 0) {
        double rate = tl->ingestion_rate_mb * BYTES_IN_MB;
        double burst = tl->ingestion_burst_size_mb * BYTES_IN_MB;
        double wait_s = 0;
        if ((double)total > burst) {
            count(L, b->tenant, R_RATE, (int64_t)fc_batch_sample_count(b), (int64_t)total);
            rc = fc_errorf(err, FC_ETOOBIG,
                           "tenant \"%s\": request of %" PRIu64 " bytes is larger than "
                           "ingestion_burst_size_mb (%g MiB) and can never pass the rate limit",
                           b->tenant, total, tl->ingestion_burst_size_mb);
        } else if (bucket_take(L, b->tenant, rate, burst, (double)total, &wait_s) != FC_OK) {
            count(L, b->tenant, R_RATE, (int64_t)fc_batch_sample_count(b), (int64_t)total);
            rc = fc_errorf(
                err, FC_EAGAIN,
                "tenant \"%s\": ingestion rate limit reached (ingestion_rate_mb %g, "
                "ingestion_burst_size_mb %g): request of %" PRIu64 " bytes, retry in %.1fs",
                b->tenant, tl->ingestion_rate_mb, tl->ingestion_burst_size_mb, total, wait_s);
        }
    }
    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        rc = check_profile(L, tl, b, i, sizes[i], total, err);
    }
    free(sizes);
    if (rc != FC_OK) {
        return rc;
    }

    /* From here on nothing is discarded: symbols and stacks cut, samples folded. */
    rc = cut_symbols(b, tl->max_profile_symbol_value_length, &cut_syms);
    if (cut_syms > 0) {
        fc_metric_add(counter(L, b->tenant, R_SYMBOL, false), cut_syms);
    }
    cut = fc_xcalloc(b->dict.n_stacks + 1, sizeof(*cut));
    if (rc == FC_OK) {
        rc = cut_stacks(b, tl->max_profile_stacktrace_depth, &other_loc, cut, &any_cut);
    }
    if (rc == FC_OK && any_cut) {
        int64_t n = 0;
        for (uint32_t i = 0; i < b->n_profiles; i++) {
            const struct fc_profile *p = &b->profiles[i];
            for (uint32_t j = 0; j < p->n_samples; j++) {
                n += p->samples[j].stack < b->dict.n_stacks && cut[p->samples[j].stack];
            }
        }
        fc_metric_add(counter(L, b->tenant, R_DEPTH, false), n);
    }
    free(cut);
    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        int64_t folded = 0;
        rc = fold_samples(b, &b->profiles[i], tl->max_profile_stacktrace_samples, &other_loc,
                          &folded);
        if (folded > 0) {
            fc_metric_add(counter(L, b->tenant, R_MAX_SAMPLES, false), folded);
        }
    }
    if (rc != FC_OK) {
        return fc_errorf(err, rc, "tenant \"%s\": the batch exceeds its size limit", b->tenant);
    }
    return FC_OK;
}

/* ---- config ------------------------------------------------------------------------------- */

static int check_tenant_limits(const struct tenant_limits *l, const char *where,
                               struct fc_error *err)
{
    if (l->max_label_names_per_series < 0 || l->max_label_name_length < 0 ||
        l->max_label_value_length < 0 || l->max_profile_size_bytes < 0 ||
        l->max_profile_stacktrace_samples < 0 || l->max_profile_stacktrace_depth < 0 ||
        l->max_profile_symbol_value_length < 0) {
        return fc_errorf(err, FC_ECONFIG, "%s: limits must not be negative (0 = no limit)", where);
    }
    if (l->max_profile_stacktrace_depth == 1) {
        return fc_errorf(err, FC_ECONFIG,
                         "%s.max_profile_stacktrace_depth: 1 would leave only the `other` frame; "
                         "use 0 (no limit) or at least 2",
                         where);
    }
    if (l->max_profile_stacktrace_depth > UINT32_MAX / 2 ||
        l->max_profile_stacktrace_samples > UINT32_MAX / 2) {
        return fc_errorf(err, FC_ECONFIG, "%s: a limit is too large", where);
    }
    if (!(l->ingestion_rate_mb >= 0) || !(l->ingestion_burst_size_mb >= 0) ||
        !isfinite(l->ingestion_rate_mb) || !isfinite(l->ingestion_burst_size_mb)) {
        return fc_errorf(err, FC_ECONFIG,
                         "%s: ingestion_rate_mb and ingestion_burst_size_mb must be finite and not "
                         "negative",
                         where);
    }
    if (l->ingestion_rate_mb > 0 && l->ingestion_burst_size_mb <= 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "%s.ingestion_burst_size_mb: must be above 0 when ingestion_rate_mb is "
                         "set (no request could pass)",
                         where);
    }
    return FC_OK;
}

static int by_tenant(const void *x, const void *y)
{
    return strcmp(((const struct override *)x)->tenant, ((const struct override *)y)->tenant);
}

/* Binds overrides: each tenant starts from the default and changes the keys it names. */
static int bind_overrides(struct limits *L, const struct fc_node *node, struct fc_error *err)
{
    struct fc_arena *arena;
    struct fc_diag diag;
    int rc = FC_OK;

    if (node == NULL || node->kind == FC_NODE_NULL) {
        return FC_OK;
    }
    if (node->kind != FC_NODE_MAP) {
        return fc_errorf(err, FC_ECONFIG, "%s:%u:%u: overrides: expected a map of tenants",
                         node->file, node->line, node->col);
    }
    arena = fc_arena_new(0);
    fc_diag_init(&diag);
    L->overrides = fc_xcalloc(node->n_pairs + 1, sizeof(*L->overrides));
    for (size_t i = 0; i < node->n_pairs && rc == FC_OK; i++) {
        const struct fc_node *k = node->pairs[i].key, *v = node->pairs[i].value;
        struct override *o = &L->overrides[L->n_overrides];
        struct fc_error terr = {0};
        o->tenant = k->str;
        o->l = L->cfg->dflt;
        if (fc_tenant_check(k->str, strlen(k->str), &terr) != FC_OK) {
            rc = fc_errorf(err, FC_ECONFIG, "%s:%u:%u: overrides: tenant \"%s\": %s", k->file,
                           k->line, k->col, k->str, terr.msg);
            break;
        }
        for (size_t j = 0; j < L->n_overrides; j++) {
            if (strcmp(L->overrides[j].tenant, k->str) == 0) {
                rc = fc_errorf(err, FC_ECONFIG, "%s:%u:%u: overrides: tenant \"%s\" given twice",
                               k->file, k->line, k->col, k->str);
            }
        }
        if (rc == FC_OK && v->kind != FC_NODE_MAP && v->kind != FC_NODE_NULL) {
            rc = fc_errorf(err, FC_ECONFIG, "%s:%u:%u: overrides.%s: expected a map", v->file,
                           v->line, v->col, k->str);
        }
        for (size_t j = 0; rc == FC_OK && v->kind == FC_NODE_MAP && j < v->n_pairs; j++) {
            const struct fc_node_pair *kv = &v->pairs[j];
            const struct fc_field *f = tenant_fields;
            struct fc_field one[2] = {{0}, {NULL}};
            struct fc_node *single;
            char path[256];
            while (f->name != NULL && strcmp(f->name, kv->key->str) != 0) {
                f++;
            }
            if (f->name == NULL) {
                rc = fc_errorf(err, FC_ECONFIG,
                               "%s:%u:%u: overrides.%s: unknown key '%s' (valid keys are those of "
                               "`default`)",
                               kv->key->file, kv->key->line, kv->key->col, k->str, kv->key->str);
                break;
            }
            /* A one-key map bound with a one-field schema changes only that key. */
            one[0] = *f;
            one[0].default_value = NULL;
            single = fc_node_new(arena, FC_NODE_MAP, v);
            single->pairs = fc_arena_alloc(arena, sizeof(*single->pairs));
            single->pairs[0] = *kv;
            single->n_pairs = 1;
            snprintf(path, sizeof(path), "processors.%s.overrides.%s", L->id, k->str);
            {
                struct tenant_limits copy = o->l;
                if (fc_schema_bind(arena, one, single, &copy, path, &diag) != 0 ||
                    fc_diag_has_errors(&diag)) {
                    rc = fc_errorf(err, FC_ECONFIG, "%s",
                                   diag.n > 0 ? diag.entries[diag.n - 1].text : path);
                    break;
                }
                o->l = copy;
            }
        }
        if (rc == FC_OK) {
            char where[200];
            snprintf(where, sizeof(where), "overrides.%s", k->str);
            rc = check_tenant_limits(&o->l, where, err);
        }
        if (rc == FC_OK) {
            L->n_overrides++;
        }
    }
    fc_diag_release(&diag);
    fc_arena_free(arena);
    qsort(L->overrides, L->n_overrides, sizeof(*L->overrides), by_tenant);
    return rc;
}

static void limits_destroy(struct fc_processor *self)
{
    struct limits *L = self->ctx;

    if (L == NULL) {
        return;
    }
    for (struct bucket *e = L->head, *next; e != NULL; e = next) {
        next = e->next;
        free(e);
    }
    for (size_t i = 0; i < L->n_label_slots; i++) {
        for (struct tlabel *t = L->labels[i], *next; t != NULL; t = next) {
            next = t->chain;
            free(t);
        }
    }
    free(L->other);
    free(L->labels);
    free(L->buckets);
    free(L->overrides);
    pthread_mutex_destroy(&L->lock);
    free(L);
    self->ctx = NULL;
}

static int limits_create(struct fc_processor *self, struct fc_error *err)
{
    const struct limits_config *cfg = self->config;
    struct limits *L;
    int rc;

    if (cfg->max_tenants < 1 || cfg->max_tenants > MAX_TRACKED) {
        return fc_errorf(err, FC_ECONFIG, "max_tenants: %lld is not between 1 and %d",
                         (long long)cfg->max_tenants, MAX_TRACKED);
    }
    if (cfg->max_tenant_labels < 0 || cfg->max_tenant_labels > MAX_TRACKED) {
        return fc_errorf(err, FC_ECONFIG, "max_tenant_labels: %lld is not between 0 and %d",
                         (long long)cfg->max_tenant_labels, MAX_TRACKED);
    }
    rc = check_tenant_limits(&cfg->dflt, "default", err);
    if (rc != FC_OK) {
        return rc;
    }
    L = fc_xcalloc(1, sizeof(*L));
    L->cfg = cfg;
    L->id = self->id;
    L->pipeline = self->pipeline;
    pthread_mutex_init(&L->lock, NULL);
    L->n_bucket_slots = pow2_at_least((size_t)cfg->max_tenants);
    L->buckets = fc_xcalloc(L->n_bucket_slots, sizeof(*L->buckets));
    L->n_label_slots = pow2_at_least((size_t)cfg->max_tenant_labels);
    L->labels = fc_xcalloc(L->n_label_slots, sizeof(*L->labels));
    L->other = tlabel_new("other", 0);
    self->ctx = L;
    rc = bind_overrides(L, cfg->overrides, err);
    if (rc != FC_OK) {
        limits_destroy(self);
        return rc;
    }
    return FC_OK;
}

const struct fc_processor_type fc_limits_processor = {
    .info = {"limits",
             "Pyroscope's per-tenant limits: label counts and lengths, profile size, samples per "
             "profile, stack depth, symbol length, ingestion rate",
             FC_STABILITY_ALPHA, limits_fields, sizeof(struct limits_config)},
    .create = limits_create,
    .process = limits_process,
    .destroy = limits_destroy,
    .preserves_batch = false,
    /* Nothing is dropped without refusing the request; folded rows are not drops. */
    .counts_dropped = true,
};
