/*
 * The store's read path: series matching by the label index, merging the
 * packed windows that cover a range, timelines, and label listings.
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/sat.h"
#include "formats/pb.h"

#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ------------------------------------------------------------------------------ */

static void ids_push(struct idset *s, uint32_t id)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = fc_xrealloc(s->v, s->cap * sizeof(uint32_t));
    }
    s->v[s->n++] = id;
}

bool fc_store_posting_ids(const MDB_val *kv, size_t prefix_len, const MDB_val *v, uint32_t *ids,
                          size_t *n)
{
    const uint8_t *k = (const uint8_t *)kv->mv_data + prefix_len, *p = v->mv_data;
    struct fc_pb r;

    *n = 0;
    if (kv->mv_size == prefix_len + 5 && k[4] == FC_STORE_POSTING_DELTAS) {
        ids[(*n)++] = be32(k);
        fc_pb_init(&r, p, v->mv_size);
        while (r.p < r.end) {
            uint64_t d;
            if (*n == FC_STORE_POSTING_IDS || fc_pb_varint(&r, &d) != 0 || d == 0 ||
                d > UINT32_MAX - ids[*n - 1]) {
                return false;
            }
            ids[*n] = ids[*n - 1] + (uint32_t)d;
            (*n)++;
        }
        return true;
    }
    if (kv->mv_size != prefix_len + 4) {
        return false;
    }
    if (v->mv_size == 0) { /* format 7: the id in the key */
        ids[(*n)++] = be32(k);
        return true;
    }
    if (v->mv_size % 4 != 0 || v->mv_size / 4 > FC_STORE_POSTING_IDS || be32(p) != be32(k)) {
        return false; /* a chunk's first id is its key's (found by fuzz_postings) */
    }
    for (size_t i = 0; i < v->mv_size; i += 4) {
        ids[*n] = be32(p + i);
        if (*n > 0 && ids[*n] <= ids[*n - 1]) {
            return false;
        }
        (*n)++;
    }
    return true;
}

/*
 * Series ids of (name, value), from the postings (fc_store_posting_ids),
 * sorted. With cap > 0 it stops after cap + 1 ids and returns false: the
 * list is longer than cap.
 */
static bool postings(struct reader *r, const char *name, const char *value, size_t cap,
                     struct idset *out)
{
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;
    size_t n = 0;
    int rc;

    key_tenant(&k, r->tenant);
    key_h64(&k, name, strlen(name));
    key_h64(&k, value, strlen(value));
    if (mdb_cursor_open(r->txn, r->s->db[DB_POST], &c) != 0) {
        return true;
    }
    kv = val(k.b, k.n);
    for (rc = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        uint32_t ids[FC_STORE_POSTING_IDS];
        size_t got;
        if (kv.mv_size < k.n + 4 || memcmp(kv.mv_data, k.b, k.n) != 0) {
            break;
        }
        if (!fc_store_posting_ids(&kv, k.n, &v, ids, &got)) {
            atomic_fetch_add(&r->s->corrupt, 1);
            continue;
        }
        for (size_t i = 0; i < got; i++) {
            if (cap != 0 && n++ == cap) {
                mdb_cursor_close(c);
                return false;
            }
            ids_push(out, ids[i]);
        }
    }
    mdb_cursor_close(c);
    return true;
}

/*
 * Every series id of the tenant (a selector with nothing to narrow by):
 * the keys of their own and the buckets' entries (format 18), sorted.
 */
static void all_series(struct reader *r, struct idset *out)
{
    struct sid_entry e[FC_STORE_SID_SLOTS];
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;
    size_t n;

    key_tenant(&k, r->tenant);
    if (mdb_cursor_open(r->txn, r->s->db[DB_SID], &c) != 0) {
        return;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        const uint8_t *id = (const uint8_t *)kv.mv_data + k.n;
        if (kv.mv_size < k.n + 4 || memcmp(kv.mv_data, k.b, k.n) != 0) {
            break;
        }
        if (kv.mv_size == k.n + 4) {
            ids_push(out, be32(id));
        } else if (kv.mv_size != k.n + 5 || id[4] != FC_STORE_SID_BUCKET ||
                   be32(id) > UINT32_MAX / FC_STORE_SID_SLOTS ||
                   !fc_store_sid_bucket_decode(&v, e, &n)) {
            atomic_fetch_add(&r->s->corrupt, 1);
        } else {
            for (size_t i = 0; i < n; i++) {
                ids_push(out, be32(id) * FC_STORE_SID_SLOTS + e[i].slot);
            }
        }
    }
    mdb_cursor_close(c);
    if (out->n > 1) { /* out->v is NULL for a tenant without series */
        qsort(out->v, out->n, sizeof(uint32_t), cmp_u32);
    }
}

