/*
 * Private to storage/: the store's state and the helpers its files share:
 * store.c (keys, open, close), store_write.c (the write path),
 * store_pack.c (packed windows), store_spans.c (the span index),
 * store_read.c (the read path), retention.c (deleting, size accounting)
 * and symbols.c (resolving frames).
 */
#ifndef FC_STORAGE_STORE_INT_H
#define FC_STORAGE_STORE_INT_H

#include "core/buf.h"
#include "core/idmap.h"
#include "core/timeutil.h"
#include "storage/store.h"
#include "storage/tree.h"

#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

enum {
    DB_SYM,
    DB_SYMID,
    DB_SERIES,
    DB_SID,
    DB_LN,
    DB_LV,
    DB_POST,
    DB_NODE,
    DB_META,
    DB_SPAN,
    DB_TRACE,
    DB_BASE,
    DB_SBASE,
    DB_DIRTY,
    DB_BUNDLE,
    DB_BID,
    DB_DICT,
    N_DBS
};

extern const int64_t fc_store_level_secs[FC_STORE_LEVELS];

/* ---- packed windows (store_pack.c) -------------------------------------------------------- */

/* One series' tree inside a packed window. */
struct part {
    uint32_t series;
    struct fc_tree tree;
};

struct parts {
    struct part *v;
    uint32_t n, cap;
};

/* ---- the id cache (store_ids.c) ----------------------------------------------------------- */

struct id_slot {
    uint64_t lo, hi; /* a 128-bit hash of (database, key); lo 0: empty */
    uint32_t id;
};

struct id_cache {
    pthread_mutex_t lock;
    struct id_slot *slots;
    size_t cap, n;           /* slots (a power of two), entries */
    struct id_slot *pending; /* noted by the write transaction under way */
    size_t n_pending, cap_pending;
    int64_t max_bytes;     /* slots * sizeof(struct id_slot) never passes it */
    _Atomic int64_t bytes; /* the table's size */
    _Atomic uint64_t hits, misses;
    _Atomic uint64_t emptied; /* times it was full at max_bytes and emptied */
};

/* ---- open windows (store_open.c) ---------------------------------------------------------- */

/*
 * The span index goes through the log and the open windows too, as entries
 * of this pseudo level: (tenant, span id, 10 s window) with one part per
 * series, so that a span's trees are exactly as durable and as visible as
 * its profile's windows (a write refused or cut by a crash leaves none of
 * either). The flush merges them into DB_SPAN.
 */
#define FC_STORE_SPAN_LEVEL 0x7f

/* The base a span entry is filed under (chains, hashes): its id folded to 32 bits. */
static inline uint32_t span_fold(uint64_t span)
{
    return (uint32_t)(span ^ (span >> 32));
}

/*
 * A window written since the last flush: its trees live here (merged in
 * memory) and in the write-ahead log, not yet in LMDB. Level 0, or 1 for a
 * 100 s window whose 10 s windows were compacted away.
 */
struct open_window {
    char *tenant; /* owned */
    uint32_t base;
    int level; /* or FC_STORE_SPAN_LEVEL: an entry of the span index */
    int64_t start;
    uint64_t span; /* a span entry's span id (base: its fold); 0 for a window */
    struct parts parts;
    int64_t bytes;         /* what its trees hold (part of open_windows.bytes) */
    uint32_t next_of_base; /* the next window in its (tenant, base) chain, + 1; 0: none */
};

struct open_windows {
    /*
     * Readers hold it (shared) for a whole query, so that they see the open
     * windows and LMDB from the same side of a flush; the writer holds it
     * (exclusive) while merging a commit into the windows and around the
     * flush's commit and the emptying that follows.
     */
    pthread_rwlock_t lock;
    struct fc_idmap index;   /* hash of (tenant, base, level, start), rehashed on collision */
    struct fc_idmap by_base; /* hash of (tenant, base) -> first slot of its chain + 1 */
    struct open_window *v;
    uint32_t n, cap;
    _Atomic int64_t bytes; /* trees' memory, capped by max_bytes (a flush empties it) */
    int64_t max_bytes;
    /* The log: path/wal, records of the current generation (see store_open.c). */
    int fd;
    uint64_t generation;
    _Atomic int64_t log_bytes;
    /*
     * The file's size: written bytes (old records, zeros) past log_bytes
     * that the next records overwrite, so that a sync finds its blocks
     * allocated and the size unchanged (no inode to write, store_open.c).
     */
    _Atomic int64_t file_bytes; /* read by /metrics from other threads */
    bool sync;
    _Atomic uint64_t torn; /* records found damaged at replay (skipped) */
};

/* The name of each database, by DB_ index. */
extern const char *const fc_store_db_names[N_DBS];

/* A bundling pass stopped by its time budget: where the next call goes on. */
struct bundle_pass {
    bool resuming;
    bool packing;               /* past the 100 s spans: packing coarse windows (format 17) */
    int64_t seen, from, cutoff; /* the watermark it began from, its range of spans */
    int64_t pack_lo;            /* the first 10^5 s span it packs */
    char tenant[256];           /* the next key: (tenant, base, 0 or FC_STORE_PACK_LEVEL, at) */
    uint32_t base;
    int64_t at;
};

/* Where a retention step stopped by its time budget goes on: the next key of its table. */
struct resume_key {
    uint8_t b[512]; /* LMDB's keys are at most 511 bytes */
    size_t n;       /* 0: from the first key */
};

