/*
 * Service aggregates: per (tenant, service_name) a pseudo base whose windows
 * hold, per profile type, the merge of every series of that service, so that
 * a whole-service flame graph reads one packed window per covering window
 * instead of one per pod (issue 14). The write path adds each series' tree
 * to it in the same transaction (store_write.c); the read path uses it for
 * a selector of only the profile type and service_name (store_read.c).
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/mem.h"

#include <lmdb.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/*
 * Hash inputs of a service's keys: a 0 byte, a kind, the service, then for
 * a type 0 and the type. Canonical label sets start with a name and never
 * with a 0 byte, and a service holds no 0 byte, so no two inputs are equal.
 *   'a' service        in base: the aggregate's base id
 *   'a' service 0 type in series: the aggregate's series id of that type
 *   'f' service        in meta: the first base (be32) with a series of the service
 *   'l' service 0 type in meta: that base's series of (service, type), sorted be32
 */
static void service_key(struct key *k, const char *tenant, char kind, const char *service,
                        const char *type)
{
    struct fc_buf c;

    fc_buf_init(&c, 0);
    fc_buf_append(&c, "", 1);
    fc_buf_append(&c, &kind, 1);
    fc_buf_puts(&c, service);
    if (type != NULL) {
        fc_buf_append(&c, "", 1);
        fc_buf_puts(&c, type);
    }
    key_tenant(k, tenant);
    if (kind == 'f' || kind == 'l') {
        k->b[k->n++] = 0; /* meta: after the tenant's counters' names, which never start with 0 */
    }
    key_h128(k, (const char *)c.data, c.len);
    fc_buf_release(&c);
}

static void put_be32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

/* The id under key k of db, made from counter `what` when missing. */
static int id_of(struct writer *w, int db, const char *what, struct key *k, uint32_t *id)
{
    MDB_val kv = val(k->b, k->n), v;
    int rc;

    if (fc_store_ids_get(w->s, db, k, id)) {
        return FC_OK;
    }
    if (mdb_get(w->txn, w->s->db[db], &kv, &v) == 0 && v.mv_size == 4) {
        *id = be32(v.mv_data);
        fc_store_ids_note(w->s, db, k, *id);
        return FC_OK;
    }
    rc = fc_store_next_id(w, what, id);
    if (rc == FC_OK) {
        uint8_t be[4];
        fc_store_ids_note(w->s, db, k, *id);
        put_be32(be, *id);
        rc = fc_store_put_empty(w, db, k, be, 4);
    }
    return rc;
}

/* The be32 under key k of meta, set to `value` when missing. */
static int id_of_value(struct writer *w, struct key *k, uint32_t value, uint32_t *out)
{
    MDB_val kv = val(k->b, k->n), v;
    uint8_t be[4];

    if (fc_store_ids_get(w->s, DB_META, k, out)) {
        return FC_OK;
    }
    if (mdb_get(w->txn, w->s->db[DB_META], &kv, &v) == 0 && v.mv_size == 4) {
        *out = be32(v.mv_data);
        fc_store_ids_note(w->s, DB_META, k, *out);
        return FC_OK;
    }
    *out = value;
    fc_store_ids_note(w->s, DB_META, k, value);
    put_be32(be, value);
    return fc_store_put_empty(w, DB_META, k, be, 4);
}

/* Adds series to the sorted be32 list under key k of meta, when not there yet. */
static int list_add(struct writer *w, struct key *k, uint32_t series)
{
    MDB_val kv = val(k->b, k->n), v;
    size_t n = 0, at = 0;
    uint8_t *list;
    struct key listed = *k; /* (list, series): in the cache once the series is listed */
    uint32_t one;
    int rc;

    key_be32(&listed, series);
    if (fc_store_ids_get(w->s, N_DBS, &listed, &one)) {
        return FC_OK;
    }
    fc_store_ids_note(w->s, N_DBS, &listed, 1);
    if (mdb_get(w->txn, w->s->db[DB_META], &kv, &v) == 0) {
        n = v.mv_size / 4;
    }
    for (; at < n && be32((const uint8_t *)v.mv_data + at * 4) < series; at++) {
    }
    if (at < n && be32((const uint8_t *)v.mv_data + at * 4) == series) {
        return FC_OK; /* the common case: listed when the series was first written */
    }
    list = fc_xmalloc((n + 1) * 4);
    if (n > 0) {
        memcpy(list, v.mv_data, at * 4);
        memcpy(list + (at + 1) * 4, (const uint8_t *)v.mv_data + at * 4, (n - at) * 4);
    }
    put_be32(list + at * 4, series);
    rc = fc_store_put_empty(w, DB_META, k, list, (n + 1) * 4);
    free(list);
    return rc;
}

