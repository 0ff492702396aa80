/*
 * The flush: the open windows (store_open.c: what writes logged and kept in
 * memory since the last flush) are merged into their 10 s windows in LMDB,
 * and the six coarser windows above each are marked dirty (DB_DIRTY); then,
 * in the same transaction, each dirty window that is closed
 * (fc_store_close_grace: the newest profile a minute or more past its end)
 * is rebuilt from its ten children, finest level first (at most
 * rebuild_max_bytes of them a flush: the rest wait for the next). So a coarse window is
 * built about once, when it closes, instead of at every flush that wrote a
 * profile under it: with a profile a pod every 10 s and a flush every 2 s,
 * rebuilding the windows still open above each pod was 76-86 % of the
 * store's CPU (issue 14). Readers see a dirty window's children instead of
 * its stale tree (store_read.c).
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"

#include <errno.h>
#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Dirty keys are node keys: tenant 0 be32(base) u8(level) be64(window). */
static bool dirty_key_parts(const MDB_val *kv, uint32_t *base, int *level, int64_t *window)
{
    size_t tenant_len;

    return node_key_split(kv, &tenant_len, base, level, window) && *level > 0 &&
           *level < FC_STORE_LEVELS;
}

/*
 * Merges window (tenant, base, level, start) into ps, a sum through its
 * children (depth <= level); a window that does not decode is skipped and
 * counted, as a query skips it.
 */
static void merge_stored(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                         int level, int64_t start, struct bundle_caches *bundles, struct parts *ps)
{
    struct parts child = {0};
    MDB_val v;

    if (fc_store_node_get(s, txn, tenant, base, level, start, &v) != 0) {
        return;
    }
    if (fc_store_sum_of(&v)) { /* level >= 2: fc_store_node_get refuses others */
        for (int i = 0; i < 10; i++) {
            merge_stored(s, txn, tenant, base, level - 1,
                         start + i * fc_store_level_secs[level - 1], bundles, ps);
        }
        return;
    }
    if (!fc_store_window_decode(s, txn, tenant, base, &v, bundles, NULL, NULL, &child)) {
        atomic_fetch_add(&s->corrupt, 1);
    } else {
        for (uint32_t j = 0; j < child.n; j++) {
            fc_tree_merge(fc_store_part_of(ps, child.v[j].series), &child.v[j].tree);
        }
    }
    fc_store_parts_release(&child);
}

/*
 * Replaces window (tenant, base, level, start) by the merge of its ten
 * children, or (level 2 and up) by a link to its only child, or by a sum
 * of its two: a pod with one profile in a 1000 s window then stores its
 * tree twice (10 s, 100 s), not seven times, one with two stores each twice
 * and no merge of them, and no coarse rebuild of either decodes or
 * compresses anything. Level 1 never links: compaction deletes the 10 s
 * windows under it.
 */