/* *at = the key kv (cut to 512 bytes, which sorts before it: never past it). */
static inline void resume_at(struct resume_key *at, const MDB_val *kv)
{
    at->n = kv->mv_size < sizeof(at->b) ? kv->mv_size : sizeof(at->b);
    memcpy(at->b, kv->mv_data, at->n);
}

/*
 * fc_store_delete_before's or fc_store_compact_before's, between calls
 * stopped by their budget (retention.c): the pass goes on to its own cutoff.
 */
struct retention_pass {
    bool resuming;
    int step;         /* the stage (a table) it stopped in */
    int64_t cutoff_s; /* the pass's cutoff: later calls' are ignored until it ends */
    int64_t from_s;   /* compaction: the cutoff before it (bundles of spans after it) */
    struct resume_key at;
};

/* fc_store_forget_empty's, between calls (store_forget.c). */
struct forget_pass {
    struct resume_key next; /* the `bid` key the next group starts at */
    int by_base;            /* every series is found under its base: 1; not: -1; not known yet: 0 */
};

/* When a call given budget_ns (0: none) stops: CLOCK_MONOTONIC ns. */
static inline int64_t fc_store_deadline(int64_t budget_ns)
{
    return budget_ns > 0 ? fc_now_mono_ns() + budget_ns : INT64_MAX;
}

struct fc_store {
    MDB_env *env;
    MDB_dbi db[N_DBS];
    char *path;
    int lock_fd;                   /* flock()ed: one process per directory */
    int64_t max_size;              /* 0 = none; the map is larger (headroom for deletes) */
    _Atomic int64_t used;          /* bytes of pages in use, as of the last commit */
    _Atomic uint64_t corrupt;      /* windows (or posting chunks) skipped: did not decode */
    _Atomic int64_t coarse_before; /* 10 s windows before this were compacted away */
    /*
     * The previous cutoff of a compaction pass whose bundles are not all
     * rewritten yet (DB_META, fc_store_compact_from_key, from the move of
     * the cutoff to the end of its bundles), so that a pass cut short (a
     * shutdown between slices) is redone from there; INT64_MAX: none.
     */
    int64_t compact_from;
    _Atomic int64_t bundled_before;     /* spans before this were bundled since the open */
    _Atomic int64_t bundle_cache_bytes; /* what reads' bundle caches hold (store_bundle.c) */
    int64_t bundle_cache_max;           /* bundle_cache_max_bytes; 0: none */
    struct bundle_pass bundling;        /* fc_store_bundle_before's, between calls (its caller's) */
    _Atomic uint64_t failures[FC_STORE_FAILURE_KINDS]; /* refused writes, by kind */
    _Atomic int64_t last_flush_ns; /* monotonic time of the last fc_store_flush */
    int64_t flush_ns;              /* flush_interval_ns */
    bool ready;                    /* opened whole: close flushes the dirty windows */
    /*
     * The end of the newest 10 s window a flush wrote (INT64_MIN: none;
     * kept in DB_META across restarts), the writer's: coarse windows are
     * rebuilt once it has passed them (fc_store_close_grace).
     */
    int64_t newest_s;
    int64_t rebuild_max;               /* rebuild_max_bytes; 0: none */
    int64_t rebuild_max_ns;            /* rebuild_max_ns; 0: none */
    int64_t page_bytes;                /* LMDB's page size (the OS's) */
    _Atomic int64_t rebuilds_deferred; /* closed windows the last flush left dirty */
    _Atomic int64_t rebuild_peak;      /* the most one flush built, counted as its budget is */
    _Atomic bool dirty;                /* a write since the last flush began */
    struct open_windows open;          /* written since the last flush (store_open.c) */
    struct id_cache ids;               /* ids known to be in LMDB (store_ids.c) */
    bool open_started;                 /* open (its lock, its log) is set up: close stops it */
    struct forget_pass forgetting;     /* fc_store_forget_empty's (its caller's, the writer) */
    struct retention_pass deleting;    /* fc_store_delete_before's (the writer's) */
    struct retention_pass compacting;  /* fc_store_compact_before's (the writer's) */
};

/* "\0coarse_before" in DB_META: le64 unix s. */
extern const char fc_store_coarse_key[15];
/* "\0compact_from" in DB_META: fc_store.compact_from while it is set (int64 in memory order). */
extern const char fc_store_compact_from_key[14];
/* "\0newest" in DB_META: fc_store.newest_s as of the last flush, unix s (int64 in memory order). */
extern const char fc_store_newest_key[8];

/*
 * The code of the last failed write on this thread (0: none yet): an LMDB
 * code from fc_store_lmdb_error, or the errno of a failed log write.
 */
extern _Thread_local int fc_store_last_lmdb_rc;

/*
 * Fills err for an LMDB failure rc while doing `what`: FC_EUNAVAIL
 * (retryable) for a full map or a full disk, else FC_EIO.
 */
int fc_store_lmdb_error(struct fc_error *err, int rc, const char *what);

/*
 * Resolves the symbols of out->frames_tree (read in txn, tenant's symid)
 * into out->frames and collapses it into out->tree/names by display name
 * at granularity g (storage/symbols.c).
 */
int fc_store_resolve(struct fc_store *s, MDB_txn *txn, const char *tenant,
                     enum fc_frame_granularity g, struct fc_store_result *out,
                     struct fc_error *err);

/* Refreshes s->used from the file's pages and free list. */
void fc_store_refresh_used(struct fc_store *s);

static inline uint64_t be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

