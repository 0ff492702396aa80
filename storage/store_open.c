/*
 * Open windows and the write-ahead log (issue 14).
 *
 * A write no longer rewrites its 10 s window in LMDB on every commit (read,
 * decompress, merge, encode, compress): its trees are appended to the log
 * (path/wal) and synced, which is the point of acknowledgement, then merged
 * into the window's copy in memory. fc_store_flush (every
 * FC_STORE_FLUSH_NS, when the windows pass their byte cap, before retention,
 * at close) writes every open window into LMDB in one transaction (merged
 * with what is stored, its coarser windows marked dirty and rebuilt in the
 * same transaction), records in it that the log's generation is done, and
 * then empties the windows and the log.
 *
 * Readers add the open windows to what LMDB answers (store_read.c). LMDB
 * never holds what an open window holds, and no coarser window in LMDB
 * includes it, so the sum is exact; the lock makes a reader see LMDB and the
 * windows from the same side of a flush.
 *
 * The log: records of
 *   le32 magic | le32 payload length | le64 generation | le64 xxh3(payload) | payload
 * where the payload is n entries of (uvarint tenant length, tenant, uvarint
 * base, u8 level, [le64 span id when level is FC_STORE_SPAN_LEVEL], zigzag
 * start, uvarint series, uvarint raw length, raw tree). Span index entries
 * travel the same way (FC_STORE_SPAN_LEVEL): the flush merges them into
 * DB_SPAN.
 * Only records of the generation that LMDB's meta "\0wal" names are live: a
 * flush commits the next generation there before it truncates the file, so
 * a crash between the two cannot replay what LMDB already holds. Replay
 * stops at the first record that is damaged (a torn tail: logged, counted)
 * or of another generation (left over from before a truncation).
 */
#include "storage/store_int.h"

#include "core/log.h"
#include "core/mem.h"
#include "formats/pb.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LOG_MAGIC 0x31574346u /* "FCW1" */
#define LOG_HEADER 24
#define LOG_GROW (4 << 20) /* the log's file grows by this much of zeros at a time */

static const char wal_key[5] = "\0wal";

