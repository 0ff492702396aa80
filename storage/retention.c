/*
 * Space: retention by age and by size, fine_retention compaction, and the
 * accounting of pages in use that max_size is enforced on.
 *
 * Deletes run in transactions of at most DELETE_CHUNK keys. A delete is a
 * write too (copy-on-write pages, the free list): should the map be full,
 * the chunk halves down to one key, and since the map is larger than
 * max_size (writes are refused at max_size, see fc_store_open) there is
 * always room for that. Pages freed by one chunk are reused by the next.
 *
 * Deletion by age and compaction take a time budget: past it they stop
 * between two transactions and the next call goes on from the key they
 * stopped at (struct retention_pass), so that the exporter's writer
 * commits the writes that came meanwhile instead of holding them for the
 * whole pass (up to 4 s in a soak of 2,000 pods).
 */
#include "storage/store_int.h"

#include "core/mem.h"
#include "core/timeutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELETE_CHUNK 16384

/* Node keys: tenant 0 be32(series) u8(level) be64(window); tenants hold no 0 byte. */
static bool node_key_parts(const MDB_val *kv, int *level, int64_t *window)
{
    size_t tenant_len;
    uint32_t base;

    return node_key_split(kv, &tenant_len, &base, level, window) && *level < FC_STORE_LEVELS;
}

/*
 * What a retention pass deletes: windows of levels <= max_level ending by
 * cutoff_s. With dirty_parents, the coarser window above a deleted one that
 * outlives the cutoff is marked dirty: rebuilt without the deleted past, so
 * that no coarse window keeps it longer for one base (a pod written since,
 * or a service aggregate) than for another.
 */
struct doomed {
    int64_t cutoff_s;
    int max_level;
    bool dirty_parents;
    int64_t coarse_before; /* 100 s windows before this have no children: never marked */
};

static bool node_doomed(const MDB_val *kv, const MDB_val *v, const struct doomed *d)
{
    (void)v; /* doomed by its key */
    int level;
    int64_t window;

    return node_key_parts(kv, &level, &window) && level <= d->max_level &&
           window <= d->cutoff_s - fc_store_level_secs[level];
}

/* Span keys: tenant 0 be64(span) be32(series) be64(10 s window). */
static bool span_doomed(const MDB_val *kv, const MDB_val *v, const struct doomed *d)
{
    (void)v; /* doomed by its key */
    size_t tenant_len;
    const uint8_t *r = key_rest(kv, 20, &tenant_len);

    return r != NULL && (int64_t)be64(r + 12) <= d->cutoff_s - 10;
}

/*
 * Bundle keys: tenant 0 be32(base) be64(100 s span): it goes with the last
 * of its windows; a pack's (span: a 10^5 s span start + 1, format 17) with
 * the last of its 10^4 s windows, at the end of its 10^5 s span.
 */
static bool bundle_doomed(const MDB_val *kv, const MDB_val *v, const struct doomed *d)
{
    (void)v; /* doomed by its key */
    const int64_t pack_width = fc_store_level_secs[FC_STORE_PACK_LEVEL + 1];
    size_t tenant_len;
    uint32_t base;
    int64_t span;

    if (!bundle_key_split(kv, &tenant_len, &base, &span)) {
        return false;
    }
    if (span >= 1 && (span - 1) % pack_width == 0) {
        return span - 1 <= d->cutoff_s - pack_width;
    }
    return span <= d->cutoff_s - fc_store_level_secs[1];
}

/*
 * A dictionary whose day ended by the cutoff: every bundle of that day has
 * (its span ended by then too) and goes in the same pass, before it.
 */
static bool dict_doomed(const MDB_val *kv, const MDB_val *v, const struct doomed *d)
{
    (void)v; /* doomed by its key */
    size_t tenant_len;
    uint64_t service;
    int64_t day, cutoff_day = d->cutoff_s / FC_STORE_DAY_SECS; /* rounded down, below */

    cutoff_day -= d->cutoff_s % FC_STORE_DAY_SECS < 0;
    return dict_key_split(kv, &tenant_len, &service, &day) && day < cutoff_day;
}

/*
 * Trace keys: tenant 0 trace id (16 bytes) be64(span) -> le64 the last 10 s
 * window a profile of the span was written to (empty when written before
 * that was kept: never doomed, its age unknown).
 */
