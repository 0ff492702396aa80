/*
 * relabel processor: Prometheus relabel_configs on each profile's series
 * labels and sample_relabel_configs on each sample's string labels, with the
 * rule engine of rules.h (compiled once, in create).
 *
 * Per batch, in this order:
 *   1. Series: a profile's labels (every fc_label with a non-empty value) go
 *      through relabel_configs. A set a keep/drop rule rejects, or one left
 *      without labels, removes the profile (reason `rule` / `no_labels`).
 *      Labels named `__tmp*` are scratch space (Prometheus reserves the
 *      prefix) and are removed after the rules. A profile whose labels changed
 *      loses its OTLP origin, so the otlp exporters send the new labels as its
 *      resource attributes (scope and non-string resource attributes are not
 *      kept then). Results are cached per label set (bounded LRU, cache_size).
 *   2. Samples: sample_relabel_configs see a sample's string attributes (pprof
 *      string labels, OTLP string attributes) except `span_id` and `trace_id`,
 *      which link samples to traces and stay as they are, like every
 *      non-string attribute and the sample's OTLP link. Samples with one
 *      attribute list share one run of the rules. A sample the rules reject
 *      is removed; a profile left without samples that had some is removed
 *      (reason `no_samples`).
 *   3. Profiles with equal series labels, sample types and period type are
 *      merged into the first: samples appended, time from the earliest start
 *      to the latest end; its other fields are the first's.
 *   4. In profiles that changed in 2 or 3, samples with the same stack, link,
 *      attribute list and value count and no timestamps are merged by summing
 *      their values (timestamped samples keep their rows). Totals are exact.
 *
 * process() runs on many receiver threads at once: each call takes a worker
 * (rule scratch, buffers) from a pool and gives it back; the cache has a mutex.
 */
#include "core/component.h"
#include "core/mem.h"
#include "core/sat.h"
#include "core/metrics.h"
#include "processors/relabel/rules.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#define MAX_CACHE_SIZE (1 << 24)

struct relabel_config {
    const struct fc_node *relabel_configs;
    const struct fc_node *sample_relabel_configs;
    int label_name_validation; /* enum fc_relabel_names */
    int64_t cache_size;
};

static const struct fc_field relabel_fields[] = {
    {"relabel_configs", FC_FIELD_NODE, "[]", offsetof(struct relabel_config, relabel_configs),
     "Prometheus relabel rules (`source_labels`, `separator`, `regex`, `target_label`, "
     "`replacement`, `modulus`, `action`) applied to each profile's series labels"},
    {"sample_relabel_configs", FC_FIELD_NODE, "[]",
     offsetof(struct relabel_config, sample_relabel_configs),
     "the same rules applied to each sample's string labels (pprof labels, OTLP sample "
     "attributes; not `span_id`, `trace_id`)"},
    {"label_name_validation", FC_FIELD_ENUM, "utf8",
     offsetof(struct relabel_config, label_name_validation),
     "label names rules may use: `utf8` (Prometheus 3: any UTF-8) or `legacy` "
     "(`[a-zA-Z_][a-zA-Z0-9_]*`)",
     .choices = "utf8|legacy"},
    {"cache_size", FC_FIELD_INT, "4096", offsetof(struct relabel_config, cache_size),
     "series label sets whose relabel result is kept (LRU); 0 = no cache"},
    {NULL},
};

/* ---- the series cache --------------------------------------------------------------------- */

/* V_KEEP, or why a profile goes: dropped_profiles[verdict - 1]. */
enum verdict { V_KEEP, V_DROP_RULE, V_DROP_EMPTY, V_DROP_NO_SAMPLES };

struct centry {
    struct centry *chain;       /* same bucket */
    struct centry *prev, *next; /* LRU list, most recent first */
    uint64_t hash;
    enum verdict verdict;
    bool unchanged;
    uint32_t n_key, n_res;
    struct fc_relabel_label *key, *res; /* strings in the same allocation */
};

struct cache {
    pthread_mutex_t lock;
    struct centry **buckets;
    size_t n_buckets; /* power of two */
    size_t n, max;
    struct centry *head, *tail;
};

/* ---- workers: what one process() call needs ----------------------------------------------- */