/*
 * The shortest postings list among the selector's equalities (the profile
 * type and every non-empty `=`), into out; false when it has none. Every
 * candidate is checked against the whole selector afterwards, so one list
 * is enough: the others would only narrow what that check narrows anyway.
 * Lists are first counted under a cap that grows eightfold, so a query of
 * one pod among 10,000 never walks the service's or the type's long lists.
 */
static bool shortest_postings(struct reader *r, const struct fc_selector *sel, struct idset *out)
{
    bool any = sel->profile_type != NULL;

    for (size_t i = 0; i < sel->n && !any; i++) {
        any = sel->matchers[i].op == FC_MATCH_EQ && sel->matchers[i].value[0] != '\0';
    }
    if (!any) {
        return false;
    }
    for (size_t cap = 64;; cap = cap > SIZE_MAX / 8 ? 0 : cap * 8) {
        out->n = 0;
        if (sel->profile_type != NULL &&
            postings(r, "__profile_type__", sel->profile_type, cap, out)) {
            return true;
        }
        for (size_t i = 0; i < sel->n; i++) {
            const struct fc_matcher *m = &sel->matchers[i];
            if (m->op != FC_MATCH_EQ || m->value[0] == '\0') {
                continue;
            }
            /* The first list that fits under this cap is within 8x of the shortest. */
            out->n = 0;
            if (postings(r, m->name, m->value, cap, out)) {
                return true;
            }
        }
    }
}

/*
 * Series of the tenant matching the selector: narrowed by the index (the
 * shortest equality's postings), then checked in full against the labels.
 */
static int match_series(struct reader *r, const struct fc_selector *sel, bool need_type,
                        struct idset *out)
{
    struct idset cand = {0};
    char buf[4096];

    if (sel->profile_type == NULL && need_type) {
        return fc_errorf(r->err, FC_EPROTO,
                         "the query must select a profile type, e.g. "
                         "process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}");
    }
    if (!shortest_postings(r, sel, &cand)) {
        all_series(r, &cand);
    }
    for (size_t i = 0; i < cand.n; i++) {
        struct series_labels l;
        bool ok = true;
        if (!fc_store_sid_get(r->s, r->txn, r->tenant, cand.v[i], &r->sids, &l)) {
            continue;
        }
        if (sel->profile_type != NULL) {
            ok = strcmp(fc_store_series_label(&l, "__profile_type__", buf, sizeof(buf)),
                        sel->profile_type) == 0;
        }
        for (size_t j = 0; ok && j < sel->n; j++) {
            ok =
                fc_matcher_match(&sel->matchers[j], fc_store_series_label(&l, sel->matchers[j].name,
                                                                          buf, sizeof(buf)));
        }
        if (ok) {
            ids_push(out, cand.v[i]);
        }
    }
    free(cand.v);
    return FC_OK;
}

static void normalize(const struct fc_store_query *q, int64_t *from_s, int64_t *until_s)
{
    int64_t f = q->from_ns / 1000000000LL;
    int64_t u = (q->until_ns + 999999999LL) / 1000000000LL;

    *from_s = f - ((f % 10) + 10) % 10;
    *until_s = u + (10 - ((u % 10) + 10) % 10) % 10;
    if (*until_s <= *from_s) {
        *until_s = *from_s + 10;
    }
}

static bool base_wants(void *ctx, uint32_t series)
{
    const struct base_group *g = ctx;
    return bsearch(&series, g->sids, g->n, sizeof(uint32_t), cmp_u32) != NULL;
}

/* The series' bases, read from the index. */
struct bases {
    struct base_group *v;
    size_t n;
    uint32_t *sids; /* owned: every group's sids, grouped by base */
};

static int by_base_then_sid(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    int c = cmp_u32(&x[0], &y[0]);
    return c ? c : cmp_u32(&x[1], &y[1]);
}

/* The base a series is packed under. */
static bool base_of(struct reader *r, uint32_t series, uint32_t *base)
{
    return fc_store_series_base(r->s, r->txn, r->tenant, series, &r->sids, base);
}

static void group_by_base(struct reader *r, const struct idset *ids, struct bases *out)
{
    uint32_t(*pairs)[2] = fc_xcalloc(ids->n + 1, sizeof(*pairs));
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < ids->n; i++) {
        if (base_of(r, ids->v[i], &pairs[n][0])) {
            pairs[n++][1] = ids->v[i];
        }
    }
    qsort(pairs, n, sizeof(*pairs), by_base_then_sid);
    out->sids = fc_xcalloc(n + 1, sizeof(uint32_t));
    out->v = fc_xcalloc(n + 1, sizeof(*out->v));
    for (size_t i = 0; i < n; i++) {
        out->sids[i] = pairs[i][1];
        if (out->n == 0 || out->v[out->n - 1].base != pairs[i][0]) {
            out->v[out->n].base = pairs[i][0];
            out->v[out->n].sids = &out->sids[i];
            out->n++;
        }
        out->v[out->n - 1].n++;
    }
    free(pairs);
}