static bool trace_doomed(const MDB_val *kv, const MDB_val *v, const struct doomed *d)
{
    size_t tenant_len;
    int64_t window;

    if (key_rest(kv, 24, &tenant_len) == NULL || v->mv_size != 8) {
        return false;
    }
    memcpy(&window, v->mv_data, 8);
    return window <= d->cutoff_s - 10;
}

typedef bool (*doomed_fn)(const MDB_val *kv, const MDB_val *v, const struct doomed *d);

/*
 * Marks the coarser windows above the node window kv that outlive the cutoff
 * dirty (all of them: each is rebuilt from the one below).
 */
static int dirty_parents(struct fc_store *s, MDB_txn *txn, const MDB_val *kv,
                         const struct doomed *d)
{
    uint8_t key[512];
    int level;
    int64_t window;
    MDB_val pk = {kv->mv_size, key}, empty = {0, (void *)""};
    int rc = 0;

    if (!node_key_parts(kv, &level, &window) || kv->mv_size > sizeof(key)) {
        return 0;
    }
    memcpy(key, kv->mv_data, kv->mv_size);
    for (int up = level + 1; rc == 0 && up < FC_STORE_LEVELS; up++) {
        int64_t span = fc_store_level_secs[up];
        int64_t parent = (window >= 0 ? window / span : (window - span + 1) / span) * span;
        if (parent + span <= d->cutoff_s || (up == 1 && parent + span <= d->coarse_before)) {
            continue; /* deleted too, or a compacted 100 s window (no children) */
        }
        key[kv->mv_size - 9] = (uint8_t)up;
        for (int i = 0; i < 8; i++) {
            key[kv->mv_size - 1 - i] = (uint8_t)((uint64_t)parent >> (i * 8));
        }
        atomic_store(&s->dirty, true);
        rc = mdb_put(txn, s->db[DB_DIRTY], &pk, &empty, 0);
    }
    return rc;
}

/* Keys looked at between two looks at the clock. */
#define CLOCK_EVERY 64

/*
 * One transaction: deletes up to chunk doomed keys of db from *at on (n 0:
 * the first key), and stops early past until_ns (monotonic). Sets *more and
 * *at when it stopped before the end.
 */
static int delete_chunk(struct fc_store *s, MDB_dbi db, doomed_fn doomed, const struct doomed *d,
                        size_t chunk, int64_t until_ns, struct resume_key *at, bool *more,
                        uint64_t *n)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val kv = val(at->b, at->n), v;
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);
    size_t seen = 0;
    int g;

    *more = false;
    *n = 0;
    if (rc != 0) {
        return rc;
    }
    if ((rc = mdb_cursor_open(txn, db, &c)) != 0) {
        mdb_txn_abort(txn);
        return rc;
    }
    g = mdb_cursor_get(c, &kv, &v, at->n ? MDB_SET_RANGE : MDB_FIRST);
    for (; g == 0; g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        /*
         * Past the deadline, after CLOCK_EVERY keys at least (so that every
         * call moves on): a scan of a large table that finds little to
         * delete stops here too.
         */
        bool late = ++seen % CLOCK_EVERY == 0 && fc_now_mono_ns() >= until_ns;
        bool is_doomed = !late && doomed(&kv, &v, d);
        if (!late && !is_doomed) {
            continue;
        }
        if (late || *n == chunk) {
            resume_at(at, &kv); /* not done yet: the next starts here */
            *more = true;
            break;
        }
        if (d->dirty_parents && db == s->db[DB_NODE] && (rc = dirty_parents(s, txn, &kv, d)) != 0) {
            break;
        }
        if ((rc = mdb_cursor_del(c, 0)) != 0) {
            break;
        }
        (*n)++;
    }
    if (rc == 0 && g != 0 && g != MDB_NOTFOUND) {
        rc = g;
    }
    mdb_cursor_close(c);
    if (rc != 0) {
        mdb_txn_abort(txn); /* after a failed operation LMDB refuses the commit anyway */
        return rc;
    }
    return mdb_txn_commit(txn);
}

/*
 * Deletes every doomed key of db from *at on, chunk by chunk; halves the
 * chunk on a full map. Past until_ns it stops between chunks with FC_EAGAIN
 * and *at where the next call goes on; else *at ends empty.
 */
