/*
 * The profile store: per tenant and per series (label set including
 * __name__ and __profile_type__), a segment tree over time. Level 0 holds one
 * merged stack tree per 10 s window, level k one per 10^k * 10 s window;
 * a profile is merged into its window at every level, so a query for
 * [from, until) takes the fewest whole windows that cover it (at most 9 per
 * edge per level). Each window's total is an uncompressed prefix of its
 * value, so timelines read no trees. One write transaction merges the
 * windows it touches in memory first and writes each once. LMDB is the
 * engine: one writer, readers that never block it.
 *
 * Keys (big-endian numbers; h64 = xxh3 of a name or value, since LMDB keys
 * are at most 511 bytes):
 *   sym    tenant 0 h128(symbol)               -> u32 symbol id
 *   symid  tenant 0 be32(id)                   -> symbol: a frame record or a name (frame.h)
 *   series tenant 0 be32(base) -> (be64 h64(labels) be32 id)... (format 13; keys
 *          of their own past 256, and h128(labels) -> id before: store_write.c)
 *   sid    tenant 0 be32(id / 64) 1            -> the bucket's series: slot, base, symbol of
 *          their own labels (format 18, store_int.h); tenant 0 be32(id) -> labels before
 *   ln     tenant 0 h64(name)                  -> name
 *   lv     tenant 0 h64(name) h64(value)       -> value
 *   post   tenant 0 h64(name) h64(value) be32(first id) -> be32 ids (chunks of up to 64)
 *   node   tenant 0 be32(base) u8(level) be64(window start, s)
 *                                              -> le64 total, zstd tree
 *   span   tenant 0 be64(span id) be32(series) be64(10 s window) -> le64 total, zstd tree
 *   trace  tenant 0 trace id (16 bytes) be64(span id) -> le64 latest 10 s window ("" before)
 *   meta   tenant 0 "sym" | "series"           -> next id
 * Canonical labels: name 0x01 value 0x02 ..., sorted by name.
 */
#ifndef FC_STORAGE_STORE_H
#define FC_STORAGE_STORE_H

#include "core/batch.h"
#include "core/err.h"
#include "storage/frame.h"
#include "storage/selector.h"
#include "storage/tree.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_STORE_LEVELS 7 /* 10 s ... 10^7 s (115 days) windows */

enum fc_store_sync { FC_SYNC_BATCH, FC_SYNC_ALWAYS, FC_SYNC_NONE };

struct fc_store_options {
    const char *path; /* a directory, created when missing */
    enum fc_store_sync sync;
    /*
     * Bytes of pages in use past which writes are refused (FC_EUNAVAIL,
     * retryable) until retention frees space; 0 = none (a 64 GiB map). The
     * map itself is larger (fc_store_headroom) so that one write group may
     * overshoot and deletes, which need pages too, always find them.
     */
    int64_t max_size;
    /*
     * Bytes the open windows (written since the last flush, kept merged in
     * memory beside the write-ahead log) may hold before a write flushes them
     * early; 0 = FC_STORE_OPEN_MAX_BYTES.
     */
    int64_t open_max_bytes;
    /* How often writes flush (fc_store_flush); 0 = FC_STORE_FLUSH_NS. */
    int64_t flush_interval_ns;
    /*
     * Bytes of the id cache (symbols, bases, series a write finds without an
     * LMDB lookup); 0 = FC_STORE_ID_CACHE_BYTES, < 0 = none.
     */
    int64_t id_cache_max_bytes;
    /*
     * Bytes of bundles (their indexes and decompressed contents) that reads
     * keep loaded, all reads together; past it a read empties its own before
     * it loads more. 0 = FC_STORE_BUNDLE_CACHE_BYTES, < 0 = none (a read
     * keeps only the bundle it is reading).
     */
    int64_t bundle_cache_max_bytes;
    /*
     * Bytes of coarse windows one flush rebuilds (what it puts, plus a page
     * each: about the LMDB pages its transaction holds in memory until the
     * commit); the closed windows past it wait for the next flush, and
     * readers take their children meanwhile (fc_store_flush_before flushes
     * until none waits). Windows in the compacted past, which the open
     * 100 s windows go into, ignore it. 0 = FC_STORE_REBUILD_BYTES, < 0 =
     * no limit.
     */
    int64_t rebuild_max_bytes;
    /*
     * Time one flush spends rebuilding coarse windows, checked after each
     * (at least one is built), with the same effect as rebuild_max_bytes:
     * the rest wait, so that a flush holds the writer (and the writes
     * queued behind it) about this long at most. <= 0 = no limit (the
     * exporter's rebuild_max_time sets it).
     */
    int64_t rebuild_max_ns;
};

