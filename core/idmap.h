/*
 * A map from 64-bit ids (pprof location/function/mapping ids) to 32-bit
 * indices, open addressing, malloc-owned. Ids are arbitrary, so no dense
 * array can be assumed.
 */
#ifndef FC_IDMAP_H
#define FC_IDMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_idmap {
    uint64_t *keys; /* id + 1; 0 = empty */
    uint32_t *values;
    size_t cap;
    size_t n;
};

void fc_idmap_init(struct fc_idmap *m, size_t expected);
void fc_idmap_release(struct fc_idmap *m);
/* Returns false when the id is already present (the old value stays). */
bool fc_idmap_put(struct fc_idmap *m, uint64_t id, uint32_t value);
bool fc_idmap_get(const struct fc_idmap *m, uint64_t id, uint32_t *value);

#endif