struct worker {
    struct worker *next; /* pool */
    struct fc_relabel_scratch scratch;
    struct fc_relabel_labels ls;
    struct fc_relabel_label *orig; /* the set before the rules */
    size_t orig_cap;
    uint32_t *idx; /* an attribute index list being built */
    size_t idx_cap;
    uint32_t *slots; /* open addressing (value + 1; 0 = empty) */
    size_t slots_cap;
    uint8_t *state; /* per profile: enum pstate */
    size_t state_cap;
    struct memo *memo; /* sample attribute lists seen in this call */
    size_t memo_cap;
};

/* A sample attribute list and what the sample rules made of it. */
struct memo {
    uint32_t off, n; /* the original list in dict.idx (0, 0 with used = false) */
    bool used;
    bool drop;
    bool changed; /* result is another list */
    struct fc_span result;
};

enum pstate {
    P_KEEP = 0,
    P_DROPPED = 1,
    P_SAMPLES_CHANGED = 2, /* merge equal samples */
};

struct relabel {
    const struct relabel_config *cfg;
    struct fc_relabel_rules *series;
    struct fc_relabel_rules *samples;
    struct cache cache;
    pthread_mutex_t pool_lock;
    struct worker *pool;
    _Atomic int64_t *dropped_profiles[3]; /* reason: rule, no_labels, no_samples */
    _Atomic int64_t *dropped_samples;     /* by sample_relabel_configs */
    _Atomic int64_t *merged_profiles;
    _Atomic int64_t *merged_samples;
    _Atomic int64_t *cache_hits;
    _Atomic int64_t *cache_misses;
    _Atomic int64_t *match_errors;
};

static uint64_t labels_hash(const struct fc_relabel_label *l, size_t n)
{
    uint64_t h = n;

    for (size_t i = 0; i < n; i++) {
        h = XXH3_64bits_withSeed(l[i].name, l[i].name_len, h ^ l[i].name_len);
        h = XXH3_64bits_withSeed(l[i].value, l[i].value_len, h ^ (l[i].value_len << 32));
    }
    return h;
}

static bool labels_equal(const struct fc_relabel_label *a, size_t na,
                         const struct fc_relabel_label *b, size_t nb)
{
    if (na != nb) {
        return false;
    }
    for (size_t i = 0; i < na; i++) {
        if (a[i].name_len != b[i].name_len || a[i].value_len != b[i].value_len ||
            memcmp(a[i].name, b[i].name, a[i].name_len) != 0 ||
            memcmp(a[i].value, b[i].value, a[i].value_len) != 0) {
            return false;
        }
    }
    return true;
}

static void cache_init(struct cache *c, size_t max)
{
    pthread_mutex_init(&c->lock, NULL);
    c->max = max;
    c->n_buckets = 16;
    while (c->n_buckets < max) {
        c->n_buckets *= 2;
    }
    c->buckets = max > 0 ? fc_xcalloc(c->n_buckets, sizeof(*c->buckets)) : NULL;
}

static void cache_release(struct cache *c)
{
    for (struct centry *e = c->head, *next; e != NULL; e = next) {
        next = e->next;
        free(e);
    }
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
}

static void lru_unlink(struct cache *c, struct centry *e)
{
    if (e->prev != NULL) {
        e->prev->next = e->next;
    } else {
        c->head = e->next;
    }
    if (e->next != NULL) {
        e->next->prev = e->prev;
    } else {
        c->tail = e->prev;
    }
}

static void lru_push_front(struct cache *c, struct centry *e)
{
    e->prev = NULL;
    e->next = c->head;
    if (c->head != NULL) {
        c->head->prev = e;
    } else {
        c->tail = e;
    }
    c->head = e;
}

/*
 * Looks the set up; on a hit copies the result into ls (strings into arena)
 * and returns true. Caller holds no lock.
 */
static bool cache_get(struct cache *c, uint64_t h, const struct fc_relabel_label *key, size_t n,
                      struct fc_relabel_labels *ls, struct fc_arena *arena, enum verdict *v,
                      bool *unchanged, int *rc)
{
    bool hit = false;

    *rc = FC_OK;
    pthread_mutex_lock(&c->lock);
    for (struct centry *e = c->buckets[h & (c->n_buckets - 1)]; e != NULL; e = e->chain) {
        if (e->hash != h || !labels_equal(e->key, e->n_key, key, n)) {
            continue;
        }
        hit = true;
        *v = e->verdict;
        *unchanged = e->unchanged;
        fc_relabel_labels_clear(ls);
        for (uint32_t i = 0; i < e->n_res && *rc == FC_OK; i++) {
            const struct fc_relabel_label *l = &e->res[i];
            char *name = fc_arena_strndup(arena, l->name, l->name_len);
            char *value = fc_arena_strndup(arena, l->value, l->value_len);
            if (name == NULL || value == NULL) {
                *rc = FC_ETOOBIG;
                break;
            }
            fc_relabel_labels_set(ls, name, l->name_len, value, l->value_len);
        }
        lru_unlink(c, e);
        lru_push_front(c, e);
        break;
    }
    pthread_mutex_unlock(&c->lock);
    return hit;
}

