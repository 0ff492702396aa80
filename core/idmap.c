#include "core/idmap.h"

#include "core/mem.h"

#include <stdlib.h>

static size_t slot(uint64_t key, size_t cap)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key & (cap - 1);
}

void fc_idmap_init(struct fc_idmap *m, size_t expected)
{
    size_t cap = 16;

    while (cap < expected * 2) {
        cap *= 2;
    }
    m->keys = fc_xcalloc(cap, sizeof(uint64_t));
    m->values = fc_xcalloc(cap, sizeof(uint32_t));
    m->cap = cap;
    m->n = 0;
}

void fc_idmap_release(struct fc_idmap *m)
{
    free(m->keys);
    free(m->values);
    m->keys = NULL;
    m->values = NULL;
    m->cap = 0;
    m->n = 0;
}

static void grow(struct fc_idmap *m)
{
    struct fc_idmap bigger;

    fc_idmap_init(&bigger, m->cap);
    for (size_t i = 0; i < m->cap; i++) {
        if (m->keys[i] != 0) {
            fc_idmap_put(&bigger, m->keys[i] - 1, m->values[i]);
        }
    }
    fc_idmap_release(m);
    *m = bigger;
}

bool fc_idmap_put(struct fc_idmap *m, uint64_t id, uint32_t value)
{
    uint64_t key = id + 1;

    if (id == UINT64_MAX) {
        return false; /* cannot be stored; callers treat it as a duplicate */
    }
    if ((m->n + 1) * 2 > m->cap) {
        grow(m);
    }
    for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            return false;
        }
        if (m->keys[i] == 0) {
            m->keys[i] = key;
            m->values[i] = value;
            m->n++;
            return true;
        }
    }
}

bool fc_idmap_get(const struct fc_idmap *m, uint64_t id, uint32_t *value)
{
    uint64_t key = id + 1;

    if (m->cap == 0 || id == UINT64_MAX) {
        return false;
    }
    for (size_t i = slot(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) {
            *value = m->values[i];
            return true;
        }
        if (m->keys[i] == 0) {
            return false;
        }
    }
}
