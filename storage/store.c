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

const char *const fc_store_db_names[N_DBS] = {"sym",   "symid", "series", "sid",  "ln",    "lv",
                                              "post",  "node",  "meta",   "span", "trace", "base",
                                              "sbase", "dirty", "bundle", "bid",  "dict"};

/*
 * The on-disk format; a store written by another format is refused, never
 * misread. Format 4 interns frame records (storage/frame.h) where format 3
 * interned names; a name is a valid symbol of format 4, so a format 3 store
 * is read as it is. Format 5 adds the service aggregates (store_service.c):
 * a format 3 or 4 store gets them built at open. Format 6 adds the
 * write-ahead log (store_open.c: an older build would ignore what it holds)
 * and links (a coarse window standing for its only child): a format 5 store
 * has neither and is only marked. Format 7 writes packed windows' trees in
 * columns (store_pack.c) and still reads the interleaved trees of format 6,
 * which is only marked. Format 8 writes postings in chunks of ids
 * (store_write.c posting_add) and still reads format 7's one id per key,
 * which is only marked. Format 9 bundles past 10 s windows (store_bundle.c)
 * and reads format 8's windows as they are, which is only marked. Format 10
 * stores a new series' labels as its base's (`bid`) and the rest
 * (store_series.c), and reads format 9's whole labels, which is only marked.
 * Format 11 interns a split series' `__profile_type__` (store_series.c) and
 * reads format 10's, which is only marked. Format 12 divides each stored
 * tree's selfs by their greatest common divisor (tree.c, store_pack.c) and
 * reads format 11's windows as they are, which is only marked. Format 13
 * keys a new series by its base and h64 of its labels (store_write.c
 * series_id) and still finds format 12's by h128 of their labels, which is
 * only marked. Format 14 compresses a bundle's contents with a dictionary
 * of its base's service and day (store_bundle.c) and reads format 13's
 * bundles as they are, which is only marked. Format 15 writes a new series'
 * postings as differences of ids (store_write.c posting_add) and still
 * reads format 14's be32 ids, which is only marked. Format 16 stores a
 * coarse window of two children as a sum (store_flush.c rebuild), which
 * older builds would count corrupt; format 15 is only marked. Format 17
 * packs a base's closed 10^4 s windows of a 10^5 s span together
 * (store_bundle.c), whose markers older builds would count corrupt; format
 * 16 is only marked. Format 18 keeps a new split series' labels in a bucket
 * of 64 ids, its own part a symbol (store_series.c), and still reads format
 * 17's key per series, which is only marked.
 * Every upgrade ends marked 18, which older builds refuse rather than
 * losing the log or misreading a link, a sum, a pack, a column, a chunk, a
 * bundled window, a bucket of series or a split series.
 */
#define FORMAT_VERSION 18
#define FORMAT_NAMES_ONLY 3
#define FORMAT_NO_SERVICES 4  /* format 5 adds the service aggregates (store_service.c) */
#define FORMAT_NO_LOG 5       /* format 6 adds the write-ahead log and links */
#define FORMAT_INTERLEAVED 6  /* format 7 writes packed windows' trees in columns */
#define FORMAT_ONE_POSTING 7  /* format 8 writes postings in chunks of ids */
#define FORMAT_UNBUNDLED 8    /* format 9 bundles past 10 s windows */
#define FORMAT_WHOLE_SIDS 9   /* format 10 splits series labels from their base's */
#define FORMAT_TYPED_SIDS 10  /* format 11 interns a split series' profile type */
#define FORMAT_UNSCALED 11    /* format 12 stores trees' selfs divided by their scale */
#define FORMAT_SERIES_H128 12 /* format 13 keys a new series by its base and h64 */
#define FORMAT_NO_DICTS 13    /* format 14 compresses bundles with a dictionary */
#define FORMAT_ID_POSTINGS 14 /* format 15 writes postings as differences of ids */
#define FORMAT_NO_SUMS 15     /* format 16 stores a coarse window of two children as a sum */
#define FORMAT_NO_PACKS 16    /* format 17 packs closed 10^4 s windows */
#define FORMAT_SID_KEYS 17    /* format 18 keeps series' labels in buckets of 64 ids */
static const char format_key[] = "\0format";
const char fc_store_coarse_key[15] = "\0coarse_before";
const char fc_store_compact_from_key[14] = "\0compact_from";
const char fc_store_newest_key[8] = "\0newest";
_Thread_local int fc_store_last_lmdb_rc;

