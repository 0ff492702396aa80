#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/idmap.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"
#include "storage/frame.h"
#include "formats/pb.h"
#include "formats/pyroscope.h"
#include "core/span.h"

#include <errno.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>
#include <zstd.h>

static const char *const db_names[N_DBS] = {"sym",   "symid", "series", "sid",  "ln",
                                            "lv",    "post",  "node",   "meta", "span",
                                            "trace", "base",  "sbase"};

/*
 * A node value packs the window of every series of one base series (the
 * profile's own labels, before its types and sample labels split it):
 *   le32 header length | header: uvarint n, n x (uvarint series, uvarint total,
 *   uvarint raw length) | one zstd frame of the n raw trees, in header order.
 * Totals are readable without decompressing; similar trees compress together.
 * A span entry is le64 total followed by a zstd tree.
 */
#define NODE_HEADER 8

/*
 * The on-disk format; a store written by another format is refused, never
 * misread. Format 4 interns frame records (storage/frame.h) where format 3
 * interned names; a name is a valid symbol of format 4, so a format 3 store
 * is read as it is and marked 4 at open (a format-3 build then refuses it).
 */
#define FORMAT_VERSION 4
#define FORMAT_NAMES_ONLY 3
static const char format_key[] = "\0format";
const char fc_store_coarse_key[15] = "\0coarse_before";
_Thread_local int fc_store_last_lmdb_rc;

const int64_t fc_store_level_secs[FC_STORE_LEVELS] = {10,     100,     1000,    10000,
                                                      100000, 1000000, 10000000};

/* ---- keys --------------------------------------------------------------------------------- */

struct key {
    uint8_t b[512];
    size_t n;
};

static void key_tenant(struct key *k, const char *tenant)
{
    size_t n = strlen(tenant);

    if (n > 200) {
        n = 200; /* tenants are validated to 150 bytes by receivers */
    }
    memcpy(k->b, tenant, n);
    k->b[n] = 0;
    k->n = n + 1;
}

static void key_bytes(struct key *k, const void *p, size_t n)
{
    memcpy(k->b + k->n, p, n);
    k->n += n;
}

static void key_be32(struct key *k, uint32_t v)
{
    for (int i = 3; i >= 0; i--) {
        k->b[k->n++] = (uint8_t)(v >> (i * 8));
    }
}

static void key_be64(struct key *k, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        k->b[k->n++] = (uint8_t)(v >> (i * 8));
    }
}

static void key_h64(struct key *k, const char *s, size_t n)
{
    key_be64(k, XXH3_64bits(s, n));
}

static void key_h128(struct key *k, const char *s, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(s, n);
    key_be64(k, h.high64);
    key_be64(k, h.low64);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int fc_store_lmdb_error(struct fc_error *err, int rc, const char *what)
{
    fc_store_last_lmdb_rc = rc;
    if (rc == MDB_MAP_FULL) {
        return fc_errorf(err, FC_EUNAVAIL, "store: %s: the database reached max_size", what);
    }
    if (rc == ENOSPC || rc == EDQUOT) {
        return fc_errorf(err, FC_EUNAVAIL, "store: %s: %s", what, strerror(rc));
    }
    return fc_errorf(err, FC_EIO, "store: %s: %s", what, mdb_strerror(rc));
}

/* ---- open / close ------------------------------------------------------------------------- */

int64_t fc_store_headroom(int64_t max_size)
{
    int64_t h = max_size / 4;
    return h < (64LL << 20) ? 64LL << 20 : h > (4LL << 30) ? 4LL << 30 : h;
}

/*
 * One process per data directory: an exclusive flock() on path/flamecol.lock,
 * which then holds our pid (for the error a second process gets). The
 * kernel drops the lock with the process, however it dies.
 */
static int lock_dir(struct fc_store *s, struct fc_error *err)
{
    char file[4096], pid[32];
    int n;

    snprintf(file, sizeof(file), "%s/flamecol.lock", s->path);
    s->lock_fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (s->lock_fd < 0) {
        return fc_errorf(err, FC_EIO, "store: cannot open %s: %s", file, strerror(errno));
    }
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        n = (int)pread(s->lock_fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e != EWOULDBLOCK) {
            return fc_errorf(err, FC_EIO, "store: cannot lock %s: %s", file, strerror(e));
        }
        return fc_errorf(err, FC_EIO,
                         "store: %s is in use by another flamecol (pid %s): one process per "
                         "data directory",
                         s->path, pid[0] ? pid : "unknown");
    }
    n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(s->lock_fd, 0) != 0 || pwrite(s->lock_fd, pid, (size_t)n, 0) != n) {
        /* Only the message of a second process would lack the pid. */
    }
    return FC_OK;
}

