/*
 * Folded stacks ("root;caller;leaf 123" per line), both ways.
 *
 * Writing: one line per sample and sample type with a non-zero value; frames
 * root first, inlined functions expanded (a location's lines are leaf first).
 */
#ifndef FC_FORMATS_FOLDED_H
#define FC_FORMATS_FOLDED_H

#include "core/batch.h"
#include "core/buf.h"

#include <stddef.h>
#include <stdint.h>

/*
 * A frame's name: the line's function name, else "0x<address>" for code
 * without symbols (written into scratch, at least 24 bytes). Sets *len.
 */
const char *fc_frame_name(const struct fc_batch *b, const struct fc_location *loc,
                          const struct fc_line *line, char *scratch, size_t *len);

/* Appends the frames of a stack, root first, separated by ';' (no newline). */
int fc_folded_stack(const struct fc_batch *b, uint32_t stack, struct fc_buf *out);
/* Appends every sample of profile p for sample type t as folded lines. */
int fc_folded_write_profile(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                            struct fc_buf *out);

#endif

#ifndef FC_FORMATS_FOLDED_DECODE
#define FC_FORMATS_FOLDED_DECODE
#include "core/err.h"
#include <stdbool.h>
#include <stddef.h>

/*
 * Reads folded text into profile p of b (whose sample types the caller set;
 * values go to type 0). Each line is "frame;frame;leaf <count>", split at
 * the last space; with `lines` set each line is one stack of weight 1
 * instead. Empty lines and lines without a count are skipped, as Pyroscope
 * does; a count that is not an integer is an error naming the line.
 * Stacks deeper than max_depth (0 = any) keep their root-most frames.
 */
int fc_folded_decode(struct fc_batch *b, struct fc_profile *p, const char *text, size_t len,
                     bool lines, uint32_t max_depth, struct fc_error *err);
#endif
