#include "core/arena.h"

#include "core/mem.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define ALIGN 16
#define CHUNK_MIN (16 * 1024)

struct fc_arena_chunk {
    struct fc_arena_chunk *next;
    size_t size; /* usable bytes after the header */
    size_t off;
    _Alignas(ALIGN) unsigned char data[];
};

struct fc_arena_cleanup {
    struct fc_arena_cleanup *next;
    void (*fn)(void *);
    void *data;
};

/* Bytes of every live arena's chunks: one atomic add per chunk, one subtract per arena. */
static _Atomic int64_t live_bytes;

int64_t fc_arena_live_bytes(void)
{
    return atomic_load_explicit(&live_bytes, memory_order_relaxed);
}

static size_t align_up(size_t n)
{
    return (n + (ALIGN - 1)) & ~(size_t)(ALIGN - 1);
}

struct fc_arena *fc_arena_new(size_t budget)
{
    struct fc_arena *a = fc_xcalloc(1, sizeof(*a));

    a->budget = budget;
    return a;
}

void fc_arena_free(struct fc_arena *a)
{
    if (a == NULL) {
        return;
    }
    for (struct fc_arena_cleanup *c = a->cleanup; c != NULL;) {
        struct fc_arena_cleanup *next = c->next;
        c->fn(c->data);
        free(c);
        c = next;
    }
    for (struct fc_arena_chunk *c = a->chunks; c != NULL;) {
        struct fc_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    if (a->used > 0) {
        atomic_fetch_sub_explicit(&live_bytes, (int64_t)a->used, memory_order_relaxed);
    }
    free(a);
}

static struct fc_arena_chunk *new_chunk(struct fc_arena *a, size_t need)
{
    /* Chunks double with use so that big batches take few mallocs. */
    size_t size = a->chunks ? a->chunks->size * 2 : CHUNK_MIN;
    struct fc_arena_chunk *c;

    if (size > 8u * 1024 * 1024) {
        size = 8u * 1024 * 1024;
    }
    if (size < need) {
        size = align_up(need);
    }
    if (a->budget != 0 && a->used + size > a->budget) {
        /* Try the exact size before refusing. */
        size = align_up(need);
        if (a->used + size > a->budget) {
            a->over_budget = true;
            return NULL;
        }
    }
    c = malloc(sizeof(*c) + size);
    if (c == NULL) {
        a->over_budget = true;
        return NULL;
    }
    c->size = size;
    c->off = 0;
    c->next = a->chunks;
    a->chunks = c;
    a->used += size;
    atomic_fetch_add_explicit(&live_bytes, (int64_t)size, memory_order_relaxed);
    return c;
}

void *fc_arena_alloc(struct fc_arena *a, size_t n)
{
    struct fc_arena_chunk *c = a->chunks;
    void *p;

    if (n > SIZE_MAX / 2) {
        a->over_budget = true;
        return NULL;
    }
    n = align_up(n ? n : 1);
    if (c == NULL || c->size - c->off < n) {
        c = new_chunk(a, n);
        if (c == NULL) {
            return NULL;
        }
    }
    p = c->data + c->off;
    c->off += n;
    a->last = p;
    a->last_size = n;
    return p;
}

void *fc_arena_calloc(struct fc_arena *a, size_t count, size_t size)
{
    void *p;

    if (size != 0 && count > SIZE_MAX / 2 / size) {
        a->over_budget = true;
        return NULL;
    }
    p = fc_arena_alloc(a, count * size);
    if (p != NULL) {
        memset(p, 0, count * size);
    }
    return p;
}

void *fc_arena_realloc(struct fc_arena *a, void *p, size_t old_n, size_t new_n)
{
    struct fc_arena_chunk *c = a->chunks;
    void *q;

    if (p == NULL) {
        return fc_arena_alloc(a, new_n);
    }
    if (new_n <= old_n) {
        return p;
    }
    if (p == a->last && c != NULL && (unsigned char *)p >= c->data &&
        (unsigned char *)p < c->data + c->size) {
        size_t start = (size_t)((unsigned char *)p - c->data);
        size_t need = align_up(new_n);
        if (need <= c->size - start && new_n <= SIZE_MAX / 2) {
            c->off = start + need;
            a->last_size = need;
            return p;
        }
    }
    q = fc_arena_alloc(a, new_n);
    if (q != NULL) {
        memcpy(q, p, old_n);
    }
    return q;
}

char *fc_arena_strndup(struct fc_arena *a, const char *s, size_t n)
{
    char *d = fc_arena_alloc(a, n + 1);

    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

char *fc_arena_strdup(struct fc_arena *a, const char *s)
{
    return fc_arena_strndup(a, s, strlen(s));
}

void *fc_arena_memdup(struct fc_arena *a, const void *p, size_t n)
{
    void *d = fc_arena_alloc(a, n);

    if (d != NULL && n > 0) {
        memcpy(d, p, n);
    }
    return d;
}

void fc_arena_on_free(struct fc_arena *a, void (*fn)(void *), void *data)
{
    struct fc_arena_cleanup *c = fc_xmalloc(sizeof(*c));

    c->fn = fn;
    c->data = data;
    c->next = a->cleanup;
    a->cleanup = c;
}
