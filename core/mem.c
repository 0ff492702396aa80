#include "core/mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die_oom(size_t n)
{
    fprintf(stderr, "level=fatal msg=\"out of memory allocating %zu bytes\"\n", n);
    abort();
}

void *fc_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        die_oom(n);
    }
    return p;
}

void *fc_xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);

    if (p == NULL) {
        die_oom(count * size);
    }
    return p;
}

void *fc_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (q == NULL) {
        die_oom(n);
    }
    return q;
}

char *fc_xstrndup(const char *s, size_t n)
{
    char *d = fc_xmalloc(n + 1);

    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *fc_xstrdup(const char *s)
{
    return fc_xstrndup(s, strlen(s));
}

char *fc_xasprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *s;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    s = fc_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}
