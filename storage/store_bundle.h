/*
 * Bundles (format 9): once a 100 s span is past, the 10 s windows one base
 * holds in it are compressed together, under (tenant 0 be32(base) be64(span
 * start)) in `bundle`:
 *
 *   le32 L | a zstd frame of L bytes, the index: uvarint n, n x (uvarint
 *   slot, uvarint entry length), then the entries one after the other | a
 *   zstd frame: the windows' contents, the 100 s window's first.
 *
 * Format 14: L has its top bit set (FC_STORE_BUNDLE_DICT), be64 h64(the
 * base's service_name) follows the index, and the contents' frame was
 * compressed with that service's dictionary of the day (`dict`: at most
 * 64 KiB, samples of the service's other pods that day, then the contents
 * of the first span bundled for it that day) as a zstd prefix, with a
 * checksum. Pods of one service share their stacks,
 * which zstd would otherwise find only within one bundle.
 *
 * Slots 0-9 are the 10 s windows ((start - span) / 10), slot 10 the span's
 * own 100 s window (FC_STORE_PARENT_SLOT), when it is stored and not dirty.
 * A window's entry is its value as it was (store_pack.c: its header of
 * series, totals and column lengths), marked bundled, its own frame
 * replaced by the offset and length of its content in the bundle's
 * contents. Its node value is then a marker (FC_STORE_MARKER_LEN bytes:
 * le32 FC_STORE_BUNDLED_MARKER, u8 slot, be64 span): the key stays, for
 * every reader that walks windows by key, and a link to a bundled 100 s
 * window finds its bundle from the marker alone.
 *
 * Why: a 10 s window of one pod is about 2.3 KB compressed, just past what
 * LMDB keeps inside a leaf page, so each took an overflow page of 4 KiB of
 * its own; neighbouring windows of one pod share most of their stacks,
 * which zstd only finds in one frame; their headers, nearly the same
 * from one window to the next, compress together too (a frame apart, so
 * that a timeline decompresses only them); and the 100 s
 * window, their merge, shares their stacks as well. Measured in
 * docs/internals/store.md (Bundles). The 100 s window comes first in the
 * contents, so reading it (as a coarser window's rebuild does for each of
 * its ten) decompresses only its own bytes.
 *
 * This header: the keys, slots and markers of bundles and packs, which
 * store_bundle_read.c (reading them) and store_bundle.c (making them:
 * the bundling and packing pass, dictionaries, compaction's rewrite) share.
 */
#ifndef FC_STORAGE_STORE_BUNDLE_H
#define FC_STORAGE_STORE_BUNDLE_H

#include "storage/store_int.h"

#include <string.h>

static inline int64_t span_of(int64_t start)
{
    int64_t w = fc_store_level_secs[1];

    return (start >= 0 ? start / w : (start - w + 1) / w) * w;
}

/* The 10^5 s span whose pack holds the 10^4 s window at start. */
static inline int64_t pack_span_of(int64_t start)
{
    int64_t w = fc_store_level_secs[FC_STORE_PACK_LEVEL + 1];

    return (start >= 0 ? start / w : (start - w + 1) / w) * w;
}

/* The slot of window (level, start) in its span's bundle, or in its pack. */
static inline int slot_of(int level, int64_t start)
{
    if (level == FC_STORE_PACK_LEVEL) {
        return (int)((start - pack_span_of(start)) / fc_store_level_secs[FC_STORE_PACK_LEVEL]);
    }
    return level == 1 ? FC_STORE_PARENT_SLOT
                      : (int)((start - span_of(start)) / fc_store_level_secs[0]);
}

/* Whether a bundle key's span is a pack's (a 10^5 s span start + 1). */
static inline bool pack_key_span(int64_t span)
{
    return span >= 1 && (span - 1) % fc_store_level_secs[FC_STORE_PACK_LEVEL + 1] == 0;
}

static inline void marker_encode(int slot, int64_t span, uint8_t out[FC_STORE_MARKER_LEN])
{
    uint32_t flags = FC_STORE_BUNDLED_MARKER;

    memcpy(out, &flags, 4);
    out[4] = (uint8_t)slot;
    for (int i = 0; i < 8; i++) {
        out[5 + i] = (uint8_t)((uint64_t)span >> (56 - 8 * i));
    }
}

static inline void bundle_key(struct key *k, const char *tenant, uint32_t base, int64_t span)
{
    key_tenant(k, tenant);
    key_be32(k, base);
    key_be64(k, (uint64_t)span);
}

/* The day a span's bundle takes its dictionary from (rounded down, as spans are). */
static inline int64_t day_of(int64_t span)
{
    return span >= 0 ? span / FC_STORE_DAY_SECS
                     : (span - FC_STORE_DAY_SECS + 1) / FC_STORE_DAY_SECS;
}

static inline void dict_key(struct key *k, const char *tenant, uint64_t service, int64_t day)
{
    key_tenant(k, tenant);
    key_be64(k, service);
    key_be64(k, (uint64_t)day);
}

/* Loads bundle (tenant, base, span) into c, unless it holds it already; false when corrupt. */
bool fc_store_bundle_load(struct fc_store *s, MDB_txn *txn, const char *tenant, uint32_t base,
                          int64_t span, struct bundle_cache *c);
/*
 * The contents of c's bundle, decompressed up to at least need bytes (all of
 * them with a dictionary); *size what is there. NULL when they cannot be read.
 */
const uint8_t *fc_store_bundle_contents(struct bundle_cache *c, size_t need, size_t *size);

#endif
