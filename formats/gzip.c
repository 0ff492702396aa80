#include "formats/gzip.h"

#include <libdeflate.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* A gzip member's smallest size: a 10-byte header, an empty block, an 8-byte trailer. */
#define GZIP_MIN_MEMBER 18
/* deflate expands at most about 1032:1; a member's ISIZE claiming more is a lie. */
#define DEFLATE_MAX_RATIO 1032

/*
 * libdeflate inflates a whole member into a buffer it is given. Its size
 * comes from the ISIZE trailer of the input's last member (exact for the
 * usual single member), bounded by what deflate can produce from the input
 * and by the room left under limit; when the member does not fit, the
 * buffer doubles and the member is inflated again, up to limit.
 */
int fc_gunzip_ex(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out, size_t *trailing,
                 struct fc_error *err)
{
    struct libdeflate_decompressor *d;
    size_t pos = 0, produced = 0;
    int rc = FC_OK;

    if (trailing != NULL) {
        *trailing = 0;
    }
    if (len < GZIP_MIN_MEMBER) {
        return fc_errorf(err, FC_EPROTO, "gzip: truncated data");
    }
    d = libdeflate_alloc_decompressor();
    if (d == NULL) {
        return fc_errorf(err, FC_EIO, "gzip: out of memory");
    }
    for (;;) {
        size_t rest = len - pos;
        const uint8_t *tail = in + len - 4;
        size_t isize =
            (size_t)tail[0] | (size_t)tail[1] << 8 | (size_t)tail[2] << 16 | (size_t)tail[3] << 24;
        size_t room = limit != 0 ? limit - produced : SIZE_MAX / 2;
        size_t most = rest > SIZE_MAX / DEFLATE_MAX_RATIO ? SIZE_MAX : rest * DEFLATE_MAX_RATIO;
        size_t cap = isize < most ? isize : most;
        size_t used_in = 0, used_out = 0;
        enum libdeflate_result r;

        cap = cap < 4096 ? 4096 : cap;
        cap = cap < room ? cap : room;
        for (;;) {
            if (fc_buf_reserve(out, cap) != FC_OK) {
                rc = fc_errorf(err, FC_ETOOBIG, "gzip: decompressed data exceeds the buffer limit");
                goto done;
            }
            r = libdeflate_gzip_decompress_ex(d, in + pos, rest, out->data + out->len, cap,
                                              &used_in, &used_out);
            if (r != LIBDEFLATE_INSUFFICIENT_SPACE) {
                break;
            }
            if (cap >= room) {
                rc = fc_errorf(err, FC_ETOOBIG,
                               "gzip: decompressed size exceeds the limit of %zu bytes", limit);
                goto done;
            }
            cap = cap > room / 2 ? room : cap * 2;
        }
        if (r != LIBDEFLATE_SUCCESS) {
            /* libdeflate cannot tell a cut stream from a corrupt one; a short input is likely cut.
             */
            rc = fc_errorf(err, FC_EPROTO, "gzip: corrupt or truncated data");
            goto done;
        }
        out->len += used_out;
        out->data[out->len] = '\0';
        produced += used_out;
        pos += used_in;
        /* Another member may follow (concatenated gzip files); anything else is left over. */
        if (len - pos >= 2 && in[pos] == 0x1f && in[pos + 1] == 0x8b) {
            if (len - pos < GZIP_MIN_MEMBER) {
                rc = fc_errorf(err, FC_EPROTO, "gzip: truncated data");
                goto done;
            }
            continue;
        }
        if (trailing != NULL) {
            *trailing = len - pos;
        }
        break;
    }
done:
    libdeflate_free_decompressor(d);
    return rc;
}

int fc_gunzip(const uint8_t *in, size_t len, size_t limit, struct fc_buf *out, struct fc_error *err)
{
    return fc_gunzip_ex(in, len, limit, out, NULL, err);
}

/*
 * A libdeflate compressor holds its match finder's tables (about 200 KB at
 * level 1, 650 KB above): making one per call cost more than compressing a
 * request, and one per thread cost that much resident memory for each
 * receiving worker (8 connections, 8 workers: 1.6 MB). Compressors are
 * shared instead: taken from a pool for one call and given back, so there
 * are only as many as compressions ever ran at once (about the cores). The
 * pool keeps at most POOL_MAX of them; one more given back is freed.
 */
#define POOL_MAX 8

struct pooled_compressor {
    struct libdeflate_compressor *c;
    int level;
    struct pooled_compressor *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pooled_compressor *pool; /* idle compressors, the last given back first */
static unsigned pool_n;

/* A compressor of this level, the caller's until compressor_put(); NULL when out of memory. */
static struct pooled_compressor *compressor_get(int level)
{
    struct pooled_compressor *pc, **link;

    pthread_mutex_lock(&pool_lock);
    for (link = &pool; (pc = *link) != NULL; link = &pc->next) {
        if (pc->level == level) {
            *link = pc->next;
            pool_n--;
            break;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    if (pc != NULL) {
        return pc;
    }
    pc = calloc(1, sizeof(*pc));
    if (pc == NULL) {
        return NULL;
    }
    pc->c = libdeflate_alloc_compressor(level);
    pc->level = level;
    if (pc->c == NULL) {
        free(pc);
        return NULL;
    }
    return pc;
}

static void compressor_put(struct pooled_compressor *pc)
{
    pthread_mutex_lock(&pool_lock);
    if (pool_n < POOL_MAX) {
        pc->next = pool;
        pool = pc;
        pool_n++;
        pc = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    if (pc != NULL) {
        libdeflate_free_compressor(pc->c);
        free(pc);
    }
}

/*
 * libdeflate, not zlib: on the small buffers we compress (a request, a
 * profile) it is several times faster, and it needs no stream state.
 */
int fc_gzip(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err)
{
    struct pooled_compressor *pc = compressor_get(level);
    size_t bound, n;
    int rc = FC_OK;

    if (pc == NULL) {
        return fc_errorf(err, FC_EIO, "gzip: cannot make a compressor of level %d", level);
    }
    bound = libdeflate_gzip_compress_bound(pc->c, len);
    if (fc_buf_reserve(out, bound) != FC_OK) {
        rc = fc_errorf(err, FC_ETOOBIG, "gzip: output exceeds the buffer limit");
    } else if ((n = libdeflate_gzip_compress(pc->c, in, len, out->data + out->len, bound)) == 0) {
        rc = fc_errorf(err, FC_EIO, "gzip: compression failed");
    } else {
        out->len += n;
        out->data[out->len] = '\0';
    }
    compressor_put(pc);
    return rc;
}
