/*
 * The persistent sending queue (`sending_queue.storage: <dir>`): every
 * item is written to disk before fc_sender_submit answers FC_OK, and the
 * consumers read it back from there. There is no separate memory queue (as
 * the Collector's persistent queue); memory holds only an index.
 *
 * Files in <dir> (created 0700 when missing):
 *   LOCK                     flock()ed for the life of the process, holds our
 *                            pid: one flamecol per directory
 *   seg-<first seq, %016x>.log  append-only records, a new file once one
 *                            passes segment_size (8 MiB); all records of one
 *                            append call go in one segment
 *   acks.log                 append-only {seq, kind, crc}: kind 1 = dispatched
 *                            (about to be sent), 2 = done (sent, or dropped)
 *
 * A record, little-endian: header {magic u32, len u32, crc u32}, then len
 * bytes {seq u64, samples u64, profiles u32, tenant_len u16, tenant,
 * target_len u16, target, body} (tenant_len 0: sent without X-Scope-OrgID,
 * the default tenant; records of before that carry "anonymous"). crc is
 * zlib's crc32 of the four len bytes followed by the len bytes (so a corrupt
 * length cannot pass either). An ack
 * entry is {seq u64, kind u8, crc32 of those 9 bytes u32}: 13 bytes.
 *
 * Durability: an append writes every record of the call under the append
 * lock, then waits for an fdatasync covering its last byte. Syncs are grouped:
 * one thread syncs for everyone who wrote before it started, a writer whose
 * bytes a finished sync already covered returns without syncing. Only then
 * does the append (and fc_sender_submit) return FC_OK. Rolling to a new
 * segment first fdatasyncs the old one; creating or deleting a segment
 * fsyncs the directory. A failed sync marks the queue broken (every later
 * append fails; Linux may have dropped the dirty pages) and the records of
 * that append are acked done, so a client retry cannot duplicate them.
 *
 * Acks are not synced: after kill -9 the page cache still holds them, so the
 * redelivery bound below holds; after a power loss, acks written since the
 * last segment sync may be lost and more records may be delivered twice.
 *
 * Start (replay): acks.log is read (a torn or corrupt entry is skipped), the
 * segments are scanned oldest first and every record without a done ack is
 * queued in seq order. A record that was dispatched but not done may have
 * reached the peer: it is delivered again and counted in
 * redelivered_requests_total. A torn or corrupt record (bad magic, length
 * past the end of the file, bad checksum, bad fields) is skipped, logged and
 * counted in corrupt_records_total (one per damaged region: the scanner
 * resyncs at the next offset that holds a valid record); it is never
 * delivered and never stops the start. The last segment is truncated after
 * its last valid record before anything is appended to it. seq never goes
 * back: the next one is above every seq in the segments and in acks.log.
 *
 * Delivery is at-least-once. The duplicates after a kill -9 are exactly the
 * records that had a "dispatched" ack and no "done" ack at that moment: the
 * ones consumers were sending or retrying (at most num_consumers records),
 * plus those already redelivered ones from an earlier crash that were not
 * done again yet.
 *
 * A segment is deleted (then acks.log rewritten without its entries, through
 * a synced temporary file and rename) once every record in it is done and it
 * is not the segment being appended to. The segment goes first: a crash in
 * between leaves stale acks for seqs that no longer exist, which is harmless
 * because seqs are never reused.
 *
 * Thread safety: every function may be called from any thread; open and
 * close from one.
 */
#ifndef FC_EXPORTERS_HELPER_PERSIST_H
#define FC_EXPORTERS_HELPER_PERSIST_H

#include "core/err.h"
#include "exporters/helper/sender.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_PERSIST_SEGMENT_SIZE (8u << 20)
#define FC_PERSIST_MAGIC 0x31515046u /* "FPQ1" little-endian */
#define FC_PERSIST_HEADER 12u
#define FC_PERSIST_ACK_SIZE 13u
#define FC_PERSIST_META 24u /* seq, samples, profiles, tenant_len, target_len */
#define FC_PERSIST_MAX_PAYLOAD (UINT32_MAX - FC_PERSIST_HEADER)

enum fc_persist_ack { FC_PERSIST_DISPATCHED = 1, FC_PERSIST_DONE = 2 };