int fc_store_open(const struct fc_store_options *o, struct fc_store **out, struct fc_error *err)
{
    struct fc_store *s;
    MDB_txn *txn;
    unsigned flags = MDB_NOTLS;
    size_t map =
        (size_t)(o->max_size > 0 ? o->max_size + fc_store_headroom(o->max_size) : 64LL << 30);
    int rc;

    if (mkdir(o->path, 0755) != 0 && errno != EEXIST) {
        return fc_errorf(err, FC_EIO, "store: cannot create %s: %s", o->path, strerror(errno));
    }
    s = fc_xcalloc(1, sizeof(*s));
    s->path = fc_xstrdup(o->path);
    s->max_size = o->max_size > 0 ? o->max_size : 0;
    s->lock_fd = -1;
    if (lock_dir(s, err) != FC_OK) {
        fc_store_close(s);
        return FC_EIO;
    }
    if (o->sync == FC_SYNC_NONE) {
        flags |= MDB_NOSYNC;
    }
    if ((rc = mdb_env_create(&s->env)) != 0 || (rc = mdb_env_set_maxdbs(s->env, N_DBS + 2)) != 0 ||
        (rc = mdb_env_set_mapsize(s->env, map)) != 0 ||
        (rc = mdb_env_set_maxreaders(s->env, 256)) != 0 ||
        (rc = mdb_env_open(s->env, o->path, flags, 0644)) != 0) {
        fc_store_lmdb_error(err, rc, o->path);
        fc_store_close(s);
        return FC_EIO;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
        fc_store_lmdb_error(err, rc, "open");
        fc_store_close(s);
        return FC_EIO;
    }
    for (int i = 0; i < N_DBS; i++) {
        if ((rc = mdb_dbi_open(txn, db_names[i], MDB_CREATE, &s->db[i])) != 0) {
            mdb_txn_abort(txn);
            fc_store_lmdb_error(err, rc, db_names[i]);
            fc_store_close(s);
            return FC_EIO;
        }
    }
    {
        MDB_val kv = val(format_key, sizeof(format_key) - 1), v;
        MDB_stat st;
        uint32_t version = FORMAT_VERSION;
        rc = mdb_get(txn, s->db[DB_META], &kv, &v);
        if (rc == MDB_NOTFOUND) {
            mdb_stat(txn, s->db[DB_NODE], &st);
            if (st.ms_entries > 0) {
                mdb_txn_abort(txn);
                fc_store_close(s);
                return fc_errorf(err, FC_EIO,
                                 "store: %s was written by an older flamecol (format 1); this "
                                 "build reads format %d: move it away or use another path",
                                 o->path, FORMAT_VERSION);
            }
            v = val(&version, 4);
            rc = mdb_put(txn, s->db[DB_META], &kv, &v, 0);
        } else if (rc == 0 && v.mv_size == 4 &&
                   memcmp(v.mv_data, &(uint32_t){FORMAT_NAMES_ONLY}, 4) == 0) {
            v = val(&version, 4);
            rc = mdb_put(txn, s->db[DB_META], &kv, &v, 0);
        } else if (rc == 0 && (v.mv_size != 4 || memcmp(v.mv_data, &version, 4) != 0)) {
            uint32_t found = 0;
            memcpy(&found, v.mv_data, v.mv_size == 4 ? 4 : 0);
            mdb_txn_abort(txn);
            fc_store_close(s);
            return fc_errorf(err, FC_EIO,
                             "store: %s has on-disk format %u; this build reads format %d", o->path,
                             found, FORMAT_VERSION);
        }
        if (rc != 0) {
            mdb_txn_abort(txn);
            fc_store_lmdb_error(err, rc, "format");
            fc_store_close(s);
            return FC_EIO;
        }
    }
    {
        MDB_val kv = val(fc_store_coarse_key, sizeof(fc_store_coarse_key) - 1), v;
        int64_t before = INT64_MIN;
        if (mdb_get(txn, s->db[DB_META], &kv, &v) == 0 && v.mv_size == sizeof(before)) {
            memcpy(&before, v.mv_data, sizeof(before));
        }
        atomic_store(&s->coarse_before, before);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        fc_store_lmdb_error(err, rc, "open");
        fc_store_close(s);
        return FC_EIO;
    }
    fc_store_refresh_used(s);
    *out = s;
    return FC_OK;
}

void fc_store_close(struct fc_store *s)
{
    if (s == NULL) {
        return;
    }
    if (s->env != NULL) {
        mdb_env_close(s->env);
    }
    if (s->lock_fd >= 0) {
        close(s->lock_fd); /* releases the lock */
    }
    free(s->path);
    free(s);
}

int64_t fc_store_coarse_before(struct fc_store *s)
{
    int64_t v = atomic_load(&s->coarse_before);
    return v == INT64_MIN ? 0 : v;
}

uint64_t fc_store_corrupt_windows(struct fc_store *s)
{
    return atomic_load(&s->corrupt);
}

int64_t fc_store_disk_bytes(struct fc_store *s)
{
    char path[4096];
    struct stat st;

    snprintf(path, sizeof(path), "%s/data.mdb", s->path);
    return stat(path, &st) == 0 ? (int64_t)st.st_blocks * 512 : 0;
}

/* ---- writing ------------------------------------------------------------------------------ */

struct windows;

struct writer {
    struct fc_store *s;
    MDB_txn *txn;
    const char *tenant;
    struct fc_error *err;
    struct windows *windows;
};

static int next_id(struct writer *w, const char *what, uint32_t *id)
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
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_SYM], &kv, &v) == 0 && v.mv_size == 4) {
        memcpy(id, v.mv_data, 4);
        return FC_OK;
    }
    if ((rc = next_id(w, "sym", id)) != FC_OK) {
        return rc;
    }
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

static int put_empty(struct writer *w, int db, struct key *k, const void *data, size_t n)
{
    MDB_val kv = val(k->b, k->n), v = val(data, n);
    int rc = mdb_put(w->txn, w->s->db[db], &kv, &v, 0);

    return rc ? fc_store_lmdb_error(w->err, rc, db_names[db]) : FC_OK;
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
 * are not in the label index; queries reach them through their series.
 */
static int base_id(struct writer *w, const struct label *labels, size_t n, uint32_t *id)
{
    struct fc_buf canon;
    struct key k;
    MDB_val kv, v;
    int rc;

    fc_buf_init(&canon, 0);
    canonical(labels, n, &canon);
    key_tenant(&k, w->tenant);
    key_h128(&k, canon.data ? (const char *)canon.data : "", canon.len);
    fc_buf_release(&canon);
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_BASE], &kv, &v) == 0 && v.mv_size == 4) {
        *id = be32(v.mv_data);
        return FC_OK;
    }
    rc = next_id(w, "base", id);
    if (rc == FC_OK) {
        uint8_t be[4] = {(uint8_t)(*id >> 24), (uint8_t)(*id >> 16), (uint8_t)(*id >> 8),
                         (uint8_t)*id};
        rc = put_empty(w, DB_BASE, &k, be, 4);
    }
    return rc;
}