static size_t labels_bytes(const struct fc_relabel_label *l, size_t n)
{
    size_t bytes = 0;

    for (size_t i = 0; i < n; i++) {
        bytes += l[i].name_len + l[i].value_len;
    }
    return bytes;
}

static void copy_labels(struct fc_relabel_label *dst, const struct fc_relabel_label *src, size_t n,
                        char **data)
{
    for (size_t i = 0; i < n; i++) {
        dst[i] = src[i];
        memcpy(*data, src[i].name, src[i].name_len);
        dst[i].name = *data;
        *data += src[i].name_len;
        memcpy(*data, src[i].value, src[i].value_len);
        dst[i].value = *data;
        *data += src[i].value_len;
    }
}

static void cache_put(struct cache *c, uint64_t h, const struct fc_relabel_label *key, size_t n_key,
                      const struct fc_relabel_labels *res, enum verdict v, bool unchanged)
{
    size_t n_res = v == V_KEEP && !unchanged ? res->n : 0;
    size_t size = sizeof(struct centry) + (n_key + n_res) * sizeof(struct fc_relabel_label) +
                  labels_bytes(key, n_key) + labels_bytes(res->items, n_res);
    struct centry *e = fc_xmalloc(size);
    char *data;

    memset(e, 0, sizeof(*e));
    e->hash = h;
    e->verdict = v;
    e->unchanged = unchanged;
    e->n_key = (uint32_t)n_key;
    e->n_res = (uint32_t)n_res;
    e->key = (struct fc_relabel_label *)(e + 1);
    e->res = e->key + n_key;
    data = (char *)(e->res + n_res);
    copy_labels(e->key, key, n_key, &data);
    copy_labels(e->res, res->items, n_res, &data);

    pthread_mutex_lock(&c->lock);
    /* Another thread may have put the same set meanwhile: keep one. */
    for (struct centry *o = c->buckets[h & (c->n_buckets - 1)]; o != NULL; o = o->chain) {
        if (o->hash == h && labels_equal(o->key, o->n_key, key, n_key)) {
            pthread_mutex_unlock(&c->lock);
            free(e);
            return;
        }
    }
    if (c->n == c->max) {
        struct centry *old = c->tail;
        struct centry **pp = &c->buckets[old->hash & (c->n_buckets - 1)];
        while (*pp != old) {
            pp = &(*pp)->chain;
        }
        *pp = old->chain;
        lru_unlink(c, old);
        free(old);
        c->n--;
    }
    e->chain = c->buckets[h & (c->n_buckets - 1)];
    c->buckets[h & (c->n_buckets - 1)] = e;
    lru_push_front(c, e);
    c->n++;
    pthread_mutex_unlock(&c->lock);
}

/* ---- workers ------------------------------------------------------------------------------ */

static struct worker *worker_take(struct relabel *r)
{
    struct worker *w;

    pthread_mutex_lock(&r->pool_lock);
    w = r->pool;
    if (w != NULL) {
        r->pool = w->next;
    }
    pthread_mutex_unlock(&r->pool_lock);
    if (w == NULL) {
        w = fc_xcalloc(1, sizeof(*w));
        fc_relabel_scratch_init(&w->scratch);
        fc_relabel_labels_init(&w->ls);
    }
    return w;
}

static void worker_give(struct relabel *r, struct worker *w)
{
    pthread_mutex_lock(&r->pool_lock);
    w->next = r->pool;
    r->pool = w;
    pthread_mutex_unlock(&r->pool_lock);
}

static void worker_free(struct worker *w)
{
    fc_relabel_scratch_release(&w->scratch);
    fc_relabel_labels_release(&w->ls);
    free(w->orig);
    free(w->idx);
    free(w->slots);
    free(w->state);
    free(w->memo);
    free(w);
}

/* Makes *p hold at least n elements of size bytes (contents kept). */
static void reserve(void *pp, size_t *cap, size_t n, size_t size)
{
    void **p = pp;

    if (n > *cap) {
        size_t c = *cap ? *cap : 16;
        while (c < n) {
            c *= 2;
        }
        *p = fc_xrealloc(*p, c * size);
        *cap = c;
    }
}