static int rebuild(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base, int level,
                   int64_t start, int64_t *put, struct fc_error *err)
{
    int64_t step = fc_store_level_secs[level - 1], only = 0;
    struct parts ps = {0};
    struct key k;
    MDB_val kv, v;
    struct fc_buf enc;
    struct bundle_cache one = {0}; /* the span's 10 s windows share one bundle */
    struct bundle_caches bundles = {&one, 1};
    int rc = 0, present = 0;
    bool only_sum = false;

    for (int i = 0; i < 10; i++) {
        node_key(&k, tenant, base, level - 1, start + i * step);
        kv = val(k.b, k.n);
        if (mdb_get(txn, s->db[DB_NODE], &kv, &v) == 0) {
            present++;
            only = start + i * step;
            only_sum = fc_store_sum_of(&v);
        }
    }
    node_key(&k, tenant, base, level, start);
    kv = val(k.b, k.n);
    if (level >= 2 && present >= 1 && present <= FC_STORE_SUM_MAX) {
        /* A link to the only child, unless that is a sum (links never lead to one): a sum. */
        uint8_t mark[FC_STORE_LINK_LEN];
        if (present == 1 && !only_sum) {
            fc_store_link_encode(only, mark);
            v = val(mark, FC_STORE_LINK_LEN);
        } else {
            fc_store_sum_encode(mark);
            v = val(mark, FC_STORE_SUM_LEN);
        }
        *put += (int64_t)v.mv_size;
        rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
        return rc ? fc_store_lmdb_error(err, rc, "flush") : FC_OK;
    }
    for (int i = 0; present > 0 && i < 10; i++) {
        merge_stored(s, txn, tenant, base, level - 1, start + i * step, &bundles, &ps);
    }
    fc_store_bundle_cache_release(&one);
    if (ps.n == 0) {
        rc = mdb_del(txn, s->db[DB_NODE], &kv, NULL);
        rc = rc == MDB_NOTFOUND ? 0 : rc;
    } else {
        fc_buf_init(&enc, 0);
        if (fc_store_packed_encode(&ps, &enc) != FC_OK) {
            fc_buf_release(&enc);
            fc_store_parts_release(&ps);
            return fc_errorf(err, FC_EIO, "store: flush: cannot encode a window");
        }
        /* A packed 10^4 s window stored whole: its span gets packed again (format 17). */
        bool was_packed = level == FC_STORE_PACK_LEVEL &&
                          mdb_get(txn, s->db[DB_NODE], &kv, &v) == 0 && fc_store_bundled_marker(&v);
        v = val(enc.data, enc.len);
        *put += (int64_t)enc.len;
        rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
        fc_buf_release(&enc);
        if (level == 1 || was_packed) {
            fc_store_bundle_again(s, start); /* stored whole: its span gets bundled again */
        }
    }
    fc_store_parts_release(&ps);
    return rc ? fc_store_lmdb_error(err, rc, "flush") : FC_OK;
}

int64_t fc_store_close_grace(uint32_t base, int level)
{
    int64_t spread = fc_store_level_secs[level] / 2 < 3600 ? fc_store_level_secs[level] / 2 : 3600;
    uint64_t h16 = (uint32_t)(base * 2654435761u) >> 16; /* Knuth's multiplicative hash */

    return FC_STORE_CLOSE_GRACE_S + (int64_t)((h16 * (uint64_t)spread) >> 16);
}

/* The newest 10 s window's end, never past the clock; INT64_MIN: none. */
static int64_t newest_end(const struct fc_store *s)
{
    int64_t now_s = fc_now_ns() / 1000000000LL;

    return s->newest_s < now_s ? s->newest_s : now_s;
}

/*
 * Whether a dirty window is due whatever its grace: ending by before_s, or
 * a start far off the clock (a damaged key: rebuilt at once, as every dirty
 * window was before). A 100 s window with before_s at coarse_before (the
 * compacted past, whose 10 s windows are gone or about to go) is built
 * whatever the flush's budget too (flush()): the open 100 s windows merged
 * after level 1 go into it; the windows above it keep the budget.
 */
static bool due_whatever(int level, int64_t start, int64_t before_s)
{
    if (start < -(INT64_C(1) << 62) || start > (INT64_C(1) << 62)) {
        return true;
    }
    return before_s > INT64_MIN / 2 && start + fc_store_level_secs[level] <= before_s;
}

/* Whether a dirty window is due: closed (ended its grace before newest), or due_whatever. */
static bool due_now(uint32_t base, int level, int64_t start, int64_t newest, int64_t before_s)
{
    return due_whatever(level, start, before_s) ||
           (newest > INT64_MIN / 2 &&
            start + fc_store_level_secs[level] + fc_store_close_grace(base, level) <= newest);
}

/* A dirty window a flush rebuilds: its key (a node key) and level. */
struct due {
    size_t at, n; /* its key: keys.data[at..at+n) */
    uint32_t base;
    int level;
    int64_t window;
    size_t order; /* the cursor's order, the tie-break of a stable sort by level */
};

