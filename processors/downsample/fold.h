/*
 * Call-tree folding for the downsample processor, usable alone (and fuzzed).
 *
 * The call tree of a profile is built root first from its samples' stacks:
 * a node is a path of location indices from the root frame (the last
 * location of a stack) down; two stacks share a node while they share the
 * locations of that path. A node's weight is the sum of |value| of the
 * samples through it, for the driving sample type: the one named by the
 * options' sample_type when the profile has it, else the one the profile's
 * default_sample_type names, else the last one (pprof's rule, what
 * `go tool pprof` shows by default: inuse_space for a Go heap profile).
 *
 * A node is kept when
 *   - its depth (root location = 1; a location with inlined functions is
 *     one level) is at most max_depth (0 = no limit),
 *   - its weight is at least min_fraction of the profile's weight (0 = off),
 *   - with max_nodes set: it is among the heaviest nodes (ties: shallower,
 *     then first seen) that fit, counting the `other` nodes the folding
 *     adds, so the folded tree has at most max_nodes nodes; a location
 *     with inlined functions counts one node per frame (line), as flame
 *     graphs show them,
 * and its parent is kept. A sample whose leaf node is not kept gets the
 * stack of its deepest kept node plus one leaf frame `other` (function
 * "other"): the folded nodes of a parent become its single `other` child.
 * Values are never changed, so the profile's totals (every sample type) and
 * the total of every kept node stay exact. Samples that become equal (same
 * stack, same sample labels, same link, values only, no timestamps) are
 * merged by summing their values, unless a sum would overflow.
 *
 * The dictionary keeps its rows (interning appends the new stacks and the
 * `other` frame); the pprof and OTLP encoders write only the rows a profile
 * references, so what leaves the collector has no unused entry.
 * Iterative throughout: stacks may be thousands of frames deep.
 */
#ifndef FC_DOWNSAMPLE_FOLD_H
#define FC_DOWNSAMPLE_FOLD_H

#include "core/batch.h"
#include "core/err.h"

#include <stdint.h>

struct fc_fold_options {
    double min_fraction;     /* 0 = off; in [0, 1] */
    uint32_t max_nodes;      /* 0 = off; else at least 1 */
    uint32_t max_depth;      /* 0 = off */
    const char *sample_type; /* the driving sample type's name ("alloc_space"); NULL = default */
};

struct fc_fold_stats {
    uint64_t nodes_before;   /* call-tree nodes (frames) of the profile as it came */
    uint64_t nodes_after;    /* at most, as it leaves (kept + `other`): what max_nodes bounds */
    uint64_t samples_folded; /* samples whose stack was cut to an `other` frame */
    uint64_t samples_merged; /* samples that left by being summed into an equal one */
};

/* Which sample type drives the choice (see above); 0 when the profile has none. name may be NULL.
 */
uint32_t fc_fold_drive_type(const struct fc_batch *b, const struct fc_profile *p, const char *name);

/*
 * Folds profile `profile` of b in place. st (may be NULL) receives the
 * counts. Errors: FC_EINVAL (bad index or options), FC_ETOOBIG (the batch's
 * budget while interning the new stacks; the profile is then unchanged).
 */
int fc_fold_profile(struct fc_batch *b, uint32_t profile, const struct fc_fold_options *o,
                    struct fc_fold_stats *st, struct fc_error *err);

/*
 * Sums the samples of p that are equal (same stack, sample labels and link;
 * values only, no timestamps; unless a sum would overflow), keeping the
 * first of each in place and the order otherwise; returns how many left.
 */
uint64_t fc_fold_merge_equal(const struct fc_batch *b, struct fc_profile *p);

#endif
