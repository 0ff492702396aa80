/*
 * Forgetting pods: retention deletes windows, and a base (a pod: the labels
 * a profile came with) that has none left is deleted too: its series
 * (`series`, `sid`, `sbase`), their ids in the label index (`post`; a label
 * value no series has any more goes from `lv`, a name without values from
 * `ln`), and the base itself (`base`, `bid`). Without this, pods that come
 * and go (every deploy names new ones) grow the index for ever, label
 * values keep listing pods gone for months, and under max_size the ids
 * alone end up filling the store.
 *
 * Kept: a service's first base (its series are listed under the service,
 * `meta` 'f'/'l', for whole-service queries; one pod per service), and
 * every base of a store that holds series made before format 13 (keyed by
 * the hash of their labels, not by their base: nothing would find all of a
 * base's series). Ids are never reused: a pod that comes back gets new ids,
 * so a reader that still holds an old id finds nothing under it.
 *
 * The writer's id cache knows bases and series by their labels; it is
 * emptied after a pass that forgot any, so a pod that comes back is made
 * again rather than written under ids that are gone. A transaction forgets
 * up to 64 bases, each whole or not at all; a failed one is tried again.
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/mem.h"
#include "core/timeutil.h"
#include "formats/pb.h"

#include <errno.h>
#include <lmdb.h>
#include <stdlib.h>
#include <string.h>

/* Whether a key of db starts with prefix k (a tenant's keys of one base, or of one label). */
static bool has_prefix(MDB_txn *txn, MDB_dbi db, const struct key *k)
{
    MDB_cursor *c;
    MDB_val kv = val(k->b, k->n), v;
    bool found = false;

    if (mdb_cursor_open(txn, db, &c) != 0) {
        return true; /* unknown: kept */
    }
    int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
    if (g == 0) {
        found = kv.mv_size >= k->n && memcmp(kv.mv_data, k->b, k->n) == 0;
    } else {
        found = g != MDB_NOTFOUND; /* a read error: kept, as if something were there */
    }
    mdb_cursor_close(c);
    return found;
}

/*
 * 1 when every series of this store is found under its base in `series`
 * (format 13 and later), -1 when not, 0 when a read failed: no key there is a hash of a series'
 * labels whose id has labels in `sid` (the service aggregates' ids have the same keys but no
 * `sid`).
 */
static int series_by_base(struct fc_store *s, MDB_txn *txn)
{
    MDB_cursor *c;
    MDB_val kv, v;
    bool ok = true;
    int g;

    if (mdb_cursor_open(txn, s->db[DB_SERIES], &c) != 0) {
        return 0;
    }
    for (g = mdb_cursor_get(c, &kv, &v, MDB_FIRST); g == 0 && ok;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        const uint8_t *zero = memchr(kv.mv_data, 0, kv.mv_size);
        size_t rest =
            zero == NULL ? 0 : kv.mv_size - (size_t)(zero - (const uint8_t *)kv.mv_data) - 1;
        if (rest == 4 || rest == 12) {
            continue; /* a base's series, or one past its value's cap */
        }
        if (rest == 16 && v.mv_size == 4) {
            struct key k;
            MDB_val ik, iv;
            memcpy(k.b, kv.mv_data, kv.mv_size - 16);
            k.n = kv.mv_size - 16;
            key_be32(&k, be32(v.mv_data));
            ik = val(k.b, k.n);
            ok = mdb_get(txn, s->db[DB_SID], &ik, &iv) != 0; /* labels: a series of format 12 */
            continue;
        }
        ok = false; /* not a key this build makes */
    }
    mdb_cursor_close(c);
    if (ok && g != 0 && g != MDB_NOTFOUND) {
        return 0; /* a read error: not known, asked again next time */
    }
    return ok ? 1 : -1;
}

/*
 * Removes ids (sorted, m of them) from the postings of (name, value) (lv:
 * their key so far), each chunk rewritten once for all of its ids (a pod's
 * series ids follow each other: mostly one or two chunks); *empty when none
 * are left.
 */