/* Open addressing slots for n entries, all empty; returns the mask. */
static size_t slots_reset(struct worker *w, size_t n)
{
    size_t cap = 16;

    while (cap < 2 * n) {
        cap *= 2;
    }
    reserve(&w->slots, &w->slots_cap, cap, sizeof(*w->slots));
    memset(w->slots, 0, cap * sizeof(*w->slots));
    return cap - 1;
}

/* ---- series labels ------------------------------------------------------------------------ */

static bool is_tmp(const struct fc_relabel_label *l)
{
    return l->name_len >= 5 && memcmp(l->name, "__tmp", 5) == 0;
}

/* The rules on ls (the profile's labels); the verdict, and whether the set is unchanged. */
static int series_apply(struct relabel *r, struct worker *w, struct fc_arena *arena,
                        enum verdict *v, bool *unchanged)
{
    int rc;
    size_t n = w->ls.n;

    reserve(&w->orig, &w->orig_cap, n, sizeof(*w->orig));
    memcpy(w->orig, w->ls.items, n * sizeof(*w->orig));
    rc = fc_relabel_apply(r->series, &w->ls, &w->scratch, arena);
    if (rc != FC_RELABEL_KEEP && rc != FC_RELABEL_DROP) {
        return rc;
    }
    if (rc == FC_RELABEL_DROP) {
        *v = V_DROP_RULE;
        *unchanged = false;
        return FC_OK;
    }
    for (size_t i = w->ls.n; i-- > 0;) {
        if (is_tmp(&w->ls.items[i])) {
            fc_relabel_labels_del(&w->ls, w->ls.items[i].name, w->ls.items[i].name_len);
        }
    }
    *v = w->ls.n == 0 ? V_DROP_EMPTY : V_KEEP;
    *unchanged = *v == V_KEEP && labels_equal(w->orig, n, w->ls.items, w->ls.n);
    return FC_OK;
}

/* Writes ls as the profile's labels (sorted and unique, as fc_profile requires). */
static int write_labels(struct fc_batch *b, struct fc_profile *p,
                        const struct fc_relabel_labels *ls)
{
    struct fc_label *labels = fc_arena_alloc(b->arena, (ls->n ? ls->n : 1) * sizeof(*labels));

    if (labels == NULL) {
        return FC_ETOOBIG;
    }
    for (size_t i = 0; i < ls->n; i++) {
        const struct fc_relabel_label *l = &ls->items[i];
        int rc = fc_dict_string(b, l->name, l->name_len, &labels[i].name);
        if (rc == FC_OK) {
            rc = fc_dict_string(b, l->value, l->value_len, &labels[i].value);
        }
        if (rc != FC_OK) {
            return rc;
        }
    }
    p->labels = labels;
    p->n_labels = (uint32_t)ls->n;
    p->cap_labels = (uint32_t)(ls->n ? ls->n : 1);
    p->origin = 0; /* the otlp exporters then send these labels as the resource */
    return FC_OK;
}

static int relabel_series(struct relabel *r, struct worker *w, struct fc_batch *b,
                          struct fc_profile *p, struct fc_arena *arena, enum verdict *v)
{
    uint64_t h = 0;
    bool unchanged = false;
    bool cached = r->cfg->cache_size > 0;
    int rc = FC_OK;

    fc_relabel_labels_clear(&w->ls);
    for (uint32_t i = 0; i < p->n_labels; i++) {
        uint32_t name = p->labels[i].name;
        uint32_t value = p->labels[i].value;
        fc_relabel_labels_set(&w->ls, fc_str(b, name), b->dict.str_len[name], fc_str(b, value),
                              b->dict.str_len[value]);
    }
    if (cached) {
        h = labels_hash(w->ls.items, w->ls.n);
        reserve(&w->orig, &w->orig_cap, w->ls.n, sizeof(*w->orig));
        memcpy(w->orig, w->ls.items, w->ls.n * sizeof(*w->orig));
        if (cache_get(&r->cache, h, w->orig, w->ls.n, &w->ls, arena, v, &unchanged, &rc)) {
            fc_metric_add(r->cache_hits, 1);
            if (rc != FC_OK || *v != V_KEEP || unchanged) {
                return rc;
            }
            return write_labels(b, p, &w->ls);
        }
        fc_metric_add(r->cache_misses, 1);
    }
    {
        size_t n_key = w->ls.n;
        rc = series_apply(r, w, arena, v, &unchanged);
        if (rc != FC_OK) {
            return rc;
        }
        if (cached) {
            cache_put(&r->cache, h, w->orig, n_key, &w->ls, *v, unchanged);
        }
    }
    if (*v != V_KEEP || unchanged) {
        return FC_OK;
    }
    return write_labels(b, p, &w->ls);
}

