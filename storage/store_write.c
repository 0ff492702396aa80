/*
 * The store's write path: series and symbol ids, the label index, and one
 * write transaction per group of batches, whose windows are merged in
 * memory and written once per commit (storage/store_pack.c packs them).
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/idmap.h"
#include "core/mem.h"
#include "core/sat.h"
#include "core/timeutil.h"
#include "formats/pb.h"
#include "formats/pyroscope.h"
#include "storage/frame.h"

#include <errno.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

/* ---- writing ------------------------------------------------------------------------------ */

int fc_store_next_id(struct writer *w, const char *what, uint32_t *id)
{
    struct key k;
    MDB_val kv, v;
    uint32_t next = 1;
    int rc;

    key_tenant(&k, w->tenant);
    key_bytes(&k, what, strlen(what));
    kv = val(k.b, k.n);
    rc = mdb_get(w->txn, w->s->db[DB_META], &kv, &v);
    if (rc == 0 && v.mv_size == 4) {
        memcpy(&next, v.mv_data, 4);
    }
    *id = next++;
    v = val(&next, 4);
    rc = mdb_put(w->txn, w->s->db[DB_META], &kv, &v, 0);
    return rc ? fc_store_lmdb_error(w->err, rc, "meta") : FC_OK;
}

static int symbol(struct writer *w, const char *name, size_t len, uint32_t *id)
{
    struct key k, kid;
    MDB_val kv, v;
    int rc;

    key_tenant(&k, w->tenant);
    key_h128(&k, name, len);
    if (fc_store_ids_get(w->s, DB_SYM, &k, id)) {
        return FC_OK;
    }
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_SYM], &kv, &v) == 0 &&
        (v.mv_size == 4 || v.mv_size == FC_STORE_OWN_SYM_LEN)) {
        memcpy(id, v.mv_data, 4);
        if (v.mv_size == FC_STORE_OWN_SYM_LEN) {
            /* A series' own part (own_symbol) with these bytes: shared from now on, kept. */
            v = val(id, 4);
            if ((rc = mdb_put(w->txn, w->s->db[DB_SYM], &kv, &v, 0)) != 0) {
                return fc_store_lmdb_error(w->err, rc, "symbols");
            }
        }
        fc_store_ids_note(w->s, DB_SYM, &k, *id);
        return FC_OK;
    }
    if ((rc = fc_store_next_id(w, "sym", id)) != FC_OK) {
        return rc;
    }
    fc_store_ids_note(w->s, DB_SYM, &k, *id);
    v = val(id, 4);
    if ((rc = mdb_put(w->txn, w->s->db[DB_SYM], &kv, &v, 0)) != 0) {
        return fc_store_lmdb_error(w->err, rc, "symbols");
    }
    key_tenant(&kid, w->tenant);
    key_be32(&kid, *id);
    kv = val(kid.b, kid.n);
    v = val(name, len);
    rc = mdb_put(w->txn, w->s->db[DB_SYMID], &kv, &v, 0);
    return rc ? fc_store_lmdb_error(w->err, rc, "symbols") : FC_OK;
}

struct label {
    const char *name;
    const char *value;
};

static int by_label_name(const void *a, const void *b)
{
    return strcmp(((const struct label *)a)->name, ((const struct label *)b)->name);
}

int fc_store_put_empty(struct writer *w, int db, struct key *k, const void *data, size_t n)
{
    MDB_val kv = val(k->b, k->n), v = val(data, n);
    int rc = mdb_put(w->txn, w->s->db[db], &kv, &v, 0);

    return rc ? fc_store_lmdb_error(w->err, rc, fc_store_db_names[db]) : FC_OK;
}

/*
 * A new series id into the postings of (name, value) (lv: their key so
 * far): appended to their last chunk as its difference from the id before
 * (store_int.h, format 15), or the first id of a new chunk when that one is
 * full or of an older format (ids only grow, so chunks stay in order).
 * Series of one pod get consecutive ids and those of one label value
 * follow each other by about a pod's series, so a difference takes a byte
 * where format 8 took four for each id (10,000 pods of about 35 series:
 * `post` from 14.9 MB of pages to 4.4 MB, docs/internals/store.md, Keys).
 */
static int posting_add(struct writer *w, const struct key *lv, uint32_t id)
{
    uint32_t ids[FC_STORE_POSTING_IDS];
    struct key k = *lv;
    struct fc_buf chunk;
    MDB_cursor *c;
    MDB_val kv, v;
    size_t n = 0;
    int rc;

    key_be32(&k, UINT32_MAX);
    if ((rc = mdb_cursor_open(w->txn, w->s->db[DB_POST], &c)) != 0) {
        return fc_store_lmdb_error(w->err, rc, "post");
    }
    kv = val(k.b, k.n);
    rc = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE);
    rc = mdb_cursor_get(c, &kv, &v, rc == 0 ? MDB_PREV : MDB_LAST);
    fc_buf_init(&chunk, 0);
    if (rc == 0 && kv.mv_size >= lv->n + 4 && memcmp(kv.mv_data, lv->b, lv->n) == 0 &&
        fc_store_posting_ids(&kv, lv->n, &v, ids, &n) && n > 0) {
        if (ids[n - 1] >= id) {
            mdb_cursor_close(c);
            fc_buf_release(&chunk);
            return FC_OK; /* there already */
        }
        if (kv.mv_size == lv->n + 5 && n < FC_STORE_POSTING_IDS) {
            memcpy(k.b, kv.mv_data, kv.mv_size); /* the last chunk, not full: appended to */
            k.n = kv.mv_size;
            fc_buf_append(&chunk, v.mv_data, v.mv_size);
            fc_pb_put_varint(&chunk, id - ids[n - 1]);
        } else {
            n = 0;
        }
    } else {
        n = 0;
    }
    mdb_cursor_close(c);
    if (n == 0) {
        k = *lv;
        key_be32(&k, id);
        k.b[k.n++] = FC_STORE_POSTING_DELTAS;
    }
    rc = fc_store_put_empty(w, DB_POST, &k, chunk.data ? chunk.data : (const uint8_t *)"",
                            chunk.len);
    fc_buf_release(&chunk);
    return rc;
}

