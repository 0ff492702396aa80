/*
 * The id cache: ids the writer already found or made in LMDB, by
 * (database, key), so that a steady stream of writes finds its symbols,
 * bases, series and service entries without a B-tree lookup (issue 14: a
 * profile looks up hundreds of frames). Entries are noted during a write
 * transaction and published only once it has committed: an id made by a
 * transaction that is then aborted never reaches the cache. What it holds
 * is deleted from LMDB only when a pod is forgotten (store_forget.c), which
 * empties it; so an entry never goes stale.
 *
 * Open addressing over a 128-bit hash of the key (seeded with the
 * database), growing by doubling up to max_bytes; full there, it is
 * emptied and refills with what is used (memory stays bounded whatever the
 * number of series or frames).
 */
#include "storage/store_int.h"

#include "core/mem.h"

#include <stdlib.h>
#include <string.h>

#define FIRST_SLOTS 64

static XXH128_hash_t key_hash(int db, const struct key *k)
{
    XXH128_hash_t h = XXH3_128bits_withSeed(k->b, k->n, (uint64_t)db + 1);

    h.low64 |= 1; /* 0 marks an empty slot */
    return h;
}

void fc_store_ids_init(struct id_cache *c, int64_t max_bytes)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->max_bytes = max_bytes;
}

void fc_store_ids_release(struct id_cache *c)
{
    free(c->slots);
    free(c->pending);
    pthread_mutex_destroy(&c->lock);
    memset(c, 0, sizeof(*c));
}

static struct id_slot *find(struct id_slot *slots, size_t cap, XXH128_hash_t h)
{
    size_t i = (size_t)h.high64 & (cap - 1);

    while (slots[i].lo != 0 && (slots[i].lo != h.low64 || slots[i].hi != h.high64)) {
        i = (i + 1) & (cap - 1);
    }
    return &slots[i];
}

bool fc_store_ids_get(struct fc_store *s, int db, const struct key *k, uint32_t *id)
{
    struct id_cache *c = &s->ids;
    XXH128_hash_t h = key_hash(db, k);
    bool hit = false;

    pthread_mutex_lock(&c->lock);
    if (c->cap > 0) {
        struct id_slot *slot = find(c->slots, c->cap, h);
        if (slot->lo != 0) {
            *id = slot->id;
            hit = true;
        }
    }
    pthread_mutex_unlock(&c->lock);
    atomic_fetch_add(hit ? &c->hits : &c->misses, 1);
    return hit;
}

void fc_store_ids_note(struct fc_store *s, int db, const struct key *k, uint32_t id)
{
    struct id_cache *c = &s->ids;
    XXH128_hash_t h = key_hash(db, k);

    pthread_mutex_lock(&c->lock);
    if (c->n_pending == c->cap_pending) {
        c->cap_pending = c->cap_pending ? c->cap_pending * 2 : 256;
        c->pending = fc_xrealloc(c->pending, c->cap_pending * sizeof(*c->pending));
    }
    c->pending[c->n_pending].hi = h.high64;
    c->pending[c->n_pending].lo = h.low64;
    c->pending[c->n_pending].id = id;
    c->n_pending++;
    pthread_mutex_unlock(&c->lock);
}

/* Room for one more entry at most 3/4 full: doubled, or (at max_bytes) emptied. */
static void make_room(struct id_cache *c)
{
    size_t cap;

    if (c->cap > 0 && (c->n + 1) * 4 <= c->cap * 3) {
        return;
    }
    cap = c->cap ? c->cap * 2 : FIRST_SLOTS;
    if ((int64_t)(cap * sizeof(struct id_slot)) > c->max_bytes) {
        if (c->cap == 0) {
            return; /* too small for even the first table: no cache */
        }
        memset(c->slots, 0, c->cap * sizeof(struct id_slot));
        c->n = 0;
        atomic_fetch_add(&c->emptied, 1);
        return;
    }
    {
        struct id_slot *slots = fc_xcalloc(cap, sizeof(*slots));
        for (size_t i = 0; i < c->cap; i++) {
            if (c->slots[i].lo != 0) {
                XXH128_hash_t h = {c->slots[i].lo, c->slots[i].hi};
                *find(slots, cap, h) = c->slots[i];
            }
        }
        free(c->slots);
        c->slots = slots;
        c->cap = cap;
        atomic_store(&c->bytes, (int64_t)(cap * sizeof(struct id_slot)));
    }
}

void fc_store_ids_clear(struct id_cache *c)
{
    pthread_mutex_lock(&c->lock);
    if (c->cap > 0) {
        memset(c->slots, 0, c->cap * sizeof(struct id_slot));
    }
    c->n = 0;
    c->n_pending = 0;
    pthread_mutex_unlock(&c->lock);
}

void fc_store_ids_publish(struct fc_store *s, bool committed)
{
    struct id_cache *c = &s->ids;

    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; committed && i < c->n_pending; i++) {
        XXH128_hash_t h = {c->pending[i].lo, c->pending[i].hi};
        struct id_slot *slot;
        make_room(c);
        if (c->cap == 0) {
            break;
        }
        slot = find(c->slots, c->cap, h);
        if (slot->lo == 0) {
            c->n++;
        }
        *slot = c->pending[i];
    }
    c->n_pending = 0;
    pthread_mutex_unlock(&c->lock);
}