static void put_le(uint8_t *p, uint64_t v, int n)
{
    for (int i = 0; i < n; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint64_t get_le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

static uint64_t base_hash(const char *tenant, uint32_t base)
{
    return XXH3_64bits_withSeed(&base, sizeof(base), XXH3_64bits(tenant, strlen(tenant)));
}

static int64_t parts_bytes(const struct parts *ps)
{
    int64_t n = (int64_t)ps->cap * (int64_t)sizeof(struct part);
    for (uint32_t i = 0; i < ps->n; i++) {
        n += (int64_t)ps->v[i].tree.cap * (int64_t)sizeof(struct fc_tree_node);
    }
    return n;
}

/* The open window (tenant, base, level, start), made empty when missing. Writer only. */
static struct open_window *window_of(struct open_windows *o, const char *tenant, uint32_t base,
                                     int level, int64_t start, uint64_t span)
{
    uint64_t h = fc_store_window_hash(tenant, base, level, start);
    uint32_t slot, head;
    struct open_window *w;

    /* Open addressing over the hash itself: a collision takes the next hash. */
    while (fc_idmap_get(&o->index, h, &slot)) {
        w = &o->v[slot];
        if (w->base == base && w->level == level && w->start == start && w->span == span &&
            strcmp(w->tenant, tenant) == 0) {
            return w;
        }
        h = h * 0x9E3779B97F4A7C15ull + 1;
    }
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 64;
        o->v = fc_xrealloc(o->v, o->cap * sizeof(*o->v));
    }
    w = &o->v[o->n];
    memset(w, 0, sizeof(*w));
    w->tenant = fc_xstrdup(tenant);
    w->base = base;
    w->level = level;
    w->start = start;
    w->span = span;
    fc_idmap_put(&o->index, h, o->n);
    /* Its (tenant, base) chain: readers walk it; a hash shared by two bases only costs a skip. */
    if (fc_idmap_get(&o->by_base, base_hash(tenant, base), &head)) {
        w->next_of_base = o->v[head - 1].next_of_base;
        o->v[head - 1].next_of_base = o->n + 1;
    } else {
        fc_idmap_put(&o->by_base, base_hash(tenant, base), o->n + 1);
    }
    o->n++;
    return w;
}

static void merge_into(struct open_windows *o, const char *tenant, uint32_t base, int level,
                       int64_t start, uint64_t span, uint32_t series, const struct fc_tree *tree)
{
    struct open_window *w = window_of(o, tenant, base, level, start, span);
    int64_t before = w->bytes;

    fc_tree_merge(fc_store_part_of(&w->parts, series), tree);
    w->bytes = parts_bytes(&w->parts);
    atomic_fetch_add(&o->bytes, w->bytes - before);
}

const struct open_window *fc_store_open_first(struct fc_store *s, const char *tenant, uint32_t base)
{
    uint32_t head;
    const struct open_window *w;

    if (!fc_idmap_get(&s->open.by_base, base_hash(tenant, base), &head)) {
        return NULL;
    }
    /* The chain may hold another (tenant, base) of the same hash: the first of ours. */
    for (w = &s->open.v[head - 1];; w = &s->open.v[w->next_of_base - 1]) {
        if (w->base == base && w->level != FC_STORE_SPAN_LEVEL && strcmp(w->tenant, tenant) == 0) {
            return w;
        }
        if (w->next_of_base == 0) {
            return NULL;
        }
    }
}

const struct open_window *fc_store_open_next(struct fc_store *s, const struct open_window *ow)
{
    const struct open_window *w = ow;

    while (w->next_of_base != 0) {
        w = &s->open.v[w->next_of_base - 1];
        /* The same (tenant, base), and a window after a window, a span's entry after its own. */
        if (w->base == ow->base && w->span == ow->span &&
            (w->level == FC_STORE_SPAN_LEVEL) == (ow->level == FC_STORE_SPAN_LEVEL) &&
            strcmp(w->tenant, ow->tenant) == 0) {
            return w;
        }
    }
    return NULL;
}

const struct open_window *fc_store_open_first_span(struct fc_store *s, const char *tenant,
                                                   uint64_t span)
{
    uint32_t head;
    const struct open_window *w;

    if (!fc_idmap_get(&s->open.by_base, base_hash(tenant, span_fold(span)), &head)) {
        return NULL;
    }
    for (w = &s->open.v[head - 1];; w = &s->open.v[w->next_of_base - 1]) {
        if (w->level == FC_STORE_SPAN_LEVEL && w->span == span && strcmp(w->tenant, tenant) == 0) {
            return w;
        }
        if (w->next_of_base == 0) {
            return NULL;
        }
    }
}

/* ---- the log ------------------------------------------------------------------------------- */

/*
 * The log keeps its file across flushes (cut back to twice the open
 * windows' cap, at least LOG_GROW; between flushes it is as long as the log
 * was, which a write flushes past eight times the cap: store_write.c), so
 * that appends overwrite allocated blocks within the file's size:
 * fdatasync then writes the record's pages only, where an append past the
 * end also wrote the inode and the allocation's metadata (about half of the
 * sync's CPU measured on ext4 without a journal; a journal commit where
 * there is one).
 */
static int64_t log_keep(const struct open_windows *o)
{
    return 2 * o->max_bytes > LOG_GROW ? 2 * o->max_bytes : LOG_GROW;
}

/*
 * Zeros from the file's end to past `need` (LOG_GROW at a time), synced with
 * the record that needed them. When they cannot all be written (a full
 * disk), the file is cut back to where it was and the record's own write
 * decides.
 */
static void log_grow(struct fc_store *s, int64_t need)
{
    struct open_windows *o = &s->open;
    static const uint8_t zeros[1 << 16];
    int64_t to = (need + LOG_GROW - 1) / LOG_GROW * LOG_GROW;

    for (int64_t at = o->file_bytes; at < to;) {
        size_t n = to - at < (int64_t)sizeof(zeros) ? (size_t)(to - at) : sizeof(zeros);
        ssize_t put = pwrite(o->fd, zeros, n, (off_t)at);
        if (put <= 0) {
            if (ftruncate(o->fd, (off_t)o->file_bytes) != 0) {
                fc_log_warn("store", "%s/wal: cannot cut back its zeros: %s", s->path,
                            strerror(errno));
            }
            return;
        }
        at += put;
    }
    o->file_bytes = to;
}

static void encode_record(const struct windows *ws, uint64_t generation, struct fc_buf *out)
{
    uint8_t header[LOG_HEADER] = {0};
    struct fc_buf raw;

    fc_buf_init(&raw, 0);
    fc_buf_append(out, header, sizeof(header));
    for (uint32_t i = 0; i < ws->n; i++) {
        const struct window *w = &ws->v[i];
        size_t tn = strlen(w->tenant);
        for (uint32_t j = 0; j < w->parts.n; j++) {
            fc_pb_put_varint(out, tn);
            fc_buf_append(out, w->tenant, tn);
            fc_pb_put_varint(out, w->base);
            fc_buf_append(out, &(uint8_t){(uint8_t)w->level}, 1);
            if (w->level == FC_STORE_SPAN_LEVEL) {
                uint8_t sb[8];
                put_le(sb, w->span, 8);
                fc_buf_append(out, sb, 8);
            }
            fc_pb_put_varint(out, ((uint64_t)w->start << 1) ^ (uint64_t)(w->start >> 63));
            fc_pb_put_varint(out, w->parts.v[j].series);
            fc_buf_reset(&raw);
            fc_tree_encode_raw(&w->parts.v[j].tree, &raw);
            fc_pb_put_varint(out, raw.len);
            fc_buf_append(out, raw.data, raw.len);
        }
    }
    fc_buf_release(&raw);
    put_le(out->data, LOG_MAGIC, 4);
    put_le(out->data + 4, out->len - LOG_HEADER, 4);
    put_le(out->data + 8, generation, 8);
    put_le(out->data + 16, XXH3_64bits(out->data + LOG_HEADER, out->len - LOG_HEADER), 8);
}

/*
 * Checks a record's payload whole (every tree decodes) before merging any
 * of it, so that a damaged record is skipped whole. Returns false when damaged.
 */
static bool replay_payload(struct open_windows *o, const uint8_t *p, size_t len, bool apply)
{
    struct fc_pb r;
    char tenant[512]; /* receivers allow 150 bytes; key_tenant keeps 200 */

    fc_pb_init(&r, p, len);
    while (!fc_pb_done(&r)) {
        uint64_t tn, base, zz, series, raw_len, span = 0;
        uint8_t level;
        struct fc_tree tree;
        if (fc_pb_varint(&r, &tn) != FC_OK || tn >= sizeof(tenant) ||
            (uint64_t)(r.end - r.p) < tn + 1) {
            return false;
        }
        memcpy(tenant, r.p, tn);
        tenant[tn] = '\0';
        r.p += tn;
        if (fc_pb_varint(&r, &base) != FC_OK || base > UINT32_MAX || r.p >= r.end) {
            return false;
        }
        level = *r.p++;
        if (level == FC_STORE_SPAN_LEVEL) {
            if (r.end - r.p < 8) {
                return false;
            }
            span = get_le(r.p, 8);
            r.p += 8;
        } else if (level > 1) {
            return false;
        }
        if (fc_pb_varint(&r, &zz) != FC_OK || fc_pb_varint(&r, &series) != FC_OK ||
            series > UINT32_MAX || fc_pb_varint(&r, &raw_len) != FC_OK ||
            (uint64_t)(r.end - r.p) < raw_len) {
            return false;
        }
        fc_tree_init(&tree);
        if (fc_tree_decode_raw_merge(&tree, r.p, raw_len) != FC_OK) {
            fc_tree_release(&tree);
            return false;
        }
        if (apply) {
            merge_into(o, tenant, (uint32_t)base, level, (int64_t)(zz >> 1) ^ -(int64_t)(zz & 1),
                       span, (uint32_t)series, &tree);
        }
        fc_tree_release(&tree);
        r.p += raw_len;
    }
    return true;
}

/* Replays the live records of data[0..len) into the open windows; the bytes replayed. */
static size_t replay(struct fc_store *s, const uint8_t *data, size_t len, uint64_t *records)
{
    size_t at = 0;

    *records = 0;
    while (len - at >= LOG_HEADER) {
        const uint8_t *h = data + at;
        uint64_t plen = get_le(h + 4, 4);
        if (get_le(h, 4) != LOG_MAGIC || get_le(h + 8, 8) != s->open.generation) {
            break; /* from before the last truncation (or not a record): the end */
        }
        if (plen > len - at - LOG_HEADER ||
            XXH3_64bits(h + LOG_HEADER, plen) != get_le(h + 16, 8) ||
            !replay_payload(&s->open, h + LOG_HEADER, plen, false)) {
            atomic_fetch_add(&s->open.torn, 1);
            fc_log_warn("store",
                        "%s/wal: a damaged record at byte %zu (a write cut short by a crash) "
                        "was skipped with whatever follows it; counted in "
                        "flamecol_store_log_damaged_total",
                        s->path, at);
            break;
        }
        replay_payload(&s->open, h + LOG_HEADER, plen, true);
        (*records)++;
        at += LOG_HEADER + plen;
    }
    return at;
}

int fc_store_open_start(struct fc_store *s, const struct fc_store_options *o, struct fc_error *err)
{
    struct open_windows *ow = &s->open;
    char file[4096];
    struct stat st;
    MDB_txn *txn;
    pthread_rwlockattr_t attr;
    uint64_t records = 0;

    pthread_rwlockattr_init(&attr);
    /* A steady stream of queries must not starve the writer (and so the acks). */
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&ow->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    fc_idmap_init(&ow->index, 64);
    fc_idmap_init(&ow->by_base, 64);
    ow->max_bytes = o->open_max_bytes > 0 ? o->open_max_bytes : FC_STORE_OPEN_MAX_BYTES;
    ow->sync = o->sync != FC_SYNC_NONE;
    ow->fd = -1;
    {
        /* Which generation is live: unreadable, nothing may be replayed (or thrown away). */
        MDB_val kv = val(wal_key, sizeof(wal_key)), v;
        int rc = mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn);
        if (rc == 0) {
            rc = mdb_get(txn, s->db[DB_META], &kv, &v);
            if (rc == 0 && v.mv_size != 8) {
                rc = MDB_CORRUPTED;
            } else if (rc == 0) {
                ow->generation = get_le(v.mv_data, 8);
            }
            mdb_txn_abort(txn);
        }
        if (rc != 0 && rc != MDB_NOTFOUND) {
            return fc_store_lmdb_error(err, rc, "the log's generation");
        }
    }
    snprintf(file, sizeof(file), "%s/wal", s->path);
    ow->fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (ow->fd < 0 || fstat(ow->fd, &st) != 0) {
        return fc_errorf(err, FC_EIO, "store: cannot open %s: %s", file, strerror(errno));
    }
    if (st.st_size > 0) {
        /* Mapped, not read: the log's size (however large) is not an allocation. */
        void *data = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, ow->fd, 0);
        size_t live;
        if (data == MAP_FAILED) {
            return fc_errorf(err, FC_EIO, "store: cannot read %s: %s", file, strerror(errno));
        }
        live = replay(s, data, (size_t)st.st_size, &records);
        munmap(data, (size_t)st.st_size);
        /*
         * Whatever follows the live records is cut off: it may be of the
         * live generation (a damaged record, records after it) when nothing
         * was replayed and so no flush starts a new one, and a later start
         * must neither count it again nor replay what follows it once new
         * records fill the gap (review). The next record grows the file again.
         */
        ow->file_bytes = st.st_size;
        if (ow->file_bytes > (int64_t)live) {
            ow->file_bytes = (int64_t)live;
            if (ftruncate(ow->fd, (off_t)ow->file_bytes) != 0) {
                return fc_errorf(err, FC_EIO, "store: cannot truncate %s: %s", file,
                                 strerror(errno));
            }
        }
        atomic_store(&ow->log_bytes, (int64_t)live);
        if (records > 0) {
            fc_log_info("store", "%s/wal: %llu acknowledged write groups replayed (%zu bytes)",
                        s->path, (unsigned long long)records, live);
            atomic_store(&s->dirty, true);
        }
    }
    return FC_OK;
}

