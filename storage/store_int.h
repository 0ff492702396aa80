/*
 * Private to storage/: the store's state and the helpers that store.c
 * (writing, reading) and retention.c (deleting, size accounting) share.
 */
#ifndef FC_STORAGE_STORE_INT_H
#define FC_STORAGE_STORE_INT_H

#include "storage/store.h"

#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>

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
    N_DBS
};

extern const int64_t fc_store_level_secs[FC_STORE_LEVELS];

struct fc_store {
    MDB_env *env;
    MDB_dbi db[N_DBS];
    char *path;
    int lock_fd;                   /* flock()ed: one process per directory */
    int64_t max_size;              /* 0 = none; the map is larger (headroom for deletes) */
    _Atomic int64_t used;          /* bytes of pages in use, as of the last commit */
    _Atomic uint64_t corrupt;      /* windows skipped because their tree did not decode */
    _Atomic int64_t coarse_before; /* 10 s windows before this were compacted away */
    _Atomic uint64_t failures[FC_STORE_FAILURE_KINDS]; /* refused writes, by kind */
};

/* "\0coarse_before" in DB_META: le64 unix s. */
extern const char fc_store_coarse_key[15];

/* The LMDB code of the last fc_store_lmdb_error on this thread (0: none yet). */
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

#endif