static inline MDB_val val(const void *p, size_t n)
{
    MDB_val v = {n, (void *)p};
    return v;
}

/* ---- keys --------------------------------------------------------------------------------- */

struct key {
    uint8_t b[512];
    size_t n;
};

static inline void key_tenant(struct key *k, const char *tenant)
{
    size_t n = strlen(tenant);

    if (n > 200) {
        n = 200; /* tenants are validated to 150 bytes by receivers */
    }
    memcpy(k->b, tenant, n);
    k->b[n] = 0;
    k->n = n + 1;
}

static inline void key_bytes(struct key *k, const void *p, size_t n)
{
    memcpy(k->b + k->n, p, n);
    k->n += n;
}

static inline void key_be32(struct key *k, uint32_t v)
{
    for (int i = 3; i >= 0; i--) {
        k->b[k->n++] = (uint8_t)(v >> (i * 8));
    }
}

static inline void key_be64(struct key *k, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        k->b[k->n++] = (uint8_t)(v >> (i * 8));
    }
}

static inline void key_h64(struct key *k, const char *s, size_t n)
{
    key_be64(k, XXH3_64bits(s, n));
}

static inline void key_h128(struct key *k, const char *s, size_t n)
{
    XXH128_hash_t h = XXH3_128bits(s, n);
    key_be64(k, h.high64);
    key_be64(k, h.low64);
}

static inline uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static inline void node_key(struct key *k, const char *tenant, uint32_t base, int level,
                            int64_t window)
{
    key_tenant(k, tenant);
    key_be32(k, base);
    k->b[k->n++] = (uint8_t)level;
    key_be64(k, (uint64_t)window);
}

/*
 * Where a key's parts after its tenant start (past the 0 byte), when that
 * leaves exactly `rest` bytes; *tenant_len is the tenant's length. NULL
 * when kv is not such a key.
 */
static inline const uint8_t *key_rest(const MDB_val *kv, size_t rest, size_t *tenant_len)
{
    const uint8_t *p = kv->mv_data;
    const uint8_t *zero = memchr(p, 0, kv->mv_size);

    if (zero == NULL || (size_t)(zero - p) + 1 + rest != kv->mv_size) {
        return NULL;
    }
    *tenant_len = (size_t)(zero - p);
    return zero + 1;
}

/*
 * Splits a node key (node_key's layout; dirty keys share it): the length of
 * its tenant, its base, level and window. False when kv is not one.
 */
static inline bool node_key_split(const MDB_val *kv, size_t *tenant_len, uint32_t *base, int *level,
                                  int64_t *window)
{
    const uint8_t *r = key_rest(kv, 13, tenant_len);

    if (r == NULL) {
        return false;
    }
    *base = be32(r);
    *level = r[4];
    *window = (int64_t)be64(r + 5);
    return true;
}

/* Splits a bundle key: tenant 0 be32(base) be64(100 s span start). False when kv is not one. */
static inline bool bundle_key_split(const MDB_val *kv, size_t *tenant_len, uint32_t *base,
                                    int64_t *span)
{
    const uint8_t *r = key_rest(kv, 12, tenant_len);

    if (r == NULL) {
        return false;
    }
    *base = be32(r);
    *span = (int64_t)be64(r + 4);
    return true;
}

/*
 * Splits a dictionary key (store_bundle.c): tenant 0 be64(h64 of the service)
 * be64(day: the bundles' span start / 86,400, rounded down). False when kv is
 * not one.
 */
static inline bool dict_key_split(const MDB_val *kv, size_t *tenant_len, uint64_t *service,
                                  int64_t *day)
{
    const uint8_t *r = key_rest(kv, 16, tenant_len);

    if (r == NULL) {
        return false;
    }
    *service = be64(r);
    *day = (int64_t)be64(r + 8);
    return true;
}

/*
 * Whether window (base, level, start) is dirty: a profile went into one of
 * its finer windows since it was last rebuilt (store_flush.c), so its
 * stored tree (if any) is stale and readers take its children instead.
 */
static inline bool window_dirty(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                                int level, int64_t window)
{
    struct key k;
    MDB_val kv, v;

    if (level == 0) {
        return false;
    }
    node_key(&k, tenant, base, level, window);
    kv = val(k.b, k.n);
    return mdb_get(txn, s->db[DB_DIRTY], &kv, &v) == 0;
}

static inline int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* ---- the write path (store_write.c, store_spans.c) ---------------------------------------- */

/*
 * Windows touched by one write transaction, merged in memory first: each
 * is then logged and merged into the open windows once per commit (or, for
 * the format 4 upgrade, merged into LMDB once).
 */
struct window {
    const char *tenant; /* the batch's: valid for the write call */
    uint32_t base;
    int level; /* or FC_STORE_SPAN_LEVEL */
    int64_t start;
    uint64_t span; /* a span entry's span id; 0 for a window */
    struct parts parts;
};

struct windows {
    struct fc_idmap index; /* hash of (tenant, base, level, start) -> slot */
    struct window *v;
    uint32_t n, cap;
};

struct writer {
    struct fc_store *s;
    MDB_txn *txn;
    const char *tenant;
    struct fc_error *err;
    struct windows *windows;
    int64_t coarse_before; /* as of this transaction (DB_META) */
};

/*
 * A batch's frames as the writer resolves them: the symbol id of each frame
 * record (storage/frame.h), memoized per line of a location (the dict's line
 * pool) and per location without lines; and each stack's path (its symbol
 * ids, root first), made once for all the profiles, sample types and label
 * groups that use it (a pprof's two CPU types walk every stack twice).
 */