static int delete_keys(struct fc_store *s, MDB_dbi db, doomed_fn doomed, const struct doomed *d,
                       int64_t until_ns, struct resume_key *at, uint64_t *deleted,
                       struct fc_error *err)
{
    size_t chunk = DELETE_CHUNK;
    bool more = true;
    int rc = 0;

    while (more) {
        struct resume_key from = *at;
        uint64_t n = 0;
        rc = delete_chunk(s, db, doomed, d, chunk, until_ns, at, &more, &n);
        if (rc == MDB_MAP_FULL && chunk > 1) {
            chunk /= 2; /* the same keys again, fewer at a time */
            *at = from;
            more = true;
            rc = 0;
        } else if (rc == 0) {
            *deleted += n;
            chunk = chunk * 2 > DELETE_CHUNK ? DELETE_CHUNK : chunk * 2;
            if (more && fc_now_mono_ns() >= until_ns) {
                fc_store_refresh_used(s);
                return FC_EAGAIN;
            }
        } else {
            more = false;
        }
    }
    at->n = 0;
    fc_store_refresh_used(s);
    return rc ? fc_store_lmdb_error(err, rc, "retention") : FC_OK;
}

/*
 * Compaction remembers its cutoff before deleting, so queries never see the
 * gap, and with it where its bundles start (from_s), until they are done.
 */
static int set_coarse_before(struct fc_store *s, int64_t cutoff_s, int64_t from_s,
                             struct fc_error *err)
{
    MDB_txn *txn;
    MDB_val kv = val(fc_store_coarse_key, sizeof(fc_store_coarse_key) - 1);
    MDB_val v = val(&cutoff_s, sizeof(cutoff_s));
    MDB_val fk = val(fc_store_compact_from_key, sizeof(fc_store_compact_from_key) - 1);
    MDB_val fv = val(&from_s, sizeof(from_s));
    int rc = mdb_txn_begin(s->env, NULL, 0, &txn);

    if (rc == 0 && ((rc = mdb_put(txn, s->db[DB_META], &kv, &v, 0)) != 0 ||
                    (rc = mdb_put(txn, s->db[DB_META], &fk, &fv, 0)) != 0)) {
        mdb_txn_abort(txn);
    } else if (rc == 0) {
        rc = mdb_txn_commit(txn);
    }
    if (rc != 0) {
        return fc_store_lmdb_error(err, rc, "compaction");
    }
    atomic_store(&s->coarse_before, cutoff_s);
    s->compact_from = from_s;
    return FC_OK;
}

/* The bundles of a compaction pass are all rewritten: no pass need redo them. */
static int clear_compact_from(struct fc_store *s, struct fc_error *err)
{
    MDB_txn *txn;
    MDB_val fk = val(fc_store_compact_from_key, sizeof(fc_store_compact_from_key) - 1);
    int rc;

    if (s->compact_from == INT64_MAX) {
        return FC_OK;
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) == 0) {
        rc = mdb_del(txn, s->db[DB_META], &fk, NULL);
        rc = rc == MDB_NOTFOUND ? 0 : rc;
        rc = rc ? (mdb_txn_abort(txn), rc) : mdb_txn_commit(txn);
    }
    if (rc != 0) {
        return fc_store_lmdb_error(err, rc, "compaction");
    }
    s->compact_from = INT64_MAX;
    return FC_OK;
}

/*
 * What a deletion by age goes through, in order: windows, then bundles
 * whose span ended by the cutoff (after their windows: none is left to read
 * them), then the dictionaries of the days that ended by it, span entries
 * and trace entries. Only windows and span entries count as deleted ones.
 */
static const struct delete_step {
    int db;
    doomed_fn doomed;
    bool counted;
} delete_steps[] = {
    {DB_NODE, node_doomed, true}, {DB_BUNDLE, bundle_doomed, false}, {DB_DICT, dict_doomed, false},
    {DB_SPAN, span_doomed, true}, {DB_TRACE, trace_doomed, false},
};
#define N_DELETE_STEPS (sizeof(delete_steps) / sizeof(delete_steps[0]))

