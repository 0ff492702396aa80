/*
 * RE2 (Go regexp) syntax for PCRE2: a translation that refuses what Go's
 * regexp/syntax refuses and rewrites what PCRE2 reads differently, so the
 * compiled pattern matches what Prometheus would. Private to processors/relabel/.
 */
#ifndef FC_PROCESSORS_RELABEL_RE2_H
#define FC_PROCESSORS_RELABEL_RE2_H

#include "core/buf.h"

#include <stddef.h>
#include <stdint.h>

/*
 * Appends to out the PCRE2 form of the RE2 pattern re[0..len). Returns 0, or
 * -1 with Go's kind of message in why ("missing closing ): `(a`"; refusals of
 * PCRE-only syntax say what is not supported).
 */
int fc__relabel_re2_translate(const char *re, size_t len, struct fc_buf *out, char *why,
                              size_t why_size);

/*
 * Decodes one UTF-8 sequence at s[0..n) (n > 0) as Go does: returns its
 * length and sets *cp; an invalid byte (bad lead, overlong, surrogate, above
 * U+10FFFF, truncated) returns 1 and sets *cp to -1.
 */
size_t fc__relabel_utf8_decode(const uint8_t *s, size_t n, int32_t *cp);

/* Appends the UTF-8 encoding of cp (a valid code point) to out; 0 or FC_ETOOBIG. */
int fc__relabel_utf8_put(struct fc_buf *out, int32_t cp);

#endif