const int64_t fc_store_level_secs[FC_STORE_LEVELS] = {10,     100,     1000,    10000,
                                                      100000, 1000000, 10000000};

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

/*
 * A store of format 3 or 4 (no service aggregates) is upgraded in the open
 * transaction: the aggregates built from its windows (build), then marked
 * with this format (so that an older build refuses it rather than ignoring
 * the aggregates or the log); a format 5, 6 or 7 store is only marked (its
 * windows in interleaved trees and its one-id postings stay readable; an
 * older build would misread the columns and chunks this one writes).
 */
static int upgrade(struct fc_store *s, MDB_txn *txn, MDB_val *kv, bool build, struct fc_error *err)
{
    uint32_t version = FORMAT_VERSION;
    MDB_val v = val(&version, 4);

    if (build && fc_store_service_build(s, txn, err) != FC_OK) {
        return fc_store_last_lmdb_rc != 0 ? fc_store_last_lmdb_rc : EIO;
    }
    return mdb_put(txn, s->db[DB_META], kv, &v, 0);
}

/* A byte cap of fc_store_options: 0 is its default, < 0 none (0 here). */
static int64_t cap_option(int64_t v, int64_t default_bytes)
{
    return v == 0 ? default_bytes : v < 0 ? 0 : v;
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
    s->newest_s = INT64_MIN;
    s->path = fc_xstrdup(o->path);
    s->max_size = o->max_size > 0 ? o->max_size : 0;
    s->flush_ns = o->flush_interval_ns > 0 ? o->flush_interval_ns : FC_STORE_FLUSH_NS;
    s->bundle_cache_max = cap_option(o->bundle_cache_max_bytes, FC_STORE_BUNDLE_CACHE_BYTES);
    s->rebuild_max = cap_option(o->rebuild_max_bytes, FC_STORE_REBUILD_BYTES);
    s->rebuild_max_ns = o->rebuild_max_ns > 0 ? o->rebuild_max_ns : 0;
    fc_store_ids_init(&s->ids, cap_option(o->id_cache_max_bytes, FC_STORE_ID_CACHE_BYTES));
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
    {
        MDB_stat st;
        s->page_bytes = mdb_env_stat(s->env, &st) == 0 ? (int64_t)st.ms_psize : 4096;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
        fc_store_lmdb_error(err, rc, "open");
        fc_store_close(s);
        return FC_EIO;
    }
    for (int i = 0; i < N_DBS; i++) {
        if ((rc = mdb_dbi_open(txn, fc_store_db_names[i], MDB_CREATE, &s->db[i])) != 0) {
            mdb_txn_abort(txn);
            fc_store_lmdb_error(err, rc, fc_store_db_names[i]);
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
            rc = upgrade(s, txn, &kv, true, err);
        } else if (rc == 0 && v.mv_size == 4 &&
                   memcmp(v.mv_data, &(uint32_t){FORMAT_NO_SERVICES}, 4) == 0) {
            rc = upgrade(s, txn, &kv, true, err);
        } else if (rc == 0 && v.mv_size == 4 &&
                   (memcmp(v.mv_data, &(uint32_t){FORMAT_NO_LOG}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_INTERLEAVED}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_ONE_POSTING}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_UNBUNDLED}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_WHOLE_SIDS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_TYPED_SIDS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_UNSCALED}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_SERIES_H128}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_NO_DICTS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_ID_POSTINGS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_NO_SUMS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_NO_PACKS}, 4) == 0 ||
                    memcmp(v.mv_data, &(uint32_t){FORMAT_SID_KEYS}, 4) == 0)) {
            rc = upgrade(s, txn, &kv, false, err);
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
        kv = val(fc_store_compact_from_key, sizeof(fc_store_compact_from_key) - 1);
        s->compact_from = INT64_MAX;
        if (mdb_get(txn, s->db[DB_META], &kv, &v) == 0 && v.mv_size == sizeof(s->compact_from)) {
            memcpy(&s->compact_from, v.mv_data, sizeof(s->compact_from));
        }
    }
    {
        MDB_val kv = val(fc_store_newest_key, sizeof(fc_store_newest_key) - 1), v;
        if (mdb_get(txn, s->db[DB_META], &kv, &v) == 0 && v.mv_size == sizeof(s->newest_s)) {
            memcpy(&s->newest_s, v.mv_data, sizeof(s->newest_s));
        }
    }
    {
        /* Windows left dirty by a crash: rebuilt by the first flush, not the first write. */
        MDB_stat st;
        if (mdb_stat(txn, s->db[DB_DIRTY], &st) == 0 && st.ms_entries > 0) {
            atomic_store(&s->dirty, true);
        }
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        fc_store_lmdb_error(err, rc, "open");
        fc_store_close(s);
        return FC_EIO;
    }
    fc_store_refresh_used(s);
    atomic_store(&s->last_flush_ns, fc_now_mono_ns());
    s->open_started = true;
    if (fc_store_open_start(s, o, err) != FC_OK) {
        fc_store_close(s);
        return FC_EIO;
    }
    s->ready = true;
    if (atomic_load(&s->open.log_bytes) > 0) {
        /* What the log replayed goes into LMDB now, not at the first write. */
        struct fc_error ignored = {0};
        fc_store_flush(s, &ignored);
    }
    *out = s;
    return FC_OK;
}