static void bases_release(struct bases *b)
{
    free(b->v);
    free(b->sids);
    memset(b, 0, sizeof(*b));
}

struct merge {
    struct reader *r;
    const struct base_group *group;
    struct fc_tree *tree; /* NULL: only whether the group has data (found) */
    uint32_t merged;
    int rc;
    bool found;
};

/* Whether window (level, start), stored as v, holds a positive total for m's group (header only).
 */
static bool window_has(struct merge *m, const MDB_val *v)
{
    const struct base_group *group = m->group;
    struct packed p;
    bool has = false;

    if (!fc_store_window_parse(m->r->s, m->r->txn, m->r->tenant, group->base, v, &m->r->bundles,
                               &p)) {
        return false;
    }
    for (uint32_t i = 0; i < p.n && !has; i++) {
        has = p.totals[i] > 0 && base_wants((void *)group, p.series[i]);
    }
    fc_store_packed_release(&p);
    return has;
}

static void cover(struct merge *m, int level, int64_t lo, int64_t hi);

static void take(struct merge *m, int level, int64_t window)
{
    MDB_val v;
    struct parts ps = {0};

    if (window_dirty(m->r->s, m->r->txn, m->r->tenant, m->group->base, level, window)) {
        /* Stale until the next flush rebuilds it: its children instead (depth <= levels). */
        cover(m, level - 1, window, window + fc_store_level_secs[level]);
        return;
    }
    if (fc_store_node_get(m->r->s, m->r->txn, m->r->tenant, m->group->base, level, window, &v) !=
        0) {
        return;
    }
    if (fc_store_sum_of(&v)) {
        /* A sum (level >= 2, fc_store_node_get): its children (depth <= levels). */
        cover(m, level - 1, window, window + fc_store_level_secs[level]);
        return;
    }
    if (m->tree == NULL) {
        m->found = m->found || window_has(m, &v);
        return;
    }
    /* Decoded apart first: a corrupt window is skipped whole, never half merged. */
    if (!fc_store_window_decode(m->r->s, m->r->txn, m->r->tenant, m->group->base, &v,
                                &m->r->bundles, base_wants, (void *)m->group, &ps)) {
        if (atomic_fetch_add(&m->r->s->corrupt, 1) == 0) {
            fc_log_error("store",
                         "skipping a corrupt window (base %u, level %d, %lld); "
                         "counted in flamecol_store_corrupt_windows_total",
                         m->group->base, level, (long long)window);
        }
    } else if (ps.n > 0) {
        for (uint32_t i = 0; i < ps.n; i++) {
            fc_tree_merge(m->tree, &ps.v[i].tree);
        }
        m->merged++;
    }
    fc_store_parts_release(&ps);
}

/* The fewest whole windows covering [lo, hi): coarse inside, finer at the edges. */
static void cover(struct merge *m, int level, int64_t lo, int64_t hi)
{
    int64_t d = fc_store_level_secs[level];
    int64_t w = (lo >= 0 ? lo / d : (lo - d + 1) / d) * d;

    for (; w < hi && m->rc == FC_OK && !m->found; w += d) {
        int64_t a = w > lo ? w : lo;
        int64_t b = w + d < hi ? w + d : hi;
        if (a == w && b == w + d) {
            take(m, level, w);
        } else if (level == 1 && w + d <= atomic_load(&m->r->s->coarse_before)) {
            take(m, level, w); /* its 10 s windows were compacted: rounded out to 100 s */
        } else if (level > 0) {
            cover(m, level - 1, a, b);
        }
    }
}

/*
 * A read: the open windows' lock (shared) for its whole length, then an
 * LMDB snapshot, so that both come from the same side of any flush.
 */
static int begin_read(struct fc_store *s, struct reader *r, const char *tenant,
                      struct fc_error *err)
{
    int rc;

    pthread_rwlock_rdlock(&s->open.lock);
    rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &r->txn);
    /* Slots allocated by the first bundled window read. */
    r->bundles = (struct bundle_caches){NULL, FC_STORE_READER_BUNDLES, NULL, s, 0};
    r->sids.state = 0;
    r->s = s;
    r->tenant = tenant;
    r->err = err;
    if (rc != 0) {
        pthread_rwlock_unlock(&s->open.lock);
        return fc_store_lmdb_error(err, rc, "read");
    }
    return FC_OK;
}