struct frames {
    uint32_t *line_sym;    /* by index into dict.lines */
    uint32_t *loc_sym;     /* by location index, for locations without lines */
    uint32_t *stack_at;    /* by stack index: 1 + where its path starts in paths, 0 = not made */
    uint32_t *stack_depth; /* by stack index: its path's length */
    uint32_t *paths;       /* the paths kept, one after another, then the last one made */
    size_t n_paths, cap;   /* ids of kept paths; allocated */
    struct fc_buf record;
};

/*
 * At most this many ids of paths are kept a batch; a stack whose path
 * would pass it is made again each time it is asked for. The array also
 * holds the path being made and grows by doubling: at most 32 MiB, or
 * about twice the longest path past that.
 */
#define FC_STORE_PATHS_MAX (1u << 22)

void fc_store_frames_init(struct frames *f, const struct fc_batch *b);
void fc_store_frames_release(struct frames *f);

/* Takes the next id of counter `what` ("sym", "series", "base") of the writer's tenant. */
int fc_store_next_id(struct writer *w, const char *what, uint32_t *id);

/* Hashes (tenant, base, level, start) (struct windows, struct open_windows). */
uint64_t fc_store_window_hash(const char *tenant, uint32_t base, int level, int64_t start);
/* Adds tree to series' part of window (w->tenant, base, level, start) in ws. */
int fc_store_add_window(struct writer *w, struct windows *ws, uint32_t base, uint32_t series,
                        int level, int64_t start, const struct fc_tree *tree);
/* Adds tree to series' part of the span entry (w->tenant, span, 10 s window) in ws. */
int fc_store_add_span(struct writer *w, struct windows *ws, uint64_t span, uint32_t series,
                      int64_t window, const struct fc_tree *tree);
/* Merges tree into the span index's stored entry (w->tenant, span, series, window), in w->txn. */
int fc_store_merge_span_value(struct writer *w, uint64_t span, uint32_t series, int64_t window,
                              const struct fc_tree *tree);
/* Merges every window of ws into the database and empties ws. */
int fc_store_flush_windows(struct writer *w, struct windows *ws);
/* Merges parts into the stored window (w->tenant, base, level, start) in w->txn. */
int fc_store_merge_window(struct writer *w, uint32_t base, int level, int64_t start,
                          const struct parts *add);
/* An empty set of windows (fc_store_windows_free drops what was not flushed). */
struct windows *fc_store_windows_new(void);
void fc_store_windows_free(struct windows *ws);
uint32_t fc_store_windows_count(const struct windows *ws);
/* Marks window (base, level, start) dirty (store_flush.c rebuilds it). */
int fc_store_mark_dirty(struct writer *w, uint32_t base, int level, int64_t start);
/*
 * Marks dirty every window above (base, level, start) but a compacted 100 s
 * window (it has no children to be rebuilt from).
 */
int fc_store_mark_ancestors(struct writer *w, uint32_t base, int level, int64_t start);

/* ---- open windows and the log (store_open.c) ---------------------------------------------- */

/* Opens the log, replays its live records into the open windows (after the format check). */
int fc_store_open_start(struct fc_store *s, const struct fc_store_options *o, struct fc_error *err);
void fc_store_open_stop(struct fc_store *s);
/*
 * Logs the windows of a committed write (synced unless sync: none), then
 * merges them into the open windows: the point of acknowledgement.
 */
int fc_store_open_add(struct fc_store *s, const struct windows *ws, struct fc_error *err);
/*
 * In the flush transaction: merges every open window of `level` into LMDB
 * and marks its coarser windows dirty; level 0 also records that the log's
 * generation is done. Level 1 (compacted 100 s windows, merged directly)
 * comes after the 100 s windows were rebuilt: a rebuild replaces a window
 * by its children and would drop what was merged into it directly.
 */
int fc_store_open_write(struct fc_store *s, MDB_txn *txn, int level, struct fc_error *err);
/* Whether an open window is a compacted 100 s window (the writer's thread). */
bool fc_store_open_has_compacted(struct fc_store *s);
/*
 * Writes the open windows into LMDB (coarser windows left dirty for the
 * next fc_store_flush): what a write does when they pass their byte cap.
 */
int fc_store_flush_open(struct fc_store *s, struct fc_error *err);

/*
 * A coarse window is rebuilt once it is closed: once the newest 10 s
 * window's end (never past the clock) is this many seconds past its own:
 * FC_STORE_CLOSE_GRACE_S for profiles that arrive late, and up to half the
 * window more (at most an hour) by its base, so that the windows of many
 * pods, which end together, close over that time and not all at one
 * flush. A base's grace never shrinks from a level to the next, so a
 * window closes no sooner than its children. Until it closes each flush
 * only marks it dirty and readers take its children, so a pod's six
 * coarse windows are each built once, not at every flush that wrote one of
 * its profiles (issue 14: that was 76-86 % of the CPU of ingest at the
 * SDKs' rate).
 */
#define FC_STORE_CLOSE_GRACE_S 60
int64_t fc_store_close_grace(uint32_t base, int level);
/* After the flush's commit (the caller holds the lock): empties the windows and the log. */
void fc_store_open_clear(struct fc_store *s);
/* The first open window of (tenant, base) and the next ones (callers hold the lock). */
const struct open_window *fc_store_open_first(struct fc_store *s, const char *tenant,
                                              uint32_t base);