static int postings_remove(struct fc_store *s, MDB_txn *txn, const struct key *lv,
                           const uint32_t *ids, size_t m, bool *empty)
{
    uint32_t got[FC_STORE_POSTING_IDS];
    MDB_cursor *c;
    size_t i = 0;
    int rc;

    *empty = false;
    if ((rc = mdb_cursor_open(txn, s->db[DB_POST], &c)) != 0) {
        return rc;
    }
    while (rc == 0 && i < m) {
        struct key k = *lv;
        MDB_val kv, v;
        size_t n = 0, kept = 0, j = i;
        key_be32(&k, ids[i]);
        k.b[k.n++] = FC_STORE_POSTING_DELTAS + 1; /* past both chunk keys of a first id ids[i] */
        kv = val(k.b, k.n);
        rc = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
        if (rc == 0 || rc == MDB_NOTFOUND) {
            rc = mdb_cursor_get(c, &kv, &v, rc == 0 ? MDB_PREV : MDB_LAST);
        }
        /* The chunk with the greatest first id <= ids[i]: chunks are in order and do not overlap.
         */
        if (rc != 0 || kv.mv_size < lv->n + 4 || memcmp(kv.mv_data, lv->b, lv->n) != 0 ||
            !fc_store_posting_ids(&kv, lv->n, &v, got, &n) || n == 0) {
            rc = rc == MDB_NOTFOUND ? 0 : rc;
            i++; /* not listed (or a chunk that does not decode): nothing to remove */
            continue;
        }
        for (size_t g = 0; g < n; g++) {
            while (j < m && ids[j] < got[g]) {
                j++; /* not listed */
            }
            if (j < m && ids[j] == got[g]) {
                j++;
            } else {
                got[kept++] = got[g];
            }
        }
        while (j < m && ids[j] <= got[n - 1]) {
            j++;
        }
        if (j == i) {
            j++; /* past the chunk's last id: not listed */
        }
        if (kept < n && (rc = mdb_cursor_del(c, 0)) == 0 && kept > 0) {
            struct fc_buf deltas;
            fc_buf_init(&deltas, 0);
            for (size_t g = 1; g < kept; g++) {
                fc_pb_put_varint(&deltas, got[g] - got[g - 1]);
            }
            k = *lv;
            key_be32(&k, got[0]);
            k.b[k.n++] = FC_STORE_POSTING_DELTAS;
            kv = val(k.b, k.n);
            v = val(deltas.data != NULL ? deltas.data : (const uint8_t *)"", deltas.len);
            rc = mdb_put(txn, s->db[DB_POST], &kv, &v, 0);
            fc_buf_release(&deltas);
        }
        i = j;
    }
    mdb_cursor_close(c);
    if (rc == 0) {
        *empty = !has_prefix(txn, s->db[DB_POST], lv);
    }
    return rc;
}

/* Deletes key k of db when it is there. */
static int del_key(struct fc_store *s, MDB_txn *txn, int db, const struct key *k)
{
    MDB_val kv = val(k->b, k->n);
    int rc = mdb_del(txn, s->db[db], &kv, NULL);

    return rc == MDB_NOTFOUND ? 0 : rc;
}

/* One label of a series being forgotten: h64 of its name and of its value, and the series. */
struct label_of {
    uint64_t name, value;
    uint32_t id;
};

static int by_label_then_id(const void *a, const void *b)
{
    const struct label_of *x = a, *y = b;

    if (x->name != y->name) {
        return x->name < y->name ? -1 : 1;
    }
    if (x->value != y->value) {
        return x->value < y->value ? -1 : 1;
    }
    return x->id < y->id ? -1 : x->id > y->id;
}

/*
 * Appends the (name, value) of each label of series id (canonical labels,
 * copied out of LMDB) to *out; a damaged label ends the list (what it
 * names stays indexed).
 */
static void labels_of(uint32_t id, const char *canon, size_t len, struct label_of **out, size_t *n,
                      size_t *cap)
{
    const char *p = canon, *end = canon + len;

    while (p < end) {
        const char *name = p, *sep = memchr(p, 1, (size_t)(end - p)), *value, *stop;
        if (sep == NULL || (stop = memchr(sep + 1, 2, (size_t)(end - sep - 1))) == NULL) {
            break;
        }
        value = sep + 1;
        p = stop + 1;
        if (*n == *cap) {
            *cap = *cap ? *cap * 2 : 256;
            *out = fc_xrealloc(*out, *cap * sizeof(**out));
        }
        (*out)[*n].name = XXH3_64bits(name, (size_t)(sep - name));
        (*out)[*n].value = XXH3_64bits(value, (size_t)(stop - value));
        (*out)[*n].id = id;
        (*n)++;
    }
}