int fc_store_service_route(struct writer *w, const char *service, const char *type, uint32_t base,
                           uint32_t series, bool *to_agg, uint32_t *agg_base, uint32_t *agg_series)
{
    struct key k;
    uint32_t first;
    int rc;

    *to_agg = false;
    service_key(&k, w->tenant, 'f', service, NULL);
    if ((rc = id_of_value(w, &k, base, &first)) != FC_OK) {
        return rc;
    }
    if (first == base) {
        service_key(&k, w->tenant, 'l', service, type);
        return list_add(w, &k, series);
    }
    service_key(&k, w->tenant, 'a', service, NULL);
    rc = id_of(w, DB_BASE, "base", &k, agg_base);
    service_key(&k, w->tenant, 'a', service, type);
    rc = rc ? rc : id_of(w, DB_SERIES, "series", &k, agg_series);
    *to_agg = rc == FC_OK;
    return rc;
}

/* The be32 id under key k of db in txn, when there. */
static bool find_id(struct fc_store *s, MDB_txn *txn, int db, const struct key *k, uint32_t *id)
{
    MDB_val kv = val(k->b, k->n), v;

    if (mdb_get(txn, s->db[db], &kv, &v) != 0 || v.mv_size != 4) {
        return false;
    }
    *id = be32(v.mv_data);
    return true;
}

bool fc_store_service_first_base(struct fc_store *s, MDB_txn *txn, const char *tenant,
                                 const char *service, size_t service_len, uint32_t *base)
{
    char *svc = fc_xstrndup(service, service_len);
    struct key k;

    service_key(&k, tenant, 'f', svc, NULL);
    free(svc);
    return find_id(s, txn, DB_META, &k, base);
}

bool fc_store_service_of(struct reader *r, const struct fc_store_query *q,
                         struct fc_store_service *out)
{
    const struct fc_selector *sel = q->selector;
    const char *service;
    struct key k;
    MDB_val kv, v;

    memset(out, 0, sizeof(*out));
    if (q->level0_only || q->n_span_ids > 0 || q->n_trace_ids > 0 || sel->profile_type == NULL ||
        sel->n != 1 || sel->matchers[0].op != FC_MATCH_EQ ||
        strcmp(sel->matchers[0].name, FC_STORE_SERVICE_LABEL) != 0 ||
        sel->matchers[0].value[0] == '\0') {
        return false;
    }
    service = sel->matchers[0].value;
    service_key(&k, r->tenant, 'f', service, NULL);
    if (!find_id(r->s, r->txn, DB_META, &k, &out->first.base)) {
        return false; /* no series of the service yet: per series (there are none) */
    }
    service_key(&k, r->tenant, 'l', service, sel->profile_type);
    kv = val(k.b, k.n);
    if (mdb_get(r->txn, r->s->db[DB_META], &kv, &v) == 0 && v.mv_size >= 4) {
        out->first_sids = fc_xcalloc(v.mv_size / 4, sizeof(uint32_t));
        for (size_t i = 0; i < v.mv_size / 4; i++) {
            out->first_sids[i] = be32((const uint8_t *)v.mv_data + i * 4);
        }
        out->first.sids = out->first_sids;
        out->first.n = v.mv_size / 4;
    }
    service_key(&k, r->tenant, 'a', service, NULL);
    if (find_id(r->s, r->txn, DB_BASE, &k, &out->agg.base)) {
        service_key(&k, r->tenant, 'a', service, sel->profile_type);
        if (find_id(r->s, r->txn, DB_SERIES, &k, &out->agg_series)) {
            out->agg.sids = &out->agg_series;
            out->agg.n = 1;
        }
    }
    return true;
}

void fc_store_service_release(struct fc_store_service *sv)
{
    free(sv->first_sids);
    memset(sv, 0, sizeof(*sv));
}

/* ---- building the aggregates of an older store ------------------------------------------- */

/*
 * Routes a part of base's window: *has = false when its series has no
 * service or belongs to its service's first base (listed there), else the
 * aggregate to add it to.
 */
static int aggregate_of(struct writer *w, uint32_t base, uint32_t sid, bool *has,
                        uint32_t *agg_base, uint32_t *agg_series)
{
    struct series_labels l;
    const char *service, *type;
    size_t service_len, type_len;
    char *svc, *typ;
    int rc;

    *has = false;
    if (!fc_store_sid_get(w->s, w->txn, w->tenant, sid, NULL, &l) ||
        !fc_store_series_value(&l, FC_STORE_SERVICE_LABEL, &service, &service_len) ||
        !fc_store_series_value(&l, "__profile_type__", &type, &type_len) || service_len == 0) {
        return FC_OK;
    }
    svc = fc_xstrndup(service, service_len);
    typ = fc_xstrndup(type, type_len);
    rc = fc_store_service_route(w, svc, typ, base, sid, has, agg_base, agg_series);
    free(svc);
    free(typ);
    return rc;
}