void fc_store_close(struct fc_store *s)
{
    if (s == NULL) {
        return;
    }
    if (s->ready) {
        struct fc_error ignored = {0};
        fc_store_flush(s, &ignored); /* else the next open's first flush does it */
    }
    if (s->open_started) {
        fc_store_open_stop(s);
    }
    if (s->env != NULL) {
        mdb_env_close(s->env);
    }
    if (s->lock_fd >= 0) {
        close(s->lock_fd); /* releases the lock */
    }
    fc_store_ids_release(&s->ids);
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

int64_t fc_store_open_bytes(struct fc_store *s)
{
    return atomic_load(&s->open.bytes);
}

int64_t fc_store_open_max_bytes(struct fc_store *s)
{
    return s->open.max_bytes;
}

int64_t fc_store_rebuilds_deferred(struct fc_store *s)
{
    return atomic_load(&s->rebuilds_deferred);
}

int64_t fc_store_rebuild_max_bytes(struct fc_store *s)
{
    return s->rebuild_max;
}

int64_t fc_store_rebuild_peak_bytes(struct fc_store *s)
{
    return atomic_load(&s->rebuild_peak);
}

int64_t fc_store_id_cache_bytes(struct fc_store *s)
{
    return atomic_load(&s->ids.bytes);
}

int64_t fc_store_id_cache_max_bytes(struct fc_store *s)
{
    return s->ids.max_bytes;
}

int64_t fc_store_bundle_cache_bytes(struct fc_store *s)
{
    return atomic_load(&s->bundle_cache_bytes);
}

int64_t fc_store_bundle_cache_max_bytes(struct fc_store *s)
{
    return s->bundle_cache_max;
}

void fc_store_id_cache_lookups(struct fc_store *s, uint64_t *hits, uint64_t *misses,
                               uint64_t *emptied)
{
    *hits = atomic_load(&s->ids.hits);
    *misses = atomic_load(&s->ids.misses);
    *emptied = atomic_load(&s->ids.emptied);
}

int64_t fc_store_log_bytes(struct fc_store *s)
{
    return atomic_load(&s->open.log_bytes);
}

int64_t fc_store_log_file_bytes(struct fc_store *s)
{
    return atomic_load(&s->open.file_bytes);
}

uint64_t fc_store_log_damaged(struct fc_store *s)
{
    return atomic_load(&s->open.torn);
}

int64_t fc_store_disk_bytes(struct fc_store *s)
{
    char path[4096];
    struct stat st;

    snprintf(path, sizeof(path), "%s/data.mdb", s->path);
    return stat(path, &st) == 0 ? (int64_t)st.st_blocks * 512 : 0;
}