/*
 * The label index entries of forgotten series (their labels ls, n of them,
 * sorted by label then id): each (name, value)'s postings without them, its
 * `lv` when none are left, and its name's `ln` when that has no value left.
 */
static int unindex(struct fc_store *s, MDB_txn *txn, const char *tenant, const struct label_of *ls,
                   size_t n)
{
    uint32_t *ids = fc_xmalloc((n ? n : 1) * sizeof(*ids));
    int rc = 0;

    for (size_t i = 0, j; rc == 0 && i < n; i = j) {
        struct key ln, lv;
        size_t m = 0;
        bool empty;
        for (j = i; j < n && ls[j].name == ls[i].name && ls[j].value == ls[i].value; j++) {
            if (m == 0 || ids[m - 1] != ls[j].id) {
                ids[m++] = ls[j].id;
            }
        }
        key_tenant(&ln, tenant);
        key_be64(&ln, ls[i].name);
        lv = ln;
        key_be64(&lv, ls[i].value);
        if ((rc = postings_remove(s, txn, &lv, ids, m, &empty)) == 0 && empty) {
            rc = del_key(s, txn, DB_LV, &lv);
            if (rc == 0 && !has_prefix(txn, s->db[DB_LV], &ln)) {
                rc = del_key(s, txn, DB_LN, &ln);
            }
        }
    }
    free(ids);
    return rc;
}

/* The ids of base's series: its `series` value's, then its keys past the cap. */
static int base_series(struct fc_store *s, MDB_txn *txn, const struct key *bk, uint32_t **ids,
                       size_t *n)
{
    MDB_cursor *c;
    MDB_val kv = val(bk->b, bk->n), v;
    size_t cap = 0;
    int g;

    *ids = NULL;
    *n = 0;
    if (mdb_cursor_open(txn, s->db[DB_SERIES], &c) != 0) {
        return EIO;
    }
    for (g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
         g == 0 && kv.mv_size >= bk->n && memcmp(kv.mv_data, bk->b, bk->n) == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        const uint8_t *p = v.mv_data;
        size_t step = kv.mv_size == bk->n ? 12 : kv.mv_size == bk->n + 8 ? 4 : 0;
        if (step == 0 || v.mv_size % step != 0) {
            continue;
        }
        for (size_t i = 0; i < v.mv_size; i += step) {
            if (*n == cap) {
                cap = cap ? cap * 2 : 64;
                *ids = fc_xrealloc(*ids, cap * sizeof(**ids));
            }
            (*ids)[(*n)++] = be32(p + i + step - 4);
        }
    }
    mdb_cursor_close(c);
    return g == 0 || g == MDB_NOTFOUND ? 0 : g;
}

/*
 * Deletes the keys of db that start with prefix k and are at most max_extra
 * bytes longer. A base's keys of `series` (k: tenant 0 be32(base)) are its
 * value and its keys past the cap, 8 bytes longer: only those (max_extra
 * 8), as a service aggregate's series key (tenant 0 h128, 12 bytes longer)
 * may start with the same four bytes.
 */
static int del_prefixed(MDB_txn *txn, MDB_dbi db, const struct key *k, size_t max_extra)
{
    MDB_cursor *c;
    MDB_val kv, v;
    int rc, g;

    if ((rc = mdb_cursor_open(txn, db, &c)) != 0) {
        return rc;
    }
    kv = val(k->b, k->n);
    for (g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
         g == 0 && kv.mv_size >= k->n && memcmp(kv.mv_data, k->b, k->n) == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        if (kv.mv_size - k->n <= max_extra && (rc = mdb_cursor_del(c, 0)) != 0) {
            break; /* after a delete MDB_NEXT stands on the key that followed */
        }
    }
    mdb_cursor_close(c);
    return rc ? rc : g == 0 || g == MDB_NOTFOUND ? 0 : g;
}

