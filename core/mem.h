/*
 * Allocation for small, program-sized objects: these abort with the size on
 * failure, so callers need no NULL checks. Input-sized memory goes through an
 * arena with a budget instead (core/arena.h), which fails cleanly.
 */
#ifndef FC_MEM_H
#define FC_MEM_H

#include <stddef.h>

void *fc_xmalloc(size_t n);
void *fc_xcalloc(size_t count, size_t size);
void *fc_xrealloc(void *p, size_t n);
char *fc_xstrdup(const char *s);
char *fc_xstrndup(const char *s, size_t n);
char *fc_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#define FC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
