/*
 * zstd bodies (HTTP Content-Encoding: zstd), as the Collector's confighttp
 * sends and accepts them. Decoding is bounded like fc_gunzip: the output by
 * a limit, and the window a frame may ask for by FC_ZSTD_WINDOW_LOG_MAX, so
 * a hostile frame cannot make us allocate more than 16 MiB of window.
 */
#ifndef FC_FORMATS_ZSTD_H
#define FC_FORMATS_ZSTD_H

#include "core/buf.h"
#include "core/err.h"

#include <stddef.h>
#include <stdint.h>

#define FC_ZSTD_WINDOW_LOG_MAX 24

/*
 * Appends the decompressed bytes of every frame of in to out. FC_ETOOBIG as
 * soon as the output would pass limit bytes (0 = none), FC_EPROTO on
 * corrupt or truncated data (the message names which).
 */
int fc_unzstd(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out,
              struct fc_error *err);
/* Appends in compressed as one frame at this level. */
int fc_zstd(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err);

#endif
