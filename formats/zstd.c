#include "formats/zstd.h"

#include <zstd.h>

int fc_unzstd(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out, struct fc_error *err)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    ZSTD_inBuffer src = {in, len, 0};
    size_t produced = 0, last = 0;
    int rc = FC_OK;

    if (d == NULL) {
        return fc_errorf(err, FC_EIO, "zstd: out of memory");
    }
    ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, FC_ZSTD_WINDOW_LOG_MAX);
    if (len == 0) {
        rc = fc_errorf(err, FC_EPROTO, "zstd: empty data");
    }
    while (rc == FC_OK) {
        size_t room = limit != 0 ? limit - produced + 1 : SIZE_MAX / 2;
        size_t chunk = room < (64u << 10) ? room : (64u << 10);
        ZSTD_outBuffer dst;
        if (fc_buf_reserve(out, chunk) != FC_OK) {
            rc = fc_errorf(err, FC_ETOOBIG, "zstd: decompressed data exceeds the buffer limit");
            break;
        }
        dst = (ZSTD_outBuffer){out->data + out->len, chunk, 0};
        last = ZSTD_decompressStream(d, &dst, &src);
        if (ZSTD_isError(last)) {
            rc = fc_errorf(err, FC_EPROTO, "zstd: %s", ZSTD_getErrorName(last));
            break;
        }
        out->len += dst.pos;
        produced += dst.pos;
        if (limit != 0 && produced > limit) {
            out->len -= produced - limit;
            rc = fc_errorf(err, FC_ETOOBIG,
                           "zstd: decompressed size exceeds the limit of %zu bytes", limit);
            break;
        }
        if (src.pos == src.size && dst.pos < dst.size) {
            /* All input read and the output not full: a frame ended (0) or was cut short. */
            if (last != 0) {
                rc = fc_errorf(err, FC_EPROTO, "zstd: truncated data");
            }
            break;
        }
    }
    if (out->len < out->cap) {
        out->data[out->len] = '\0';
    }
    ZSTD_freeDCtx(d);
    return rc;
}

int fc_zstd(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err)
{
    size_t bound = ZSTD_compressBound(len);
    size_t n;

    if (fc_buf_reserve(out, bound) != FC_OK) {
        return fc_errorf(err, FC_ETOOBIG, "zstd: out of memory");
    }
    n = ZSTD_compress(out->data + out->len, bound, in, len, level);
    if (ZSTD_isError(n)) {
        return fc_errorf(err, FC_EIO, "zstd: %s", ZSTD_getErrorName(n));
    }
    out->len += n;
    return FC_OK;
}
