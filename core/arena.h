/*
 * A bump allocator with a byte budget. Everything decoded from one request
 * lives in one arena and is freed with one fc_arena_free(); individual
 * allocations are never freed. When the bytes taken from the system would
 * pass the budget, allocation returns NULL and fc_arena_over_budget() turns
 * true, so decoders report FC_ETOOBIG (413) instead of running out of memory.
 */
#ifndef FC_ARENA_H
#define FC_ARENA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_arena_chunk;
struct fc_arena_cleanup;

struct fc_arena {
    struct fc_arena_chunk *chunks;    /* newest first */
    struct fc_arena_cleanup *cleanup; /* run in reverse order at free */
    size_t used;                      /* bytes taken from the system */
    size_t budget;                    /* 0 = unlimited */
    bool over_budget;                 /* a request was refused */
    void *last;                       /* last allocation, can grow in place */
    size_t last_size;
};

/* budget: most bytes this arena may take from the system; 0 = no limit. */
struct fc_arena *fc_arena_new(size_t budget);
void fc_arena_free(struct fc_arena *a);

/* 16-byte aligned; NULL only when over budget. */
void *fc_arena_alloc(struct fc_arena *a, size_t n);
void *fc_arena_calloc(struct fc_arena *a, size_t count, size_t size);
/* Grows the arena's last allocation in place when it can, else copies. */
void *fc_arena_realloc(struct fc_arena *a, void *p, size_t old_n, size_t new_n);
char *fc_arena_strndup(struct fc_arena *a, const char *s, size_t n);
char *fc_arena_strdup(struct fc_arena *a, const char *s);
void *fc_arena_memdup(struct fc_arena *a, const void *p, size_t n);

/* Runs fn(data) when the arena is freed (for foreign buffers it adopts). */
void fc_arena_on_free(struct fc_arena *a, void (*fn)(void *), void *data);

/*
 * Bytes every live arena took from the system (chunk sizes), process-wide:
 * what flamecol holds for requests in flight, queued batches and the like.
 * One relaxed atomic add per chunk and one subtract per freed arena.
 */
int64_t fc_arena_live_bytes(void);

static inline bool fc_arena_over_budget(const struct fc_arena *a)
{
    return a->over_budget;
}

#endif
