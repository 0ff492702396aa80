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

#include <stdint.h>

/* Appends the frames of a stack, root first, separated by ';' (no newline). */
int fc_folded_stack(const struct fc_batch *b, uint32_t stack, struct fc_buf *out);
/* Appends every sample of profile p for sample type t as folded lines. */
int fc_folded_write_profile(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                            struct fc_buf *out);

#endif