struct fc_persist_options {
    const char *dir;
    const char *component;            /* for logs: "exporter/otlp" */
    uint64_t segment_size;            /* 0 = FC_PERSIST_SEGMENT_SIZE */
    _Atomic int64_t *corrupt_records; /* counters, may be NULL */
    _Atomic int64_t *redelivered;
    _Atomic int64_t *fsyncs;
};

/* A record handed to a consumer by fc_persist_take. */
struct fc_persist_ref {
    void *seg; /* the segment (private) */
    uint32_t idx;
    uint64_t seq;
    uint64_t samples;
    uint64_t bytes; /* body bytes */
};

struct fc_persist;

/* Creates the directory, locks it, replays what is there. */
int fc_persist_open(const struct fc_persist_options *o, struct fc_persist **out,
                    struct fc_error *err);
/* Closes files and frees memory; writes nothing: what is not done stays. */
void fc_persist_close(struct fc_persist *p);

/* What is on disk and not done (queued, in flight, or being appended). */
void fc_persist_totals(struct fc_persist *p, uint64_t *requests, uint64_t *samples,
                       uint64_t *bytes);

/*
 * Writes the n items as records (all of them or none) and returns once
 * they are synced; they are then queued for fc_persist_take. Borrows items.
 * FC_ETOOBIG: an item cannot be a record. FC_EIO: the disk failed.
 */
int fc_persist_append(struct fc_persist *p, struct fc_send_item *const *items, size_t n,
                      struct fc_error *err);

/* The oldest queued record, taken off the queue; false when none. No I/O. */
bool fc_persist_take(struct fc_persist *p, struct fc_persist_ref *ref);

/*
 * Acks ref dispatched and reads its item back (*out, the caller's, with
 * seq set). On a read or checksum error the record is counted corrupt,
 * done (dropped) and FC_EIO returned: do not call fc_persist_done then.
 */
int fc_persist_load(struct fc_persist *p, const struct fc_persist_ref *ref,
                    struct fc_send_item **out, struct fc_error *err);

/* Acks ref done (sent, or dropped for good); may delete its segment. */
void fc_persist_done(struct fc_persist *p, const struct fc_persist_ref *ref);

/* ---- the formats (persist_format.c); the scanners read outside input and are fuzzed ----- */

/*
 * Writes the record header, meta, tenant and target of it with this seq
 * at h (FC_PERSIST_HEADER + FC_PERSIST_META + tenant and target lengths
 * bytes), the crc covering the body too; returns that length. The body
 * follows on disk. Lengths must fit (fc_persist_append checks).
 */
size_t fc_persist_encode_head(uint8_t *h, uint64_t seq, const struct fc_send_item *it);
/* Writes one FC_PERSIST_ACK_SIZE-byte ack entry at e. */
void fc_persist_encode_ack(uint8_t *e, uint64_t seq, int kind);

struct fc_persist_record {
    uint64_t off; /* of the header in the buffer scanned */
    uint32_t len; /* of the whole record, header included */
    uint64_t seq;
    uint64_t samples;
    uint32_t profiles;
    const char *tenant; /* not NUL-terminated; never contains a NUL */
    uint16_t tenant_len;
    const char *target;
    uint16_t target_len;
    const uint8_t *body;
    size_t body_len;
};

/* Parses the record at buf[0..len): FC_OK, or FC_EPROTO when it is not a valid one. */
int fc_persist_parse(const uint8_t *buf, size_t len, struct fc_persist_record *r);

/*
 * Calls cb for every valid record of a segment's bytes, in order; adds the
 * number of damaged regions to *corrupt. Returns the end offset of the last
 * valid record (0 when none): where appending may resume.
 */
size_t fc_persist_scan(const uint8_t *buf, size_t len,
                       void (*cb)(void *arg, const struct fc_persist_record *r), void *arg,
                       uint64_t *corrupt);

/* Calls cb for every valid ack entry; adds the number of damaged regions to *corrupt. */
void fc_persist_scan_acks(const uint8_t *buf, size_t len,
                          void (*cb)(void *arg, uint64_t seq, int kind), void *arg,
                          uint64_t *corrupt);

#endif