static int series_id(struct writer *w, const struct label *labels, size_t n, uint32_t base,
                     uint32_t *id)
{
    struct fc_buf canon;
    struct key k;
    MDB_val kv, v;
    int rc = FC_OK;

    fc_buf_init(&canon, 0);
    canonical(labels, n, &canon);
    key_tenant(&k, w->tenant);
    key_h128(&k, canon.data ? (const char *)canon.data : "", canon.len);
    kv = val(k.b, k.n);
    if (mdb_get(w->txn, w->s->db[DB_SERIES], &kv, &v) == 0 && v.mv_size == 4) {
        *id = be32(v.mv_data);
        fc_buf_release(&canon);
        return FC_OK;
    }
    rc = next_id(w, "series", id);
    if (rc == FC_OK) {
        struct key idk;
        uint8_t be[4] = {(uint8_t)(*id >> 24), (uint8_t)(*id >> 16), (uint8_t)(*id >> 8),
                         (uint8_t)*id};
        uint8_t bb[4] = {(uint8_t)(base >> 24), (uint8_t)(base >> 16), (uint8_t)(base >> 8),
                         (uint8_t)base};
        rc = put_empty(w, DB_SERIES, &k, be, 4);
        key_tenant(&idk, w->tenant);
        key_be32(&idk, *id);
        rc = rc ? rc : put_empty(w, DB_SID, &idk, canon.data, canon.len);
        rc = rc ? rc : put_empty(w, DB_SBASE, &idk, bb, 4);
    }
    /* The label index: names, values per name, and series per (name, value). */
    for (size_t i = 0; rc == FC_OK && i < n; i++) {
        size_t nl = strlen(labels[i].name), vl = strlen(labels[i].value);
        struct key ln, lv, post;
        key_tenant(&ln, w->tenant);
        key_h64(&ln, labels[i].name, nl);
        lv = ln;
        key_h64(&lv, labels[i].value, vl);
        post = lv;
        key_be32(&post, *id);
        rc = put_empty(w, DB_LN, &ln, labels[i].name, nl);
        rc = rc ? rc : put_empty(w, DB_LV, &lv, labels[i].value, vl);
        rc = rc ? rc : put_empty(w, DB_POST, &post, "", 0);
    }
    fc_buf_release(&canon);
    return rc;
}

static void node_key(struct key *k, const char *tenant, uint32_t base, int level, int64_t window)
{
    key_tenant(k, tenant);
    key_be32(k, base);
    k->b[k->n++] = (uint8_t)level;
    key_be64(k, (uint64_t)window);
}

/* Merges add into the tree stored under key k of the span index. */
static int merge_span_value(struct writer *w, const struct key *k, const struct fc_tree *add)
{
    MDB_val kv, v;
    struct fc_tree t;
    struct fc_buf enc;
    int64_t total;
    int rc;

    kv = val(k->b, k->n);
    fc_tree_init(&t);
    fc_buf_init(&enc, 0);
    if (mdb_get(w->txn, w->s->db[DB_SPAN], &kv, &v) == 0 &&
        (v.mv_size < NODE_HEADER ||
         fc_tree_decode_merge(&t, (const uint8_t *)v.mv_data + NODE_HEADER, v.mv_size - NODE_HEADER,
                              w->err) != FC_OK)) {
        /* A tree we cannot read is replaced rather than poisoning every later write. */
        fc_tree_release(&t);
        fc_tree_init(&t);
    }
    fc_tree_merge(&t, add);
    total = fc_tree_total(&t);
    fc_buf_append(&enc, &total, NODE_HEADER);
    rc = fc_tree_encode(&t, &enc);
    if (rc == FC_OK) {
        v = val(enc.data, enc.len);
        rc = mdb_put(w->txn, w->s->db[DB_SPAN], &kv, &v, 0);
        rc = rc ? fc_store_lmdb_error(w->err, rc, "span") : FC_OK;
    }
    fc_tree_release(&t);
    fc_buf_release(&enc);
    return rc;
}

/* One series' tree inside a packed window. */
struct part {
    uint32_t series;
    struct fc_tree tree;
};

struct parts {
    struct part *v;
    uint32_t n, cap;
};

static struct fc_tree *part_of(struct parts *ps, uint32_t series)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        if (ps->v[i].series == series) {
            return &ps->v[i].tree;
        }
    }
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? ps->cap * 2 : 8;
        ps->v = fc_xrealloc(ps->v, ps->cap * sizeof(*ps->v));
    }
    ps->v[ps->n].series = series;
    fc_tree_init(&ps->v[ps->n].tree);
    return &ps->v[ps->n++].tree;
}

static void parts_release(struct parts *ps)
{
    for (uint32_t i = 0; i < ps->n; i++) {
        fc_tree_release(&ps->v[i].tree);
    }
    free(ps->v);
    memset(ps, 0, sizeof(*ps));
}

/* The header of a packed value: entries without decompressing the frame. */
struct packed {
    uint32_t n;
    uint32_t *series;
    int64_t *totals;
    uint64_t *raw_lens;
    const uint8_t *frame;
    size_t frame_len;
};

static void packed_release(struct packed *p)
{
    free(p->series);
    free(p->totals);
    free(p->raw_lens);
    memset(p, 0, sizeof(*p));
}

static bool packed_parse(const uint8_t *data, size_t len, struct packed *p)
{
    uint32_t hlen;
    struct fc_pb r;
    uint64_t n;

    memset(p, 0, sizeof(*p));
    if (len < 4) {
        return false;
    }
    memcpy(&hlen, data, 4);
    if (hlen > len - 4) {
        return false;
    }
    fc_pb_init(&r, data + 4, hlen);
    if (fc_pb_varint(&r, &n) != 0 || n > hlen) {
        return false;
    }
    p->n = (uint32_t)n;
    p->series = fc_xcalloc(n + 1, sizeof(uint32_t));
    p->totals = fc_xcalloc(n + 1, sizeof(int64_t));
    p->raw_lens = fc_xcalloc(n + 1, sizeof(uint64_t));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t sid, total;
        if (fc_pb_varint(&r, &sid) != 0 || fc_pb_varint(&r, &total) != 0 ||
            fc_pb_varint(&r, &p->raw_lens[i]) != 0 || sid > UINT32_MAX) {
            packed_release(p);
            return false;
        }
        p->series[i] = (uint32_t)sid;
        p->totals[i] = (int64_t)total;
    }
    p->frame = data + 4 + hlen;
    p->frame_len = len - 4 - hlen;
    return true;
}

/*
 * Decodes the trees of a packed value whose series `want` accepts (NULL =
 * all) into ps. Returns false when the value is corrupt.
 */