static void windows_empty(struct open_windows *o)
{
    for (uint32_t i = 0; i < o->n; i++) {
        free(o->v[i].tenant);
        fc_store_parts_release(&o->v[i].parts);
    }
    o->n = 0;
    fc_idmap_release(&o->index);
    fc_idmap_release(&o->by_base);
    fc_idmap_init(&o->index, 64);
    fc_idmap_init(&o->by_base, 64);
    atomic_store(&o->bytes, 0);
}

void fc_store_open_stop(struct fc_store *s)
{
    windows_empty(&s->open);
    fc_idmap_release(&s->open.index);
    fc_idmap_release(&s->open.by_base);
    free(s->open.v);
    if (s->open.fd >= 0) {
        close(s->open.fd);
    }
    pthread_rwlock_destroy(&s->open.lock);
}

int fc_store_open_add(struct fc_store *s, const struct windows *ws, struct fc_error *err)
{
    struct open_windows *o = &s->open;
    struct fc_buf rec;
    int64_t at = atomic_load(&o->log_bytes);
    ssize_t put;
    int e = 0;

    if (ws->n == 0) {
        return FC_OK;
    }
    fc_buf_init(&rec, 0);
    encode_record(ws, o->generation, &rec);
    if (at + (int64_t)rec.len > o->file_bytes) {
        log_grow(s, at + (int64_t)rec.len);
    }
    put = pwrite(o->fd, rec.data, rec.len, (off_t)at);
    if (put != (ssize_t)rec.len) {
        e = put < 0 ? errno : ENOSPC;
    } else if (o->sync && fdatasync(o->fd) != 0) {
        e = errno;
    }
    if (e != 0) {
        /*
         * Not acknowledged: cut off (and the cut synced, so that a power loss
         * cannot bring the refused record back for its retry to double).
         */
        if (ftruncate(o->fd, (off_t)at) != 0 || (o->sync && fdatasync(o->fd) != 0)) {
            fc_log_error("store", "%s/wal: cannot cut off a refused record: %s", s->path,
                         strerror(errno));
        }
        o->file_bytes = at;
        fc_buf_release(&rec);
        fc_store_last_lmdb_rc = e; /* what count_failure classifies by (no_space, io) */
        return fc_errorf(err, e == ENOSPC || e == EDQUOT ? FC_EUNAVAIL : FC_EIO,
                         "store: cannot write %s/wal: %s", s->path, strerror(e));
    }
    atomic_store(&o->log_bytes, at + (int64_t)rec.len);
    if (at + (int64_t)rec.len > o->file_bytes) {
        o->file_bytes = at + (int64_t)rec.len;
    }
    fc_buf_release(&rec);
    pthread_rwlock_wrlock(&o->lock);
    for (uint32_t i = 0; i < ws->n; i++) {
        const struct window *w = &ws->v[i];
        for (uint32_t j = 0; j < w->parts.n; j++) {
            merge_into(o, w->tenant, w->base, w->level, w->start, w->span, w->parts.v[j].series,
                       &w->parts.v[j].tree);
        }
    }
    pthread_rwlock_unlock(&o->lock);
    return FC_OK;
}

