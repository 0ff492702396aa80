#include "formats/gzip.h"

#include <isa-l/igzip_lib.h>
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
 * A compressor holds its match finder's tables (libdeflate: about 200 KB at
 * level 1, 650 KB above; ISA-L's stream: 80 KB): making one per call cost
 * more than compressing a request, and one per thread cost that much
 * resident memory for each receiving worker (8 connections, 8 workers:
 * 1.6 MB). Compressors are shared instead: taken from a pool for one call
 * and given back, so there are only as many as compressions ever ran at once
 * (about the cores). The pool keeps at most POOL_MAX of them; one more given
 * back is freed.
 */
#define POOL_MAX 8

struct pooled_compressor {
    struct libdeflate_compressor *c; /* levels 1 to 12 */
    struct isal_zstream *z;          /* FC_GZIP_FASTEST */
    int level;
    struct pooled_compressor *next;
};

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pooled_compressor *pool; /* idle compressors, the last given back first */
static unsigned pool_n;

static void compressor_free(struct pooled_compressor *pc)
{
    if (pc->c != NULL) {
        libdeflate_free_compressor(pc->c);
    }
    free(pc->z);
    free(pc);
}

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
    pc->level = level;
    if (level == FC_GZIP_FASTEST) {
        pc->z = malloc(sizeof(*pc->z));
    } else {
        pc->c = libdeflate_alloc_compressor(level);
    }
    if (pc->c == NULL && pc->z == NULL) {
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
        compressor_free(pc);
    }
}

/*
 * ISA-L's igzip at its level 0 in one call (stateless). Its output can pass
 * len on incompressible input (stored blocks have headers); the bound below
 * covers that, and STATELESS_OVERFLOW all the same makes the caller use
 * libdeflate. Returns the bytes written, 0 when it did not fit.
 */
static size_t igzip_fastest(struct isal_zstream *z, const uint8_t *in, size_t len, uint8_t *out,
                            size_t room)
{
    isal_deflate_stateless_init(z);
    z->level = 0;
    z->gzip_flag = IGZIP_GZIP;
    z->end_of_stream = 1;
    z->flush = NO_FLUSH;
    z->next_in = (uint8_t *)in;
    z->avail_in = (uint32_t)len;
    z->next_out = out;
    z->avail_out = room > UINT32_MAX ? UINT32_MAX : (uint32_t)room;
    if (isal_deflate_stateless(z) != COMP_OK) {
        return 0;
    }
    return z->total_out;
}

/* A stored deflate block per 64 KiB plus headers: the most igzip's level 0 writes. */
static size_t igzip_bound(size_t len)
{
    return len + (len / 65535 + 1) * 5 + ISAL_DEF_MAX_HDR_SIZE + 64;
}

/*
 * libdeflate, not zlib: on the small buffers we compress (a request, a
 * profile) it is several times faster, and it needs no stream state.
 * FC_GZIP_FASTEST is ISA-L's igzip (level 0), about four times faster again
 * than libdeflate's level 1 on a request of the corpus, for output about a
 * sixth larger: the exporters' choice, where compressing is most of the
 * cost of forwarding a request (bench/bench_forward).
 */
int fc_gzip(const uint8_t *in, size_t len, int level, struct fc_buf *out, struct fc_error *err)
{
    struct pooled_compressor *pc;
    size_t bound, n = 0;
    int rc = FC_OK;

    /* igzip counts in 32 bits: near 4 GiB its stored blocks' size would wrap. */
    if (level == FC_GZIP_FASTEST && len <= UINT32_MAX / 2) {
        pc = compressor_get(level);
        if (pc != NULL) {
            bound = igzip_bound(len);
            if (fc_buf_reserve(out, bound) != FC_OK) {
                rc = fc_errorf(err, FC_ETOOBIG, "gzip: output exceeds the buffer limit");
            } else {
                n = igzip_fastest(pc->z, in, len, out->data + out->len, bound);
            }
            compressor_put(pc);
            if (rc != FC_OK || n > 0) {
                if (n > 0) {
                    out->len += n;
                    out->data[out->len] = '\0';
                }
                return rc;
            }
        }
        /* Out of memory, or igzip did not fit: libdeflate's fastest level. */
    }
    if (level == FC_GZIP_FASTEST) {
        level = 1;
    }
    pc = compressor_get(level);
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
