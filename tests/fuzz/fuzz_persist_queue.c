/*
 * The persistent sending queue's readers (exporters/helper/persist.h) on
 * arbitrary bytes. Input: a little-endian u16 n, then n bytes of a segment
 * file (fewer when the input is shorter), then the rest as acks.log.
 *
 * 1. The scanners must stay in bounds (ASan) and hand over only records
 *    whose checksum is right: each one is checked here against zlib's crc32
 *    of its length field and payload, independently of the parser, and its
 *    fields must lie inside the record.
 * 2. The same bytes become real files in a temporary directory and the
 *    queue is opened (replay must never refuse to start), then every queued
 *    record is taken and loaded: each item must equal, byte for byte, a
 *    record the scanner found with that seq.
 */
#include "core/log.h"
#include "exporters/helper/persist.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];

static void clean_dir(void)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];

    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
}

static void remove_dir(void)
{
    clean_dir();
    rmdir(dir);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

struct found {
    const uint8_t *seg;
    size_t seg_len;
    struct fc_persist_record r[4096];
    size_t n;
};

static void on_record(void *arg, const struct fc_persist_record *r)
{
    struct found *f = arg;
    const uint8_t *rec = f->seg + r->off, *payload = rec + FC_PERSIST_HEADER;
    uint32_t plen, crc;

    if (r->off > f->seg_len || r->len > f->seg_len - r->off || r->len < FC_PERSIST_HEADER) {
        abort(); /* a record outside the buffer */
    }
    plen = le32(rec + 4);
    if (le32(rec) != FC_PERSIST_MAGIC || (uint64_t)plen + FC_PERSIST_HEADER != r->len) {
        abort();
    }
    crc = (uint32_t)crc32(0L, rec + 4, 4);
    crc = (uint32_t)crc32(crc, payload, plen);
    if (crc != le32(rec + 8)) {
        abort(); /* delivered with a wrong checksum */
    }
    if ((const uint8_t *)r->tenant < payload || (const uint8_t *)r->target < payload ||
        r->body < payload || r->body + r->body_len != rec + r->len ||
        (const uint8_t *)r->tenant + r->tenant_len > rec + r->len ||
        (const uint8_t *)r->target + r->target_len > rec + r->len) {
        abort();
    }
    if (f->n < 4096) {
        f->r[f->n++] = *r;
    }
}

static void on_ack(void *arg, uint64_t seq, int kind)
{
    (void)arg;
    if (seq == 0 || (kind != FC_PERSIST_DISPATCHED && kind != FC_PERSIST_DONE)) {
        abort();
    }
}

static void write_file(const char *name, const uint8_t *p, size_t n)
{
    char path[512];
    int fd;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (n > 0 && write(fd, p, n) != (ssize_t)n)) {
        abort();
    }
    close(fd);
}

static const struct fc_persist_record *by_seq(const struct found *f, uint64_t seq)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->r[i].seq == seq) {
            return &f->r[i];
        }
    }
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct found f;
    struct fc_persist_options o = {0};
    struct fc_persist *p = NULL;
    struct fc_persist_ref ref;
    struct fc_error err = {0};
    uint64_t corrupt = 0;
    size_t n, end;

    if (size < 2) {
        return 0;
    }
    n = (size_t)(data[0] | data[1] << 8);
    data += 2;
    size -= 2;
    n = n < size ? n : size;

    f.seg = data;
    f.seg_len = n;
    f.n = 0;
    end = fc_persist_scan(data, n, on_record, &f, &corrupt);
    if (end > n || (f.n > 0 && end != f.r[f.n - 1].off + f.r[f.n - 1].len)) {
        abort();
    }
    fc_persist_scan_acks(data + n, size - n, on_ack, NULL, &corrupt);
    if (f.n == sizeof(f.r) / sizeof(f.r[0])) {
        return 0; /* more records than we keep to compare with */
    }

    if (dir[0] == '\0') {
        fc_log_set_level(FC_LOG_ERROR); /* damage is logged as a warning: expected here */
        snprintf(dir, sizeof(dir), "/tmp/fc-fuzz-persist-XXXXXX");
        if (mkdtemp(dir) == NULL) {
            abort();
        }
        atexit(remove_dir);
    }
    clean_dir();
    write_file("seg-0000000000000001.log", data, n);
    write_file("acks.log", data + n, size - n);
    o.dir = dir;
    o.component = "fuzz";
    if (fc_persist_open(&o, &p, &err) != FC_OK) {
        fprintf(stderr, "replay refused to start: %s\n", err.msg);
        abort();
    }
    while (fc_persist_take(p, &ref)) {
        struct fc_send_item *it = NULL;
        const struct fc_persist_record *r = by_seq(&f, ref.seq);
        if (r == NULL) {
            abort(); /* queued a record the scanner did not find */
        }
        if (fc_persist_load(p, &ref, &it, &err) != FC_OK) {
            abort(); /* the file did not change under it */
        }
        if (it->body_len != r->body_len || memcmp(it->body, r->body, r->body_len) != 0 ||
            strlen(it->tenant) != r->tenant_len || strlen(it->target) != r->target_len ||
            it->samples != r->samples || it->profiles != r->profiles) {
            abort();
        }
        fc_send_item_free(it);
        fc_persist_done(p, &ref);
    }
    fc_persist_close(p);
    return 0;
}
