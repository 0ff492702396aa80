/* Helpers shared by the cmocka unit tests. */
#ifndef FC_TEST_H
#define FC_TEST_H

#include "config/diag.h"
#include "config/node.h"
#include "core/arena.h"

#include <stddef.h>
#include <stdint.h>

/*
 * When FC_TEST_FILTER is set (a glob of test function names: * and ?),
 * only the tests it matches run: scripts/mutations sets it from a planted
 * bug's "# only:" line, so that the test which catches the bug runs alone.
 * Called by main() before cmocka_run_group_tests; a filter that matches
 * nothing runs no test and passes.
 */
void fc_test_filter_from_env(void);

/* Reads a whole file (malloc'd, NUL-terminated); NULL when missing. */
uint8_t *fc_test_read(const char *path, size_t *len);
/* The shared corpus directory (FLAMECOL_CORPUS, else ../shared/corpus). */
const char *fc_test_corpus(void);
/* The names of the corpus's *.pb.gz files, sorted; returns how many (at most max). */
size_t fc_test_corpus_files(char (*names)[256], size_t max);
/* Parses YAML text named "test.yaml" into arena; diagnostics in diag. */
struct fc_node *fc_test_yaml(struct fc_arena *a, const char *text, struct fc_diag *diag);
/* True when some diagnostic contains needle. */
int fc_test_diag_has(const struct fc_diag *d, const char *needle);

/* Makes a new directory /tmp/<prefix>-XXXXXX, its path into dir (size bytes); 0, else -1. */
int fc_test_tmpdir(char *dir, size_t size, const char *prefix);
/* Removes dir and all it holds; 0, else -1. */
int fc_test_rmdir(const char *dir);

struct fc_store;
/* A store of its own in dir/name (sync: none); fails the test when it does not open. */
struct fc_store *fc_test_store_open(const char *dir, const char *name);
/* rebuild_max_bytes of the stores fc_test_store_open opens (0: the library's default). */
extern int64_t fc_test_rebuild_max;
/* The on-disk format version a closed store at path says it has (LMDB read directly); 0: none. */
uint32_t fc_test_store_format(const char *path);
/*
 * Rewrites the closed store at path as format 17 kept series' labels: each
 * entry of a `sid` bucket (format 18: key tenant 0 be32(id / 64) 0x01;
 * entries u8 slot << 1 | same base, uvarint base unless same, uvarint
 * symbol of the own part) becomes a key of its own (tenant 0 be32(id) ->
 * 0x00 be32(base) and the symbol's bytes), the buckets go, and the store is
 * marked format 17. Decoded here, by hand. Returns the series rewritten.
 */
uint32_t fc_test_sids_as_format_17(const char *path);
/* The series whose labels the closed store at path holds: buckets' entries and keys of their own.
 */
size_t fc_test_sid_series(const char *path);

#endif