const struct open_window *fc_store_open_next(struct fc_store *s, const struct open_window *ow);
/* The first open span entry of (tenant, span), then fc_store_open_next (callers hold the lock). */
const struct open_window *fc_store_open_first_span(struct fc_store *s, const char *tenant,
                                                   uint64_t span);

/* ---- service aggregates (store_service.c) ------------------------------------------------- */

/*
 * Per (tenant, service_name value) an aggregate: a pseudo base whose windows
 * hold, per profile type, the merge of every series with that service_name
 * outside the service's first base (one pseudo series per type); a
 * whole-service query reads it and the first base's series of the type.
 * Written with the series in the same transaction; retention, compaction,
 * trim and flush treat it as any base.
 * Its ids live in `base` and `series` under keys no label set makes (they
 * start with a 0 byte) and it has no sid, sbase or label index entries, so
 * nothing that lists series or labels sees it.
 */
#define FC_STORE_SERVICE_LABEL "service_name"

/*
 * Where a series of (service, type) in base goes: the first base written
 * with a series of the service keeps its series where they are (listed for
 * the service, made once); any other base's series go to the aggregate too
 * (*to_agg, its ids made when new). A service of one pod costs nothing.
 */
/* The first base of (tenant, service) (meta 'f'), when it has one. */
bool fc_store_service_first_base(struct fc_store *s, MDB_txn *txn, const char *tenant,
                                 const char *service, size_t service_len, uint32_t *base);
int fc_store_service_route(struct writer *w, const char *service, const char *type, uint32_t base,
                           uint32_t series, bool *to_agg, uint32_t *agg_base, uint32_t *agg_series);
/*
 * Builds every service's aggregate from the series' windows of a store
 * written before them (format 4), in txn: 10 s windows (and 100 s windows
 * whose 10 s windows were compacted) merged, coarser ones marked dirty.
 */
int fc_store_service_build(struct fc_store *s, MDB_txn *txn, struct fc_error *err);

/* ---- the id cache (store_ids.c) ----------------------------------------------------------- */

void fc_store_ids_init(struct id_cache *c, int64_t max_bytes);
void fc_store_ids_release(struct id_cache *c);
/* The id under key k of database db, when the cache has it (then no LMDB lookup is needed). */
bool fc_store_ids_get(struct fc_store *s, int db, const struct key *k, uint32_t *id);
/* Notes that key k of db holds id in the write transaction under way. */
void fc_store_ids_note(struct fc_store *s, int db, const struct key *k, uint32_t id);
/* After the write transaction: its notes into the cache when it committed, else dropped. */
void fc_store_ids_publish(struct fc_store *s, bool committed);
/* Empties the cache (ids were deleted: store_forget.c); it refills from LMDB. */
void fc_store_ids_clear(struct id_cache *c);

/* Puts key k with data into database db of the write transaction. */
int fc_store_put_empty(struct writer *w, int db, struct key *k, const void *data, size_t n);

/*
 * The symbol ids of sample s's frames, root first: (*path)[0..*depth),
 * valid until the next call.
 */
int fc_store_sample_path(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_sample *s, const uint32_t **path, uint32_t *depth);

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

/* Indexes a group's samples by span: one tree per (span, series, 10 s window). */
int fc_store_write_spans(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_profile *p, const struct group *g, uint32_t t,
                         int64_t scale, uint32_t series, int64_t window);

/* ---- packed windows, continued ----------------------------------------------------------- */

/*
 * A coarse window (level 2 and up) whose only stored child is one window
 * holds a link to it instead of a copy: le32 0xffffffff (never a header
 * length) then be64(the child's start); the child is one level finer, same
 * tenant and base. fc_store_node_get follows links; retention marks every
 * window above a deleted one dirty, so a link never outlives its child
 * unread (a dirty window is read through its children, then rebuilt).
 */
#define FC_STORE_LINK_LEN 12
/*
 * Format 16: a coarse window (level 2 and up) with at most FC_STORE_SUM_MAX
 * stored children, and no link (one child that is not a sum itself), holds
 * a sum: le32 0xfffffffe (FC_STORE_SUM_LEN bytes; never a header length, a
 * link or a marker) instead of their merge. Readers read its children, as
 * they read a dirty window's: at most two windows where the merge, about
 * the size of either, would be one. A pod of one profile every 14 minutes
 * had a third copy of two profiles in most of its 1000 s windows, each a
 * whole overflow page or two (docs/internals/store.md, Links and sums).
 * Links never point to a sum (fc_store_node_get refuses one).
 */
#define FC_STORE_SUM_LEN 4
#define FC_STORE_SUM_MAX 2
/*
 * Postings (`post`, store_write.c posting_add): under (name, value) chunks
 * of increasing series ids, each keyed by its first id.
 *  - format 15: key ... be32(first id) u8 FC_STORE_POSTING_DELTAS; value:
 *    the later ids as uvarint differences from the one before (each >= 1),
 *    at most FC_STORE_POSTING_IDS ids in all;
 *  - format 8: key ... be32(first id); value: be32 of every id, the first
 *    included, at most 64 (FC_STORE_POSTING_IDS bounds what is read);
 *  - format 7: key ... be32(id); value empty.
 */
#define FC_STORE_POSTING_DELTAS 1
#define FC_STORE_POSTING_IDS 256
/*
 * The ids of posting entry (kv, v), whose (tenant, name, value) part is
 * prefix_len bytes, into ids[FC_STORE_POSTING_IDS]; false when it is no
 * posting of any format or does not decode (ids not increasing, too many).
 */