static void end_read(struct reader *r)
{
    mdb_txn_abort(r->txn);
    fc_store_bundle_caches_release(&r->bundles);
    pthread_rwlock_unlock(&r->s->open.lock);
}

/*
 * The open windows of m's group within [from_s, until_s) (10 s aligned), by
 * the rule cover applies to stored windows: a 10 s window when it lies
 * inside, a compacted 100 s window when it overlaps (not for level0_only).
 * LMDB holds none of what they hold, so adding them is exact.
 */
static void add_open(struct merge *m, int64_t from_s, int64_t until_s, bool level0_only)
{
    for (const struct open_window *ow = fc_store_open_first(m->r->s, m->r->tenant, m->group->base);
         ow != NULL && !m->found; ow = fc_store_open_next(m->r->s, ow)) {
        int64_t end = ow->start + fc_store_level_secs[ow->level];
        bool in = ow->level == 0 ? ow->start >= from_s && end <= until_s
                                 : !level0_only && ow->start < until_s && end > from_s;
        bool any = false;
        if (!in) {
            continue;
        }
        for (uint32_t i = 0; i < ow->parts.n; i++) {
            const struct part *p = &ow->parts.v[i];
            if (fc_tree_total(&p->tree) <= 0 || !base_wants((void *)m->group, p->series)) {
                continue;
            }
            any = true;
            if (m->tree != NULL) {
                fc_tree_merge(m->tree, &p->tree);
            }
        }
        if (any && m->tree == NULL) {
            m->found = true;
        }
        m->merged += any && m->tree != NULL;
    }
}

/* Stored windows covering [from_s, until_s) and the open ones in it. */
static void cover_all(struct merge *m, int64_t from_s, int64_t until_s, bool level0_only)
{
    cover(m, level0_only ? 0 : FC_STORE_LEVELS - 1, from_s, until_s);
    if (m->rc == FC_OK && !m->found) {
        add_open(m, from_s, until_s, level0_only);
    }
}

/* Merges the span entries of one span id, for matched series within the range. */
int fc_store_select_merge(struct fc_store *s, const struct fc_store_query *q,
                          struct fc_store_result *out, struct fc_store_stats *stats,
                          struct fc_error *err)
{
    struct reader r;
    struct idset ids = {0};
    struct fc_store_service sv;
    int64_t from_s, until_s;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(stats, 0, sizeof(*stats));
    fc_tree_init(&out->frames_tree);
    if ((rc = begin_read(s, &r, q->tenant, err)) != FC_OK) {
        fc_store_result_release(out);
        return rc;
    }
    normalize(q, &from_s, &until_s);
    if (fc_store_service_of(&r, q, &sv)) {
        /* A whole service: its aggregate and its first base, instead of every base. */
        const struct base_group *groups[2] = {&sv.first, &sv.agg};
        for (int i = 0; i < 2 && rc == FC_OK; i++) {
            struct merge m = {&r, groups[i], &out->frames_tree, 0, FC_OK, false};
            if (groups[i]->n > 0) {
                cover_all(&m, from_s, until_s, false);
                stats->series += (uint32_t)groups[i]->n;
                stats->nodes_merged += m.merged;
                rc = m.rc;
            }
        }
        fc_store_service_release(&sv);
    } else if ((rc = match_series(&r, q->selector, true, &ids)) != FC_OK) {
        stats->series = 0;
    } else if (q->n_span_ids > 0 || q->n_trace_ids > 0) {
        /* Span profiles come from the span index, not the segment tree. */
        uint8_t(*spans)[8];
        size_t n_spans;
        stats->series = (uint32_t)ids.n;
        fc_store_query_spans(&r, q, &spans, &n_spans);
        qsort(ids.v, ids.n, sizeof(uint32_t), cmp_u32);
        for (size_t i = 0; i < n_spans; i++) {
            fc_store_merge_span(&r, spans[i], &ids, from_s, until_s, &out->frames_tree,
                                &stats->nodes_merged);
        }
        free(spans);
    } else {
        struct bases bases;
        stats->series = (uint32_t)ids.n;
        group_by_base(&r, &ids, &bases);
        for (size_t i = 0; rc == FC_OK && i < bases.n; i++) {
            struct merge m = {&r, &bases.v[i], &out->frames_tree, 0, FC_OK, false};
            cover_all(&m, from_s, until_s, q->level0_only);
            stats->nodes_merged += m.merged;
            rc = m.rc;
        }
        bases_release(&bases);
    }
    /* Frames for its nodes, and the flame graph by display name. */
    if (rc == FC_OK) {
        rc = fc_store_resolve(s, r.txn, q->tenant, q->granularity, out, err);
    }
    end_read(&r);
    free(ids.v);
    if (rc != FC_OK) {
        fc_store_result_release(out);
    }
    return rc;
}

