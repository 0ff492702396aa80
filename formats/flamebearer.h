/*
 * Pyroscope's flamebearer JSON (what /pyroscope/render answers and Grafana
 * and Pyroscope's UI draw): names[0] = "total", one array per depth of
 * [x_delta, total, self, name_index] tuples, x delta-encoded against the end
 * of the previous node in the level, children placed left to right in name
 * order after the parent's self. Nodes whose total is below the maxNodes-th
 * largest are folded into a synthetic "other" child.
 *
 * The walks keep their own stacks on the heap (a tree of any depth, e.g. one
 * 300,000-frame stack, is fine) and x offsets and sums saturate at
 * INT64_MAX / INT64_MIN instead of wrapping.
 */
#ifndef FC_FORMATS_FLAMEBEARER_H
#define FC_FORMATS_FLAMEBEARER_H

#include "core/buf.h"
#include "storage/tree.h"

#include <stdint.h>

struct fc_flamebearer_meta {
    const char *name;  /* the sample type, e.g. "cpu" */
    const char *units; /* "samples", "bytes", "objects", "nanoseconds" */
    int64_t sample_rate;
    int64_t timeline_start_s;
    int64_t timeline_step_s;
    const int64_t *timeline; /* may be NULL */
    size_t timeline_n;
    int64_t watermark_100s; /* data before it is at 100 s resolution; 0 = none */
    /* groupBy: one timeline (timeline_n points) per label value; "*" = without it */
    const char *const *group_names;
    const int64_t *const *group_timelines;
    size_t n_groups;
};

/* The flame graph itself: names and levels of delta-encoded 4-tuples. */
struct fc_flamegraph {
    const char **names; /* borrowed from the names given to build */
    size_t n_names;
    int64_t **levels; /* levels[d] holds level_len[d] values (4 per node) */
    size_t *level_len;
    size_t n_levels;
    int64_t total;
    int64_t max_self;
};

void fc_flamegraph_build(const struct fc_tree *t, char *const *names, uint32_t max_nodes,
                         struct fc_flamegraph *out);
void fc_flamegraph_release(struct fc_flamegraph *fg);

/*
 * A diff ("double") flame graph of two trees whose node names share one id
 * space (the same tenant's symbols): levels of 7-tuples [left x delta,
 * left total, left self, right x delta, right total, right self, name], both
 * x columns delta-encoded on their own; total = left + right.
 */
struct fc_flamegraph_diff {
    struct fc_flamegraph fg; /* levels hold 7 values per node */
    int64_t left_ticks;
    int64_t right_ticks;
};

void fc_flamegraph_diff_build(const struct fc_tree *left, char *const *left_names,
                              const struct fc_tree *right, char *const *right_names,
                              uint32_t max_nodes, struct fc_flamegraph_diff *out);
/* The FlamebearerProfile JSON of a diff (metadata.format "double"). */
int fc_flamebearer_diff_write(const struct fc_flamegraph_diff *d,
                              const struct fc_flamebearer_meta *meta, struct fc_buf *out);

/* Appends the whole FlamebearerProfile JSON. names[i] names tree node i. */
int fc_flamebearer_write(const struct fc_tree *t, char *const *names, uint32_t max_nodes,
                         const struct fc_flamebearer_meta *meta, struct fc_buf *out);

#endif