static int delete_pass(struct fc_store *s, struct retention_pass *p, int64_t cutoff_s,
                       int64_t budget_ns, uint64_t *deleted, struct fc_error *err)
{
    int64_t until = fc_store_deadline(budget_ns);
    struct doomed d;
    int rc = FC_OK;

    *deleted = 0;
    if (!p->resuming) {
        *p = (struct retention_pass){.resuming = true, .cutoff_s = cutoff_s, .step = -1};
    }
    if (p->step == -1) {
        struct fc_error ignored = {0};
        /*
         * The open windows go into LMDB first, so that none outlives the
         * deletion, and dirty coarse windows are built, so that the pages a
         * trim counts next are all there is (a trim's pass has no budget:
         * all of them). Should that fail (a full disk), deleting still goes
         * ahead: freeing space matters more than an open window past the
         * cutoff. With a budget, the windows still waiting once it is spent
         * (the writes between slices keep closing more) are left to the
         * writer's rebuild slices, and the next call deletes: a window left
         * dirty is rebuilt from what is left of its children, and one that
         * ends by the cutoff goes as it is.
         */
        bool waiting = (fc_store_open_bytes(s) > 0 || atomic_load(&s->dirty)) &&
                       fc_store_flush_until(s, INT64_MIN, until, &ignored) == FC_EAGAIN;
        p->step = 0;
        if (waiting) {
            return FC_EAGAIN; /* the open windows are written: the next call deletes */
        }
    }
    /* The compaction cutoff as it is now: it only moves on, and 100 s windows before it stay. */
    d = (struct doomed){p->cutoff_s, FC_STORE_LEVELS - 1, true, atomic_load(&s->coarse_before)};
    while (rc == FC_OK && p->step < (int)N_DELETE_STEPS) {
        const struct delete_step *step = &delete_steps[p->step];
        uint64_t n = 0;
        rc = delete_keys(s, s->db[step->db], step->doomed, &d, until, &p->at, &n, err);
        *deleted += step->counted ? n : 0;
        p->step += rc == FC_OK;
    }
    p->resuming = rc == FC_EAGAIN; /* done, or failed: the next call starts over */
    return rc;
}

int fc_store_delete_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                           uint64_t *deleted, struct fc_error *err)
{
    return delete_pass(s, &s->deleting, cutoff_s, budget_ns, deleted, err);
}

/* The stages of a compaction pass (struct retention_pass.step). */
enum { COMPACT_FLUSH, COMPACT_CUTOFF, COMPACT_BUNDLES, COMPACT_WINDOWS };

int fc_store_compact_before(struct fc_store *s, int64_t cutoff_s, int64_t budget_ns,
                            uint64_t *deleted, struct fc_error *err)
{
    struct retention_pass *p = &s->compacting;
    int64_t until = fc_store_deadline(budget_ns);
    struct doomed d = {0};
    int rc = FC_OK;

    *deleted = 0;
    if (!p->resuming) {
        /*
         * The previous cutoff: the bundles of spans before it were made
         * alone by an earlier pass; or, when a pass moved the cutoff and
         * stopped before its bundles were done (a shutdown, a failure), that
         * pass's own start, kept in DB_META.
         */
        int64_t from = atomic_load(&s->coarse_before);
        from = s->compact_from < from ? s->compact_from : from;
        /* Whole 100 s windows only, so a level-1 window is either all fine or all coarse. */
        cutoff_s = (cutoff_s >= 0 ? cutoff_s / 100 : (cutoff_s - 99) / 100) * 100;
        /* Never back: late profiles written into the compacted past are compacted too. */
        if (cutoff_s < atomic_load(&s->coarse_before)) {
            cutoff_s = atomic_load(&s->coarse_before);
        }
        *p = (struct retention_pass){.resuming = true, .cutoff_s = cutoff_s, .from_s = from};
    }
    /*
     * Dirty windows ending by the cutoff are rebuilt from their 10 s windows
     * before these go, closed or not: first in flushes within the rebuild
     * budget (store_flush.c), over as many calls as it takes; every flush
     * after the cutoff moved builds the 100 s windows it finds there at once
     * (writes committed from there on, between the calls of this pass too,
     * merge into them directly: store_write.c), so the last finds none; the
     * windows above them keep the budget (built from the 100 s windows).
     */
    if (p->step == COMPACT_FLUSH &&
        (rc = fc_store_flush_until(s, p->cutoff_s, until, err)) == FC_OK) {
        p->step = COMPACT_CUTOFF;
    }
    if (rc == FC_OK && p->step == COMPACT_CUTOFF) {
        if (p->cutoff_s != atomic_load(&s->coarse_before)) {
            rc = set_coarse_before(s, p->cutoff_s, p->from_s, err);
        }
        /* Its first flush builds every window ending by the cutoff; the rest can wait. */
        rc = rc ? rc : fc_store_flush_until(s, p->cutoff_s, until, err);
        rc = rc == FC_EAGAIN ? FC_OK : rc;
        p->step += rc == FC_OK;
    }
    /*
     * The 100 s windows stay: the bundles of their spans are rewritten with
     * them alone (their dictionaries stay for them, until retention).
     */
    if (rc == FC_OK && p->step == COMPACT_BUNDLES &&
        (rc = fc_store_bundle_compact(s, p->from_s, p->cutoff_s, until, &p->at, err)) == FC_OK &&
        (rc = clear_compact_from(s, err)) == FC_OK) {
        p->step = COMPACT_WINDOWS;
    }
    if (rc == FC_OK) {
        d.cutoff_s = p->cutoff_s;
        d.max_level = 0;
        rc = delete_keys(s, s->db[DB_NODE], node_doomed, &d, until, &p->at, deleted, err);
    }
    /* Done, or failed (the next call starts over: a failed stage did nothing for good). */
    p->resuming = rc == FC_EAGAIN;
    return rc;
}