/* ---- sample labels ------------------------------------------------------------------------ */

/* Attributes the sample rules see: strings with a key, except the trace links. */
static bool rule_visible(const struct fc_batch *b, const struct fc_attr *a)
{
    const char *key = fc_str(b, a->key);

    return a->kind == FC_ATTR_STR && key[0] != '\0' && b->dict.str_len[a->v.str] > 0 &&
           strcmp(key, "span_id") != 0 && strcmp(key, "trace_id") != 0;
}

/* The sample rules on one attribute list: *drop, or *out (the same span when unchanged). */
static int sample_apply(struct relabel *r, struct worker *w, struct fc_batch *b,
                        struct fc_arena *arena, struct fc_span in, bool *drop, struct fc_span *out)
{
    size_t n_orig;
    uint32_t n_idx = 0;
    int rc;

    *drop = false;
    *out = in;
    fc_relabel_labels_clear(&w->ls);
    for (uint32_t i = 0; i < in.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, in)[i]];
        if (rule_visible(b, a)) {
            fc_relabel_labels_set(&w->ls, fc_str(b, a->key), b->dict.str_len[a->key],
                                  fc_str(b, a->v.str), b->dict.str_len[a->v.str]);
        }
    }
    n_orig = w->ls.n;
    reserve(&w->orig, &w->orig_cap, n_orig, sizeof(*w->orig));
    memcpy(w->orig, w->ls.items, n_orig * sizeof(*w->orig));
    rc = fc_relabel_apply(r->samples, &w->ls, &w->scratch, arena);
    if (rc == FC_RELABEL_DROP) {
        *drop = true;
        return FC_OK;
    }
    if (rc != FC_RELABEL_KEEP) {
        return rc;
    }
    if (labels_equal(w->orig, n_orig, w->ls.items, w->ls.n)) {
        return FC_OK;
    }
    /* What the rules did not see, in its order, then the rules' result, sorted. */
    reserve(&w->idx, &w->idx_cap, (size_t)in.n + w->ls.n + 1, sizeof(*w->idx));
    for (uint32_t i = 0; i < in.n; i++) {
        uint32_t ai = fc_span_idx(b, in)[i];
        if (!rule_visible(b, &b->dict.attrs[ai])) {
            w->idx[n_idx++] = ai;
        }
    }
    for (size_t i = 0; i < w->ls.n; i++) {
        const struct fc_relabel_label *l = &w->ls.items[i];
        struct fc_attr a = {0};
        a.kind = FC_ATTR_STR;
        rc = fc_dict_string(b, l->name, l->name_len, &a.key);
        rc = rc ? rc : fc_dict_string(b, l->value, l->value_len, &a.v.str);
        rc = rc ? rc : fc_dict_attr(b, &a, &w->idx[n_idx]);
        if (rc != FC_OK) {
            return rc;
        }
        n_idx++;
    }
    return fc_dict_span(b, w->idx, n_idx, out);
}

static uint64_t span_hash(const struct fc_batch *b, struct fc_span s)
{
    return XXH3_64bits(fc_span_idx(b, s), (size_t)s.n * sizeof(uint32_t));
}

/*
 * The sample rules on every sample of p. Equal attribute lists are worked out
 * once per call (memo, keyed by content). Returns the samples removed.
 */
static int relabel_samples(struct relabel *r, struct worker *w, struct fc_batch *b,
                           struct fc_profile *p, struct fc_arena *arena, uint32_t *removed,
                           bool *changed)
{
    size_t mask = 16;
    uint32_t kept = 0;

    *removed = 0;
    *changed = false;
    while (mask < 2 * (size_t)p->n_samples) {
        mask *= 2;
    }
    reserve(&w->memo, &w->memo_cap, mask, sizeof(*w->memo));
    memset(w->memo, 0, mask * sizeof(*w->memo));
    mask--;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_sample *s = &p->samples[i];
        struct memo *m;
        size_t at = span_hash(b, s->attrs) & mask;
        while (w->memo[at].used &&
               !fc_span_eq(b, (struct fc_span){w->memo[at].off, w->memo[at].n}, s->attrs)) {
            at = (at + 1) & mask;
        }
        m = &w->memo[at];
        if (!m->used) {
            int rc = sample_apply(r, w, b, arena, s->attrs, &m->drop, &m->result);
            if (rc != FC_OK) {
                return rc;
            }
            m->used = true;
            m->changed = !fc_span_eq(b, m->result, s->attrs);
            m->off = s->attrs.off;
            m->n = s->attrs.n;
        }
        if (m->drop) {
            (*removed)++;
            continue;
        }
        p->samples[kept] = *s;
        if (m->changed) {
            *changed = true;
            p->samples[kept].attrs = m->result;
        }
        kept++;
    }
    p->n_samples = kept;
    return FC_OK;
}