#define FC_STORE_ID_CACHE_BYTES (4LL << 20)
#define FC_STORE_BUNDLE_CACHE_BYTES (16LL << 20)

#define FC_STORE_OPEN_MAX_BYTES (16LL << 20)
#define FC_STORE_REBUILD_BYTES (8LL << 20)

/* The map beyond max_size: a quarter of it, at least 64 MiB, at most 4 GiB. */
int64_t fc_store_headroom(int64_t max_size);

/* Why writes were refused, counted per store. */
enum fc_store_failure {
    FC_STORE_FULL,     /* max_size reached (or the map full) */
    FC_STORE_NO_SPACE, /* the disk is full (ENOSPC, EDQUOT) */
    FC_STORE_IO,       /* any other error of the database */
    FC_STORE_FAILURE_KINDS
};

struct fc_store;

/*
 * Opens (creating) the store in o->path. One process per directory: an
 * exclusive flock() on path/flamecol.lock (holding the owner's pid) is
 * taken first, and a second open fails naming the directory and that pid.
 * The lock goes with the process, kill -9 included.
 */
int fc_store_open(const struct fc_store_options *o, struct fc_store **out, struct fc_error *err);
void fc_store_close(struct fc_store *s);
/*
 * Writes the open windows (what writes since the last flush logged and kept
 * in memory) into LMDB and rebuilds every dirty window (coarser than 10 s)
 * that is closed (its end a minute or more behind the newest profile's) from its
 * finer windows, in one transaction, then empties the log.
 * fc_store_write does it every FC_STORE_FLUSH_NS or when the open windows
 * pass open_max_bytes, retention and fc_store_close before they act;
 * queries are exact either way (they add the open windows, and read a dirty
 * window's children).
 */
#define FC_STORE_FLUSH_NS 2000000000LL
int fc_store_flush(struct fc_store *s, struct fc_error *err);
/*
 * fc_store_flush, and every dirty window that ends at or before before_s
 * rebuilt too (INT64_MIN: none more), in as many flushes as it takes for
 * none to wait (rebuild_max_bytes): retention, which measures and deletes
 * what is built, calls it.
 */
int fc_store_flush_before(struct fc_store *s, int64_t before_s, struct fc_error *err);
/*
 * The same, but past until_ns (monotonic) it stops between flushes and
 * answers FC_EAGAIN while rebuilds still wait (retention, in slices).
 */
int fc_store_flush_until(struct fc_store *s, int64_t before_s, int64_t until_ns,
                         struct fc_error *err);
/*
 * Rebuilds the closed windows earlier flushes left waiting
 * (fc_store_rebuilds_deferred), within the flush's budgets and until
 * until_ns (monotonic), in one transaction that leaves the open windows
 * open: the writer calls it between write groups, so that windows closing
 * together are built within a few slices instead of a flush_interval
 * each. FC_EAGAIN: some still wait.
 */
int fc_store_rebuild_deferred(struct fc_store *s, int64_t until_ns, struct fc_error *err);
/* Nanoseconds until a flush is due (<= 0: now), or -1 when nothing was written since the last. */
int64_t fc_store_flush_in(struct fc_store *s);

/*
 * Writes every profile of every batch in one transaction; when it returns
 * FC_OK the data is durable as the sync option says (sync none: the OS
 * decides). Profiles without a time are stored at now. A full store
 * (max_size) or a full disk gives FC_EUNAVAIL and leaves the database as it
 * was: retryable once retention (or the operator) frees space.
 */
int fc_store_write(struct fc_store *s, struct fc_batch *const *batches, size_t n,
                   struct fc_error *err);

struct fc_store_query {
    const char *tenant;
    const struct fc_selector *selector; /* its profile_type is required */
    int64_t from_ns;
    int64_t until_ns;
    bool level0_only; /* benchmarks: merge every 10 s window, as if there were no tree */
    /*
     * When either is set, only the samples of these spans (or of every span of
     * these traces) are merged, from the span index.
     */
    const uint64_t *span_ids;
    size_t n_span_ids;
    const uint8_t (*trace_ids)[16];
    size_t n_trace_ids;
    /* How the flame graph (fc_store_result.tree) tells frames apart; 0: by function name. */
    enum fc_frame_granularity granularity;
};