bool fc_store_posting_ids(const MDB_val *kv, size_t prefix_len, const MDB_val *v, uint32_t *ids,
                          size_t *n);
void fc_store_link_encode(int64_t child_start, uint8_t out[FC_STORE_LINK_LEN]);
/* Whether v is a link, and to which child start. */
bool fc_store_link_of(const MDB_val *v, int64_t *child_start);
void fc_store_sum_encode(uint8_t out[FC_STORE_SUM_LEN]);
/* Whether v is a sum: the window is read through its children. */
bool fc_store_sum_of(const MDB_val *v);
/*
 * The stored value of window (tenant, base, level, start), links followed
 * down to the packed value they stand for, or the window's own sum
 * (fc_store_sum_of: the caller reads its children): 0, or MDB_NOTFOUND.
 */
int fc_store_node_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                      int level, int64_t start, MDB_val *v);

/* The header of a packed value: entries without decompressing the frame. */
struct packed {
    uint32_t n;
    uint32_t *series;
    int64_t *totals;
    uint64_t *raw_lens;   /* columns: 3 a tree (names, selfs, counts); else 1 a tree */
    const uint8_t *frame; /* the zstd frame; bundled: the slice's two varints */
    size_t frame_len;
    bool columns; /* the trees are in columns (format 7), else interleaved */
    bool bundled; /* a 10 s window whose trees are a slice of its span's bundle (format 9) */
    bool scaled;  /* the selfs columns start with their scale (format 12) */
    uint64_t slice_off, slice_len;
};

/* The tree of series in ps, added empty when new. */
struct fc_tree *fc_store_part_of(struct parts *ps, uint32_t series);
void fc_store_parts_release(struct parts *ps);
/* Parses the header of a packed value; false when corrupt. */
bool fc_store_packed_parse(const uint8_t *data, size_t len, struct packed *p);
void fc_store_packed_release(struct packed *p);
/*
 * Decodes the trees of a packed value whose series `want` accepts (NULL =
 * all) into ps. Returns false when the value is corrupt.
 */
bool fc_store_packed_decode(const uint8_t *data, size_t len,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps);
/* Appends the packed value of ps to out. */
int fc_store_packed_encode(const struct parts *ps, struct fc_buf *out);
/* Whether p holds a series want accepts (NULL: any). */
bool fc_store_packed_wanted(const struct packed *p, bool (*want)(void *ctx, uint32_t series),
                            void *ctx);
/* The trees of parsed value p from its content (raw, size bytes) that want accepts, into ps. */
bool fc_store_packed_decode_raw(const struct packed *p, const uint8_t *raw, size_t size,
                                bool (*want)(void *ctx, uint32_t series), void *ctx,
                                struct parts *ps);
/*
 * Appends the value a bundled window's entry (parsed as p) stands for on its
 * own: its header, not marked bundled, and its content (len bytes) compressed.
 */
int fc_store_packed_whole(const uint8_t *entry, const struct packed *p, const uint8_t *content,
                          size_t len, struct fc_buf *out);
/*
 * Appends the bundled form of value data (parsed as p): its header, marked
 * bundled, and the slice [off, off + len) of its span's bundle.
 */
int fc_store_packed_entry(const uint8_t *data, const struct packed *p, uint64_t off, uint64_t len,
                          struct fc_buf *out);

/* ---- bundles: the 10 s windows of a 100 s span in one frame (store_bundle.c) -------------- */

/* A bundle's slots: the span's ten 10 s windows, then its 100 s window. */
#define FC_STORE_BUNDLE_SLOTS 11
#define FC_STORE_PARENT_SLOT 10
/*
 * The node value of a bundled window (its entry is in its span's bundle):
 * le32 FC_STORE_BUNDLED_MARKER, u8 slot, be64 span start.
 */
#define FC_STORE_BUNDLED_MARKER 0x20000000u
#define FC_STORE_MARKER_LEN 13
/*
 * Packs (format 17, store_bundle.c): the closed windows of this level of
 * one base in one window of the next level (a 10^5 s span), compressed
 * together as a bundle is, without a dictionary (they outlive its day),
 * under bundle key span start + 1 (never a 100 s span's); their markers
 * name slot (start - span) / 10^4 and that key's span.
 */
#define FC_STORE_PACK_LEVEL 3
/*
 * Format 14: the top bit of a bundle's index length says its contents were
 * compressed with a dictionary; be64(h64 of the base's service_name) then
 * follows the index frame. A dictionary is at most FC_STORE_DICT_MAX bytes.
 */
#define FC_STORE_BUNDLE_DICT 0x80000000u
#define FC_STORE_DICT_MAX (64u * 1024u)
#define FC_STORE_DAY_SECS 86400

/* The last bundle a reader loaded (a span's 10 s windows are read together). */
struct bundle_cache {
    char *tenant; /* owned; NULL: nothing loaded */
    uint32_t base;
    int64_t span;
    uint8_t *index; /* owned: decompressed (NULL: the bundle is missing or corrupt) */
    size_t index_len;
    uint32_t at[FC_STORE_BUNDLE_SLOTS], len[FC_STORE_BUNDLE_SLOTS]; /* each slot's entry */
    /* The contents' frame: in the bundle's value, valid for the transaction until its next put. */
    const uint8_t *frame;
    size_t frame_len;
    /*
     * Format 14: the contents were compressed with their service's
     * dictionary of the day (dict_service) as a zstd prefix; dict_frame is
     * that dictionary's stored zstd frame, borrowed from LMDB as frame is
     * (NULL: not found, so the contents do not decode).
     */
    bool dict;
    uint64_t dict_service;
    const uint8_t *dict_frame;
    size_t dict_frame_len;
    uint8_t *raw; /* owned: the contents, or their first size bytes, once decompressed */
    size_t size;
    bool whole; /* raw holds all of them */
};
void fc_store_bundle_cache_release(struct bundle_cache *c);
/*
 * Bundles a reader keeps loaded, by (base, span) (direct-mapped): a
 * series-by-series timeline loads the same bundles once per series.
 */