void fc_store_result_release(struct fc_store_result *r)
{
    free(r->names);
    free(r->node_frame);
    free(r->frames);
    free(r->frame_bytes);
    free(r->name_bytes);
    fc_tree_release(&r->tree);
    fc_tree_release(&r->frames_tree);
    memset(r, 0, sizeof(*r));
}

struct timeline {
    int64_t from_s, step_s; /* bucket i holds windows starting in [from + i·step, +step) */
    int64_t *buckets;
    size_t n;
};

/* Adds the group's totals of the level's windows starting in [lo, hi) (packed headers only). */
static int timeline_scan(struct reader *r, const struct base_group *group, int level, int64_t lo,
                         int64_t hi, struct timeline *tl)
{
    struct key k, prefix;
    MDB_cursor *c;
    MDB_val kv, v;

    node_key(&k, r->tenant, group->base, level, lo);
    prefix = k;
    prefix.n -= 8;
    if (mdb_cursor_open(r->txn, r->s->db[DB_NODE], &c) != 0) {
        return FC_EIO;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        int64_t w, total = 0, child;
        size_t at;
        struct packed p;
        if (kv.mv_size != prefix.n + 8 || memcmp(kv.mv_data, prefix.b, prefix.n) != 0) {
            break;
        }
        w = (int64_t)be64((const uint8_t *)kv.mv_data + prefix.n);
        if (w >= hi) {
            break;
        }
        if (w < lo || window_dirty(r->s, r->txn, r->tenant, group->base, level, w)) {
            continue; /* a dirty window: its children below */
        }
        if (fc_store_sum_of(&v)) {
            /* Its children's totals (depth <= levels); a sum below level 2 is never written. */
            int rc = level < 2 ? (atomic_fetch_add(&r->s->corrupt, 1), FC_OK)
                               : timeline_scan(r, group, level - 1, w,
                                               w + fc_store_level_secs[level], tl);
            if (rc != FC_OK) {
                mdb_cursor_close(c);
                return rc;
            }
            continue;
        }
        if (fc_store_link_of(&v, &child)) {
            if (fc_store_node_get(r->s, r->txn, r->tenant, group->base, level, w, &v) != 0) {
                continue; /* a link whose child is gone: nothing there */
            }
        } else if (!fc_store_marker_fits(&v, level, w)) {
            atomic_fetch_add(&r->s->corrupt, 1); /* another window's marker */
            continue;
        }
        if (!fc_store_window_parse(r->s, r->txn, r->tenant, group->base, &v, &r->bundles, &p)) {
            atomic_fetch_add(&r->s->corrupt, 1);
            continue;
        }
        for (uint32_t i = 0; i < p.n; i++) {
            total = fc_sat_add(total, base_wants((void *)group, p.series[i]) ? p.totals[i] : 0);
        }
        fc_store_packed_release(&p);
        at = w <= tl->from_s ? 0 : (size_t)((w - tl->from_s) / tl->step_s);
        if (at < tl->n) {
            tl->buckets[at] = fc_sat_add(tl->buckets[at], total);
        }
    }
    mdb_cursor_close(c);
    if (level == 0) {
        return FC_OK;
    }
    /* Dirty windows starting in [lo, hi): their children's totals (depth <= levels). */
    if (mdb_cursor_open(r->txn, r->s->db[DB_DIRTY], &c) != 0) {
        return FC_EIO;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        int64_t w;
        if (kv.mv_size != prefix.n + 8 || memcmp(kv.mv_data, prefix.b, prefix.n) != 0) {
            break;
        }
        w = (int64_t)be64((const uint8_t *)kv.mv_data + prefix.n);
        if (w >= hi) {
            break;
        }
        if (w >= lo) {
            int rc = timeline_scan(r, group, level - 1, w, w + fc_store_level_secs[level], tl);
            if (rc != FC_OK) {
                mdb_cursor_close(c);
                return rc;
            }
        }
    }
    mdb_cursor_close(c);
    return FC_OK;
}

/*
 * Adds the open windows' totals of the group where the stored windows they
 * will go into are counted: a 10 s window under the level-`level` window
 * that starts in [from_s, until_s) (from_s is the cutoff when the compacted
 * past was scanned apart), a compacted 100 s window as timeline_of scans
 * those. LMDB holds none of it, so adding it is exact.
 */