/* The id of the series with these labels (sorted, unique names), made when new. */
static void canonical(const struct label *labels, size_t n, struct fc_buf *canon)
{
    for (size_t i = 0; i < n; i++) {
        fc_buf_puts(canon, labels[i].name);
        fc_buf_append(canon, "\x01", 1);
        fc_buf_puts(canon, labels[i].value);
        fc_buf_append(canon, "\x02", 1);
    }
}

/*
 * The id of a base series (the profile's own labels, before its types and sample
 * labels split it): where its series' windows are packed together. Bases
 * are not in the label index; queries reach them through their series. A
 * new base's labels go into `bid` (store_series.c). canon: the base's
 * canonical labels, for series_id.
 */
static int base_id(struct writer *w, const struct label *labels, size_t n, uint32_t *id,
                   struct fc_buf *canon)
{
    struct key k;
    MDB_val kv, v;
    int rc;

    fc_buf_reset(canon);
    canonical(labels, n, canon);
    key_tenant(&k, w->tenant);
    key_h128(&k, canon->data ? (const char *)canon->data : "", canon->len);
    if (fc_store_ids_get(w->s, DB_BASE, &k, id)) {
        return FC_OK;
    }
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_BASE], &kv, &v) == 0 && v.mv_size == 4) {
        *id = be32(v.mv_data);
        fc_store_ids_note(w->s, DB_BASE, &k, *id);
        return FC_OK;
    }
    rc = fc_store_next_id(w, "base", id);
    if (rc == FC_OK) {
        struct key idk;
        fc_store_ids_note(w->s, DB_BASE, &k, *id);
        uint8_t be[4] = {(uint8_t)(*id >> 24), (uint8_t)(*id >> 16), (uint8_t)(*id >> 8),
                         (uint8_t)*id};
        rc = fc_store_put_empty(w, DB_BASE, &k, be, 4);
        key_tenant(&idk, w->tenant);
        key_be32(&idk, *id);
        rc = rc ? rc : fc_store_put_empty(w, DB_BID, &idk, canon->data, canon->len);
    }
    return rc;
}

/*
 * A new series' `sid` value: split from its base's labels (format 10) when
 * the base has them in `bid`, they give the series' labels back exactly and
 * no name is in both parts (a value holding 0x02 name 0x01 reads as one
 * more label: split, it could shadow the base's); else all of them (then
 * `sbase` holds the base). Its `__profile_type__` is interned as a symbol
 * (format 11); a symbol that cannot be written is the write's error.
 * *split: whether out holds the split value.
 */
static int split_sid(struct writer *w, uint32_t base, const struct fc_buf *base_canon,
                     const struct fc_buf *canon, struct fc_buf *out, bool *split)
{
    struct key k;
    MDB_val kv, v;
    struct series_labels l = {0};
    struct fc_buf back;
    const char *type = NULL;
    size_t type_len = 0;
    uint32_t type_sym = 0, parsed_type = 0;
    const uint32_t *typed = NULL;
    int rc;

    key_tenant(&k, w->tenant);
    key_be32(&k, base);
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_BID], &kv, &v) != 0 || v.mv_size != base_canon->len ||
        (v.mv_size > 0 && memcmp(v.mv_data, base_canon->data, v.mv_size) != 0)) {
        *split = false; /* a base made before format 10 */
        return FC_OK;
    }
    /* Format 11: the type's value interned (about 45 bytes a series at 10,000 pods of one). */
    if (fc_store_canon_value((const char *)canon->data, canon->len, "__profile_type__", &type,
                             &type_len)) {
        if ((rc = symbol(w, type, type_len, &type_sym)) != FC_OK) {
            return rc; /* LMDB's error (a full map): the transaction takes no more puts */
        }
        typed = &type_sym;
    }
    fc_store_series_split(base_canon, canon, base, typed, out);
    if (!fc_store_sid_parse(out->data, out->len, &l, &parsed_type) || parsed_type != type_sym) {
        *split = false;
        return FC_OK;
    }
    l.base = (const char *)base_canon->data;
    l.base_len = base_canon->len;
    l.type = type;
    l.type_len = type_len;
    fc_buf_init(&back, 0);
    fc_store_series_canonical(&l, &back);
    *split = back.len == canon->len &&
             (back.len == 0 || memcmp(back.data, canon->data, back.len) == 0) &&
             !fc_store_series_shadowed(&l);
    fc_buf_release(&back);
    return FC_OK;
}

/*
 * Format 13: a base's series are one `series` value, keyed (tenant, be32
 * base): entries of be64 h64(canonical labels) be32 id, sorted by hash, at
 * most BASE_SERIES_MAX of them; a base's further series have a key each,
 * (tenant, be32 base, be64 h64). At 10,000 pods of one profile each (about
 * 35 series a pod) one key a series, h128 of its labels, took about 59
 * bytes of pages a series (25 MB keyed by base and hash: half-full leaves)
 * and a new pod dirtied a leaf page per series; a pod's value takes about
 * 12 bytes a series and one page write. Series made before (h128 of their
 * labels, 16 bytes after the tenant) are still found by that key.
 */
#define BASE_SERIES_MAX 256
#define BASE_SERIES_ENTRY 12