static bool packed_decode(const uint8_t *data, size_t len, bool (*want)(void *ctx, uint32_t series),
                          void *ctx, struct parts *ps)
{
    struct packed p;
    unsigned long long size;
    uint8_t *raw;
    size_t off = 0;
    bool ok = true;
    bool any = false;

    if (!packed_parse(data, len, &p)) {
        return false;
    }
    for (uint32_t i = 0; i < p.n && !any; i++) {
        any = want == NULL || want(ctx, p.series[i]);
    }
    if (!any) {
        packed_release(&p);
        return true; /* nothing wanted here: no decompression */
    }
    size = ZSTD_getFrameContentSize(p.frame, p.frame_len);
    if (size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN || size > (1u << 30)) {
        packed_release(&p);
        return false;
    }
    raw = fc_xmalloc(size ? size : 1);
    if (ZSTD_isError(ZSTD_decompress(raw, size, p.frame, p.frame_len))) {
        free(raw);
        packed_release(&p);
        return false;
    }
    for (uint32_t i = 0; i < p.n && ok; i++) {
        if (p.raw_lens[i] > size - off) {
            ok = false;
            break;
        }
        if (want == NULL || want(ctx, p.series[i])) {
            ok = fc_tree_decode_raw_merge(part_of(ps, p.series[i]), raw + off,
                                          (size_t)p.raw_lens[i]) == FC_OK;
        }
        off += (size_t)p.raw_lens[i];
    }
    free(raw);
    packed_release(&p);
    return ok;
}

static int packed_encode(const struct parts *ps, struct fc_buf *out)
{
    struct fc_buf header, raw;
    uint32_t hlen;
    size_t bound, n;
    int rc;

    fc_buf_init(&header, 0);
    fc_buf_init(&raw, 0);
    fc_pb_put_varint(&header, ps->n);
    for (uint32_t i = 0; i < ps->n; i++) {
        size_t before = raw.len;
        fc_tree_encode_raw(&ps->v[i].tree, &raw);
        fc_pb_put_varint(&header, ps->v[i].series);
        fc_pb_put_varint(&header, (uint64_t)fc_tree_total(&ps->v[i].tree));
        fc_pb_put_varint(&header, raw.len - before);
    }
    hlen = (uint32_t)header.len;
    fc_buf_append(out, &hlen, 4);
    fc_buf_append(out, header.data, header.len);
    bound = ZSTD_compressBound(raw.len);
    rc = fc_buf_reserve(out, bound);
    if (rc == FC_OK) {
        n = ZSTD_compress(out->data + out->len, bound, raw.data ? raw.data : (const uint8_t *)"",
                          raw.len, 3);
        if (ZSTD_isError(n)) {
            rc = FC_EIO;
        } else {
            out->len += n;
        }
    }
    fc_buf_release(&header);
    fc_buf_release(&raw);
    return rc;
}

/* Merges the new parts into the packed window (base, level, start), once per commit. */
static int merge_window(struct writer *w, uint32_t base, int level, int64_t start,
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
        !packed_decode(v.mv_data, v.mv_size, NULL, NULL, &ps)) {
        /* A window we cannot read is replaced rather than poisoning every later write. */
        parts_release(&ps);
    }
    for (uint32_t i = 0; i < add->n; i++) {
        fc_tree_merge(part_of(&ps, add->v[i].series), &add->v[i].tree);
    }
    fc_buf_init(&enc, 0);
    rc = packed_encode(&ps, &enc);
    if (rc == FC_OK) {
        v = val(enc.data, enc.len);
        rc = mdb_put(w->txn, w->s->db[DB_NODE], &kv, &v, 0);
        rc = rc ? fc_store_lmdb_error(w->err, rc, "node") : FC_OK;
    }
    fc_buf_release(&enc);
    parts_release(&ps);
    return rc;
}

/*
 * Windows touched by one write transaction, merged in memory first so that
 * each is read, decoded, encoded and written once per commit.
 */
struct window {
    uint32_t base;
    int level;
    int64_t start;
    struct parts parts;
};

struct windows {
    struct fc_idmap index; /* hash of (base, level, start) -> slot */
    struct window *v;
    uint32_t n, cap;
    const char *tenant; /* the tenant they belong to (flushed when it changes) */
};

static uint64_t window_hash(uint32_t base, int level, int64_t start)
{
    uint64_t k[2] = {((uint64_t)base << 8) | (uint64_t)level, (uint64_t)start};
    return XXH3_64bits(k, sizeof(k));
}

static int flush_windows(struct writer *w, struct windows *ws)
{
    int rc = FC_OK;

    for (uint32_t i = 0; i < ws->n; i++) {
        if (rc == FC_OK) {
            rc = merge_window(w, ws->v[i].base, ws->v[i].level, ws->v[i].start, &ws->v[i].parts);
        }
        parts_release(&ws->v[i].parts);
    }
    ws->n = 0;
    fc_idmap_release(&ws->index);
    fc_idmap_init(&ws->index, 64);
    return rc;
}

static int add_window(struct writer *w, struct windows *ws, uint32_t base, uint32_t series,
                      int level, int64_t start, const struct fc_tree *tree)
{
    uint64_t h = window_hash(base, level, start);
    uint32_t slot;

    if (fc_idmap_get(&ws->index, h, &slot)) {
        struct window *x = &ws->v[slot];
        if (x->base == base && x->level == level && x->start == start) {
            fc_tree_merge(part_of(&x->parts, series), tree);
            return FC_OK;
        }
        {
            /* A 64-bit hash collision: write this one straight through. */
            struct parts one = {0};
            int rc;
            fc_tree_merge(part_of(&one, series), tree);
            rc = merge_window(w, base, level, start, &one);
            parts_release(&one);
            return rc;
        }
    }
    if (ws->n == ws->cap) {
        ws->cap = ws->cap ? ws->cap * 2 : 64;
        ws->v = fc_xrealloc(ws->v, ws->cap * sizeof(*ws->v));
    }
    ws->v[ws->n].base = base;
    ws->v[ws->n].level = level;
    ws->v[ws->n].start = start;
    memset(&ws->v[ws->n].parts, 0, sizeof(ws->v[ws->n].parts));
    fc_tree_merge(part_of(&ws->v[ws->n].parts, series), tree);
    fc_idmap_put(&ws->index, h, ws->n);
    ws->n++;
    return FC_OK;
}