struct fc_store_stats {
    uint32_t series;       /* series the selector matched (1: a service's aggregate) */
    uint32_t nodes_merged; /* stack trees read and merged */
};

/*
 * The merged selection, twice:
 *   - tree/names: the flame graph, nodes told apart by their display name
 *     (fc_frame_display at the query's granularity; siblings with the same
 *     name merged);
 *   - frames_tree/node_frame/frames: full detail, one node per frame record
 *     (function, file, line, inlining, mapping and address), for pprof and
 *     per-line answers.
 * Everything is owned by the result (fc_store_result_release).
 */
struct fc_store_result {
    struct fc_tree tree;
    char **names; /* per tree node (names[0] = "total"); point into name_bytes */
    struct fc_tree frames_tree;
    uint32_t *node_frame;    /* per frames_tree node: its frame in frames (0 for the root) */
    struct fc_frame *frames; /* n_frames distinct frames ([0] unused); strings in frame_bytes */
    uint32_t n_frames;
    uint8_t *frame_bytes;
    char *name_bytes;
};

int fc_store_select_merge(struct fc_store *s, const struct fc_store_query *q,
                          struct fc_store_result *out, struct fc_store_stats *stats,
                          struct fc_error *err);
void fc_store_result_release(struct fc_store_result *r);

/* Totals per step (from window totals, no tree decoding); buckets[n] zeroed first. */
int fc_store_timeline(struct fc_store *s, const struct fc_store_query *q, int64_t step_ns,
                      int64_t *buckets, size_t n, struct fc_error *err);

/*
 * The label sets (canonical form: name 0x01 value 0x02 ...) of the series
 * matching any of the selectors (a selector may lack a profile type here)
 * with data in [from_ns, until_ns) (until_ns <= 0: any time).
 */
int fc_store_series_labels(struct fc_store *s, const char *tenant,
                           const struct fc_selector *selectors, size_t n_selectors, int64_t from_ns,
                           int64_t until_ns, char ***out, size_t *n, struct fc_error *err);

/* One time series of SelectSeries: the group's label values and a total per step. */
struct fc_store_timeseries {
    char *labels;     /* canonical form of the group_by labels */
    int64_t *buckets; /* n_buckets totals */
};

/* Totals per step for the matching series, summed per group_by label values. */
int fc_store_select_series(struct fc_store *s, const struct fc_store_query *q, int64_t step_ns,
                           size_t n_buckets, const char *const *group_by, size_t n_group_by,
                           struct fc_store_timeseries **out, size_t *n, struct fc_error *err);
void fc_store_timeseries_free(struct fc_store_timeseries *v, size_t n);

/* Label names, or values of one name, of a tenant (sorted, unique). Strings are owned. */
int fc_store_label_names(struct fc_store *s, const char *tenant, char ***out, size_t *n,
                         struct fc_error *err);
int fc_store_label_values(struct fc_store *s, const char *tenant, const char *name, char ***out,
                          size_t *n, struct fc_error *err);
void fc_store_strings_free(char **v, size_t n);

/*
 * Retention: deletes every window (any level, any tenant) that ends before
 * cutoff_s, span entries of 10 s windows before it and trace entries whose
 * span's latest window is before it; coarser windows above
 * a deleted one that end after it are marked dirty (rebuilt without it by the
 * next flush). Freed pages are reused by later writes. *deleted: the
 * windows and span entries this call deleted.
 *
 * With budget_ns > 0 it stops after about that long, between two of its
 * transactions, and answers FC_EAGAIN: the next call goes on where it
 * stopped, to the cutoff it began with (the one passed is then ignored), so
 * that its owner can commit writes in between. One caller at a time (the
 * writer); 0: the whole pass at once.
 */
int fc_store_delete_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                           uint64_t *deleted, struct fc_error *err);
/*
 * Compaction: deletes the 10 s windows that end before cutoff_s (rounded
 * down to 100 s); queries then read that past from 100 s windows, ranges
 * rounded out to them. Remembered in the database across restarts. The
 * budget as for fc_store_delete_before: the cutoff moves once the pass's
 * first flush is done (which may take more than one call), and writes
 * between its calls from then on go into the 100 s windows. A pass cut
 * short after that (a shutdown) is redone from its start by the next.
 */
