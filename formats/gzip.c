#include "formats/gzip.h"

#include <libdeflate.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

int fc_gunzip(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out, struct fc_error *err)
{
    z_stream z;
    uint8_t chunk[65536];
    size_t produced = 0;
    int zrc;
    int rc = FC_OK;

    memset(&z, 0, sizeof(z));
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK) {
        return fc_errorf(err, FC_EIO, "gzip: cannot initialise zlib");
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)(len > UINT32_MAX ? UINT32_MAX : len);
    for (;;) {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        zrc = inflate(&z, Z_NO_FLUSH);
        if (zrc != Z_OK && zrc != Z_STREAM_END && zrc != Z_BUF_ERROR) {
            rc = fc_errorf(err, FC_EPROTO, "gzip: corrupt data (%s)", z.msg ? z.msg : "inflate");
            goto out;
        }
        {
            size_t n = sizeof(chunk) - z.avail_out;
            produced += n;
            if (limit != 0 && produced > limit) {
                rc = fc_errorf(err, FC_ETOOBIG,
                               "gzip: decompressed size exceeds the limit of %zu bytes", limit);
                goto out;
            }
            if (fc_buf_append(out, chunk, n) != FC_OK) {
                rc = fc_errorf(err, FC_ETOOBIG, "gzip: decompressed data exceeds the buffer limit");
                goto out;
            }
        }
        if (zrc == Z_STREAM_END) {
            /* Another member may follow (concatenated gzip files). */
            if (z.avail_in >= 2 && z.next_in[0] == 0x1f && z.next_in[1] == 0x8b) {
                inflateReset(&z);
                continue;
            }
            break;
        }
        if (zrc == Z_BUF_ERROR && z.avail_in == 0) {
            rc = fc_errorf(err, FC_EPROTO, "gzip: truncated data");
            goto out;
        }
    }
out:
    inflateEnd(&z);
    return rc;
}

/*
 * libdeflate, not zlib: on the small buffers we compress (a request, a
 * profile) it is several times faster, and it needs no stream state.
 */
int fc_gzip(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err)
{
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    uint8_t *tmp;
    size_t bound, n;
    int rc;

    if (c == NULL) {
        return fc_errorf(err, FC_EIO, "gzip: cannot make a compressor of level %d", level);
    }
    bound = libdeflate_gzip_compress_bound(c, len);
    tmp = malloc(bound);
    if (tmp == NULL) {
        libdeflate_free_compressor(c);
        return fc_errorf(err, FC_EIO, "gzip: out of memory");
    }
    n = libdeflate_gzip_compress(c, in, len, tmp, bound);
    libdeflate_free_compressor(c);
    if (n == 0) {
        rc = fc_errorf(err, FC_EIO, "gzip: compression failed");
    } else if (fc_buf_append(out, tmp, n) != FC_OK) {
        rc = fc_errorf(err, FC_ETOOBIG, "gzip: output exceeds the buffer limit");
    } else {
        rc = FC_OK;
    }
    free(tmp);
    return rc;
}
