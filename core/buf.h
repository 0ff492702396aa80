/*
 * A growable byte buffer with a hard limit (curl's dynbuf "toobig"). Appends
 * past the limit fail with FC_ETOOBIG and leave the buffer as it was. Memory
 * is the buffer's own (malloc); fc_buf_release() frees it.
 */
#ifndef FC_BUF_H
#define FC_BUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_buf {
    uint8_t *data; /* NUL-terminated when len < cap, for text use */
    size_t len;
    size_t cap;
    size_t limit; /* 0 = unlimited */
};

void fc_buf_init(struct fc_buf *b, size_t limit);
void fc_buf_release(struct fc_buf *b);
void fc_buf_reset(struct fc_buf *b);
int fc_buf_reserve(struct fc_buf *b, size_t extra);
int fc_buf_append(struct fc_buf *b, const void *p, size_t n);
int fc_buf_puts(struct fc_buf *b, const char *s);
int fc_buf_printf(struct fc_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends s with JSON string escaping, without the quotes; bytes that are not
 * valid UTF-8 become U+FFFD, so the answer is valid JSON for strict parsers. */
int fc_buf_json_escape(struct fc_buf *b, const char *s, size_t n);
/* Decodes exactly 2*n hex digits (either case) of s[0..len) into out; false otherwise. */
bool fc_hex_decode(const char *s, size_t len, uint8_t *out, size_t n);
/* Takes ownership of the data; the buffer is empty afterwards. */
uint8_t *fc_buf_detach(struct fc_buf *b, size_t *len);

#endif
