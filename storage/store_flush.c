/*
 * The flush: the open windows (store_open.c: what writes logged and kept in
 * memory since the last flush) are merged into their 10 s windows in LMDB,
 * and the six coarser windows above each are marked dirty (DB_DIRTY); then,
 * in the same transaction, each dirty window is rebuilt from its ten
 * children, finest level first, so each is decompressed, merged and
 * recompressed once per flush instead of once per commit. Readers see a
 * dirty window's children instead of its stale tree (store_read.c), which
 * only a failed or interrupted flush leaves behind.
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/timeutil.h"

#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>
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
                   int64_t start, struct fc_error *err)
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
        rc = mdb_put(txn, s->db[DB_NODE], &kv, &v, 0);
        fc_buf_release(&enc);
        if (level == 1 || was_packed) {
            fc_store_bundle_again(s, start); /* stored whole: its span gets bundled again */
        }
    }
    fc_store_parts_release(&ps);
    return rc ? fc_store_lmdb_error(err, rc, "flush") : FC_OK;
}

/*
 * The open windows into LMDB, then (rebuild) every dirty window rebuilt.
 * Without rebuild (the open windows passed their byte cap between two timed
 * flushes) the coarse windows stay dirty until the next timed flush, which
 * keeps the cost of a cap flush to one merge per open window.
 */
static int flush(struct fc_store *s, bool rebuild_dirty, struct fc_error *err)
{
    MDB_txn *txn;
    int rc;

    if (!rebuild_dirty && fc_store_open_has_compacted(s)) {
        rebuild_dirty = true; /* a compacted 100 s window is merged only after rebuilds */
    }
    if (rebuild_dirty) {
        atomic_store(&s->last_flush_ns, fc_now_mono_ns());
    }
    if ((rc = mdb_txn_begin(s->env, NULL, 0, &txn)) != 0) {
        return fc_store_lmdb_error(err, rc, "flush");
    }
    if (rebuild_dirty) {
        atomic_store(&s->dirty, false);
    }
    if (fc_store_open_write(s, txn, 0, err) != FC_OK) {
        mdb_txn_abort(txn); /* still open and logged: nothing is lost */
        atomic_store(&s->dirty, true);
        return err->code;
    }
    /* Finest first: a window is rebuilt from children that are themselves up to date. */
    for (int level = 1; rebuild_dirty && rc == 0 && level < FC_STORE_LEVELS; level++) {
        MDB_cursor *c;
        MDB_val kv, v;
        int g;
        if ((rc = mdb_cursor_open(txn, s->db[DB_DIRTY], &c)) != 0) {
            break;
        }
        for (g = mdb_cursor_get(c, &kv, &v, MDB_FIRST); g == 0 && rc == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            uint32_t base;
            int lv;
            int64_t window;
            char tenant[256];
            size_t tn;
            if (!dirty_key_parts(&kv, &base, &lv, &window)) {
                rc = mdb_cursor_del(c, 0); /* not a window: nothing to rebuild */
                continue;
            }
            if (lv != level) {
                continue;
            }
            tn = strnlen(kv.mv_data, kv.mv_size);
            if (tn >= sizeof(tenant)) {
                tn = sizeof(tenant) - 1;
            }
            memcpy(tenant, kv.mv_data, tn);
            tenant[tn] = '\0';
            /*
             * Compaction flushes after setting its cutoff and before deleting
             * 10 s windows, so a dirty 100 s window always has its children.
             */
            if (rebuild(s, txn, tenant, base, level, window, err) != FC_OK) {
                mdb_cursor_close(c);
                mdb_txn_abort(txn); /* the windows stay dirty: queries stay exact */
                atomic_store(&s->dirty, true);
                return err->code;
            }
            rc = mdb_cursor_del(c, 0);
        }
        if (rc == 0 && g != 0 && g != MDB_NOTFOUND) {
            rc = g;
        }
        mdb_cursor_close(c);
        if (rc == 0 && level == 1 && fc_store_open_write(s, txn, 1, err) != FC_OK) {
            mdb_txn_abort(txn); /* still open and logged: nothing is lost */
            atomic_store(&s->dirty, true);
            return err->code;
        }
    }
    if (rc != 0) {
        mdb_txn_abort(txn);
        atomic_store(&s->dirty, true);
        return fc_store_lmdb_error(err, rc, "flush");
    }
    /* Readers see the windows either open or in LMDB, never both or neither. */
    pthread_rwlock_wrlock(&s->open.lock);
    if ((rc = mdb_txn_commit(txn)) != 0) {
        pthread_rwlock_unlock(&s->open.lock);
        atomic_store(&s->dirty, true);
        return fc_store_lmdb_error(err, rc, "flush");
    }
    fc_store_open_clear(s);
    pthread_rwlock_unlock(&s->open.lock);
    if (s->max_size > 0) {
        fc_store_refresh_used(s);
    }
    return FC_OK;
}

int fc_store_flush(struct fc_store *s, struct fc_error *err)
{
    return flush(s, true, err);
}

int fc_store_flush_open(struct fc_store *s, struct fc_error *err)
{
    return flush(s, false, err);
}

int64_t fc_store_flush_in(struct fc_store *s)
{
    int64_t in = atomic_load(&s->last_flush_ns) + s->flush_ns - fc_now_mono_ns();

    if (!atomic_load(&s->dirty)) {
        return -1;
    }
    return in > 0 ? in : 0;
}
