/*
 * What the store's test programs test_store_read, _labels, _index,
 * _retention, _windows and _write (and, through bundle_fixture.h,
 * test_store_bundle, _bundle_retention and _bundle_pack) share: a directory
 * of their own for the run, stores in it, the corpus's Go profiles as
 * written there, queries by hand and LMDB read and written directly.
 */
#ifndef FC_STORE_FIXTURE_H
#define FC_STORE_FIXTURE_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/batch.h"
#include "core/buf.h"
#include "storage/store.h"

#define BASE 1700000000LL /* seconds */
/* go-1s-cpu.top.txt, sample_index=1: "Showing nodes accounting for 1080000000ns". */
#define GO_CPU_TOTAL 1080000000LL

/* The test's directory: made by fixture_setup, removed with all it holds by fixture_teardown. */
extern char dir[64];
int fixture_setup(void **state);
int fixture_teardown(void **state);

/*
 * The corpus profile `name` as service svc-<service> at time_s (tenant), its
 * __name__ by hand for the corpus's Go profiles, as Pyroscope names a raw
 * pprof (README: derived from the sample types): cpu -> process_cpu,
 * allocs/heap -> memory, goroutine -> goroutines, and block/mutex
 * (contentions, delay; Pyroscope's default display names
 * mutex_count/mutex_duration) -> mutex.
 */
struct fc_batch *load(const char *name, int service, int64_t time_s, const char *tenant);
/* The Go CPU profile as pod p<pod> of service svc-0 at t. */
struct fc_batch *load_pod(int pod, int64_t t, const char *tenant);
/* A batch of one profile (tenant "lim", service svc) whose samples are given stacks and values. */
struct fc_batch *stacks_batch(const char *svc, int64_t time_s, uint32_t depth, uint32_t n_names,
                              const int64_t *values, size_t n_values);
/* Adds string label (key, value) to every sample of b's profile. */
void label_every_sample(struct fc_batch *b, const char *key, const char *value);

/* A store of its own in a subdirectory of the test's directory. */
struct fc_store *open_sub(const char *name);
/* rebuild_max_bytes and rebuild_max_ns of the stores open_unflushed opens (0: the library's
 * default). */
extern int64_t unflushed_rebuild_max, unflushed_rebuild_max_ns;
/* The store in dir/name, flushing only when asked (or when closed). */
struct fc_store *open_unflushed(const char *name);
/* Writes b (one profile) into s2, which must take it, and lets b go. */
void write_batch(struct fc_store *s2, struct fc_batch *b);
/* Writes pods [from, to) in write groups of 7 (a chunk fills across groups and within one). */
void write_pods(struct fc_store *s2, int from, int to, const char *tenant);

/* The total of q's merged flame graph over [from_s, until_s). */
int64_t range_total(struct fc_store *st, struct fc_store_query *q, int64_t from_s, int64_t until_s);
/* CPU of svc-0 over [BASE, BASE + 10) for a selector's labels (after the type). */
int64_t cpu_of(struct fc_store *s2, const char *tenant, const char *labels);
/* Every series' labels of tenant (sorted), as the API lists them. */
size_t listed(struct fc_store *s2, const char *tenant, const char *selector, char ***out);
void free_listed(char **v, size_t n);

/* The LMDB environment of a closed store and a transaction on it (flags: 0 or MDB_RDONLY). */
void lmdb_begin(const char *sub, unsigned flags, MDB_env **env, MDB_txn **txn);
/* Writes the on-disk format version into meta, commits and closes. */
void lmdb_commit_format(MDB_env *env, MDB_txn *txn, MDB_dbi meta, uint32_t version);
/* Keeps (k, value) in puts (key length, key, value length, value) to be put after a cursor walk. */
void keep_put(struct fc_buf *puts, const MDB_val *k, const void *value, size_t len);
/* Puts every entry keep_put kept into db, and releases puts. */
void put_kept(MDB_txn *txn, MDB_dbi db, struct fc_buf *puts);
/* Entries of each database of the closed store at sub, by name (fc_store_db_names' order). */
void db_entries(const char *sub, const char *const *names, size_t n, size_t *out);
/* A uvarint of a frame record, read here from the format in storage/frame.h. */
uint64_t ref_uvarint(const uint8_t **p);
/* Whether the n bytes at p hold text. */
bool holds(const void *p, size_t n, const char *text);

#endif