/*
 * Samples of one profile with the same sample labels (span_id/trace_id aside).
 * Every label is kept, however many a sample has: the receivers' cap
 * (max_sample_labels, 0 = none) is the only bound.
 */
struct group {
    uint32_t *attrs; /* sorted attribute indices, n_attrs of them */
    uint32_t n_attrs;
    uint32_t *samples;
    size_t n;
    size_t cap;
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
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

/*
 * Symbol ids of a sample's frames, root first: each frame is a frame record
 * (storage/frame.h), memoized per line of a location (the dict's line pool)
 * and per location without lines.
 */
struct frames {
    uint32_t *line_sym; /* by index into dict.lines */
    uint32_t *loc_sym;  /* by location index, for locations without lines */
    uint32_t *path;
    size_t cap;
    struct fc_buf record;
};

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

static int sample_path(struct writer *w, struct frames *f, const struct fc_batch *b,
                       const struct fc_sample *s, uint32_t *depth)
{
    const struct fc_stack *st = &b->dict.stacks[s->stack];
    const uint32_t *locs = fc_span_idx(b, st->locations);
    uint32_t d = 0;

    for (uint32_t i = st->locations.n; i-- > 0;) {
        const struct fc_location *loc = &b->dict.locations[locs[i]];
        uint32_t lines = loc->n_lines ? loc->n_lines : 1;
        for (uint32_t j = lines; j-- > 0;) {
            if (d == f->cap) {
                f->cap = f->cap ? f->cap * 2 : 128;
                f->path = fc_xrealloc(f->path, f->cap * sizeof(uint32_t));
            }
            if (frame_sym(w, f, b, locs[i], j, &f->path[d]) != FC_OK) {
                return w->err->code;
            }
            d++;
        }
    }
    *depth = d;
    return FC_OK;
}

/* The span (and trace) of a sample: its OTLP Link, else pprof labels span_id/trace_id. */
static bool sample_span(const struct fc_batch *b, const struct fc_sample *s, uint8_t span[8],
                        uint8_t trace[16])
{
    return fc_sample_span(b, s, span, trace); /* the one reader of span ids (core/span.h) */
}

struct span_tree {
    uint8_t span[8];
    uint8_t trace[16];
    struct fc_tree tree;
};

/* Indexes a group's samples by span: one tree per (span, series, 10 s window). */
static int write_spans(struct writer *w, struct frames *f, const struct fc_batch *b,
                       const struct fc_profile *p, const struct group *g, uint32_t t, int64_t scale,
                       uint32_t series, int64_t window)
{
    struct span_tree *spans = NULL;
    size_t n = 0, cap = 0;
    int rc = FC_OK;

    for (size_t i = 0; rc == FC_OK && i < g->n; i++) {
        const struct fc_sample *s = &p->samples[g->samples[i]];
        int64_t v = fc_sample_value(p, s, t);
        uint8_t span[8], trace[16];
        uint32_t depth;
        size_t j;
        if (v <= 0 || !sample_span(b, s, span, trace)) {
            continue;
        }
        for (j = 0; j < n && memcmp(spans[j].span, span, 8) != 0; j++) {
        }
        if (j == n) {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                spans = fc_xrealloc(spans, cap * sizeof(*spans));
            }
            memcpy(spans[n].span, span, 8);
            memcpy(spans[n].trace, trace, 16);
            fc_tree_init(&spans[n].tree);
            n++;
        }
        if ((rc = sample_path(w, f, b, s, &depth)) == FC_OK) {
            fc_tree_insert(&spans[j].tree, f->path, depth, fc_sat_mul(v, scale));
        }
    }
    for (size_t j = 0; j < n; j++) {
        struct key k;
        static const uint8_t no_trace[16];
        if (rc == FC_OK) {
            key_tenant(&k, w->tenant);
            key_bytes(&k, spans[j].span, 8);
            key_be32(&k, series);
            key_be64(&k, (uint64_t)window);
            rc = merge_span_value(w, &k, &spans[j].tree);
        }
        if (rc == FC_OK && memcmp(spans[j].trace, no_trace, 16) != 0) {
            key_tenant(&k, w->tenant);
            key_bytes(&k, spans[j].trace, 16);
            key_bytes(&k, spans[j].span, 8);
            rc = put_empty(w, DB_TRACE, &k, "", 0);
        }
        fc_tree_release(&spans[j].tree);
    }
    free(spans);
    return rc;
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

static int write_profile(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_profile *p)
{
    struct group *groups = NULL;
    uint32_t max_attrs;
    size_t n_groups = group_samples(b, p, &groups, &max_attrs);
    /* The profile's labels, every sample label of a group, and __profile_type__. */
    struct label *labels = fc_xcalloc((size_t)p->n_labels + max_attrs + 1, sizeof(*labels));
    int64_t time_s = (p->time_ns > 0 ? p->time_ns : fc_now_ns()) / 1000000000LL;
    uint32_t base = 0;
    int rc = FC_OK;

    for (uint32_t t = 0; rc == FC_OK && t < p->n_sample_types; t++) {
        struct fc_buf type_id;
        int64_t scale;
        fc_buf_init(&type_id, 0);
        fc_pyro_stored_type(b, p, t, &type_id, &scale);
        /*
         * The base: the profile's own labels, where the series of all its
         * types and sample-label groups are packed (their trees share most of
         * their shape, which zstd then stores once).
         */
        if (t == 0) {
            size_t n = profile_labels(b, p, labels);
            qsort(labels, n, sizeof(*labels), by_label_name);
            rc = base_id(w, labels, n, &base);
        }
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
                uint32_t depth;
                if (v <= 0) {
                    continue;
                }
                if ((rc = sample_path(w, f, b, s, &depth)) == FC_OK) {
                    fc_tree_insert(&tree, f->path, depth, fc_sat_mul(v, scale));
                }
            }
            if (rc == FC_OK && fc_tree_total(&tree) > 0) {
                rc = series_id(w, labels, n, base, &series);
                rc = rc ? rc
                        : write_spans(w, f, b, p, &groups[g], t, scale, series,
                                      (time_s >= 0 ? time_s / 10 : (time_s - 9) / 10) * 10);
                for (int level = 0; rc == FC_OK && level < FC_STORE_LEVELS; level++) {
                    int64_t d = fc_store_level_secs[level];
                    int64_t window = (time_s >= 0 ? time_s / d : (time_s - d + 1) / d) * d;
                    rc = add_window(w, w->windows, base, series, level, window, &tree);
                }
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
    return rc;
}

/* Every batch into the open transaction w->txn (not committed). */
static int write_batches(struct writer *w, struct fc_batch *const *batches, size_t n)
{
    struct windows *ws = w->windows;
    int rc = FC_OK;

    fc_idmap_init(&ws->index, 64);
    for (size_t i = 0; rc == FC_OK && i < n; i++) {
        const struct fc_batch *b = batches[i];
        struct frames f;
        /* Windows are keyed without the tenant: write them out when it changes. */
        if (ws->tenant != NULL && strcmp(ws->tenant, b->tenant) != 0) {
            rc = flush_windows(w, ws);
        }
        ws->tenant = b->tenant;
        w->tenant = b->tenant;
        f.line_sym = fc_xcalloc(b->dict.n_lines + 1, sizeof(uint32_t));
        f.loc_sym = fc_xcalloc(b->dict.n_locations + 1, sizeof(uint32_t));
        f.path = NULL;
        f.cap = 0;
        fc_buf_init(&f.record, 0);
        for (uint32_t p = 0; rc == FC_OK && p < b->n_profiles; p++) {
            rc = write_profile(w, &f, b, &b->profiles[p]);
        }
        free(f.line_sym);
        free(f.loc_sym);
        free(f.path);
        fc_buf_release(&f.record);
    }
    if (rc == FC_OK) {
        rc = flush_windows(w, ws);
    } else {
        for (uint32_t i = 0; i < ws->n; i++) {
            parts_release(&ws->v[i].parts);
        }
    }
    fc_idmap_release(&ws->index);
    free(ws->v);
    return rc;
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

int fc_store_write(struct fc_store *s, struct fc_batch *const *batches, size_t n,
                   struct fc_error *err)
{
    struct windows ws = {0};
    struct writer w = {s, NULL, NULL, err, &ws};
    int rc;

    if (fc_store_full(s)) {
        atomic_fetch_add(&s->failures[FC_STORE_FULL], 1);
        return fc_errorf(err, FC_EUNAVAIL,
                         "store: full: %lld bytes in use reached max_size (%lld); retention "
                         "deletes the oldest data",
                         (long long)atomic_load(&s->used), (long long)s->max_size);
    }
    fc_store_last_lmdb_rc = 0;
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &w.txn)) != 0) {
        rc = fc_store_lmdb_error(err, rc, "begin");
    } else if ((rc = write_batches(&w, batches, n)) != FC_OK) {
        mdb_txn_abort(w.txn); /* nothing of this group is written */
    } else if ((rc = mdb_txn_commit(w.txn)) != 0) {
        rc = fc_store_lmdb_error(err, rc, "commit"); /* a failed commit is aborted */
    }
    if (rc != FC_OK) {
        count_failure(s);
    }
    if (s->max_size > 0) {
        fc_store_refresh_used(s);
    }
    return rc;
}

