/*
 * What the bundles' test programs test_store_bundle, _retention and _pack
 * share, on top of store_fixture.h (the test's directory, BASE, a multiple
 * of 100, and write_batch): profiles written by hand, the pods p0 and p1
 * written and their answers by hand, queries, and the closed store's LMDB
 * read directly. Pod p0 writes one profile every 10 s (at +3 s), cpu
 * 1000 + i on main;work; pod p1 one every 20 s, cpu 5 on main;idle.
 */
#ifndef FC_BUNDLE_FIXTURE_H
#define FC_BUNDLE_FIXTURE_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"
#include "tests/unit/store_fixture.h"

#define CPU "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
#define WINDOWS 120 /* p0's profiles: 12 spans of 100 s */

/* One profile of pod at time_s: cpu `value` on main;leaf. */
struct fc_batch *profile(const char *pod, int64_t time_s, const char *leaf, int64_t value);
/*
 * Flushed with every dirty coarse window built, closed or not: a flush
 * builds only those a minute behind the newest profile (store_flush.c),
 * and the windows these tests bundle are counted with their 100 s window.
 */
void flush_all(struct fc_store *s);
/* p0 at BASE + 10 i + 3 (cpu 1000 + i), p1 at every other (cpu 5), then flushed. */
void write_all(struct fc_store *s);
/* The store name in the test's directory, write_all written into it. */
struct fc_store *written(const char *name);
/* By hand: p0's cpu over [from_s, until_s) (10 s aligned), plus what `extra` adds. */
int64_t want_p0(int64_t from_s, int64_t until_s);
/* By hand: p1's cpu over [from_s, until_s) (10 s aligned). */
int64_t want_p1(int64_t from_s, int64_t until_s);
/* The total of selector's merged flame graph over [from_s, until_s) in tenant "anonymous". */
int64_t total(struct fc_store *s, const char *selector, int64_t from_s, int64_t until_s);

/*
 * Opens the closed store at name with LMDB itself (flags: 0 or MDB_RDONLY)
 * and database db_name in a transaction; false when that database is missing.
 */
bool lmdb_open(const char *name, const char *db_name, unsigned flags, MDB_env **env, MDB_txn **txn,
               MDB_dbi *db);
/* Entries of db_name in the closed store at name (0 when that database is missing). */
size_t entries_in(const char *name, const char *db_name);
/*
 * Bundles of the closed store at name that hold one window, slot 10 (a
 * span's 100 s window), read from the layout in docs/internals/store.md:
 * le32 index length (top bit: a dictionary), a zstd frame of the index:
 * uvarint n, n x (uvarint slot, uvarint length), ...
 */
size_t lone_parents_in(const char *name);

#endif