static int by_level(const void *a, const void *b)
{
    const struct due *x = a, *y = b;

    if (x->level != y->level) {
        return x->level < y->level ? -1 : 1;
    }
    return x->order < y->order ? -1 : x->order > y->order;
}

/*
 * The dirty windows of levels min_level to max_level that are due
 * (due_now: closed, or ending by before_s), finest level first, in one pass over DB_DIRTY (which
 * holds every coarse window still open at the front of each pod, about six a pod). A key that is
 * not a window is deleted. Returns an LMDB code; *out and keys are the caller's.
 */
static int due_windows(struct fc_store *s, MDB_txn *txn, int64_t newest, int64_t before_s,
                       int min_level, int max_level, struct due **out, size_t *n_out,
                       struct fc_buf *keys)
{
    struct due *v = NULL;
    size_t n = 0, cap = 0;
    MDB_cursor *c;
    MDB_val kv, dv;
    int rc = 0, g;

    *out = NULL;
    *n_out = 0;
    if ((rc = mdb_cursor_open(txn, s->db[DB_DIRTY], &c)) != 0) {
        return rc;
    }
    for (g = mdb_cursor_get(c, &kv, &dv, MDB_FIRST); g == 0 && rc == 0;
         g = mdb_cursor_get(c, &kv, &dv, MDB_NEXT)) {
        uint32_t base;
        int level;
        int64_t window;
        if (!dirty_key_parts(&kv, &base, &level, &window)) {
            rc = mdb_cursor_del(c, 0); /* not a window: nothing to rebuild */
            continue;
        }
        if (level < min_level || level > max_level ||
            !due_now(base, level, window, newest, before_s)) {
            continue; /* still open: readers take its children until it closes */
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            v = fc_xrealloc(v, cap * sizeof(*v));
        }
        v[n] = (struct due){keys->len, kv.mv_size, base, level, window, n};
        if (fc_buf_append(keys, kv.mv_data, kv.mv_size) != FC_OK) {
            rc = ENOMEM;
            break;
        }
        n++;
    }
    if (rc == 0 && g != 0 && g != MDB_NOTFOUND) {
        rc = g;
    }
    mdb_cursor_close(c);
    if (n > 1) {
        qsort(v, n, sizeof(*v), by_level);
    }
    *out = v;
    *n_out = n;
    return rc;
}

/* What a flush does. */
enum flush_kind {
    /*
     * The open windows only (they passed their byte cap between two timed
     * flushes): the coarse windows stay dirty until the next timed flush,
     * which keeps a cap flush to one merge per open window.
     */
    FLUSH_OPEN,
    FLUSH_ALL, /* the open windows, then the dirty windows due rebuilt */
    /*
     * The dirty windows due rebuilt, the open windows left open: what an
     * earlier flush deferred, built between write groups without writing
     * the open windows more often than every flush_interval.
     */
    FLUSH_REBUILDS,
};

/*
 * The open windows into LMDB (not FLUSH_REBUILDS), then (not FLUSH_OPEN)
 * every dirty window that is closed (fc_store_close_grace) or ends at or
 * before before_s rebuilt: until rebuild_max bytes are built or until_ns
 * has passed (monotonic), after one window at least; the rest wait.
 */
static int flush(struct fc_store *s, enum flush_kind kind, int64_t before_s, int64_t until_ns,
                 struct fc_error *err)
{
    struct due *due = NULL;
    size_t n_due = 0, i = 0;
    int64_t newest, coarse, built = 0, deferred = 0;
    bool failed = false; /* a rebuild or a merge failed, err filled */
    bool rebuild_dirty, write_open = kind != FLUSH_REBUILDS;
    struct fc_buf keys;
    MDB_txn *txn;
    int rc;