int fc_store_compact_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                            uint64_t *deleted, struct fc_error *err);
/*
 * Bundling: for each base, every 100 s span that ended by cutoff_s (rounded
 * down to 100 s) has its 10 s windows and its 100 s window compressed
 * together (store_bundle.c); answers are unchanged, the bytes are fewer.
 * Spans already bundled are skipped; the first call after an open looks at
 * every span since the compaction cutoff. With budget_ns > 0 it stops after
 * about that long and answers FC_EAGAIN: the next call goes on where it
 * stopped (one caller at a time). *bundled: the windows bundled.
 */
int fc_store_bundle_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                           uint64_t *bundled, struct fc_error *err);
/*
 * Retention by size: past `high` bytes in use, deletes the oldest windows,
 * a 64th of the 10 s and 100 s windows at a time, until at most `low` bytes
 * are in use. Future-dated windows go last, but they go: a store full of
 * them would otherwise refuse every write.
 */
int fc_store_trim(struct fc_store *s, int64_t high, int64_t low, uint64_t *deleted,
                  struct fc_error *err);
/*
 * Forgets the pods retention emptied (storage/store_forget.c): a base with
 * no window left (after a flush, which rebuilds what retention marked) has
 * its series, their label index entries and its ids deleted, so label
 * values and series lists stop showing it. A service's first pod is kept,
 * and so is every pod of a store with series made before format 13. With
 * budget_ns > 0 it stops after about that long and answers FC_EAGAIN: the
 * next call goes on where it stopped (one caller at a time, the writer).
 * *bases, *series: what this call forgot.
 */
int fc_store_forget_empty(struct fc_store *s, int64_t budget_ns, uint64_t *bases, uint64_t *series,
                          struct fc_error *err);
/*
 * The start of the oldest 10 s or 100 s window stored or open (any tenant),
 * or INT64_MAX when empty.
 */
int64_t fc_store_oldest(struct fc_store *s);
/* Bytes of database pages in use (the file's pages minus the free list). */
int64_t fc_store_used_bytes(struct fc_store *s);
/* Whether writes are refused now: pages in use (as of the last commit) reached max_size. */
bool fc_store_full(struct fc_store *s);
/* Writes refused so far for that reason. */
uint64_t fc_store_failures(struct fc_store *s, enum fc_store_failure kind);

/* Data before this (unix s) is kept at 100 s resolution (fine_retention); 0 = none. */
int64_t fc_store_coarse_before(struct fc_store *s);
/* Windows skipped by queries because their tree did not decode (logged once). */
uint64_t fc_store_corrupt_windows(struct fc_store *s);
/* What the open windows hold in memory, and their cap (open_max_bytes). */
int64_t fc_store_open_bytes(struct fc_store *s);
int64_t fc_store_open_max_bytes(struct fc_store *s);
/*
 * The id cache: its table's bytes, its cap; lookups it answered and missed,
 * and how many times it was full at its cap and emptied.
 */
int64_t fc_store_id_cache_bytes(struct fc_store *s);
int64_t fc_store_id_cache_max_bytes(struct fc_store *s);
/* What reads' bundle caches hold now, and their cap (bundle_cache_max_bytes). */
int64_t fc_store_bundle_cache_bytes(struct fc_store *s);
int64_t fc_store_bundle_cache_max_bytes(struct fc_store *s);
void fc_store_id_cache_lookups(struct fc_store *s, uint64_t *hits, uint64_t *misses,
                               uint64_t *emptied);
/*
 * Closed coarse windows the last flush left dirty for a later one
 * (rebuild_max_bytes), and that cap (0: none).
 */
int64_t fc_store_rebuilds_deferred(struct fc_store *s);
int64_t fc_store_rebuild_max_bytes(struct fc_store *s);
/* The most one flush has built since the open, counted as rebuild_max_bytes counts. */
int64_t fc_store_rebuild_peak_bytes(struct fc_store *s);
/* Bytes of the write-ahead log's records since the last flush (each flush starts it over). */
int64_t fc_store_log_bytes(struct fc_store *s);
/*
 * The log file's size: records, the zeros it grew by, and what a flush left
 * of the records before it (cut back to twice open_max_bytes, at least 4 MiB).
 */
int64_t fc_store_log_file_bytes(struct fc_store *s);
/* Damaged log records skipped at replay (a write cut short by a crash). */
uint64_t fc_store_log_damaged(struct fc_store *s);

/* Bytes the database file takes on disk. */
int64_t fc_store_disk_bytes(struct fc_store *s);

#endif