/* ---- reading ------------------------------------------------------------------------------ */

struct reader {
    struct fc_store *s;
    MDB_txn *txn;
    const char *tenant;
    struct fc_error *err;
};

struct idset {
    uint32_t *v;
    size_t n;
    size_t cap;
};

static void ids_push(struct idset *s, uint32_t id)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = fc_xrealloc(s->v, s->cap * sizeof(uint32_t));
    }
    s->v[s->n++] = id;
}

/* Series ids of (name, value), from the postings, sorted. */
static void postings(struct reader *r, const char *name, const char *value, struct idset *out)
{
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;
    int rc;

    key_tenant(&k, r->tenant);
    key_h64(&k, name, strlen(name));
    key_h64(&k, value, strlen(value));
    if (mdb_cursor_open(r->txn, r->s->db[DB_POST], &c) != 0) {
        return;
    }
    kv = val(k.b, k.n);
    for (rc = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); rc == 0;
         rc = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        if (kv.mv_size != k.n + 4 || memcmp(kv.mv_data, k.b, k.n) != 0) {
            break;
        }
        ids_push(out, be32((const uint8_t *)kv.mv_data + k.n));
    }
    mdb_cursor_close(c);
}

static void intersect(struct idset *a, const struct idset *b)
{
    size_t i = 0, j = 0, n = 0;

    while (i < a->n && j < b->n) {
        if (a->v[i] < b->v[j]) {
            i++;
        } else if (a->v[i] > b->v[j]) {
            j++;
        } else {
            a->v[n++] = a->v[i];
            i++;
            j++;
        }
    }
    a->n = n;
}

/* The value of label name in canonical labels, or "". */
static const char *label_in(const char *canon, size_t len, const char *name, char *buf, size_t size)
{
    const char *p = canon, *end = canon + len;
    size_t nl = strlen(name);

    while (p < end) {
        const char *sep = memchr(p, '\x01', (size_t)(end - p));
        const char *vend;
        if (sep == NULL) {
            break;
        }
        vend = memchr(sep + 1, '\x02', (size_t)(end - sep - 1));
        if (vend == NULL) {
            break;
        }
        if ((size_t)(sep - p) == nl && memcmp(p, name, nl) == 0) {
            size_t vl = (size_t)(vend - sep - 1);
            if (vl >= size) {
                vl = size - 1;
            }
            memcpy(buf, sep + 1, vl);
            buf[vl] = '\0';
            return buf;
        }
        p = vend + 1;
    }
    return "";
}

/* Every series id of the tenant (a selector with nothing to narrow by). */
static void all_series(struct reader *r, struct idset *out)
{
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;

    key_tenant(&k, r->tenant);
    if (mdb_cursor_open(r->txn, r->s->db[DB_SID], &c) != 0) {
        return;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        if (kv.mv_size != k.n + 4 || memcmp(kv.mv_data, k.b, k.n) != 0) {
            break;
        }
        ids_push(out, be32((const uint8_t *)kv.mv_data + k.n));
    }
    mdb_cursor_close(c);
}

/*
 * Series of the tenant matching the selector: narrowed by the index (the
 * profile type, then every non-empty equality), then checked in full.
 */
