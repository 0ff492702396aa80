/*
 * Frame records: what the store keeps of one frame of a stack, interned as
 * a symbol (sym/symid) exactly as names were.
 *
 * A symbol's bytes are either
 *   - a plain name (the format before frame records, and still the form of a
 *     frame that has nothing but a name: folded input). A name never starts
 *     with a 0 byte here (fc_frame_encode writes a record for one that does);
 *   - a record: 0x00, version 0x01, uvarint flags, then the fields the flags
 *     announce, in this order:
 *       name                 uvarint length, bytes (always)
 *       system name          FC_FR_SYSTEM: length, bytes (FC_FR_SYSTEM_SAME: = name)
 *       file name            FC_FR_FILE: length, bytes
 *       start line, line, column  FC_FR_START / FC_FR_LINE / FC_FR_COLUMN: zigzag varint
 *       address              FC_FR_ADDRESS: uvarint
 *       mapping              FC_FR_MAPPING: uvarint flags (enum fc_mapping_flags), file
 *                            (length, bytes), build id (length, bytes), uvarint
 *                            start, limit, offset
 *     and nothing after them.
 *
 * FC_FR_INLINE marks a frame inlined into its caller: in pprof, every line of
 * a location but its last (lines[0] is the innermost). The address and the
 * mapping are kept for frames without a function name only (unsymbolized
 * code), whose name is "0x<address>" as fc_frame_name gives it; a
 * symbolized frame is one per (function, line, column, inlining), however
 * many addresses it was seen at, so the stack trees do not grow with them.
 */
#ifndef FC_STORAGE_FRAME_H
#define FC_STORAGE_FRAME_H

#include "core/batch.h"
#include "core/buf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    FC_FR_INLINE = 1 << 0,
    FC_FR_SYSTEM = 1 << 1,
    FC_FR_SYSTEM_SAME = 1 << 2,
    FC_FR_FILE = 1 << 3,
    FC_FR_START = 1 << 4,
    FC_FR_LINE = 1 << 5,
    FC_FR_COLUMN = 1 << 6,
    FC_FR_ADDRESS = 1 << 7,
    FC_FR_MAPPING = 1 << 8,
    FC_FR_ALL = (1 << 9) - 1
};

#define FC_FRAME_VERSION 1

/* A byte range (not NUL-terminated). */
struct fc_frame_str {
    const char *p;
    size_t n;
};

struct fc_frame_mapping {
    struct fc_frame_str file;
    struct fc_frame_str build_id;
    uint64_t start, limit, offset;
    uint32_t flags; /* enum fc_mapping_flags */
};

struct fc_frame {
    struct fc_frame_str name;
    struct fc_frame_str system_name;
    struct fc_frame_str file;
    int64_t start_line;
    int64_t line;
    int64_t column;
    bool is_inline;
    bool has_address; /* unsymbolized: address (and mapping, when has_mapping) */
    uint64_t address;
    bool has_mapping;
    struct fc_frame_mapping mapping;
};

/*
 * The frame of line j of location loc (j = 0 is the innermost; pass
 * loc->n_lines == 0 and j = 0 for a location without lines). Strings point
 * into the batch.
 */
void fc_frame_of(const struct fc_batch *b, const struct fc_location *loc, uint32_t j,
                 struct fc_frame *out);

/* Appends the symbol bytes: a plain name when the frame is only a name, else a record. */
void fc_frame_encode(const struct fc_frame *f, struct fc_buf *out);

/*
 * Reads symbol bytes (the strings of *out point into them). A plain name
 * gives a frame with only that name; FC_EPROTO for a record that does not
 * decode (truncated, unknown version or flags, bytes left over).
 */
int fc_frame_decode(const uint8_t *p, size_t n, struct fc_frame *out);

/* How frames are told apart in a flame graph. */
enum fc_frame_granularity {
    FC_FRAME_FUNCTIONS = 0, /* the name (fc_frame_name's text): Pyroscope's flame graphs */
    FC_FRAME_LINES,         /* "name file:line", as pprof -lines prints a frame */
};

/*
 * Appends the frame's display name: by function, its name, or "0x<address>"
 * without one (the text fc_frame_name gives); by line, pprof's
 * "name file:line" ("name file" without a line, "name" without a file).
 */
void fc_frame_display(const struct fc_frame *f, enum fc_frame_granularity g, struct fc_buf *out);

#endif