static void timeline_open(struct reader *r, const struct base_group *group, struct timeline *tl,
                          int level, int64_t from_s, int64_t until_s, int64_t coarse)
{
    int64_t d = fc_store_level_secs[level];

    for (const struct open_window *ow = fc_store_open_first(r->s, r->tenant, group->base);
         ow != NULL; ow = fc_store_open_next(r->s, ow)) {
        int64_t w, total = 0;
        size_t at;
        if (ow->level == 1) {
            /* The compacted past: scanned apart at level 0 (from its 100 s start), else as any. */
            int64_t lo = tl->from_s >= 0 ? tl->from_s / 100 * 100 : (tl->from_s - 99) / 100 * 100;
            bool apart = level == 0 && tl->from_s < coarse;
            w = apart ? ow->start : (ow->start >= 0 ? ow->start / d : (ow->start - d + 1) / d) * d;
            if (apart ? w < lo || w >= (coarse < until_s ? coarse : until_s)
                      : w < from_s || w >= until_s) {
                continue;
            }
        } else {
            w = (ow->start >= 0 ? ow->start / d : (ow->start - d + 1) / d) * d;
            if (w < from_s || w >= until_s) {
                continue;
            }
        }
        for (uint32_t i = 0; i < ow->parts.n; i++) {
            if (base_wants((void *)group, ow->parts.v[i].series)) {
                total = fc_sat_add(total, fc_tree_total(&ow->parts.v[i].tree));
            }
        }
        at = w <= tl->from_s ? 0 : (size_t)((w - tl->from_s) / tl->step_s);
        if (at < tl->n) {
            tl->buckets[at] = fc_sat_add(tl->buckets[at], total);
        }
    }
}

/* Adds the group's window totals per step into buckets (no trees decoded). */
static int timeline_of(struct reader *r, const struct fc_store_query *q,
                       const struct base_group *group, int64_t step_ns, int64_t *buckets, size_t n)
{
    int64_t from_s = q->from_ns / 1000000000LL;
    int64_t until_s = (q->until_ns + 999999999LL) / 1000000000LL;
    int64_t coarse = atomic_load(&r->s->coarse_before);
    struct timeline tl = {from_s, step_ns / 1000000000LL, buckets, n};
    int level = 0;
    int rc = FC_OK;

    if (tl.step_s <= 0) {
        return FC_OK;
    }
    /* The coarsest windows that still fit in one step: fewer totals to read. */
    while (level + 1 < FC_STORE_LEVELS && fc_store_level_secs[level + 1] <= tl.step_s &&
           tl.step_s % fc_store_level_secs[level + 1] == 0 &&
           from_s % fc_store_level_secs[level + 1] == 0) {
        level++;
    }
    if (level == 0 && from_s < coarse) {
        /* Compacted past: its 100 s totals, each in the bucket where its window starts. */
        int64_t lo = (from_s >= 0 ? from_s / 100 : (from_s - 99) / 100) * 100;
        rc = timeline_scan(r, group, 1, lo, coarse < until_s ? coarse : until_s, &tl);
        from_s = coarse;
    }
    rc = rc == FC_OK ? timeline_scan(r, group, level, from_s, until_s, &tl) : rc;
    if (rc == FC_OK) {
        timeline_open(r, group, &tl, level, from_s, until_s, coarse);
    }
    return rc;
}

int fc_store_timeline(struct fc_store *s, const struct fc_store_query *q, int64_t step_ns,
                      int64_t *buckets, size_t n, struct fc_error *err)
{
    struct reader r;
    struct idset ids = {0};
    struct fc_store_service sv;
    int rc;

    memset(buckets, 0, n * sizeof(int64_t));
    if ((rc = begin_read(s, &r, q->tenant, err)) != FC_OK) {
        return rc;
    }
    if (fc_store_service_of(&r, q, &sv)) {
        /* A whole service: its aggregate's totals and its first base's. */
        if (sv.first.n > 0) {
            rc = timeline_of(&r, q, &sv.first, step_ns, buckets, n);
        }
        if (rc == FC_OK && sv.agg.n > 0) {
            rc = timeline_of(&r, q, &sv.agg, step_ns, buckets, n);
        }
        fc_store_service_release(&sv);
    } else if ((rc = match_series(&r, q->selector, true, &ids)) == FC_OK) {
        struct bases bases;
        group_by_base(&r, &ids, &bases);
        for (size_t i = 0; rc == FC_OK && i < bases.n; i++) {
            rc = timeline_of(&r, q, &bases.v[i], step_ns, buckets, n);
        }
        bases_release(&bases);
    }
    end_read(&r);
    free(ids.v);
    return rc;
}

static int by_string(const void *a, const void *b);

