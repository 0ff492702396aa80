/*
 * A series' labels (`sid`) and its base. Format 10 stores a series' labels
 * in two parts: its base's labels once per base (`bid`: base id -> the
 * base's canonical labels) and, in `sid`, 0x00 be32(base) then only the
 * labels the base lacks (its sample labels and `__profile_type__`). At
 * 10,000 pods of one service (about 35 series each) the full labels were
 * about 170 bytes a series; a series now keeps about 70, and `sbase`
 * (series -> base) is not written, since the base is in `sid`.
 *
 * Format 11 also keeps `__profile_type__` out of a split series' own part:
 * its value (about 45 bytes, the same for every series of a type) is
 * interned as a symbol, and the own part starts with a label of an empty
 * name whose value is that symbol's id in hex (no label of a split own
 * part has an empty name otherwise: sample labels with one are dropped and
 * the profile's labels are the base's). A split series took about 83
 * bytes of `sid` at 10,000 pods; it now takes about 28.
 *
 * Format 18 keeps a new split series in a bucket of FC_STORE_SID_SLOTS ids
 * (store_int.h): one value per 64 ids instead of one key per series, and
 * the own part (format 11's, after the head) interned as a symbol, so that
 * the pods of a service, which have the same sample label sets, share it.
 * At 10,000 pods of one profile each (about 35 series a pod) `sid` took
 * about 53 bytes of pages a series (18.8 MB), most of it the key and
 * LMDB's node header; see docs/internals/store.md (Keys) for what it takes
 * now. Series made before format 18 keep their key of their own.
 *
 * A series made by format 9 or before holds its canonical labels whole
 * (they never start with a 0 byte: names are not empty) and its base in
 * `sbase`; a series made in a base that has no `bid` entry (made before
 * format 10) is still written so. Both are read here, so that every reader
 * of labels goes through one place.
 */
#include "storage/store_int.h"

#include "formats/pb.h"

#include <stdio.h>
#include <string.h>

/* A split value: 0x00, be32(base), then the canonical labels the base lacks. */
#define SPLIT_HEAD 5
/* The first byte of the own part when the type is interned: a label with an empty name. */
#define TYPE_MARK '\x01'
#define TYPE_NAME "__profile_type__"

static bool get_by_id(struct fc_store *s, MDB_txn *txn, int db, const char *tenant, uint32_t id,
                      MDB_val *v)
{
    struct key k;
    MDB_val kv;

    key_tenant(&k, tenant);
    key_be32(&k, id);
    kv = val(k.b, k.n);
    return mdb_get(txn, s->db[db], &kv, v) == 0;
}

/* Deletes (tenant, be32 id) from db: 0 (also when it was not there) or LMDB's error. */
static int del_by_id(struct fc_store *s, MDB_txn *txn, int db, const char *tenant, uint32_t id)
{
    struct key k;
    MDB_val kv;
    int rc;

    key_tenant(&k, tenant);
    key_be32(&k, id);
    kv = val(k.b, k.n);
    rc = mdb_del(txn, s->db[db], &kv, NULL);
    return rc == MDB_NOTFOUND ? 0 : rc;
}

void fc_store_sid_bucket_key(struct key *k, const char *tenant, uint32_t id)
{
    key_tenant(k, tenant);
    key_be32(k, id / FC_STORE_SID_SLOTS);
    k->b[k->n++] = FC_STORE_SID_BUCKET;
}

/* The check a bucket's value starts with: the low 32 bits of xxh3 of its entries. */
static uint32_t bucket_check(const void *entries, size_t len)
{
    return (uint32_t)XXH3_64bits(entries, len);
}

