#include "formats/gzip.h"

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

int fc_gzip(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err)
{
    z_stream z;
    uint8_t chunk[65536];
    int zrc;

    memset(&z, 0, sizeof(z));
    if (deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return fc_errorf(err, FC_EIO, "gzip: cannot initialise zlib");
    }
    z.next_in = (Bytef *)(uintptr_t)in;
    z.avail_in = (uInt)len;
    do {
        z.next_out = chunk;
        z.avail_out = sizeof(chunk);
        zrc = deflate(&z, Z_FINISH);
        if (fc_buf_append(out, chunk, sizeof(chunk) - z.avail_out) != FC_OK) {
            deflateEnd(&z);
            return fc_errorf(err, FC_ETOOBIG, "gzip: output exceeds the buffer limit");
        }
    } while (zrc == Z_OK || zrc == Z_BUF_ERROR);
    deflateEnd(&z);
    return zrc == Z_STREAM_END ? FC_OK : fc_errorf(err, FC_EIO, "gzip: deflate failed");
}