/*
 * Whether base (canonical labels canon) is its service's first base, which
 * whole-service queries read by its listed series: kept.
 */
static bool service_first(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                          const char *canon, size_t len)
{
    const char *service;
    size_t service_len;
    uint32_t first;

    if (!fc_store_canon_value(canon, len, FC_STORE_SERVICE_LABEL, &service, &service_len) ||
        service_len == 0) {
        return false;
    }
    return !fc_store_service_first_base(s, txn, tenant, service, service_len, &first) ||
           first == base;
}

/*
 * Forgets base (tenant, base) in txn when nothing of it is left: *forgot,
 * and *series the series deleted.
 */
static int forget_base(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                       bool *forgot, uint64_t *series)
{
    struct key bk, k;
    MDB_val kv, v;
    struct fc_buf base_canon, labels;
    uint32_t *ids = NULL;
    size_t n = 0;
    int rc = 0;

    *forgot = false;
    key_tenant(&bk, tenant);
    key_be32(&bk, base);
    if (has_prefix(txn, s->db[DB_NODE], &bk) || has_prefix(txn, s->db[DB_BUNDLE], &bk) ||
        fc_store_open_first(s, tenant, base) != NULL) {
        return 0;
    }
    kv = val(bk.b, bk.n);
    if (mdb_get(txn, s->db[DB_BID], &kv, &v) != 0) {
        return 0;
    }
    fc_buf_init(&base_canon, v.mv_size + 1);
    fc_buf_append(&base_canon, v.mv_data, v.mv_size);
    if (service_first(s, txn, tenant, base, (const char *)base_canon.data, base_canon.len)) {
        fc_buf_release(&base_canon);
        return 0;
    }
    /*
     * Its dirty windows have no children left to be rebuilt from: a coarse
     * window is rebuilt once it closes (store_flush.c), and the 10^7 s one
     * of a pod gone today closes up to 115 days later.
     */
    if ((rc = del_prefixed(txn, s->db[DB_DIRTY], &bk, SIZE_MAX)) != 0) {
        fc_buf_release(&base_canon);
        return rc;
    }
    fc_buf_init(&labels, 0);
    /*
     * A base without series (builds before this one made one for a pod
     * that sent only profiles without a positive sample; writes now make a
     * base with its first series) is forgotten too: nothing makes it again.
     */
    rc = base_series(s, txn, &bk, &ids, &n);
    /*
     * Every series' labels first, copied (the deletes move LMDB's pages): a
     * series whose labels cannot be read (a read error, a damaged `sid`)
     * keeps its base, whose postings would otherwise keep its id for ever.
     */
    struct label_of *ls = NULL;
    size_t n_ls = 0, cap_ls = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        struct series_labels l;
        if (!fc_store_sid_get(s, txn, tenant, ids[i], NULL, &l)) {
            free(ls);
            free(ids);
            fc_buf_release(&labels);
            fc_buf_release(&base_canon);
            return 0;
        }
        fc_buf_reset(&labels);
        fc_store_series_canonical(&l, &labels);
        labels_of(ids[i], (const char *)labels.data, labels.len, &ls, &n_ls, &cap_ls);
    }
    if (n_ls > 0) { /* none for a base without series */
        qsort(ls, n_ls, sizeof(*ls), by_label_then_id);
        rc = unindex(s, txn, tenant, ls, n_ls);
    }
    free(ls);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        key_tenant(&k, tenant);
        key_be32(&k, ids[i]);
        rc = fc_store_sid_delete(s, txn, tenant, ids[i]);
        rc = rc ? rc : del_key(s, txn, DB_SBASE, &k);
    }
    rc = rc ? rc : del_prefixed(txn, s->db[DB_SERIES], &bk, 8);
    key_tenant(&k, tenant);
    key_h128(&k, base_canon.data != NULL ? (const char *)base_canon.data : "", base_canon.len);
    kv = val(k.b, k.n);
    if (rc == 0) {
        int g = mdb_get(txn, s->db[DB_BASE], &kv, &v);
        if (g == 0 && v.mv_size == 4 && be32(v.mv_data) == base) {
            rc = del_key(s, txn, DB_BASE, &k); /* the labels' id, when it is this base's */
        } else if (g != 0 && g != MDB_NOTFOUND) {
            rc = g; /* unknown: the group is not forgotten */
        }
    }
    rc = rc ? rc : del_key(s, txn, DB_BID, &bk);
    if (rc == 0) {
        *forgot = true;
        *series += n;
    }
    free(ids);
    fc_buf_release(&labels);
    fc_buf_release(&base_canon);
    return rc;
}

