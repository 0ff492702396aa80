/*
 * The persistent queue's on-disk formats (persist.h): records and ack
 * entries, their encoders and the scanners that read them back. Everything
 * read is outside input: bounds-checked, and fuzzed (tests/fuzz/fuzz_persist_queue.c).
 */
#include "exporters/helper/persist.h"

#include <string.h>
#include <zlib.h>

#define META FC_PERSIST_META
#define MAX_PAYLOAD FC_PERSIST_MAX_PAYLOAD

/* ---- encoding ---------------------------------------------------------------------------- */

static void put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static uint16_t get16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

int fc_persist_parse(const uint8_t *buf, size_t len, struct fc_persist_record *r)
{
    uint32_t plen, crc;
    const uint8_t *p;
    uint16_t tl, gl;

    if (len < FC_PERSIST_HEADER || get32(buf) != FC_PERSIST_MAGIC) {
        return FC_EPROTO;
    }
    plen = get32(buf + 4);
    if (plen < META || plen > MAX_PAYLOAD || plen > len - FC_PERSIST_HEADER) {
        return FC_EPROTO;
    }
    crc = (uint32_t)crc32(0L, buf + 4, 4);
    crc = (uint32_t)crc32(crc, buf + FC_PERSIST_HEADER, plen);
    if (crc != get32(buf + 8)) {
        return FC_EPROTO;
    }
    p = buf + FC_PERSIST_HEADER;
    tl = get16(p + 20);
    if ((size_t)22 + tl + 2 > plen) {
        return FC_EPROTO;
    }
    gl = get16(p + 22 + tl);
    if ((size_t)META + tl + gl > plen) {
        return FC_EPROTO;
    }
    memset(r, 0, sizeof(*r));
    r->len = FC_PERSIST_HEADER + plen;
    r->seq = get64(p);
    r->samples = get64(p + 8);
    r->profiles = get32(p + 16);
    r->tenant = (const char *)p + 22;
    r->tenant_len = tl;
    r->target = (const char *)p + 24 + tl;
    r->target_len = gl;
    r->body = p + META + tl + gl;
    r->body_len = plen - META - tl - gl;
    /* Written from C strings: a NUL inside is damage. seq 0 is never written. */
    if (r->seq == 0 || memchr(r->tenant, 0, tl) != NULL || memchr(r->target, 0, gl) != NULL) {
        return FC_EPROTO;
    }
    return FC_OK;
}

size_t fc_persist_scan(const uint8_t *buf, size_t len,
                       void (*cb)(void *arg, const struct fc_persist_record *r), void *arg,
                       uint64_t *corrupt)
{
    size_t off = 0, end = 0;
    bool bad = false;

    while (off < len) {
        struct fc_persist_record r;
        if (fc_persist_parse(buf + off, len - off, &r) == FC_OK) {
            r.off = off;
            cb(arg, &r);
            off += r.len;
            end = off;
            bad = false;
            continue;
        }
        /* Damage: count the region once. */
        if (!bad) {
            (*corrupt)++;
            bad = true;
        }
        if (len - off >= FC_PERSIST_HEADER && get32(buf + off) == FC_PERSIST_MAGIC) {
            uint32_t plen = get32(buf + off + 4);
            if (plen > len - off - FC_PERSIST_HEADER) {
                /*
                 * A record cut short: the torn tail of a crash. Nothing after
                 * it was written, and its partial payload (bytes a client
                 * chose) must never be scanned for records.
                 */
                break;
            }
            /* A whole record that fails its checks: skip it, not into its payload. */
            off += FC_PERSIST_HEADER + (size_t)plen;
            continue;
        }
        off++; /* no header here: look for the next one */
    }
    return end;
}

static uint32_t ack_crc(const uint8_t *e)
{
    return (uint32_t)crc32(0L, e, 9);
}

void fc_persist_scan_acks(const uint8_t *buf, size_t len,
                          void (*cb)(void *arg, uint64_t seq, int kind), void *arg,
                          uint64_t *corrupt)
{
    size_t off = 0;
    bool bad = false;

    while (off < len) {
        const uint8_t *e = buf + off;
        if (len - off >= FC_PERSIST_ACK_SIZE && get32(e + 9) == ack_crc(e) &&
            (e[8] == FC_PERSIST_DISPATCHED || e[8] == FC_PERSIST_DONE) && get64(e) != 0) {
            cb(arg, get64(e), e[8]);
            off += FC_PERSIST_ACK_SIZE;
            bad = false;
            continue;
        }
        if (!bad) {
            (*corrupt)++;
            bad = true;
        }
        off++;
    }
}

size_t fc_persist_encode_head(uint8_t *h, uint64_t seq, const struct fc_send_item *it)
{
    uint16_t tl = (uint16_t)strlen(it->tenant), gl = (uint16_t)strlen(it->target);
    size_t hl = FC_PERSIST_HEADER + META + tl + gl;
    uint32_t crc;

    put32(h, FC_PERSIST_MAGIC);
    put32(h + 4, (uint32_t)(META + tl + gl + it->body_len));
    put64(h + 12, seq);
    put64(h + 20, it->samples);
    put32(h + 28, it->profiles);
    put16(h + 32, tl);
    memcpy(h + 34, it->tenant, tl);
    put16(h + 34 + tl, gl);
    memcpy(h + 36 + tl, it->target, gl);
    crc = (uint32_t)crc32(0L, h + 4, 4);
    crc = (uint32_t)crc32(crc, h + FC_PERSIST_HEADER, (uInt)(hl - FC_PERSIST_HEADER));
    crc = (uint32_t)crc32(crc, it->body, (uInt)it->body_len);
    put32(h + 8, crc);
    return hl;
}

void fc_persist_encode_ack(uint8_t *e, uint64_t seq, int kind)
{
    put64(e, seq);
    e[8] = (uint8_t)kind;
    put32(e + 9, ack_crc(e));
}