static uint64_t be64_at(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/*
 * In a base's series value v (its size a multiple of BASE_SERIES_ENTRY):
 * whether hash h is there (then *id), and where it goes (*at, an entry).
 */
static bool base_series_find(const MDB_val *v, uint64_t h, uint32_t *id, size_t *at)
{
    const uint8_t *p = v->mv_data;
    size_t lo = 0, hi = v->mv_size / BASE_SERIES_ENTRY;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t m = be64_at(p + mid * BASE_SERIES_ENTRY);
        if (m == h) {
            *id = be32(p + mid * BASE_SERIES_ENTRY + 8);
            *at = mid;
            return true;
        }
        if (m < h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *at = lo;
    return false;
}

/* Puts series id (labels hashed to h) of base: into the base's value, or its own key past the cap.
 */
static int base_series_put(struct writer *w, const struct key *bk, const struct key *own,
                           uint64_t h, uint32_t id)
{
    MDB_val kv = val(bk->b, bk->n), v;
    uint8_t entry[BASE_SERIES_ENTRY];
    struct fc_buf next;
    uint32_t found;
    size_t at = 0, len = 0;
    int rc;

    for (int i = 0; i < 8; i++) {
        entry[i] = (uint8_t)(h >> (56 - 8 * i));
    }
    for (int i = 0; i < 4; i++) {
        entry[8 + i] = (uint8_t)(id >> (24 - 8 * i));
    }
    if (mdb_get(w->txn, w->s->db[DB_SERIES], &kv, &v) == 0) {
        if (v.mv_size % BASE_SERIES_ENTRY != 0 ||
            v.mv_size / BASE_SERIES_ENTRY >= BASE_SERIES_MAX) {
            /* Full (or damaged: left as it is): a key of its own. */
            struct key k = *own;
            return fc_store_put_empty(w, DB_SERIES, &k, entry + 8, 4);
        }
        base_series_find(&v, h, &found, &at);
        len = v.mv_size;
    }
    fc_buf_init(&next, len + BASE_SERIES_ENTRY);
    if (at > 0) {
        fc_buf_append(&next, v.mv_data, at * BASE_SERIES_ENTRY);
    }
    fc_buf_append(&next, entry, BASE_SERIES_ENTRY);
    if (len > at * BASE_SERIES_ENTRY) {
        fc_buf_append(&next, (const uint8_t *)v.mv_data + at * BASE_SERIES_ENTRY,
                      len - at * BASE_SERIES_ENTRY);
    }
    {
        struct key k = *bk;
        rc = fc_store_put_empty(w, DB_SERIES, &k, next.data, next.len);
    }
    fc_buf_release(&next);
    return rc;
}

/*
 * The symbol of a new series' own part (format 18), counted: `sym` holds
 * its id and the number of series that name it (FC_STORE_OWN_SYM_LEN), so
 * that forget deletes it with the last (fc_store_own_symbol_release). A
 * symbol of 4 bytes (a frame's, or an own part interned before it was
 * counted) is shared and never deleted. Not through the id cache: a new
 * series is rare, and its count is written each time.
 */
static int own_symbol(struct writer *w, const char *bytes, size_t len, uint32_t *id)
{
    struct key k, kid;
    MDB_val kv, v;
    uint8_t counted[FC_STORE_OWN_SYM_LEN];
    uint32_t n = 1;
    int rc;

    key_tenant(&k, w->tenant);
    key_h128(&k, bytes, len);
    kv = val(k.b, k.n);
    rc = mdb_get(w->txn, w->s->db[DB_SYM], &kv, &v);
    if (rc == 0 && v.mv_size == 4) {
        memcpy(id, v.mv_data, 4);
        return FC_OK;
    }
    if (rc == 0 && v.mv_size == FC_STORE_OWN_SYM_LEN) {
        memcpy(id, v.mv_data, 4);
        memcpy(&n, (const uint8_t *)v.mv_data + 4, 4);
        n = n == UINT32_MAX ? n : n + 1; /* saturated: never deleted */
    } else if (rc != 0 && rc != MDB_NOTFOUND) {
        return fc_store_lmdb_error(w->err, rc, "symbols");
    } else {
        if ((rc = fc_store_next_id(w, "sym", id)) != FC_OK) {
            return rc;
        }
        key_tenant(&kid, w->tenant);
        key_be32(&kid, *id);
        rc = fc_store_put_empty(w, DB_SYMID, &kid, bytes, len);
        if (rc != FC_OK) {
            return rc;
        }
    }
    memcpy(counted, id, 4);
    memcpy(counted + 4, &n, 4);
    return fc_store_put_empty(w, DB_SYM, &k, counted, sizeof(counted));
}

/*
 * A new split series' `sid` entry (format 18, store_int.h): its own part
 * interned as a symbol, its entry appended to its bucket (ids only grow, so
 * it is the bucket's last). An entry at or past its slot is an id never
 * given out, so damage that still decodes: it is dropped and counted, since
 * readers, who look in the bucket first, would read it for this series
 * (found by review). A bucket that does not decode is left as it is and the
 * series gets a key of its own as format 17 wrote it, which readers read
 * when the bucket does not answer.
 */
static int sid_put(struct writer *w, uint32_t id, uint32_t base, const struct fc_buf *split)
{
    struct sid_entry e[FC_STORE_SID_SLOTS];
    struct key k;
    MDB_val kv, v;
    struct fc_buf next;
    size_t n = 0, head = 5; /* 0x00 be32(base): fc_store_series_split */
    uint32_t own;
    int rc;

    fc_store_sid_bucket_key(&k, w->tenant, id);
    kv = val(k.b, k.n);
    rc = mdb_get(w->txn, w->s->db[DB_SID], &kv, &v);
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return fc_store_lmdb_error(w->err, rc, "sid");
    }
    if (split->len > head && (rc == MDB_NOTFOUND || fc_store_sid_bucket_decode(&v, e, &n))) {
        while (n > 0 && e[n - 1].slot >= id % FC_STORE_SID_SLOTS) {
            n--;
            atomic_fetch_add(&w->s->corrupt, 1);
        }
        if ((rc = own_symbol(w, (const char *)split->data + head, split->len - head, &own)) !=
            FC_OK) {
            return rc;
        }
        e[n++] = (struct sid_entry){id % FC_STORE_SID_SLOTS, base, own};
        fc_buf_init(&next, 0);
        fc_store_sid_bucket_encode(e, n, &next);
        rc = fc_store_put_empty(w, DB_SID, &k, next.data, next.len);
        fc_buf_release(&next);
        return rc;
    }
    key_tenant(&k, w->tenant);
    key_be32(&k, id);
    return fc_store_put_empty(w, DB_SID, &k, split->data, split->len);
}

static int series_id(struct writer *w, const struct label *labels, size_t n, uint32_t base,
                     const struct fc_buf *base_canon, uint32_t *id)
{
    struct fc_buf canon;
    struct key k, bk, old;
    MDB_val kv, v;
    uint64_t h;
    size_t at;
    int rc = FC_OK;

    fc_buf_init(&canon, 0);
    canonical(labels, n, &canon);
    h = XXH3_64bits(canon.data ? (const char *)canon.data : "", canon.len);
    /* The id cache knows a series by (base, hash) wherever it is stored. */
    key_tenant(&k, w->tenant);
    key_be32(&k, base);
    bk = k;
    key_be64(&k, h);
    key_tenant(&old, w->tenant);
    key_h128(&old, canon.data ? (const char *)canon.data : "", canon.len);
    if (fc_store_ids_get(w->s, DB_SERIES, &k, id)) {
        fc_buf_release(&canon);
        return FC_OK;
    }
    kv = val(bk.b, bk.n);
    if (mdb_get(w->txn, w->s->db[DB_SERIES], &kv, &v) == 0 && v.mv_size % BASE_SERIES_ENTRY == 0 &&
        base_series_find(&v, h, id, &at)) {
        fc_buf_release(&canon);
        fc_store_ids_note(w->s, DB_SERIES, &k, *id);
        return FC_OK;
    }
    for (int i = 0; i < 2; i++) {
        const struct key *probe = i == 0 ? &k : &old; /* past the cap; made before format 13 */
        uint32_t its_base;
        kv = val(probe->b, probe->n);
        if (mdb_get(w->txn, w->s->db[DB_SERIES], &kv, &v) != 0 || v.mv_size != 4) {
            continue;
        }
        *id = be32(v.mv_data);
        /*
         * A series made before format 13 is one per label set, packed in the
         * base it was first written from: from another base (a label the
         * profile's own here and a sample's there) it would be written where
         * no series query reads it, so this base gets a series of its own.
         */
        if (i == 1 && (!fc_store_series_base(w->s, w->txn, w->tenant, *id, NULL, &its_base) ||
                       its_base != base)) {
            break;
        }
        fc_buf_release(&canon);
        fc_store_ids_note(w->s, DB_SERIES, &k, *id); /* known by (base, hash) from now on */
        return FC_OK;
    }
    rc = fc_store_next_id(w, "series", id);
    if (rc == FC_OK) {
        /* Noted now: the label index below is written in the same transaction. */
        fc_store_ids_note(w->s, DB_SERIES, &k, *id);
        struct key idk;
        uint8_t bb[4] = {(uint8_t)(base >> 24), (uint8_t)(base >> 16), (uint8_t)(base >> 8),
                         (uint8_t)base};
        struct fc_buf split;
        bool is_split = false;
        rc = base_series_put(w, &bk, &k, h, *id);
        key_tenant(&idk, w->tenant);
        key_be32(&idk, *id);
        fc_buf_init(&split, 0);
        rc = rc ? rc : split_sid(w, base, base_canon, &canon, &split, &is_split);
        if (rc == FC_OK && is_split) {
            rc = sid_put(w, *id, base, &split);
        } else if (rc == FC_OK) {
            rc = fc_store_put_empty(w, DB_SID, &idk, canon.data, canon.len);
            rc = rc ? rc : fc_store_put_empty(w, DB_SBASE, &idk, bb, 4);
        }
        fc_buf_release(&split);
    }
    /* The label index: names, values per name, and series per (name, value). */
    for (size_t i = 0; rc == FC_OK && i < n; i++) {
        size_t nl = strlen(labels[i].name), vl = strlen(labels[i].value);
        struct key ln, lv;
        key_tenant(&ln, w->tenant);
        key_h64(&ln, labels[i].name, nl);
        lv = ln;
        key_h64(&lv, labels[i].value, vl);
        rc = fc_store_put_empty(w, DB_LN, &ln, labels[i].name, nl);
        rc = rc ? rc : fc_store_put_empty(w, DB_LV, &lv, labels[i].value, vl);
        rc = rc ? rc : posting_add(w, &lv, *id);
    }
    fc_buf_release(&canon);
    return rc;
}

int fc_store_merge_window(struct writer *w, uint32_t base, int level, int64_t start,
                          const struct parts *add)
{
    struct key k;
    MDB_val kv, v;
    struct parts ps = {0};
    struct fc_buf enc;
    int rc;

    node_key(&k, w->tenant, base, level, start);
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_NODE], &kv, &v) == 0 &&
        (!fc_store_marker_fits(&v, level, start) ||
         !fc_store_window_decode(w->s, w->txn, w->tenant, base, &v, NULL, NULL, NULL, &ps))) {
        /* A window we cannot read is replaced rather than poisoning every later write. */
        fc_store_parts_release(&ps);
    }
    for (uint32_t i = 0; i < add->n; i++) {
        fc_tree_merge(fc_store_part_of(&ps, add->v[i].series), &add->v[i].tree);
    }
    fc_buf_init(&enc, 0);
    rc = fc_store_packed_encode(&ps, &enc);
    if (rc == FC_OK) {
        v = val(enc.data, enc.len);
        rc = mdb_put(w->txn, w->s->db[DB_NODE], &kv, &v, 0);
        rc = rc ? fc_store_lmdb_error(w->err, rc, "node") : FC_OK;
    }
    fc_buf_release(&enc);
    fc_store_parts_release(&ps);
    return rc;
}