bool fc_store_sid_bucket_decode(const MDB_val *v, struct sid_entry *out, size_t *n)
{
    const uint8_t *p = v->mv_data;
    struct fc_pb r;
    uint32_t base = 0;

    *n = 0;
    if (v->mv_size < FC_STORE_SID_CHECK ||
        be32(p) != bucket_check(p + FC_STORE_SID_CHECK, v->mv_size - FC_STORE_SID_CHECK)) {
        return false;
    }
    fc_pb_init(&r, p + FC_STORE_SID_CHECK, v->mv_size - FC_STORE_SID_CHECK);
    while (r.p < r.end) {
        uint8_t head = *r.p++;
        uint32_t slot = head >> 1;
        uint64_t b, own;
        bool same_base = head & 1;
        if (slot >= FC_STORE_SID_SLOTS || (*n > 0 && slot <= out[*n - 1].slot) ||
            (same_base && *n == 0)) {
            return false; /* slots increase, and the first names its base */
        }
        if (!same_base) {
            if (fc_pb_varint(&r, &b) != 0 || b > UINT32_MAX) {
                return false;
            }
            base = (uint32_t)b;
        }
        if (fc_pb_varint(&r, &own) != 0 || own > UINT32_MAX) {
            return false;
        }
        out[*n].slot = slot;
        out[*n].base = base;
        out[*n].own = (uint32_t)own;
        (*n)++;
    }
    return true;
}

void fc_store_sid_bucket_encode(const struct sid_entry *e, size_t n, struct fc_buf *out)
{
    size_t at = out->len;
    uint32_t check;
    uint8_t room[FC_STORE_SID_CHECK] = {0};

    fc_buf_append(out, room, sizeof(room)); /* the check's place, filled below */
    for (size_t i = 0; i < n; i++) {
        bool same_base = i > 0 && e[i].base == e[i - 1].base;
        uint8_t head = (uint8_t)(e[i].slot << 1 | (same_base ? 1u : 0u));
        fc_buf_append(out, &head, 1);
        if (!same_base) {
            fc_pb_put_varint(out, e[i].base);
        }
        fc_pb_put_varint(out, e[i].own);
    }
    check = bucket_check(out->data + at + FC_STORE_SID_CHECK, out->len - at - FC_STORE_SID_CHECK);
    for (int i = 0; i < FC_STORE_SID_CHECK; i++) {
        out->data[at + (size_t)i] = (uint8_t)(check >> (24 - 8 * i));
    }
}

/*
 * Series id's entry in its bucket (format 18), through cache (NULL: none):
 * 1 found, 0 not there (a series of an older format has a key of its own),
 * -1 a damaged bucket (counted as corrupt once a load).
 */
static int bucket_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id,
                      struct sid_cache *cache, struct sid_entry *out)
{
    struct sid_cache local;
    struct sid_cache *c = cache != NULL ? cache : &local;
    uint32_t slot = id % FC_STORE_SID_SLOTS;
    size_t lo = 0, hi;

    if (cache == NULL || c->state == 0 || c->bucket != id / FC_STORE_SID_SLOTS) {
        struct key k;
        MDB_val kv, v;
        fc_store_sid_bucket_key(&k, tenant, id);
        kv = val(k.b, k.n);
        c->bucket = id / FC_STORE_SID_SLOTS;
        c->state = 1;
        c->n = 0;
        if (mdb_get(txn, s->db[DB_SID], &kv, &v) == 0 &&
            !fc_store_sid_bucket_decode(&v, c->e, &c->n)) {
            atomic_fetch_add(&s->corrupt, 1);
            c->state = 2;
        }
    }
    if (c->state == 2) {
        return -1;
    }
    for (hi = c->n; lo < hi;) { /* slots increase */
        size_t mid = lo + (hi - lo) / 2;
        if (c->e[mid].slot < slot) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    if (lo < c->n && c->e[lo].slot == slot) {
        *out = c->e[lo];
        return 1;
    }
    return 0;
}

int fc_store_own_symbol_release(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t own)
{
    struct key k;
    MDB_val kv, v, sv;
    uint32_t id, n;
    int rc;

    key_tenant(&k, tenant);
    key_be32(&k, own);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_SYMID], &kv, &v) != 0) {
        return 0; /* lost already: nothing to count down */
    }
    key_tenant(&k, tenant);
    key_h128(&k, v.mv_data, v.mv_size);
    kv = val(k.b, k.n);
    if (mdb_get(txn, s->db[DB_SYM], &kv, &sv) != 0 || sv.mv_size != FC_STORE_OWN_SYM_LEN) {
        return 0; /* a symbol of 4 bytes is shared and kept */
    }
    memcpy(&id, sv.mv_data, 4);
    memcpy(&n, (const uint8_t *)sv.mv_data + 4, 4);
    if (id != own || n == UINT32_MAX) {
        return 0; /* another id under its hash (damage), or saturated: kept */
    }
    if (n > 1) {
        uint8_t counted[FC_STORE_OWN_SYM_LEN];
        n--;
        memcpy(counted, &id, 4);
        memcpy(counted + 4, &n, 4);
        sv = val(counted, sizeof(counted));
        return mdb_put(txn, s->db[DB_SYM], &kv, &sv, 0);
    }
    if ((rc = mdb_del(txn, s->db[DB_SYM], &kv, NULL)) != 0) {
        return rc;
    }
    return del_by_id(s, txn, DB_SYMID, tenant, own);
}