/* Merges samples of p with the same stack, link, attributes and value count (no timestamps). */
static uint32_t merge_samples(struct worker *w, const struct fc_batch *b, struct fc_profile *p)
{
    size_t mask = slots_reset(w, p->n_samples);
    uint32_t kept = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_sample *s = &p->samples[i];
        size_t at;
        if (s->n_ts > 0) {
            p->samples[kept++] = *s;
            continue;
        }
        at = (XXH3_64bits_withSeed(fc_span_idx(b, s->attrs), (size_t)s->attrs.n * sizeof(uint32_t),
                                   ((uint64_t)s->stack << 32) ^ s->link ^
                                       ((uint64_t)s->n_values << 48))) &
             mask;
        for (;; at = (at + 1) & mask) {
            struct fc_sample *o;
            if (w->slots[at] == 0) {
                w->slots[at] = kept + 1;
                p->samples[kept++] = *s;
                break;
            }
            o = &p->samples[w->slots[at] - 1];
            if (o->stack == s->stack && o->link == s->link && o->n_values == s->n_values &&
                fc_span_eq(b, o->attrs, s->attrs)) {
                for (uint32_t v = 0; v < s->n_values; v++) {
                    p->nums[o->values_off + v] =
                        fc_sat_add(p->nums[o->values_off + v], p->nums[s->values_off + v]);
                }
                break;
            }
        }
    }
    {
        uint32_t merged = p->n_samples - kept;
        p->n_samples = kept;
        return merged;
    }
}

/* ---- merging profiles --------------------------------------------------------------------- */

static bool str_equal(const struct fc_batch *b, uint32_t x, uint32_t y)
{
    return x == y || (b->dict.str_len[x] == b->dict.str_len[y] &&
                      memcmp(fc_str(b, x), fc_str(b, y), b->dict.str_len[x]) == 0);
}

static uint64_t str_hash(const struct fc_batch *b, uint32_t s, uint64_t seed)
{
    return XXH3_64bits_withSeed(fc_str(b, s), b->dict.str_len[s], seed);
}

static uint64_t series_hash(const struct fc_batch *b, const struct fc_profile *p)
{
    uint64_t h = p->n_labels * 31 + p->n_sample_types;

    for (uint32_t i = 0; i < p->n_labels; i++) {
        h = str_hash(b, p->labels[i].value, str_hash(b, p->labels[i].name, h));
    }
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        h = str_hash(b, p->sample_types[t].unit, str_hash(b, p->sample_types[t].type, h));
    }
    return str_hash(b, p->period_type.unit, str_hash(b, p->period_type.type, h));
}

static bool same_series(const struct fc_batch *b, const struct fc_profile *x,
                        const struct fc_profile *y)
{
    if (x->n_labels != y->n_labels || x->n_sample_types != y->n_sample_types ||
        !str_equal(b, x->period_type.type, y->period_type.type) ||
        !str_equal(b, x->period_type.unit, y->period_type.unit)) {
        return false;
    }
    for (uint32_t i = 0; i < x->n_labels; i++) {
        if (!str_equal(b, x->labels[i].name, y->labels[i].name) ||
            !str_equal(b, x->labels[i].value, y->labels[i].value)) {
            return false;
        }
    }
    for (uint32_t t = 0; t < x->n_sample_types; t++) {
        if (!str_equal(b, x->sample_types[t].type, y->sample_types[t].type) ||
            !str_equal(b, x->sample_types[t].unit, y->sample_types[t].unit)) {
            return false;
        }
    }
    return true;
}

