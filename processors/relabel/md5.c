/* MD5 (RFC 1321), for the relabel hashmod action: Prometheus hashes with it. */
#include "processors/relabel/md5.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct md5 {
    uint32_t h[4];
    uint64_t len;
    uint8_t block[64];
    size_t fill;
};

static uint32_t rol(uint32_t x, unsigned c)
{
    return (x << c) | (x >> (32 - c));
}

static void md5_block(struct md5 *m, const uint8_t *p)
{
    static const uint32_t K[64] = {
        0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
        0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
        0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
        0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
        0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
        0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
        0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
        0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
        0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
        0xeb86d391,
    };
    static const unsigned S[16] = {7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21};
    uint32_t w[16];
    uint32_t a = m->h[0];
    uint32_t b = m->h[1];
    uint32_t c = m->h[2];
    uint32_t d = m->h[3];

    for (int i = 0; i < 16; i++) {
        w[i] = (uint32_t)p[4 * i] | (uint32_t)p[4 * i + 1] << 8 | (uint32_t)p[4 * i + 2] << 16 |
               (uint32_t)p[4 * i + 3] << 24;
    }
    for (int i = 0; i < 64; i++) {
        uint32_t f;
        int g;
        int round = i / 16;
        if (round == 0) {
            f = (b & c) | (~b & d);
            g = i;
        } else if (round == 1) {
            f = (d & b) | (~d & c);
            g = (5 * i + 1) % 16;
        } else if (round == 2) {
            f = b ^ c ^ d;
            g = (3 * i + 5) % 16;
        } else {
            f = c ^ (b | ~d);
            g = (7 * i) % 16;
        }
        f += a + K[i] + w[g];
        a = d;
        d = c;
        c = b;
        b += rol(f, S[round * 4 + i % 4]);
    }
    m->h[0] += a;
    m->h[1] += b;
    m->h[2] += c;
    m->h[3] += d;
}

static void md5_update(struct md5 *m, const uint8_t *p, size_t n)
{
    m->len += n;
    while (n > 0) {
        size_t take = 64 - m->fill < n ? 64 - m->fill : n;
        memcpy(m->block + m->fill, p, take);
        m->fill += take;
        p += take;
        n -= take;
        if (m->fill == 64) {
            md5_block(m, m->block);
            m->fill = 0;
        }
    }
}

void fc_md5(const void *p, size_t n, uint8_t out[16])
{
    struct md5 m = {{0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476}, 0, {0}, 0};
    uint64_t bits;
    uint8_t pad = 0x80;
    uint8_t zero = 0;
    uint8_t len[8];

    md5_update(&m, p, n);
    bits = m.len * 8;
    md5_update(&m, &pad, 1);
    while (m.fill != 56) {
        md5_update(&m, &zero, 1);
    }
    for (int i = 0; i < 8; i++) {
        len[i] = (uint8_t)(bits >> (8 * i));
    }
    md5_update(&m, len, 8);
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 4; k++) {
            out[4 * i + k] = (uint8_t)(m.h[i] >> (8 * k));
        }
    }
}