int fc_store_sid_delete(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id)
{
    struct sid_entry e[FC_STORE_SID_SLOTS];
    struct key k;
    MDB_val kv, v;
    size_t n, kept = 0;
    int rc;

    fc_store_sid_bucket_key(&k, tenant, id);
    kv = val(k.b, k.n);
    rc = mdb_get(txn, s->db[DB_SID], &kv, &v);
    if (rc == 0 && fc_store_sid_bucket_decode(&v, e, &n)) {
        for (size_t i = 0; i < n; i++) {
            if (e[i].slot != id % FC_STORE_SID_SLOTS) {
                e[kept++] = e[i];
            } else if ((rc = fc_store_own_symbol_release(s, txn, tenant, e[i].own)) != 0) {
                return rc;
            }
        }
        if (kept == 0) {
            rc = mdb_del(txn, s->db[DB_SID], &kv, NULL);
        } else if (kept < n) {
            struct fc_buf next;
            fc_buf_init(&next, 0);
            fc_store_sid_bucket_encode(e, kept, &next);
            v = val(next.data, next.len);
            rc = mdb_put(txn, s->db[DB_SID], &kv, &v, 0);
            fc_buf_release(&next);
        }
    }
    if (rc != 0 && rc != MDB_NOTFOUND) {
        return rc;
    }
    return del_by_id(s, txn, DB_SID, tenant, id);
}

/*
 * Own part (format 11's: the interned type first, then the labels the base
 * lacks) into out; *type its type's symbol id when typed.
 */
static void own_parse(const char *own, const char *end, struct series_labels *out, uint32_t *type)
{
    const char *hex_end;
    uint32_t id = 0;

    *type = 0;
    /*
     * The interned type: an empty name, then 1 to 8 hex digits. Anything
     * else after a leading 0x01 is a format 10 label whose name starts with
     * that byte (only an empty key is dropped): its text up to the first
     * 0x02 holds the name's 0x01 separator, never hex digits alone.
     */
    hex_end =
        own < end && own[0] == TYPE_MARK ? memchr(own + 1, '\x02', (size_t)(end - own - 1)) : NULL;
    if (hex_end != NULL && hex_end > own + 1 && hex_end - own - 1 <= 8) {
        const char *h = own + 1;
        for (; h < hex_end; h++) {
            int d = *h >= '0' && *h <= '9' ? *h - '0' : *h >= 'a' && *h <= 'f' ? *h - 'a' + 10 : -1;
            if (d < 0) {
                break;
            }
            id = id << 4 | (uint32_t)d;
        }
        if (h == hex_end) {
            out->typed = true;
            *type = id;
            own = hex_end + 1;
        }
    }
    out->own = own;
    out->own_len = (size_t)(end - own);
}

bool fc_store_sid_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id,
                      struct sid_cache *cache, struct series_labels *out)
{
    MDB_val v, b, t;
    struct sid_entry e;
    uint32_t type;
    int in_bucket;