/* Appends src's samples to dst and widens dst's time to cover both. */
static int merge_profile(struct fc_batch *b, struct fc_profile *dst, const struct fc_profile *src)
{
    int64_t start = dst->time_ns;
    int64_t end = dst->time_ns + dst->duration_ns;

    for (uint32_t i = 0; i < src->n_samples; i++) {
        const struct fc_sample *s = &src->samples[i];
        int rc = fc_profile_add_sample(b, dst, s, src->nums + s->values_off, s->n_values,
                                       src->nums + s->ts_off, s->n_ts);
        if (rc != FC_OK) {
            return rc;
        }
    }
    if (src->time_ns > 0 && (start == 0 || src->time_ns < start)) {
        start = src->time_ns;
    }
    if (src->time_ns + src->duration_ns > end) {
        end = src->time_ns + src->duration_ns;
    }
    if (start > 0) {
        dst->time_ns = start;
        dst->duration_ns = end > start ? end - start : 0;
    }
    return FC_OK;
}

/* Merges the kept profiles of one series into the first; returns how many were merged. */
static int merge_profiles(struct worker *w, struct fc_batch *b, uint32_t *merged)
{
    size_t mask = slots_reset(w, b->n_profiles);

    *merged = 0;
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        size_t at;
        if (w->state[i] & P_DROPPED) {
            continue;
        }
        at = series_hash(b, &b->profiles[i]) & mask;
        for (;; at = (at + 1) & mask) {
            uint32_t j;
            if (w->slots[at] == 0) {
                w->slots[at] = i + 1;
                break;
            }
            j = w->slots[at] - 1;
            if (same_series(b, &b->profiles[j], &b->profiles[i])) {
                int rc = merge_profile(b, &b->profiles[j], &b->profiles[i]);
                if (rc != FC_OK) {
                    return rc;
                }
                w->state[i] |= P_DROPPED;
                w->state[j] |= P_SAMPLES_CHANGED;
                (*merged)++;
                break;
            }
        }
    }
    return FC_OK;
}

/* ---- the processor ------------------------------------------------------------------------ */

/* *dropped: sample rows removed by rules (with the profiles they dropped); *merged_rows: rows
 * summed into an equal one, which is not a drop. */
static int relabel_batch(struct relabel *r, struct worker *w, struct fc_batch *b,
                         struct fc_arena *arena, int64_t *merged_rows, int64_t *dropped)
{
    uint32_t n_merged = 0;
    uint32_t kept = 0;
    int rc = FC_OK;

    reserve(&w->state, &w->state_cap, b->n_profiles + 1, 1);
    memset(w->state, 0, b->n_profiles);
    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        struct fc_profile *p = &b->profiles[i];
        enum verdict v = V_KEEP;
        if (fc_relabel_rules_count(r->series) > 0) {
            rc = relabel_series(r, w, b, p, arena, &v);
            if (rc != FC_OK) {
                break;
            }
        }
        if (v == V_KEEP && fc_relabel_rules_count(r->samples) > 0 && p->n_samples > 0) {
            uint32_t removed = 0;
            bool changed = false;
            rc = relabel_samples(r, w, b, p, arena, &removed, &changed);
            fc_metric_add(r->dropped_samples, removed);
            *dropped += removed;
            if (p->n_samples == 0) {
                v = V_DROP_NO_SAMPLES;
            } else if (changed || removed > 0) {
                w->state[i] |= P_SAMPLES_CHANGED;
            }
        }
        if (v != V_KEEP) {
            fc_metric_add(r->dropped_profiles[v - 1], 1);
            *dropped += p->n_samples;
            w->state[i] |= P_DROPPED;
        }
    }
    if (rc == FC_OK) {
        rc = merge_profiles(w, b, &n_merged);
        fc_metric_add(r->merged_profiles, n_merged);
    }
    if (rc != FC_OK) {
        return rc;
    }
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        if (w->state[i] & P_DROPPED) {
            continue;
        }
        if (w->state[i] & P_SAMPLES_CHANGED) {
            *merged_rows += merge_samples(w, b, &b->profiles[i]);
        }
        if (kept != i) {
            b->profiles[kept] = b->profiles[i];
        }
        kept++;
    }
    b->n_profiles = kept;
    return FC_OK;
}

static int relabel_process(struct fc_processor *self, struct fc_batch **batchp,
                           struct fc_error *err)
{
    struct relabel *r = self->ctx;
    struct fc_batch *b = *batchp;
    struct worker *w;
    struct fc_arena *arena;
    int64_t merged_rows = 0, dropped = 0;
    uint64_t match_errors;
    int rc;