struct bundle_caches {
    struct bundle_cache *v; /* n of them; NULL: allocated on first use (owned) */
    size_t n;
    struct bundle_cache *contents; /* the one of v whose contents are kept decompressed */
    /*
     * A reader's caches count what they hold (held) in owner's
     * bundle_cache_bytes, and empty themselves past its cap; NULL: not counted.
     */
    struct fc_store *owner;
    int64_t held;
};
/* Releases every bundle of caches and v itself (a reader's, at its end). */
void fc_store_bundle_caches_release(struct bundle_caches *caches);
/* A reader's: a day of 100 s spans of one base (index only: about 1-3 KB each). */
#define FC_STORE_READER_BUNDLES 1024
/* Parses a bundle value (len bytes, which c then points into); false when corrupt. */
bool fc_store_bundle_set(struct bundle_cache *c, const uint8_t *value, size_t len);
/* Decodes the trees want accepts (NULL: all) of slot's window in c into ps; false when corrupt. */
bool fc_store_bundle_slot_decode(struct bundle_cache *c, int slot,
                                 bool (*want)(void *ctx, uint32_t series), void *ctx,
                                 struct parts *ps);
/*
 * A 10 s or 100 s window at start went into LMDB whole: the next
 * fc_store_bundle_before looks at its span.
 */
void fc_store_bundle_again(struct fc_store *s, int64_t start);
/*
 * Compaction, before it deletes the 10 s windows of the spans ending by
 * cutoff_s: each of their bundles is rewritten with the span's 100 s window
 * alone, which compaction keeps (or goes, when it does not hold that
 * window). Spans ending by from_s (the previous cutoff; 0 or less: none)
 * were done by an earlier pass and are skipped a base at a time: the
 * bundles of the compacted past are not read again at every pass (found by
 * review: 2.5 M lone bundles at 100 pods, about 4 s a pass). It starts at
 * *at (n 0: the first key) and, past until_ns (monotonic), stops between
 * transactions with FC_EAGAIN and *at where the next call goes on.
 */
int fc_store_bundle_compact(struct fc_store *s, int64_t from_s, int64_t cutoff_s, int64_t until_ns,
                            struct resume_key *at, struct fc_error *err);
/* Whether v is a bundled window's marker. */
bool fc_store_bundled_marker(const MDB_val *v);
/*
 * False when v, stored at window (level, start), is a marker that names
 * another window (another slot or span, or a level bundles never hold):
 * damage that would answer with a neighbour's data. True for any other value.
 */
bool fc_store_marker_fits(const MDB_val *v, int level, int64_t start);
/*
 * Parses the header of a window of (tenant, base) whose stored value is v:
 * the value itself, or a bundled window's entry in its span's bundle,
 * loaded into one of caches (p points into it: valid until that cache loads
 * another bundle).
 * A cache is valid for one read transaction, or in a write transaction until
 * its next put. False when corrupt.
 */
bool fc_store_window_parse(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                           const MDB_val *v, struct bundle_caches *caches, struct packed *p);
/*
 * Decodes the trees want accepts (NULL: all) of a window of (tenant, base)
 * whose stored value is v (fc_store_node_get's): from its own frame, or for
 * a bundled window from its span's bundle (through caches, when not NULL).
 * False when the value or its bundle is corrupt.
 */
bool fc_store_window_decode(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                            const MDB_val *v, struct bundle_caches *caches,
                            bool (*want)(void *ctx, uint32_t series), void *ctx, struct parts *ps);

/* ---- a series' labels and base (store_series.c) -------------------------------------------- */

/*
 * A series' labels as stored: own (canonical: name 0x01 value 0x02 ...,
 * sorted by name) and, for a series of format 10, its base's labels, which
 * own then lacks. Both point into LMDB: valid for the transaction.
 */
struct series_labels {
    const char *own;
    size_t own_len;
    const char *base; /* NULL: own holds them all (made before format 10) */
    size_t base_len;
    const char *type; /* __profile_type__'s value, when typed (interned: format 11) */
    size_t type_len;
    uint32_t base_id; /* when split */
    bool split;
    bool typed;
};
/*
 * Format 18: a split series' `sid` entry is kept with those of the other
 * ids of its bucket of FC_STORE_SID_SLOTS (id / 64): key tenant 0
 * be32(bucket) u8 FC_STORE_SID_BUCKET (a byte longer than an older
 * series' own key, be32(id)); value: be32 of the low 32 bits of xxh3 of
 * what follows (one damaged byte would otherwise give up to 64 series
 * another pod's base), then for each series of the bucket in
 * increasing slot (id % 64) order: u8 (slot << 1 | 1 when its base is the
 * entry before's), uvarint base id unless that bit is set, uvarint symbol
 * id of its own part (`symid`: what a format 11 split value holds after
 * its 5-byte head, the interned type first).
 */