    memset(out, 0, sizeof(*out));
    /* A damaged bucket (counted) leaves the key of its own a series written past it has. */
    in_bucket = bucket_get(s, txn, tenant, id, cache, &e);
    if (in_bucket > 0) {
        if (!get_by_id(s, txn, DB_SYMID, tenant, e.own, &v)) {
            atomic_fetch_add(&s->corrupt, 1); /* its own part's symbol is lost */
            return false;
        }
        out->split = true;
        out->base_id = e.base;
        own_parse(v.mv_data, (const char *)v.mv_data + v.mv_size, out, &type);
    } else if (!get_by_id(s, txn, DB_SID, tenant, id, &v)) {
        return false;
    } else if (v.mv_size == 0 || ((const uint8_t *)v.mv_data)[0] != 0) {
        out->own = v.mv_data;
        out->own_len = v.mv_size;
        return true;
    } else if (!fc_store_sid_parse(v.mv_data, v.mv_size, out, &type)) {
        atomic_fetch_add(&s->corrupt, 1);
        return false;
    }
    if (!get_by_id(s, txn, DB_BID, tenant, out->base_id, &b) ||
        (out->typed && !get_by_id(s, txn, DB_SYMID, tenant, type, &t))) {
        atomic_fetch_add(&s->corrupt, 1); /* a split series whose base or type is lost */
        return false;
    }
    out->base = b.mv_data;
    out->base_len = b.mv_size;
    if (out->typed) {
        out->type = t.mv_data;
        out->type_len = t.mv_size;
    }
    return true;
}

bool fc_store_sid_parse(const void *value, size_t len, struct series_labels *out, uint32_t *type)
{
    memset(out, 0, sizeof(*out));
    if (len < SPLIT_HEAD || ((const uint8_t *)value)[0] != 0) {
        return false;
    }
    out->split = true;
    out->base_id = be32((const uint8_t *)value + 1);
    own_parse((const char *)value + SPLIT_HEAD, (const char *)value + len, out, type);
    return true;
}

bool fc_store_series_base(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id,
                          struct sid_cache *cache, uint32_t *base)
{
    MDB_val v;
    struct sid_entry e;

    if (bucket_get(s, txn, tenant, id, cache, &e) > 0) {
        *base = e.base;
        return true;
    }
    if (!get_by_id(s, txn, DB_SID, tenant, id, &v)) {
        return false;
    }
    if (v.mv_size >= SPLIT_HEAD && ((const uint8_t *)v.mv_data)[0] == 0) {
        *base = be32((const uint8_t *)v.mv_data + 1);
        return true;
    }
    if (!get_by_id(s, txn, DB_SBASE, tenant, id, &v) || v.mv_size != 4) {
        return false;
    }
    *base = be32(v.mv_data);
    return true;
}

/* The next label of canonical labels at *p (before end): false at the end or when damaged. */
static bool next_label(const char **p, const char *end, const char **name, size_t *name_len,
                       const char **value, size_t *value_len)
{
    const char *sep = *p < end ? memchr(*p, '\x01', (size_t)(end - *p)) : NULL;
    const char *vend = sep ? memchr(sep + 1, '\x02', (size_t)(end - sep - 1)) : NULL;

    if (vend == NULL) {
        return false;
    }
    *name = *p;
    *name_len = (size_t)(sep - *p);
    *value = sep + 1;
    *value_len = (size_t)(vend - sep - 1);
    *p = vend + 1;
    return true;
}

bool fc_store_canon_value(const char *canon, size_t len, const char *name, const char **value,
                          size_t *value_len)
{
    const char *p = canon, *end, *n;
    size_t nl = strlen(name), l;

    if (canon == NULL) {
        return false;
    }
    end = canon + len;
    while (next_label(&p, end, &n, &l, value, value_len)) {
        if (l == nl && memcmp(n, name, nl) == 0) {
            return true;
        }
    }
    return false;
}

bool fc_store_series_value(const struct series_labels *l, const char *name, const char **value,
                           size_t *value_len)
{
    if (l->typed && strcmp(name, TYPE_NAME) == 0) {
        *value = l->type;
        *value_len = l->type_len;
        return true;
    }
    return fc_store_canon_value(l->own, l->own_len, name, value, value_len) ||
           fc_store_canon_value(l->base, l->base_len, name, value, value_len);
}

const char *fc_store_series_label(const struct series_labels *l, const char *name, char *buf,
                                  size_t size)
{
    const char *value;
    size_t vl;

    if (!fc_store_series_value(l, name, &value, &vl)) {
        return "";
    }
    vl = vl < size ? vl : size - 1;
    memcpy(buf, value, vl);
    buf[vl] = '\0';
    return buf;
}