/*
 * What the node table holds, in one scan: the oldest start of a 10 s or
 * 100 s window (compacted data has no 10 s windows left) and of any window
 * (INT64_MAX when there are none), the latest end of any window
 * (INT64_MIN), and, when
 * ends is not NULL, the distinct ends of the 10 s and 100 s windows, sorted.
 */
struct span {
    int64_t oldest_fine, oldest_any, newest_end;
    int64_t *ends; /* owned by the caller when asked for */
    size_t n_ends, cap_ends;
};

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

    return (x > y) - (x < y);
}

static void sort_unique(struct span *sp)
{
    size_t k = 0;

    if (sp->n_ends == 0) {
        return; /* ends may still be NULL: qsort wants an array */
    }
    qsort(sp->ends, sp->n_ends, sizeof(*sp->ends), cmp_i64);
    for (size_t i = 0; i < sp->n_ends; i++) {
        if (k == 0 || sp->ends[k - 1] != sp->ends[i]) {
            sp->ends[k++] = sp->ends[i];
        }
    }
    sp->n_ends = k;
}

/* Every pod repeats the same ends: deduplicated whenever the array fills, grown only if still full.
 */
static void add_end(struct span *sp, int64_t end)
{
    if (sp->n_ends == sp->cap_ends) {
        sort_unique(sp);
        if (sp->cap_ends == 0 || sp->n_ends * 2 > sp->cap_ends) {
            sp->cap_ends = sp->cap_ends ? sp->cap_ends * 2 : 1024;
            sp->ends = fc_xrealloc(sp->ends, sp->cap_ends * sizeof(*sp->ends));
        }
    }
    sp->ends[sp->n_ends++] = end;
}