static bool seen(const struct idset *s, uint32_t id)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->v[i] == id) {
            return true;
        }
    }
    return false;
}

/* Whether the series has data in [from_s, until_s) (window headers only). */
static bool has_data(struct reader *r, uint32_t series, int64_t from_s, int64_t until_s)
{
    struct base_group one = {0, &series, 1};
    struct merge m = {r, &one, NULL, 0, FC_OK, false};

    if (!base_of(r, series, &one.base)) {
        return false;
    }
    cover_all(&m, from_s, until_s, false);
    return m.found;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Sorts v and frees repeats: since format 13 a series is one per base, so
 * the same labels can be two series when a label came from the profile in
 * one push and from a sample in another (two bases).
 */
static void unique_labels(char **v, size_t *n)
{
    size_t kept = 0;

    if (*n == 0) {
        return;
    }
    qsort(v, *n, sizeof(*v), by_string);
    for (size_t i = 0; i < *n; i++) {
        if (kept > 0 && strcmp(v[kept - 1], v[i]) == 0) {
            free(v[i]);
        } else {
            v[kept++] = v[i];
        }
    }
    *n = kept;
}

int fc_store_series_labels(struct fc_store *s, const char *tenant,
                           const struct fc_selector *selectors, size_t n_selectors, int64_t from_ns,
                           int64_t until_ns, char ***out, size_t *n, struct fc_error *err)
{
    struct fc_store_query range = {0};
    int64_t from_s = 0, until_s = 0;
    struct reader r;
    struct idset all = {0};
    size_t cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = begin_read(s, &r, tenant, err)) != FC_OK) {
        return rc;
    }
    for (size_t i = 0; rc == FC_OK && i < (n_selectors ? n_selectors : 1); i++) {
        struct idset ids = {0};
        struct fc_selector none = {0};
        rc = match_series(&r, n_selectors ? &selectors[i] : &none, false, &ids);
        for (size_t j = 0; j < ids.n; j++) {
            if (!seen(&all, ids.v[j])) {
                ids_push(&all, ids.v[j]);
            }
        }
        free(ids.v);
    }
    range.from_ns = from_ns;
    range.until_ns = until_ns;
    if (until_ns > 0) {
        normalize(&range, &from_s, &until_s);
    }
    for (size_t i = 0; rc == FC_OK && i < all.n; i++) {
        struct series_labels l;
        struct fc_buf canon;
        if (!fc_store_sid_get(s, r.txn, tenant, all.v[i], &r.sids, &l) ||
            (until_ns > 0 && !has_data(&r, all.v[i], from_s, until_s))) {
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            *out = fc_xrealloc(*out, cap * sizeof(char *));
        }
        fc_buf_init(&canon, 0);
        fc_store_series_canonical(&l, &canon);
        fc_buf_append(&canon, "", 1);
        (*out)[(*n)++] = (char *)fc_buf_detach(&canon, NULL);
    }
    end_read(&r);
    free(all.v);
    unique_labels(*out, n);
    return rc;
}

/*
 * SelectSeries of a whole service (fc_store_service_of) grouped by nothing
 * or by service_name alone: every series falls in one group, so its totals
 * are the service's timeline, read from its aggregate and first base
 * instead of series by series. false: not such a query (*rc untouched).
 */
static bool whole_service_series(struct reader *r, const struct fc_store_query *q, int64_t step_ns,
                                 size_t n_buckets, const char *const *group_by, size_t n_group_by,
                                 struct fc_store_timeseries **out, size_t *n, int *rc)
{
    struct fc_store_service sv;
    struct fc_buf group;

    for (size_t j = 0; j < n_group_by; j++) {
        if (strcmp(group_by[j], FC_STORE_SERVICE_LABEL) != 0) {
            return false;
        }
    }
    if (!fc_store_service_of(r, q, &sv)) {
        return false;
    }
    *rc = FC_OK;
    if (sv.first.n + sv.agg.n > 0) {
        /* The group's labels as the per-series path writes them. */
        fc_buf_init(&group, 0);
        fc_buf_append(&group, "", 0);
        for (size_t j = 0; j < n_group_by; j++) {
            fc_buf_puts(&group, group_by[j]);
            fc_buf_append(&group, "\x01", 1);
            fc_buf_puts(&group, q->selector->matchers[0].value);
            fc_buf_append(&group, "\x02", 1);
        }
        *out = fc_xcalloc(1, sizeof(**out));
        (*out)[0].labels = (char *)fc_buf_detach(&group, NULL);
        (*out)[0].buckets = fc_xcalloc(n_buckets + 1, sizeof(int64_t));
        *n = 1;
        if (sv.first.n > 0) {
            *rc = timeline_of(r, q, &sv.first, step_ns, (*out)[0].buckets, n_buckets);
        }
        if (*rc == FC_OK && sv.agg.n > 0) {
            *rc = timeline_of(r, q, &sv.agg, step_ns, (*out)[0].buckets, n_buckets);
        }
    }
    fc_store_service_release(&sv);
    return true;
}