struct windows *fc_store_windows_new(void)
{
    struct windows *ws = fc_xcalloc(1, sizeof(*ws));

    fc_idmap_init(&ws->index, 64);
    return ws;
}

void fc_store_windows_free(struct windows *ws)
{
    for (uint32_t i = 0; i < ws->n; i++) {
        fc_store_parts_release(&ws->v[i].parts);
    }
    fc_idmap_release(&ws->index);
    free(ws->v);
    free(ws);
}

uint32_t fc_store_windows_count(const struct windows *ws)
{
    return ws->n;
}

/* Hashes (tenant, base, level, start); the open windows use it too. */
uint64_t fc_store_window_hash(const char *tenant, uint32_t base, int level, int64_t start)
{
    uint64_t k[2] = {((uint64_t)base << 8) | (uint64_t)level, (uint64_t)start};
    return XXH3_64bits_withSeed(k, sizeof(k), XXH3_64bits(tenant, strlen(tenant)));
}

int fc_store_flush_windows(struct writer *w, struct windows *ws)
{
    const char *tenant = w->tenant;
    int rc = FC_OK;

    for (uint32_t i = 0; i < ws->n; i++) {
        if (rc == FC_OK) {
            w->tenant = ws->v[i].tenant;
            rc = fc_store_merge_window(w, ws->v[i].base, ws->v[i].level, ws->v[i].start,
                                       &ws->v[i].parts);
        }
        fc_store_parts_release(&ws->v[i].parts);
    }
    w->tenant = tenant;
    ws->n = 0;
    fc_idmap_release(&ws->index);
    fc_idmap_init(&ws->index, 64);
    return rc;
}