static void stored_span(struct fc_store *s, struct span *sp, bool want_ends)
{
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val kv, v;

    *sp = (struct span){INT64_MAX, INT64_MAX, INT64_MIN, NULL, 0, 0};
    if (mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0) {
        return;
    }
    if (mdb_cursor_open(txn, s->db[DB_NODE], &c) == 0) {
        for (int g = mdb_cursor_get(c, &kv, &v, MDB_FIRST); g == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            int level;
            int64_t window, end;
            if (!node_key_parts(&kv, &level, &window)) {
                continue;
            }
            end = window + fc_store_level_secs[level];
            if (level <= 1 && window < sp->oldest_fine) {
                sp->oldest_fine = window;
            }
            if (level <= 1 && want_ends) {
                add_end(sp, end);
            }
            sp->oldest_any = window < sp->oldest_any ? window : sp->oldest_any;
            sp->newest_end = end > sp->newest_end ? end : sp->newest_end;
        }
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    if (want_ends) {
        sort_unique(sp);
    }
}

int64_t fc_store_oldest(struct fc_store *s)
{
    struct span sp;
    int64_t fine;

    /*
     * Under the open windows' lock, as a query reads: a flush moves windows
     * from open to LMDB under it (exclusive), so none is seen in neither.
     */
    pthread_rwlock_rdlock(&s->open.lock);
    stored_span(s, &sp, false);
    fine = sp.oldest_fine;
    /* And the open windows (written, not flushed yet). */
    for (uint32_t i = 0; i < s->open.n; i++) {
        fine = s->open.v[i].start < fine ? s->open.v[i].start : fine;
    }
    pthread_rwlock_unlock(&s->open.lock);
    return fine;
}

/* One retention step: every window ending by cutoff deleted, and the bytes now used. */
static int trim_to(struct fc_store *s, int64_t cutoff, int64_t *used, uint64_t *deleted,
                   struct fc_error *err)
{
    struct retention_pass whole = {0}; /* its own: a deletion by age may be under way */
    uint64_t n = 0;
    int rc = delete_pass(s, &whole, cutoff, 0, &n, err);

    *deleted += n;
    *used = fc_store_used_bytes(s);
    return rc;
}

/*
 * Oldest first until used is at most low. The steps are a 64th of the 10 s
 * and 100 s windows each (by count, not by time: the data may sit in one
 * hour of a year, or be future-dated, and a 64th of the time would take it
 * all, the newest too, in one step). Past every such window, what is left
 * is coarse: a 64th of the time up to where the last one ends.
 */
int fc_store_trim(struct fc_store *s, int64_t high, int64_t low, uint64_t *deleted,
                  struct fc_error *err)
{
    int64_t used, cutoff = INT64_MIN;
    struct span sp;
    size_t stride;
    int rc = FC_OK;

    *deleted = 0;
    /*
     * Measured with the coarse windows built: flushes near max_size or past
     * the open windows' cap (store_write.c) leave them dirty, and their
     * pages would come after the trim, past the high mark again.
     */
    if (fc_store_open_bytes(s) > 0 || atomic_load(&s->dirty)) {
        struct fc_error ignored = {0};
        fc_store_flush_before(s, INT64_MIN, &ignored); /* all of them, within the budget */
    }
    used = fc_store_used_bytes(s);
    if (used <= high) {
        return FC_OK;
    }
    stored_span(s, &sp, true);
    stride = sp.n_ends / 64 > 0 ? sp.n_ends / 64 : 1;
    for (size_t i = 0; rc == FC_OK && used > low && i < sp.n_ends; i += stride) {
        size_t last = i + stride - 1 < sp.n_ends ? i + stride - 1 : sp.n_ends - 1;
        cutoff = sp.ends[last];
        rc = trim_to(s, cutoff, &used, deleted, err);
    }
    free(sp.ends);
    if (rc == FC_OK && used > low && sp.newest_end != INT64_MIN) {
        int64_t from = cutoff != INT64_MIN ? cutoff : sp.oldest_any;
        int64_t step = ((sp.newest_end - from) / 64 + 9) / 10 * 10;
        step = step < 10 ? 10 : step;
        while (rc == FC_OK && used > low && from < sp.newest_end) {
            from = sp.newest_end - from > step ? from + step : sp.newest_end;
            rc = trim_to(s, from, &used, deleted, err);
        }
    }
    return rc;
}

int64_t fc_store_used_bytes(struct fc_store *s)
{
    MDB_envinfo info;
    MDB_stat st;
    MDB_txn *txn;
    MDB_cursor *c;
    MDB_val kv, v;
    uint64_t free_pages = 0;

    if (mdb_env_info(s->env, &info) != 0 || mdb_env_stat(s->env, &st) != 0 ||
        mdb_txn_begin(s->env, NULL, MDB_RDONLY, &txn) != 0) {
        return 0;
    }
    /* The free list is database 0; each value is a page list whose first word is its length. */
    if (mdb_cursor_open(txn, 0, &c) == 0) {
        for (int g = mdb_cursor_get(c, &kv, &v, MDB_FIRST); g == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            size_t count;
            if (v.mv_size >= sizeof(size_t)) {
                memcpy(&count, v.mv_data, sizeof(size_t));
                free_pages += count;
            }
        }
        mdb_cursor_close(c);
    }
    mdb_txn_abort(txn);
    return (int64_t)(((uint64_t)info.me_last_pgno + 1 - free_pages) * st.ms_psize);
}

void fc_store_refresh_used(struct fc_store *s)
{
    atomic_store(&s->used, fc_store_used_bytes(s));
}

bool fc_store_full(struct fc_store *s)
{
    return s->max_size > 0 && atomic_load(&s->used) >= s->max_size;
}

uint64_t fc_store_failures(struct fc_store *s, enum fc_store_failure kind)
{
    return kind < FC_STORE_FAILURE_KINDS ? atomic_load(&s->failures[kind]) : 0;
}