#define FC_STORE_SID_BUCKET 1
#define FC_STORE_SID_SLOTS 64
#define FC_STORE_SID_CHECK 4
struct sid_entry {
    uint32_t slot, base, own;
};
/*
 * The last bucket a reader decoded (series ids are read in increasing
 * order, a pod's mostly consecutive): a query over 240,000 series decoded
 * each bucket once per series, 1.5x the time format 17 took
 * (docs/internals/store.md). Valid for one transaction that writes no sid.
 */
struct sid_cache {
    int state; /* 0 nothing loaded, 1 loaded (n may be 0: no bucket), 2 damaged */
    uint32_t bucket;
    size_t n;
    struct sid_entry e[FC_STORE_SID_SLOTS];
};
void fc_store_sid_bucket_key(struct key *k, const char *tenant, uint32_t id);
/* A bucket's entries into out[FC_STORE_SID_SLOTS]; false when it is damaged (or its check fails).
 */
bool fc_store_sid_bucket_decode(const MDB_val *v, struct sid_entry *out, size_t *n);
/* Entries (slots increasing) appended to out as a bucket value. */
void fc_store_sid_bucket_encode(const struct sid_entry *e, size_t n, struct fc_buf *out);
/*
 * Series id's labels; false when it is missing or damaged (counted as
 * corrupt). cache: NULL, or the reader's (struct sid_cache).
 */
bool fc_store_sid_get(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id,
                      struct sid_cache *cache, struct series_labels *out);
/*
 * A split `sid` value (0x00 first) into out's own part and base id, and the
 * symbol id of its interned type (out->typed); out->base and out->type are
 * left for the caller. False when it is not split or is damaged.
 */
bool fc_store_sid_parse(const void *value, size_t len, struct series_labels *out, uint32_t *type);
/*
 * A series' own part's `sym` value (format 18): u32 symbol id, u32 the
 * series that name it (host order, as the id). A frame's is the id alone.
 */
#define FC_STORE_OWN_SYM_LEN 8
/*
 * One series fewer names own part symbol own: the symbol (`sym` and
 * `symid`) goes with its last. A symbol of 4 bytes is kept. 0 or LMDB's error.
 */
int fc_store_own_symbol_release(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t own);
/*
 * Deletes series id's labels: its bucket's entry (the bucket goes with its
 * last, its own part's symbol with the last series naming it) and a key of
 * its own. 0 or LMDB's error; a damaged bucket is left.
 */
int fc_store_sid_delete(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id);
/* The base series id is packed under (from `sid`, or `sbase` before format 10). */
bool fc_store_series_base(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t id,
                          struct sid_cache *cache, uint32_t *base);
/* The value of label name in canonical labels (pointing into them); false when absent. */
bool fc_store_canon_value(const char *canon, size_t len, const char *name, const char **value,
                          size_t *value_len);
/* The value of label name of a series (pointing into LMDB); false when it has none. */
bool fc_store_series_value(const struct series_labels *l, const char *name, const char **value,
                           size_t *value_len);
/* The value of label name of a series, copied into buf (truncated to size), or "". */
const char *fc_store_series_label(const struct series_labels *l, const char *name, char *buf,
                                  size_t size);
/* Whether a name of own is also a name of base (then own's would shadow base's). */
bool fc_store_series_shadowed(const struct series_labels *l);
/* Appends all of a series' labels, canonical, to out. */
void fc_store_series_canonical(const struct series_labels *l, struct fc_buf *out);
/*
 * The split `sid` value, appended to out: 0x00 be32(base_id), then the
 * labels of series (canonical) that base (canonical) lacks; with type (a
 * symbol id of __profile_type__'s value, format 11) that label is the
 * symbol's id instead, first, under an empty name.
 */
void fc_store_series_split(const struct fc_buf *base, const struct fc_buf *series, uint32_t base_id,
                           const uint32_t *type, struct fc_buf *out);

/* ---- the read path (store_read.c, store_spans.c) ------------------------------------------ */

struct reader {
    struct fc_store *s;
    MDB_txn *txn;
    const char *tenant;
    struct fc_error *err;
    struct bundle_caches bundles; /* FC_STORE_READER_BUNDLES, allocated on first use */
    struct sid_cache sids;
};

struct idset {
    uint32_t *v;
    size_t n;
    size_t cap;
};

/* The matched series of one base: what a packed window is read for. */
struct base_group {
    uint32_t base;
    const uint32_t *sids; /* sorted */
    size_t n;
};

/* What answers a whole-service query: two groups (n = 0: none). */
struct fc_store_service {
    struct base_group first; /* the first base's series of the service and type */
    struct base_group agg;   /* the aggregate's series of the type */
    uint32_t *first_sids;    /* owned */
    uint32_t agg_series;
};

/*
 * Whether query q selects a whole service (its profile type and one non-empty
 * service_name equality, nothing else, no spans) that has series: then out
 * holds the groups whose merge is exactly that of all its series
 * (fc_store_service_release).
 */
bool fc_store_service_of(struct reader *r, const struct fc_store_query *q,
                         struct fc_store_service *out);
void fc_store_service_release(struct fc_store_service *sv);

/* Merges the span entries of one span id, for matched series (sorted ids) within the range. */
void fc_store_merge_span(struct reader *r, const uint8_t span[8], const struct idset *ids,
                         int64_t from_s, int64_t until_s, struct fc_tree *out, uint32_t *merged);

/* The span ids of the query: given ones, plus every span recorded for its traces. */
void fc_store_query_spans(struct reader *r, const struct fc_store_query *q, uint8_t (**out)[8],
                          size_t *n);

#endif