/* Up to this many bases a transaction, so that a pass's budget is checked between them. */
#define FORGET_GROUP 64

int fc_store_forget_empty(struct fc_store *s, int64_t budget_ns, uint64_t *bases, uint64_t *series,
                          struct fc_error *err)
{
    int64_t until = fc_store_deadline(budget_ns);
    struct forget_pass *p = &s->forgetting;
    bool more = true;
    int rc = 0;

    *bases = 0;
    *series = 0;
    /*
     * The rebuilds retention asked for delete a gone pod's coarse windows:
     * first, and all of them within this call (no write comes between).
     */
    if (atomic_load(&s->dirty) || fc_store_open_bytes(s) > 0) {
        rc = fc_store_flush_until(s, INT64_MIN, until, err);
        if (rc != FC_OK) {
            return rc == FC_EAGAIN ? FC_EAGAIN : err->code;
        }
    }
    while (rc == 0 && more && fc_now_mono_ns() < until) {
        struct key group[FORGET_GROUP];
        struct resume_key start = p->next;
        uint64_t got = 0, got_series = 0;
        size_t n = 0;
        MDB_txn *txn;
        MDB_cursor *c;
        MDB_val kv, v;
        int g;
        if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
            break;
        }
        if (p->by_base == 0) {
            p->by_base = series_by_base(s, txn);
        }
        if (p->by_base <= 0) {
            mdb_txn_abort(txn);
            if (p->by_base == 0) {
                rc = EIO; /* unknown: tried again next pass */
                break;
            }
            return FC_OK; /* series of format 12 or before: pods are kept */
        }
        if ((rc = mdb_cursor_open(txn, s->db[DB_BID], &c)) != 0) {
            mdb_txn_abort(txn);
            break;
        }
        /* The group's keys first: the deletes below would move the cursor's pages. */
        kv = val(p->next.b, p->next.n);
        for (g = mdb_cursor_get(c, &kv, &v, p->next.n > 0 ? MDB_SET_RANGE : MDB_FIRST);
             g == 0 && n < FORGET_GROUP; g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            if (kv.mv_size <= sizeof(group[n].b)) {
                memcpy(group[n].b, kv.mv_data, kv.mv_size);
                group[n++].n = kv.mv_size;
            }
        }
        if (g == 0) {
            resume_at(&p->next, &kv); /* the next group starts here */
        } else {
            more = false;
            rc = g == MDB_NOTFOUND ? 0 : g;
        }
        mdb_cursor_close(c);
        for (size_t i = 0; rc == 0 && i < n; i++) {
            MDB_val gk = val(group[i].b, group[i].n);
            size_t tenant_len;
            const uint8_t *rest = key_rest(&gk, 4, &tenant_len);
            char tenant[256];
            bool forgot;
            if (rest == NULL || tenant_len >= sizeof(tenant)) {
                continue;
            }
            memcpy(tenant, group[i].b, tenant_len);
            tenant[tenant_len] = '\0';
            if ((rc = forget_base(s, txn, tenant, be32(rest), &forgot, &got_series)) == 0 &&
                forgot) {
                got++;
            }
        }
        if (rc != 0 || got == 0) {
            mdb_txn_abort(txn); /* a failed group forgets nothing */
        } else if ((rc = mdb_txn_commit(txn)) == 0) {
            *bases += got;
            *series += got_series;
        }
        if (rc != 0) {
            p->next = start; /* a failed group is tried again next pass */
        }
    }
    if (*bases > 0) {
        fc_store_ids_clear(&s->ids);
    }
    if (rc != 0) {
        return fc_store_lmdb_error(err, rc, "forget");
    }
    if (!more) {
        p->next.n = 0; /* the next pass starts over */
        return FC_OK;
    }
    return FC_EAGAIN;
}