/* Appends one label (name 0x01 value 0x02) to out. */
static void put_label(struct fc_buf *out, const char *name, size_t nl, const char *value, size_t vl)
{
    fc_buf_append(out, name, nl);
    fc_buf_append(out, "\x01", 1);
    fc_buf_append(out, value, vl);
    fc_buf_append(out, "\x02", 1);
}

/* Whether name a sorts before name b (canonical labels are sorted by name, bytewise). */
static bool name_before(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c < 0 || (c == 0 && al < bl);
}

bool fc_store_series_shadowed(const struct series_labels *l)
{
    const char *p = l->own, *n, *v, *bv;
    size_t nl, vl, bvl;

    while (p != NULL && next_label(&p, l->own + l->own_len, &n, &nl, &v, &vl)) {
        char name[256];
        if (nl >= sizeof(name)) {
            return true; /* not looked up: taken as shadowing */
        }
        memcpy(name, n, nl);
        name[nl] = '\0';
        if (fc_store_canon_value(l->base, l->base_len, name, &bv, &bvl)) {
            return true;
        }
    }
    return false;
}

void fc_store_series_canonical(const struct series_labels *l, struct fc_buf *out)
{
    const char *p = l->own, *pend = l->own != NULL ? l->own + l->own_len : NULL;
    const char *q = l->base, *qend = l->base != NULL ? l->base + l->base_len : NULL;
    const char *pn = NULL, *pv = NULL, *qn = NULL, *qv = NULL;
    size_t pnl = 0, pvl = 0, qnl = 0, qvl = 0;
    bool has_p = p != NULL && next_label(&p, pend, &pn, &pnl, &pv, &pvl);
    bool has_q = q != NULL && next_label(&q, qend, &qn, &qnl, &qv, &qvl);

    bool has_t = l->typed;

    /* The parts are sorted by name and share none: a merge (the type is a part of one). */
    while (has_p || has_q || has_t) {
        if (has_t && (!has_p || name_before(TYPE_NAME, strlen(TYPE_NAME), pn, pnl)) &&
            (!has_q || name_before(TYPE_NAME, strlen(TYPE_NAME), qn, qnl))) {
            put_label(out, TYPE_NAME, strlen(TYPE_NAME), l->type, l->type_len);
            has_t = false;
        } else if (has_p && (!has_q || name_before(pn, pnl, qn, qnl))) {
            put_label(out, pn, pnl, pv, pvl);
            has_p = next_label(&p, pend, &pn, &pnl, &pv, &pvl);
        } else {
            put_label(out, qn, qnl, qv, qvl);
            has_q = next_label(&q, qend, &qn, &qnl, &qv, &qvl);
        }
    }
}

void fc_store_series_split(const struct fc_buf *base, const struct fc_buf *series, uint32_t base_id,
                           const uint32_t *type, struct fc_buf *out)
{
    const char *p = (const char *)series->data, *end = p != NULL ? p + series->len : NULL;
    const char *n, *v, *bv;
    size_t nl, vl, bvl;
    uint8_t head[SPLIT_HEAD] = {0, (uint8_t)(base_id >> 24), (uint8_t)(base_id >> 16),
                                (uint8_t)(base_id >> 8), (uint8_t)base_id};

    fc_buf_append(out, head, sizeof(head));
    if (type != NULL) {
        char hex[12];
        int hl = snprintf(hex, sizeof(hex), "%x", *type);
        put_label(out, "", 0, hex, (size_t)hl);
    }
    while (p != NULL && next_label(&p, end, &n, &nl, &v, &vl)) {
        char name[256];
        bool in_base = type != NULL && nl == strlen(TYPE_NAME) && memcmp(n, TYPE_NAME, nl) == 0;
        if (!in_base && nl < sizeof(name)) {
            memcpy(name, n, nl);
            name[nl] = '\0';
            in_base = fc_store_canon_value((const char *)base->data, base->len, name, &bv, &bvl) &&
                      bvl == vl && memcmp(bv, v, vl) == 0;
        }
        if (!in_base) {
            put_label(out, n, nl, v, vl);
        }
    }
}