static int add_entry(struct writer *w, struct windows *ws, uint32_t base, uint32_t series,
                     int level, int64_t start, uint64_t span, const struct fc_tree *tree)
{
    uint64_t h = fc_store_window_hash(w->tenant, base, level, start);
    uint32_t slot;

    if (fc_idmap_get(&ws->index, h, &slot)) {
        struct window *x = &ws->v[slot];
        if (x->base == base && x->level == level && x->start == start && x->span == span &&
            strcmp(x->tenant, w->tenant) == 0) {
            fc_tree_merge(fc_store_part_of(&x->parts, series), tree);
            return FC_OK;
        }
        if (level == FC_STORE_SPAN_LEVEL) {
            /* A 64-bit hash collision: this one straight into LMDB. */
            return fc_store_merge_span_value(w, span, series, start, tree);
        }
        {
            /* A 64-bit hash collision: write this one straight into LMDB. */
            struct parts one = {0};
            int rc;
            fc_tree_merge(fc_store_part_of(&one, series), tree);
            rc = fc_store_merge_window(w, base, level, start, &one);
            rc = rc ? rc : fc_store_mark_ancestors(w, base, level, start);
            fc_store_parts_release(&one);
            return rc;
        }
    }
    if (ws->n == ws->cap) {
        ws->cap = ws->cap ? ws->cap * 2 : 64;
        ws->v = fc_xrealloc(ws->v, ws->cap * sizeof(*ws->v));
    }
    ws->v[ws->n].tenant = w->tenant;
    ws->v[ws->n].base = base;
    ws->v[ws->n].level = level;
    ws->v[ws->n].start = start;
    ws->v[ws->n].span = span;
    memset(&ws->v[ws->n].parts, 0, sizeof(ws->v[ws->n].parts));
    fc_tree_merge(fc_store_part_of(&ws->v[ws->n].parts, series), tree);
    fc_idmap_put(&ws->index, h, ws->n);
    ws->n++;
    return FC_OK;
}

int fc_store_add_window(struct writer *w, struct windows *ws, uint32_t base, uint32_t series,
                        int level, int64_t start, const struct fc_tree *tree)
{
    return add_entry(w, ws, base, series, level, start, 0, tree);
}

int fc_store_add_span(struct writer *w, struct windows *ws, uint64_t span, uint32_t series,
                      int64_t window, const struct fc_tree *tree)
{
    return add_entry(w, ws, span_fold(span), series, FC_STORE_SPAN_LEVEL, window, span, tree);
}

/* Groups the samples of p by sample labels; *max_attrs = the most labels of one group. */
static size_t group_samples(const struct fc_batch *b, const struct fc_profile *p,
                            struct group **out, uint32_t *max_attrs)
{
    struct group *g = NULL;
    size_t n = 0, cap = 0;
    uint32_t key_cap = 16;
    uint32_t *key = fc_xmalloc(key_cap * sizeof(uint32_t));