bool fc_store_open_has_compacted(struct fc_store *s)
{
    for (uint32_t i = 0; i < s->open.n; i++) {
        if (s->open.v[i].level == 1) {
            return true;
        }
    }
    return false;
}

int fc_store_open_write(struct fc_store *s, MDB_txn *txn, int level, struct fc_error *err)
{
    struct open_windows *o = &s->open;
    /*
     * No cutoff: every window above an open 10 s window is marked, its 100 s
     * window too. One under the compacted past is only possible when
     * compaction set its cutoff just before this flush (store.c: it flushes
     * before deleting 10 s windows), so that window's children are all
     * still there to rebuild it from.
     */
    struct writer w = {s, txn, NULL, err, NULL, INT64_MIN};
    uint8_t next[8];
    MDB_val kv = val(wal_key, sizeof(wal_key)), v;
    int rc = FC_OK;

    for (uint32_t i = 0; rc == FC_OK && i < o->n; i++) {
        const struct open_window *ow = &o->v[i];
        if (ow->level == FC_STORE_SPAN_LEVEL && level == 0) {
            /* The span index: no coarser levels, nothing to mark. */
            w.tenant = ow->tenant;
            for (uint32_t j = 0; rc == FC_OK && j < ow->parts.n; j++) {
                rc = fc_store_merge_span_value(&w, ow->span, ow->parts.v[j].series, ow->start,
                                               &ow->parts.v[j].tree);
            }
            continue;
        }
        if (ow->level != level) {
            continue;
        }
        w.tenant = ow->tenant;
        if (ow->start <= INT64_MAX - fc_store_level_secs[ow->level] &&
            ow->start + fc_store_level_secs[ow->level] > s->newest_s) {
            s->newest_s = ow->start + fc_store_level_secs[ow->level];
        }
        rc = fc_store_merge_window(&w, ow->base, ow->level, ow->start, &ow->parts);
        rc = rc ? rc : fc_store_mark_ancestors(&w, ow->base, ow->level, ow->start);
        if (ow->level == 0) {
            fc_store_bundle_again(s, ow->start); /* a late or backfilled window gets bundled too */
        }
    }
    if (rc == FC_OK && level == 0 && o->n > 0) {
        int r;
        put_le(next, o->generation + 1, 8);
        v = val(next, sizeof(next));
        if ((r = mdb_put(txn, s->db[DB_META], &kv, &v, 0)) != 0) {
            rc = fc_store_lmdb_error(err, r, "wal");
        }
        kv = val(fc_store_newest_key, sizeof(fc_store_newest_key) - 1);
        v = val(&s->newest_s, sizeof(s->newest_s));
        if (rc == FC_OK && (r = mdb_put(txn, s->db[DB_META], &kv, &v, 0)) != 0) {
            rc = fc_store_lmdb_error(err, r, "newest");
        }
    }
    return rc;
}

void fc_store_open_clear(struct fc_store *s)
{
    struct open_windows *o = &s->open;

    if (o->n == 0) {
        return; /* fc_store_open_write recorded no new generation */
    }
    windows_empty(o);
    o->generation++;
    atomic_store(&o->log_bytes, 0);
    /*
     * The records left are of the old generation, which replay ignores: the
     * new ones overwrite them from the start. Past the reserve the file is
     * cut back, not synced (what a lost truncation leaves is ignored too).
     */
    if (o->file_bytes > log_keep(o)) {
        if (ftruncate(o->fd, (off_t)log_keep(o)) != 0) {
            fc_log_warn("store", "%s/wal: cannot truncate: %s", s->path, strerror(errno));
        } else {
            o->file_bytes = log_keep(o);
        }
    }
}