static int match_series(struct reader *r, const struct fc_selector *sel, bool need_type,
                        struct idset *out)
{
    struct idset cand = {0};
    char buf[4096];
    bool narrowed = false;

    if (sel->profile_type == NULL && need_type) {
        return fc_errorf(r->err, FC_EPROTO,
                         "the query must select a profile type, e.g. "
                         "process_cpu:cpu:nanoseconds:cpu:nanoseconds{...}");
    }
    if (sel->profile_type != NULL) {
        postings(r, "__profile_type__", sel->profile_type, &cand);
        narrowed = true;
    }
    for (size_t i = 0; i < sel->n; i++) {
        const struct fc_matcher *m = &sel->matchers[i];
        if (m->op == FC_MATCH_EQ && m->value[0] != '\0' && !narrowed) {
            postings(r, m->name, m->value, &cand);
            narrowed = true;
        }
    }
    if (!narrowed) {
        all_series(r, &cand);
    }
    for (size_t i = 0; i < sel->n && cand.n > 0; i++) {
        const struct fc_matcher *m = &sel->matchers[i];
        if (m->op == FC_MATCH_EQ && m->value[0] != '\0') {
            struct idset other = {0};
            postings(r, m->name, m->value, &other);
            intersect(&cand, &other);
            free(other.v);
        }
    }
    for (size_t i = 0; i < cand.n; i++) {
        struct key k;
        MDB_val kv, v;
        bool ok = true;
        key_tenant(&k, r->tenant);
        key_be32(&k, cand.v[i]);
        kv = val(k.b, k.n);
        if (mdb_get(r->txn, r->s->db[DB_SID], &kv, &v) != 0) {
            continue;
        }
        for (size_t j = 0; ok && j < sel->n; j++) {
            ok = fc_matcher_match(
                &sel->matchers[j],
                label_in(v.mv_data, v.mv_size, sel->matchers[j].name, buf, sizeof(buf)));
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

/* The matched series of one base: what a packed window is read for. */
struct base_group {
    uint32_t base;
    const uint32_t *sids; /* sorted */
    size_t n;
};

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
    struct key k;
    MDB_val kv, v;

    key_tenant(&k, r->tenant);
    key_be32(&k, series);
    kv = val(k.b, k.n);
    if (mdb_get(r->txn, r->s->db[DB_SBASE], &kv, &v) != 0 || v.mv_size != 4) {
        return false;
    }
    *base = be32(v.mv_data);
    return true;
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

/* Whether a packed window holds a positive total for the group (header only). */
static bool window_has(const struct base_group *group, const MDB_val *v)
{
    struct packed p;
    bool has = false;

    if (!packed_parse(v->mv_data, v->mv_size, &p)) {
        return false;
    }
    for (uint32_t i = 0; i < p.n && !has; i++) {
        has = p.totals[i] > 0 && base_wants((void *)group, p.series[i]);
    }
    packed_release(&p);
    return has;
}

static void take(struct merge *m, int level, int64_t window)
{
    struct key k;
    MDB_val kv, v;
    struct parts ps = {0};

    node_key(&k, m->r->tenant, m->group->base, level, window);
    kv = val(k.b, k.n);
    if (mdb_get(m->r->txn, m->r->s->db[DB_NODE], &kv, &v) != 0) {
        return;
    }
    if (m->tree == NULL) {
        m->found = m->found || window_has(m->group, &v);
        return;
    }
    /* Decoded apart first: a corrupt window is skipped whole, never half merged. */
    if (!packed_decode(v.mv_data, v.mv_size, base_wants, (void *)m->group, &ps)) {
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
    parts_release(&ps);
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

static int begin_read(struct fc_store *s, struct reader *r, const char *tenant,
                      struct fc_error *err)
{
    int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &r->txn);

    r->s = s;
    r->tenant = tenant;
    r->err = err;
    return rc ? fc_store_lmdb_error(err, rc, "read") : FC_OK;
}

/* Merges the span entries of one span id, for matched series within the range. */
static void merge_span(struct reader *r, const uint8_t span[8], const struct idset *ids,
                       int64_t from_s, int64_t until_s, struct fc_tree *out, uint32_t *merged)
{
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;

    key_tenant(&k, r->tenant);
    key_bytes(&k, span, 8);
    if (mdb_cursor_open(r->txn, r->s->db[DB_SPAN], &c) != 0) {
        return;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        const uint8_t *p = kv.mv_data;
        uint32_t series;
        int64_t window;
        struct fc_tree one;
        struct fc_error ignored = {0};
        if (kv.mv_size != k.n + 12 || memcmp(p, k.b, k.n) != 0) {
            break;
        }
        series = be32(p + k.n);
        window = (int64_t)be64(p + k.n + 4);
        if (window < from_s || window >= until_s ||
            bsearch(&series, ids->v, ids->n, sizeof(uint32_t), cmp_u32) == NULL ||
            v.mv_size < NODE_HEADER) {
            continue;
        }
        fc_tree_init(&one);
        if (fc_tree_decode_merge(&one, (const uint8_t *)v.mv_data + NODE_HEADER,
                                 v.mv_size - NODE_HEADER, &ignored) == FC_OK) {
            fc_tree_merge(out, &one);
            (*merged)++;
        } else {
            atomic_fetch_add(&r->s->corrupt, 1);
        }
        fc_tree_release(&one);
    }
    mdb_cursor_close(c);
}

/* The span ids of the query: given ones, plus every span recorded for its traces. */
static void query_spans(struct reader *r, const struct fc_store_query *q, uint8_t (**out)[8],
                        size_t *n)
{
    size_t cap = q->n_span_ids + 16;

    *out = fc_xcalloc(cap, 8);
    *n = 0;
    for (size_t i = 0; i < q->n_span_ids; i++) {
        for (int b = 0; b < 8; b++) {
            (*out)[*n][b] = (uint8_t)(q->span_ids[i] >> (56 - 8 * b));
        }
        (*n)++;
    }
    for (size_t t = 0; t < q->n_trace_ids; t++) {
        struct key k;
        MDB_cursor *c;
        MDB_val kv, v;
        key_tenant(&k, r->tenant);
        key_bytes(&k, q->trace_ids[t], 16);
        if (mdb_cursor_open(r->txn, r->s->db[DB_TRACE], &c) != 0) {
            continue;
        }
        kv = val(k.b, k.n);
        for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            if (kv.mv_size != k.n + 8 || memcmp(kv.mv_data, k.b, k.n) != 0) {
                break;
            }
            if (*n == cap) {
                cap *= 2;
                *out = fc_xrealloc(*out, cap * 8);
            }
            memcpy((*out)[(*n)++], (const uint8_t *)kv.mv_data + k.n, 8);
        }
        mdb_cursor_close(c);
    }
}

int fc_store_select_merge(struct fc_store *s, const struct fc_store_query *q,
                          struct fc_store_result *out, struct fc_store_stats *stats,
                          struct fc_error *err)
{
    struct reader r;
    struct idset ids = {0};
    int64_t from_s, until_s;
    int rc;

    memset(out, 0, sizeof(*out));
    memset(stats, 0, sizeof(*stats));
    fc_tree_init(&out->frames_tree);
    if ((rc = begin_read(s, &r, q->tenant, err)) != FC_OK) {
        fc_store_result_release(out);
        return rc;
    }
    rc = match_series(&r, q->selector, true, &ids);
    normalize(q, &from_s, &until_s);
    stats->series = (uint32_t)ids.n;
    if (rc == FC_OK && (q->n_span_ids > 0 || q->n_trace_ids > 0)) {
        /* Span profiles come from the span index, not the segment tree. */
        uint8_t(*spans)[8];
        size_t n_spans;
        query_spans(&r, q, &spans, &n_spans);
        qsort(ids.v, ids.n, sizeof(uint32_t), cmp_u32);
        for (size_t i = 0; i < n_spans; i++) {
            merge_span(&r, spans[i], &ids, from_s, until_s, &out->frames_tree,
                       &stats->nodes_merged);
        }
        free(spans);
    } else {
        struct bases bases;
        group_by_base(&r, &ids, &bases);
        for (size_t i = 0; rc == FC_OK && i < bases.n; i++) {
            struct merge m = {&r, &bases.v[i], &out->frames_tree, 0, FC_OK, false};
            cover(&m, q->level0_only ? 0 : FC_STORE_LEVELS - 1, from_s, until_s);
            stats->nodes_merged += m.merged;
            rc = m.rc;
        }
        bases_release(&bases);
    }
    /* Frames for its nodes, and the flame graph by display name. */
    if (rc == FC_OK) {
        rc = fc_store_resolve(s, r.txn, q->tenant, q->granularity, out, err);
    }
    mdb_txn_abort(r.txn);
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
        int64_t w, total = 0;
        size_t at;
        struct packed p;
        if (kv.mv_size != prefix.n + 8 || memcmp(kv.mv_data, prefix.b, prefix.n) != 0) {
            break;
        }
        w = (int64_t)be64((const uint8_t *)kv.mv_data + prefix.n);
        if (w >= hi) {
            break;
        }
        if (w < lo) {
            continue;
        }
        if (!packed_parse(v.mv_data, v.mv_size, &p)) {
            atomic_fetch_add(&r->s->corrupt, 1);
            continue;
        }
        for (uint32_t i = 0; i < p.n; i++) {
            total = fc_sat_add(total, base_wants((void *)group, p.series[i]) ? p.totals[i] : 0);
        }
        packed_release(&p);
        at = w <= tl->from_s ? 0 : (size_t)((w - tl->from_s) / tl->step_s);
        if (at < tl->n) {
            tl->buckets[at] = fc_sat_add(tl->buckets[at], total);
        }
    }
    mdb_cursor_close(c);
    return FC_OK;
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
    return rc == FC_OK ? timeline_scan(r, group, level, from_s, until_s, &tl) : rc;
}

int fc_store_timeline(struct fc_store *s, const struct fc_store_query *q, int64_t step_ns,
                      int64_t *buckets, size_t n, struct fc_error *err)
{
    struct reader r;
    struct idset ids = {0};
    int rc;

    memset(buckets, 0, n * sizeof(int64_t));
    if ((rc = begin_read(s, &r, q->tenant, err)) != FC_OK) {
        return rc;
    }
    rc = match_series(&r, q->selector, true, &ids);
    if (rc == FC_OK) {
        struct bases bases;
        group_by_base(&r, &ids, &bases);
        for (size_t i = 0; rc == FC_OK && i < bases.n; i++) {
            rc = timeline_of(&r, q, &bases.v[i], step_ns, buckets, n);
        }
        bases_release(&bases);
    }
    mdb_txn_abort(r.txn);
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
    cover(&m, FC_STORE_LEVELS - 1, from_s, until_s);
    return m.found;
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
        struct key k;
        MDB_val kv, v;
        key_tenant(&k, tenant);
        key_be32(&k, all.v[i]);
        kv = val(k.b, k.n);
        if (mdb_get(r.txn, s->db[DB_SID], &kv, &v) != 0 ||
            (until_ns > 0 && !has_data(&r, all.v[i], from_s, until_s))) {
            continue;
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 32;
            *out = fc_xrealloc(*out, cap * sizeof(char *));
        }
        (*out)[(*n)++] = fc_xstrndup(v.mv_data, v.mv_size);
    }
    mdb_txn_abort(r.txn);
    free(all.v);
    return rc;
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
    rc = match_series(&r, q->selector, true, &ids);
    for (size_t i = 0; rc == FC_OK && i < ids.n; i++) {
        struct key k;
        MDB_val kv, v;
        struct fc_buf group;
        size_t g;
        key_tenant(&k, q->tenant);
        key_be32(&k, ids.v[i]);
        kv = val(k.b, k.n);
        if (mdb_get(r.txn, s->db[DB_SID], &kv, &v) != 0) {
            continue;
        }
        /* The group: the series' values of the group_by labels. */
        fc_buf_init(&group, 0);
        fc_buf_append(&group, "", 0);
        for (size_t j = 0; j < n_group_by; j++) {
            const char *value = label_in(v.mv_data, v.mv_size, group_by[j], buf, sizeof(buf));
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
    mdb_txn_abort(r.txn);
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

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
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
    mdb_txn_abort(r.txn);
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