    *max_attrs = 0;
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        uint32_t nk = 0;
        size_t j;
        if (s->attrs.n > key_cap) {
            key_cap = s->attrs.n;
            key = fc_xrealloc(key, key_cap * sizeof(uint32_t));
        }
        for (uint32_t a = 0; a < s->attrs.n; a++) {
            const struct fc_attr *at = &b->dict.attrs[fc_span_idx(b, s->attrs)[a]];
            const char *k = fc_str(b, at->key);
            if (at->kind == FC_ATTR_STR && strcmp(k, "span_id") != 0 &&
                strcmp(k, "trace_id") != 0 && k[0] != '\0') {
                key[nk++] = fc_span_idx(b, s->attrs)[a];
            }
        }
        qsort(key, nk, sizeof(uint32_t), cmp_u32);
        for (j = 0; j < n; j++) {
            if (g[j].n_attrs == nk && memcmp(g[j].attrs, key, nk * sizeof(uint32_t)) == 0) {
                break;
            }
        }
        if (j == n) {
            if (n == cap) {
                cap = cap ? cap * 2 : 4;
                g = fc_xrealloc(g, cap * sizeof(*g));
            }
            memset(&g[n], 0, sizeof(g[n]));
            g[n].attrs = fc_xmalloc((nk + 1) * sizeof(uint32_t));
            if (nk > 0) {
                memcpy(g[n].attrs, key, nk * sizeof(uint32_t));
            }
            g[n].n_attrs = nk;
            if (nk > *max_attrs) {
                *max_attrs = nk;
            }
            n++;
        }
        if (g[j].n == g[j].cap) {
            g[j].cap = g[j].cap ? g[j].cap * 2 : 16;
            g[j].samples = fc_xrealloc(g[j].samples, g[j].cap * sizeof(uint32_t));
        }
        g[j].samples[g[j].n++] = i;
    }
    free(key);
    *out = g;
    return n;
}

static int frame_sym(struct writer *w, struct frames *f, const struct fc_batch *b, uint32_t loc_i,
                     uint32_t j, uint32_t *out)
{
    const struct fc_location *loc = &b->dict.locations[loc_i];
    uint32_t *memo = loc->n_lines ? &f->line_sym[loc->lines_off + j] : &f->loc_sym[loc_i];
    struct fc_frame frame;

    if (*memo != 0) {
        *out = *memo;
        return FC_OK;
    }
    fc_frame_of(b, loc, j, &frame);
    fc_buf_reset(&f->record);
    fc_frame_encode(&frame, &f->record);
    if (symbol(w, (const char *)f->record.data, f->record.len, memo) != FC_OK) {
        return w->err->code;
    }
    *out = *memo;
    return FC_OK;
}

void fc_store_frames_init(struct frames *f, const struct fc_batch *b)
{
    memset(f, 0, sizeof(*f));
    f->line_sym = fc_xcalloc(b->dict.n_lines + 1, sizeof(uint32_t));
    f->loc_sym = fc_xcalloc(b->dict.n_locations + 1, sizeof(uint32_t));
    f->stack_at = fc_xcalloc(b->dict.n_stacks + 1, sizeof(uint32_t));
    f->stack_depth = fc_xcalloc(b->dict.n_stacks + 1, sizeof(uint32_t));
    f->cap = 1024;
    f->paths = fc_xmalloc(f->cap * sizeof(uint32_t));
    fc_buf_init(&f->record, 0);
}

void fc_store_frames_release(struct frames *f)
{
    free(f->line_sym);
    free(f->loc_sym);
    free(f->stack_at);
    free(f->stack_depth);
    free(f->paths);
    fc_buf_release(&f->record);
}

int fc_store_sample_path(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_sample *s, const uint32_t **path, uint32_t *depth)
{
    const struct fc_stack *st = &b->dict.stacks[s->stack];
    const uint32_t *locs = fc_span_idx(b, st->locations);
    size_t at;
    uint32_t d = 0;

    if (f->stack_at[s->stack] != 0) {
        *path = f->paths + (f->stack_at[s->stack] - 1);
        *depth = f->stack_depth[s->stack];
        return FC_OK;
    }
    at = f->n_paths; /* kept paths end there; a path not kept is made there each time */
    for (uint32_t i = st->locations.n; i-- > 0;) {
        const struct fc_location *loc = &b->dict.locations[locs[i]];
        uint32_t lines = loc->n_lines ? loc->n_lines : 1;
        for (uint32_t j = lines; j-- > 0;) {
            if (at + d == f->cap) {
                f->cap *= 2;
                f->paths = fc_xrealloc(f->paths, f->cap * sizeof(uint32_t));
            }
            if (frame_sym(w, f, b, locs[i], j, &f->paths[at + d]) != FC_OK) {
                return w->err->code;
            }
            d++;
        }
    }
    if (at + d <= FC_STORE_PATHS_MAX) {
        f->n_paths = at + d;
        f->stack_at[s->stack] = (uint32_t)at + 1;
        f->stack_depth[s->stack] = d;
    }
    *path = f->paths + at;
    *depth = d;
    return FC_OK;
}

/* The profile's own labels into labels (its type label aside); returns how many. */
static size_t profile_labels(const struct fc_batch *b, const struct fc_profile *p,
                             struct label *labels)
{
    size_t n = 0;

    for (uint32_t i = 0; i < p->n_labels; i++) {
        labels[n].name = fc_str(b, p->labels[i].name);
        labels[n].value = fc_str(b, p->labels[i].value);
        if (strcmp(labels[n].name, "__profile_type__") != 0) {
            n++;
        }
    }
    return n;
}

/* Marks window (base, level, start) dirty, once per transaction. */
int fc_store_mark_dirty(struct writer *w, uint32_t base, int level, int64_t start)
{
    struct key k;

    node_key(&k, w->tenant, base, level, start);
    return fc_store_put_empty(w, DB_DIRTY, &k, "", 0);
}