    if (kind == FLUSH_OPEN && fc_store_open_has_compacted(s)) {
        kind = FLUSH_ALL; /* a compacted 100 s window is merged only after rebuilds */
    }
    rebuild_dirty = kind != FLUSH_OPEN;
    if (kind == FLUSH_ALL) {
        atomic_store(&s->last_flush_ns, fc_now_mono_ns());
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
        return fc_store_lmdb_error(err, rc, "flush");
    }
    if (kind == FLUSH_ALL) {
        atomic_store(&s->dirty, false);
    }
    if (write_open && fc_store_open_write(s, txn, 0, err) != FC_OK) {
        mdb_txn_abort(txn); /* still open and logged: nothing is lost */
        atomic_store(&s->dirty, true);
        return err->code;
    }
    /*
     * After the open windows, whose newest may close windows (newest_s),
     * and once for the flush: the clock read again between the scans of
     * level 1 and of the levels above could make a window due whose last
     * child was not, and build it from that stale child for good. Every
     * window in the compacted past is due: one left dirty there (a crash
     * between compaction's cutoff and its flush) would hide the profiles
     * merged into it since, then lose them when rebuilt from its children.
     */
    newest = newest_end(s);
    coarse = atomic_load(&s->coarse_before);
    before_s = coarse > before_s ? coarse : before_s;
    fc_buf_init(&keys, 0);
    if (rebuild_dirty) {
        rc = due_windows(s, txn, newest, before_s, 1, 1, &due, &n_due, &keys);
    }
    /* Finest first: a window is rebuilt from children that are themselves up to date. */
    for (int level = 1; rebuild_dirty && rc == 0 && !failed && level < FC_STORE_LEVELS; level++) {
        if (level == 2) {
            /*
             * Again: the compacted 100 s windows merged after level 1 marked
             * windows above them dirty, which the windows due above them
             * must not be rebuilt from unrebuilt.
             */
            free(due);
            fc_buf_reset(&keys);
            i = 0;
            if ((rc = due_windows(s, txn, newest, before_s, 2, FC_STORE_LEVELS - 1, &due, &n_due,
                                  &keys)) != 0) {
                break;
            }
        }
        for (; rc == 0 && i < n_due && due[i].level == level; i++) {
            MDB_val kv = val(keys.data + due[i].at, due[i].n);
            char tenant[256];
            size_t tn;
            /*
             * Past the budget, the closed windows left wait for the next
             * flush, and every one above them too (built and the clock
             * stay past it): a window is never built from a child still
             * dirty. A 100 s window in the compacted past is built
             * whatever the budget: the open 100 s windows merged after
             * level 1 go into it (those above it are built from it later).
             */
            if (((s->rebuild_max > 0 && built >= s->rebuild_max) ||
                 (built > 0 && fc_now_mono_ns() >= until_ns)) &&
                !(level == 1 && due_whatever(level, due[i].window, coarse))) {
                deferred++;
                continue;
            }
            tn = strnlen(kv.mv_data, kv.mv_size);
            if (tn >= sizeof(tenant)) {
                tn = sizeof(tenant) - 1;
            }
            memcpy(tenant, kv.mv_data, tn);
            tenant[tn] = '\0';
            /*
             * Compaction flushes until none waits before it moves its cutoff
             * and once after, before deleting 10 s windows, so a dirty 100 s
             * window always has its children. What it puts, and a page: the
             * leaf the transaction copies to change it.
             */
            built += s->page_bytes;
            if (rebuild(s, txn, tenant, due[i].base, level, due[i].window, &built, err) != FC_OK) {
                failed = true; /* the windows stay dirty: queries stay exact */
                break;
            }
            rc = mdb_del(txn, s->db[DB_DIRTY], &kv, NULL);
        }
        if (!failed && rc == 0 && level == 1 && write_open &&
            fc_store_open_write(s, txn, 1, err) != FC_OK) {
            failed = true; /* still open and logged: nothing is lost */
        }
    }
    free(due);
    fc_buf_release(&keys);
    if (failed) {
        mdb_txn_abort(txn);
        atomic_store(&s->dirty, true);
        return err->code;
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        atomic_store(&s->dirty, true);
        return fc_store_lmdb_error(err, rc, "flush");
    }
    /*
     * Readers see the windows either open or in LMDB, never both or neither
     * (with the open windows left open, either snapshot is whole: a reader's
     * query is not waited for).
     */
    if (write_open) {
        pthread_rwlock_wrlock(&s->open.lock);
    }
    if ((rc = mdb_txn_commit(txn)) != 0) {
        if (write_open) {
            pthread_rwlock_unlock(&s->open.lock);
        }
        atomic_store(&s->dirty, true);
        return fc_store_lmdb_error(err, rc, "flush");
    }
    if (write_open) {
        fc_store_open_clear(s);
        pthread_rwlock_unlock(&s->open.lock);
    }
    if (built > atomic_load(&s->rebuild_peak)) {
        atomic_store(&s->rebuild_peak, built);
    }
    if (rebuild_dirty) {
        atomic_store(&s->rebuilds_deferred, deferred);
        if (deferred > 0) {
            atomic_store(&s->dirty, true); /* the next timed flush goes on with them */
        }
    }
    if (s->max_size > 0) {
        fc_store_refresh_used(s);
    }
    return FC_OK;
}