/*
 * Adds to the aggregates tree of (level, window) and marks the coarser
 * windows above it dirty, as a write does; a 100 s window whose 10 s windows
 * were compacted away is never marked (it has no children to be rebuilt from).
 */
static int add_up(struct writer *w, uint32_t base, uint32_t series, int level, int64_t window,
                  const struct fc_tree *tree)
{
    int rc = fc_store_add_window(w, w->windows, base, series, level, window, tree);

    return rc ? rc : fc_store_mark_ancestors(w, base, level, window);
}

/*
 * Adds one series window of value v to its services' aggregates: 10 s
 * windows, and 100 s windows whose 10 s windows were compacted away (they
 * hold what no 10 s window does); every coarser aggregate window is rebuilt
 * from these by the next flush.
 */
static int add_window_of(struct writer *w, uint32_t base, int level, int64_t window,
                         const MDB_val *v)
{
    struct parts ps = {0};
    int rc = FC_OK;

    if (!(level == 0 || (level == 1 && window + fc_store_level_secs[1] <= w->coarse_before))) {
        return FC_OK;
    }
    /* Decoded (copied out) before any write of this transaction can move the value. */
    if (!fc_store_packed_decode(v->mv_data, v->mv_size, NULL, NULL, &ps)) {
        fc_store_parts_release(&ps);
        return FC_OK; /* corrupt: skipped, as queries skip it */
    }
    for (uint32_t i = 0; rc == FC_OK && i < ps.n; i++) {
        uint32_t agg_base, agg_series;
        bool has;
        rc = aggregate_of(w, base, ps.v[i].series, &has, &agg_base, &agg_series);
        if (rc == FC_OK && has) {
            rc = add_up(w, agg_base, agg_series, level, window, &ps.v[i].tree);
        }
    }
    fc_store_parts_release(&ps);
    return rc;
}

/* Every node key of the store (none is an aggregate's yet), in key order. */
static void node_keys(struct fc_store *s, MDB_txn *txn, struct fc_buf *out, size_t *n)
{
    MDB_cursor *c;
    MDB_val kv, v;

    *n = 0;
    if (mdb_cursor_open(txn, s->db[DB_NODE], &c) != 0) {
        return;
    }
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_FIRST); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        uint16_t len = (uint16_t)kv.mv_size;
        fc_buf_append(out, &len, sizeof(len));
        fc_buf_append(out, kv.mv_data, kv.mv_size);
        (*n)++;
    }
    mdb_cursor_close(c);
}

int fc_store_service_build(struct fc_store *s, MDB_txn *txn, struct fc_error *err)
{
    struct fc_buf keys;
    struct writer w = {s, txn, NULL, err, fc_store_windows_new(), INT64_MIN};
    char tenant[256] = "";
    size_t n, at = 0;
    int rc = FC_OK;

    {
        MDB_val kv = val(fc_store_coarse_key, sizeof(fc_store_coarse_key) - 1), v;
        if (mdb_get(txn, s->db[DB_META], &kv, &v) == 0 && v.mv_size == sizeof(w.coarse_before)) {
            memcpy(&w.coarse_before, v.mv_data, sizeof(w.coarse_before));
        }
    }
    fc_buf_init(&keys, 0);
    node_keys(s, txn, &keys, &n);
    w.tenant = tenant;
    for (size_t i = 0; rc == FC_OK && i < n; i++) {
        uint16_t len;
        const uint8_t *k, *zero;
        MDB_val kv, v;
        memcpy(&len, keys.data + at, sizeof(len));
        k = keys.data + at + sizeof(len);
        at += sizeof(len) + len;
        zero = memchr(k, 0, len);
        if (zero == NULL || (size_t)(zero - k) + 1 + 13 != len || zero[5] >= FC_STORE_LEVELS) {
            continue;
        }
        /* Windows are keyed without the tenant: written out when it changes, and every 4096. */
        if (strlen(tenant) != (size_t)(zero - k) || memcmp(tenant, k, (size_t)(zero - k)) != 0 ||
            fc_store_windows_count(w.windows) >= 4096) {
            rc = fc_store_flush_windows(&w, w.windows);
            memcpy(tenant, k, (size_t)(zero - k) < 255 ? (size_t)(zero - k) : 255);
            tenant[(size_t)(zero - k) < 255 ? (size_t)(zero - k) : 255] = '\0';
        }
        kv = val(k, len);
        if (rc == FC_OK && mdb_get(txn, s->db[DB_NODE], &kv, &v) == 0) {
            rc = add_window_of(&w, be32(zero + 1), zero[5], (int64_t)be64(zero + 6), &v);
        }
    }
    rc = rc ? rc : fc_store_flush_windows(&w, w.windows);
    fc_store_windows_free(w.windows);
    fc_buf_release(&keys);
    return rc;
}
