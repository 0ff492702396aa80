/*
 * pprof (perftools.profiles.Profile), gzipped or not, <-> the batch model.
 *
 * Decoding adds one fc_profile per pprof file, keeping every sample type,
 * sample label, location (address, mapping, inlined lines), function,
 * mapping (build id, flags), period, time, duration, drop/keep frames and
 * comments. Every index and length is checked; errors name the element
 * ("sample 12: location_id 99 is not in the location table").
 */
#ifndef FC_FORMATS_PPROF_H
#define FC_FORMATS_PPROF_H

#include "core/batch.h"
#include "core/buf.h"
#include "core/err.h"

#include <stddef.h>
#include <stdint.h>

/*
 * What the decoder itself bounds. Stack depth, labels and their lengths are
 * the receivers' caps on the decoded batch (core/limits.h), the same for
 * every format.
 */
struct fc_pprof_limits {
    size_t max_decompressed; /* gunzip output cap, bytes; 0 = none */
};

/*
 * Decodes data (gzip detected by its magic) into a new profile of b.
 * *out (may be NULL) receives it. Errors: FC_EPROTO (malformed, 422/400),
 * FC_ETOOBIG (a limit or the batch budget).
 */
int fc_pprof_decode(struct fc_batch *b, const uint8_t *data, size_t len,
                    const struct fc_pprof_limits *limits, struct fc_profile **out,
                    struct fc_error *err);

/* Encodes profile p of b as an uncompressed pprof message appended to out. */
int fc_pprof_encode(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out,
                    struct fc_error *err);

#endif