/* Until when one flush rebuilds, at most: rebuild_max_ns from now, or until_ns if sooner. */
static int64_t rebuild_until(const struct fc_store *s, int64_t until_ns)
{
    int64_t own;

    if (s->rebuild_max_ns <= 0) {
        return until_ns;
    }
    own = fc_now_mono_ns() + s->rebuild_max_ns;
    return own < until_ns ? own : until_ns;
}

int fc_store_flush(struct fc_store *s, struct fc_error *err)
{
    return flush(s, FLUSH_ALL, INT64_MIN, rebuild_until(s, INT64_MAX), err);
}

int fc_store_rebuild_deferred(struct fc_store *s, int64_t until_ns, struct fc_error *err)
{
    int rc;

    if (atomic_load(&s->rebuilds_deferred) == 0) {
        return FC_OK;
    }
    rc = flush(s, FLUSH_REBUILDS, INT64_MIN, rebuild_until(s, until_ns), err);
    return rc == FC_OK && atomic_load(&s->rebuilds_deferred) > 0 ? FC_EAGAIN : rc;
}

int fc_store_flush_until(struct fc_store *s, int64_t before_s, int64_t until_ns,
                         struct fc_error *err)
{
    int rc;

    /*
     * Flushes until none waits, each within the budget: each builds at
     * least one window (the first due is never past it) and deletes its
     * dirty key, so this ends.
     */
    do {
        rc = flush(s, FLUSH_ALL, before_s, rebuild_until(s, until_ns), err);
    } while (rc == FC_OK && atomic_load(&s->rebuilds_deferred) > 0 && fc_now_mono_ns() < until_ns);
    return rc == FC_OK && atomic_load(&s->rebuilds_deferred) > 0 ? FC_EAGAIN : rc;
}

int fc_store_flush_before(struct fc_store *s, int64_t before_s, struct fc_error *err)
{
    return fc_store_flush_until(s, before_s, INT64_MAX, err);
}

int fc_store_flush_open(struct fc_store *s, struct fc_error *err)
{
    /* The deadline counts only when a compacted open window makes it a whole flush. */
    return flush(s, FLUSH_OPEN, INT64_MIN, rebuild_until(s, INT64_MAX), err);
}

int64_t fc_store_flush_in(struct fc_store *s)
{
    int64_t in = atomic_load(&s->last_flush_ns) + s->flush_ns - fc_now_mono_ns();

    if (!atomic_load(&s->dirty)) {
        return -1;
    }
    return in > 0 ? in : 0;
}
