/* gzip, both ways, with a hard cap on what decompression may produce. */
#ifndef FC_FORMATS_GZIP_H
#define FC_FORMATS_GZIP_H

#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

static inline bool fc_is_gzip(const uint8_t *p, size_t len)
{
    return len >= 2 && p[0] == 0x1f && p[1] == 0x8b;
}

/*
 * Appends the decompressed bytes to out. Fails with FC_ETOOBIG as soon as
 * the output would pass `limit` bytes (decompression bombs), FC_EPROTO on
 * corrupt or truncated data. Concatenated gzip members are all read.
 */
int fc_gunzip(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out,
              struct fc_error *err);
/* The same; *trailing = bytes after the last gzip member (ignored by fc_gunzip). */
int fc_gunzip_ex(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out, size_t *trailing,
                 struct fc_error *err);
/*
 * Appends in, gzipped, to out. level: 1 (fast) to 12 (small), libdeflate's
 * scale, or FC_GZIP_FASTEST: ISA-L's igzip, several times faster than 1 for
 * somewhat larger output (what the exporters send).
 */
#define FC_GZIP_FASTEST 0
int fc_gzip(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err);

#endif