int fc_store_mark_ancestors(struct writer *w, uint32_t base, int level, int64_t start)
{
    int rc = FC_OK;

    for (int up = level + 1; rc == FC_OK && up < FC_STORE_LEVELS; up++) {
        int64_t d = fc_store_level_secs[up];
        int64_t window = (start >= 0 ? start / d : (start - d + 1) / d) * d;
        if (up != 1 || window + d > w->coarse_before) {
            rc = fc_store_mark_dirty(w, base, up, window);
        }
    }
    return rc;
}

/*
 * Adds tree to the window of (base, series) at time_s: its 10 s window, or
 * its 100 s window when the 10 s windows there were compacted away (it has
 * no children to be rebuilt from). The coarser windows are marked dirty
 * when the flush writes the open windows into LMDB.
 */
static int put_windows(struct writer *w, uint32_t base, uint32_t series, int64_t time_s,
                       const struct fc_tree *tree)
{
    int64_t w100 = (time_s >= 0 ? time_s / 100 : (time_s - 99) / 100) * 100;

    if (w100 + 100 <= w->coarse_before) {
        return fc_store_add_window(w, w->windows, base, series, 1, w100, tree);
    }
    return fc_store_add_window(w, w->windows, base, series, 0,
                               (time_s >= 0 ? time_s / 10 : (time_s - 9) / 10) * 10, tree);
}

/*
 * Adds a series' tree to its service's aggregate, unless the series is in
 * the service's first base (none when it has no service_name).
 */
static int add_to_service(struct writer *w, const struct label *labels, size_t n, const char *type,
                          uint32_t base, uint32_t series, int64_t time_s,
                          const struct fc_tree *tree)
{
    uint32_t agg_base, agg_series;
    bool to_agg;
    int rc;

    for (size_t i = 0; i < n; i++) {
        if (strcmp(labels[i].name, FC_STORE_SERVICE_LABEL) == 0) {
            if (labels[i].value[0] == '\0') {
                return FC_OK;
            }
            rc = fc_store_service_route(w, labels[i].value, type, base, series, &to_agg, &agg_base,
                                        &agg_series);
            return rc || !to_agg ? rc : put_windows(w, agg_base, agg_series, time_s, tree);
        }
    }
    return FC_OK;
}

static int write_profile(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_profile *p)
{
    struct group *groups = NULL;
    uint32_t max_attrs;
    size_t n_groups = group_samples(b, p, &groups, &max_attrs);
    /* The profile's labels, every sample label of a group, and __profile_type__. */
    struct label *labels = fc_xcalloc((size_t)p->n_labels + max_attrs + 1, sizeof(*labels));
    /*
     * The base: the profile's own labels, where the series of all its
     * types and sample-label groups are packed (their trees share most of
     * their shape, which zstd then stores once). Made with its first
     * series: a profile without a positive sample (an idle pod) makes none,
     * which nothing would ever read or forget.
     */
    struct label *base_labels = fc_xcalloc((size_t)p->n_labels + 1, sizeof(*base_labels));
    size_t n_base = profile_labels(b, p, base_labels);
    int64_t time_s = (p->time_ns > 0 ? p->time_ns : fc_now_ns()) / 1000000000LL;
    uint32_t base = 0;
    bool have_base = false;
    struct fc_buf base_canon;
    int rc = FC_OK;

    qsort(base_labels, n_base, sizeof(*base_labels), by_label_name);
    fc_buf_init(&base_canon, 0);
    for (uint32_t t = 0; rc == FC_OK && t < p->n_sample_types; t++) {
        struct fc_buf type_id;
        int64_t scale;
        fc_buf_init(&type_id, 0);
        fc_pyro_stored_type(b, p, t, &type_id, &scale);
        for (size_t g = 0; rc == FC_OK && g < n_groups; g++) {
            struct fc_tree tree;
            size_t n = profile_labels(b, p, labels);
            uint32_t series;
            /* Series labels: the profile's, then the samples' (the profile's win). */
            for (uint32_t i = 0; i < groups[g].n_attrs; i++) {
                const struct fc_attr *a = &b->dict.attrs[groups[g].attrs[i]];
                if (fc_profile_label(b, p, fc_str(b, a->key)) == NULL) {
                    labels[n].name = fc_str(b, a->key);
                    labels[n].value = fc_str(b, a->v.str);
                    n++;
                }
            }
            labels[n].name = "__profile_type__";
            labels[n].value = (const char *)type_id.data;
            n++;
            qsort(labels, n, sizeof(*labels), by_label_name);
            fc_tree_init(&tree);
            for (size_t i = 0; rc == FC_OK && i < groups[g].n; i++) {
                const struct fc_sample *s = &p->samples[groups[g].samples[i]];
                int64_t v = fc_sample_value(p, s, t);
                const uint32_t *path;
                uint32_t depth;
                if (v <= 0) {
                    continue;
                }
                if ((rc = fc_store_sample_path(w, f, b, s, &path, &depth)) == FC_OK) {
                    fc_tree_insert(&tree, path, depth, fc_sat_mul(v, scale));
                }
            }
            if (rc == FC_OK && fc_tree_total(&tree) > 0) {
                if (!have_base) {
                    rc = base_id(w, base_labels, n_base, &base, &base_canon);
                    have_base = rc == FC_OK;
                }
                rc = rc ? rc : series_id(w, labels, n, base, &base_canon, &series);
                rc =
                    rc ? rc
                       : fc_store_write_spans(w, f, b, p, &groups[g], t, scale, series,
                                              (time_s >= 0 ? time_s / 10 : (time_s - 9) / 10) * 10);
                rc = rc ? rc : put_windows(w, base, series, time_s, &tree);
                /* The service's aggregate: whole-service queries read it instead of every pod. */
                rc = rc ? rc
                        : add_to_service(w, labels, n, (const char *)type_id.data, base, series,
                                         time_s, &tree);
            }
            fc_tree_release(&tree);
        }
        fc_buf_release(&type_id);
    }
    for (size_t g = 0; g < n_groups; g++) {
        free(groups[g].attrs);
        free(groups[g].samples);
    }
    free(groups);
    free(labels);
    free(base_labels);
    fc_buf_release(&base_canon);
    return rc;
}