int fc_store_select_series(struct fc_store *s, const struct fc_store_query *q, int64_t step_ns,
                           size_t n_buckets, const char *const *group_by, size_t n_group_by,
                           struct fc_store_timeseries **out, size_t *n, struct fc_error *err)
{
    struct reader r;
    struct idset ids = {0};
    char buf[4096];
    size_t cap = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if ((rc = begin_read(s, &r, q->tenant, err)) != FC_OK) {
        return rc;
    }
    if (whole_service_series(&r, q, step_ns, n_buckets, group_by, n_group_by, out, n, &rc)) {
        end_read(&r);
        return rc;
    }
    rc = match_series(&r, q->selector, true, &ids);
    for (size_t i = 0; rc == FC_OK && i < ids.n; i++) {
        struct series_labels l;
        struct fc_buf group;
        size_t g;
        if (!fc_store_sid_get(s, r.txn, q->tenant, ids.v[i], &r.sids, &l)) {
            continue;
        }
        /* The group: the series' values of the group_by labels. */
        fc_buf_init(&group, 0);
        fc_buf_append(&group, "", 0);
        for (size_t j = 0; j < n_group_by; j++) {
            const char *value = fc_store_series_label(&l, group_by[j], buf, sizeof(buf));
            if (value[0] == '\0') {
                continue;
            }
            fc_buf_puts(&group, group_by[j]);
            fc_buf_append(&group, "\x01", 1);
            fc_buf_puts(&group, value);
            fc_buf_append(&group, "\x02", 1);
        }
        for (g = 0; g < *n; g++) {
            if (strcmp((*out)[g].labels, (const char *)group.data) == 0) {
                break;
            }
        }
        if (g == *n) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 8;
                *out = fc_xrealloc(*out, cap * sizeof(**out));
            }
            (*out)[g].labels = (char *)fc_buf_detach(&group, NULL);
            (*out)[g].buckets = fc_xcalloc(n_buckets + 1, sizeof(int64_t));
            (*n)++;
        }
        fc_buf_release(&group);
        {
            /* One series of its base; a base has few series, so this stays cheap. */
            struct base_group one = {0, &ids.v[i], 1};
            if (base_of(&r, ids.v[i], &one.base)) {
                rc = timeline_of(&r, q, &one, step_ns, (*out)[g].buckets, n_buckets);
            }
        }
    }
    end_read(&r);
    free(ids.v);
    return rc;
}

void fc_store_timeseries_free(struct fc_store_timeseries *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].labels);
        free(v[i].buckets);
    }
    free(v);
}

static int scan_strings(struct fc_store *s, int db, const struct key *prefix, size_t key_len,
                        char ***out, size_t *n, struct fc_error *err)
{
    struct reader r;
    MDB_cursor *c;
    MDB_val kv, v;
    size_t cap = 0;
    int rc = begin_read(s, &r, "", err);

    *out = NULL;
    *n = 0;
    if (rc != FC_OK) {
        return rc;
    }
    if (mdb_cursor_open(r.txn, s->db[db], &c) == 0) {
        kv = val(prefix->b, prefix->n);
        for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            if (kv.mv_size != key_len || memcmp(kv.mv_data, prefix->b, prefix->n) != 0) {
                break;
            }
            if (*n == cap) {
                cap = cap ? cap * 2 : 32;
                *out = fc_xrealloc(*out, cap * sizeof(char *));
            }
            (*out)[(*n)++] = fc_xstrndup(v.mv_data, v.mv_size);
        }
        mdb_cursor_close(c);
    }
    end_read(&r);
    if (*n > 1) {
        qsort(*out, *n, sizeof(char *), by_string);
    }
    return FC_OK;
}

int fc_store_label_names(struct fc_store *s, const char *tenant, char ***out, size_t *n,
                         struct fc_error *err)
{
    struct key k;

    key_tenant(&k, tenant);
    return scan_strings(s, DB_LN, &k, k.n + 8, out, n, err);
}

int fc_store_label_values(struct fc_store *s, const char *tenant, const char *name, char ***out,
                          size_t *n, struct fc_error *err)
{
    struct key k;

    key_tenant(&k, tenant);
    key_h64(&k, name, strlen(name));
    return scan_strings(s, DB_LV, &k, k.n + 8, out, n, err);
}

void fc_store_strings_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}