    if (b->n_profiles == 0 || (fc_relabel_rules_count(r->series) == 0 &&
                               fc_relabel_rules_count(r->samples) == 0 && b->n_profiles < 2)) {
        return FC_OK;
    }
    w = worker_take(r);
    arena = fc_arena_new(0);
    match_errors = w->scratch.match_errors;
    rc = relabel_batch(r, w, b, arena, &merged_rows, &dropped);
    fc_metric_add(r->match_errors, (int64_t)(w->scratch.match_errors - match_errors));
    fc_arena_free(arena);
    worker_give(r, w);
    if (rc != FC_OK) {
        return fc_errorf(err, rc, "relabel: the batch or a label expansion exceeds its size limit");
    }
    if (b->n_profiles == 0) {
        fc_batch_unref(b);
        *batchp = NULL;
    }
    /* Counted here, not by the service (counts_dropped): merged rows left the batch too. */
    fc_metric_add(self->dropped_samples, dropped);
    fc_metric_add(r->merged_samples, merged_rows);
    return FC_OK;
}

static int relabel_create(struct fc_processor *self, struct fc_error *err)
{
    const struct relabel_config *cfg = self->config;
    enum fc_relabel_names names =
        cfg->label_name_validation == 1 ? FC_RELABEL_NAMES_LEGACY : FC_RELABEL_NAMES_UTF8;
    struct relabel *r;
    char labels[320];
    static const char *const reasons[] = {"rule", "no_labels", "no_samples"};

    if (cfg->cache_size < 0 || cfg->cache_size > MAX_CACHE_SIZE) {
        return fc_errorf(err, FC_ECONFIG, "cache_size: %lld is not between 0 and %d",
                         (long long)cfg->cache_size, MAX_CACHE_SIZE);
    }
    r = fc_xcalloc(1, sizeof(*r));
    r->cfg = cfg;
    if (fc_relabel_compile(cfg->relabel_configs, "relabel_configs", names, &r->series, err) !=
            FC_OK ||
        fc_relabel_compile(cfg->sample_relabel_configs, "sample_relabel_configs", names,
                           &r->samples, err) != FC_OK) {
        fc_relabel_rules_free(r->series);
        free(r);
        return FC_ECONFIG;
    }
    cache_init(&r->cache, (size_t)cfg->cache_size);
    pthread_mutex_init(&r->pool_lock, NULL);
    for (size_t i = 0; i < 3; i++) {
        snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\",reason=\"%s\"", self->id,
                 self->pipeline, reasons[i]);
        r->dropped_profiles[i] =
            fc_metrics_counter("flamecol_processor_relabel_dropped_profiles_total", labels,
                               "Profiles the relabel processor dropped, by reason.");
    }
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
    {
        const struct {
            _Atomic int64_t **slot;
            const char *name, *help;
        } counters[] = {
            {&r->dropped_samples, "dropped_samples", "Samples sample_relabel_configs dropped."},
            {&r->merged_profiles, "merged_profiles",
             "Profiles merged into another of the same series in their batch."},
            {&r->merged_samples, "merged_samples",
             "Samples merged into an equal sample (values summed)."},
            {&r->cache_hits, "cache_hits", "Series label sets found in the relabel cache."},
            {&r->cache_misses, "cache_misses", "Series label sets relabeled (not in the cache)."},
            {&r->match_errors, "match_errors",
             "Regex matches abandoned at PCRE2's limits (counted as no match)."},
        };
        for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++) {
            char name[96];
            snprintf(name, sizeof(name), "flamecol_processor_relabel_%s_total", counters[i].name);
            *counters[i].slot = fc_metrics_counter(name, labels, counters[i].help);
        }
    }
    self->ctx = r;
    return FC_OK;
}

static void relabel_destroy(struct fc_processor *self)
{
    struct relabel *r = self->ctx;

    while (r->pool != NULL) {
        struct worker *w = r->pool;
        r->pool = w->next;
        worker_free(w);
    }
    pthread_mutex_destroy(&r->pool_lock);
    cache_release(&r->cache);
    fc_relabel_rules_free(r->series);
    fc_relabel_rules_free(r->samples);
    free(r);
    self->ctx = NULL;
}

const struct fc_processor_type fc_relabel_processor = {
    .info = {"relabel",
             "Prometheus relabel_configs on series labels and sample labels; merges what "
             "becomes equal",
             FC_STABILITY_ALPHA, relabel_fields, sizeof(struct relabel_config)},
    .create = relabel_create,
    .process = relabel_process,
    .destroy = relabel_destroy,
    .preserves_batch = false,
    .counts_dropped = true,
};
