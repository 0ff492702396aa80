/*
 * spanlink processor: links samples to trace spans both ways.
 *
 * A sample's span is its OTLP Link (dict.links), or its pprof labels
 * `span_id` / `trace_id` as Pyroscope's span-profile integrations set them
 * (otelpyroscope, the Java, .NET, Ruby and Python agents: span_id as 16 hex
 * digits, trace_id as 32). The processor turns one into the other as
 * configured (`to: links | labels | both`), keeps span and trace ids out of a
 * profile's series labels, and counts what it resolved.
 *
 * Span and trace ids are read by core/span.h, as the store's span index
 * reads them.
 */
#ifndef FC_PROCESSORS_SPANLINK_H
#define FC_PROCESSORS_SPANLINK_H

#include "core/batch.h"
#include "core/span.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fc_spanlink_to {
    FC_SPANLINK_TO_LINKS = 0,
    FC_SPANLINK_TO_LABELS = 1,
    FC_SPANLINK_TO_BOTH = 2,
};

struct fc_spanlink_config {
    int to; /* enum fc_spanlink_to */
    bool keep_span_name;
};

/* What one call changed (added to the processor's counters). */
struct fc_spanlink_stats {
    int64_t linked;              /* samples whose labels became a Link */
    int64_t labeled;             /* samples whose Link became labels */
    int64_t conflicts;           /* samples with a Link and labels naming another span */
    int64_t malformed;           /* span_id / trace_id labels that are not ids, left as they are */
    int64_t series_labels_moved; /* span_id / trace_id series labels moved to the samples */
    int64_t span_names_removed;  /* span_name labels removed (keep_span_name: false) */
};

/* Applies cfg to every profile of b (changed in place). FC_ETOOBIG: b's budget. */
int fc_spanlink_apply(struct fc_batch *b, const struct fc_spanlink_config *cfg,
                      struct fc_spanlink_stats *st, struct fc_error *err);

#endif