/* Every batch into the open transaction w->txn (not committed) and w->windows. */
static int write_batches(struct writer *w, struct fc_batch *const *batches, size_t n)
{
    int rc = FC_OK;

    {
        MDB_val kv = val(fc_store_coarse_key, sizeof(fc_store_coarse_key) - 1), v;
        w->coarse_before = INT64_MIN;
        if (mdb_get(w->txn, w->s->db[DB_META], &kv, &v) == 0 &&
            v.mv_size == sizeof(w->coarse_before)) {
            memcpy(&w->coarse_before, v.mv_data, sizeof(w->coarse_before));
        }
    }
    for (size_t i = 0; rc == FC_OK && i < n; i++) {
        const struct fc_batch *b = batches[i];
        struct frames f;
        w->tenant = b->tenant;
        fc_store_frames_init(&f, b);
        for (uint32_t p = 0; rc == FC_OK && p < b->n_profiles; p++) {
            rc = write_profile(w, &f, b, &b->profiles[p]);
        }
        fc_store_frames_release(&f);
    }
    return rc;
}

/*
 * Whether the open windows are past their cap, or the log past eight times
 * it (repeated stacks keep merged trees small while the log grows by every
 * record): then a write flushes them.
 */
static bool open_full(struct fc_store *s)
{
    return atomic_load(&s->open.bytes) > s->open.max_bytes ||
           atomic_load(&s->open.log_bytes) > 8 * s->open.max_bytes;
}

/* Counts a refused write by its cause (the LMDB code of its error, if any). */
static void count_failure(struct fc_store *s)
{
    int rc = fc_store_last_lmdb_rc;
    enum fc_store_failure kind = rc == MDB_MAP_FULL             ? FC_STORE_FULL
                                 : rc == ENOSPC || rc == EDQUOT ? FC_STORE_NO_SPACE
                                                                : FC_STORE_IO;
    atomic_fetch_add(&s->failures[kind], 1);
}

/*
 * One transaction for the new ids (symbols, series, labels, spans): LMDB
 * commits it (and syncs it) only when it wrote any, which in the steady
 * state it does not. The trees go to the log and the open windows after it,
 * so every id a logged record names is durable before the record.
 */
int fc_store_write(struct fc_store *s, struct fc_batch *const *batches, size_t n,
                   struct fc_error *err)
{
    struct windows *ws = fc_store_windows_new();
    struct writer w = {s, NULL, NULL, err, ws, INT64_MIN};
    int rc;

    if (fc_store_full(s)) {
        fc_store_windows_free(ws);
        atomic_fetch_add(&s->failures[FC_STORE_FULL], 1);
        return fc_errorf(err, FC_EUNAVAIL,
                         "store: full: %lld bytes in use reached max_size (%lld); retention "
                         "deletes the oldest data",
                         (long long)atomic_load(&s->used), (long long)s->max_size);
    }
    fc_store_last_lmdb_rc = 0;
    if (open_full(s) && fc_store_flush_open(s, err) != FC_OK) {
        /*
         * The open windows are over their cap because flushes fail (a full
         * disk): refused, retryably, rather than holding ever more memory.
         */
        char why[sizeof(err->msg)];
        snprintf(why, sizeof(why), "%s", err->msg);
        fc_store_windows_free(ws);
        count_failure(s);
        return fc_errorf(err, FC_EUNAVAIL,
                         "store: open windows full (%lld bytes), cannot flush: %s",
                         (long long)atomic_load(&s->open.bytes), why);
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &w.txn)) != 0) {
        rc = fc_store_lmdb_error(err, rc, "begin");
    } else if ((rc = write_batches(&w, batches, n)) != FC_OK) {
        mdb_txn_abort(w.txn); /* nothing of this group is written */
        fc_store_ids_publish(s, false);
    } else if ((rc = mdb_txn_commit(w.txn)) != 0) {
        rc = fc_store_lmdb_error(err, rc, "commit"); /* a failed commit is aborted */
        fc_store_ids_publish(s, false);
    } else {
        fc_store_ids_publish(s, true);
        rc = fc_store_open_add(s, ws, err);
    }
    fc_store_windows_free(ws);
    if (rc != FC_OK) {
        count_failure(s);
    }
    if (rc == FC_OK) {
        atomic_store(&s->dirty, true);
    }
    if (rc == FC_OK) {
        /* A failed flush leaves everything open and logged: nothing is lost. */
        struct fc_error ignored = {0};
        if (fc_now_mono_ns() - atomic_load(&s->last_flush_ns) >= s->flush_ns) {
            fc_store_flush(s, &ignored);
        } else if (open_full(s) ||
                   (s->max_size > 0 &&
                    atomic_load(&s->used) + atomic_load(&s->open.log_bytes) >= s->max_size)) {
            /*
             * Past the byte cap; or, under max_size, when what is open might
             * reach it (the log's bytes are about what it takes stored), so
             * that writes are refused as soon as the pages say full, not a
             * flush later.
             */
            fc_store_flush_open(s, &ignored);
        }
    }
    if (s->max_size > 0) {
        fc_store_refresh_used(s);
    }
    return rc;
}
