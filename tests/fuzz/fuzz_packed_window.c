/*
 * The packed window decoder (storage/store_pack.c): node values come from
 * the database, which a damaged file or another build may have written,
 * in columns (format 7) or interleaved (format 6 and older). A value that
 * decodes is a fixed point: packed again and decoded, it gives the same
 * series with the same trees, node by node: name, self value and children
 * (totals are left out: saturating sums of hostile values depend on the
 * order of merging).
 */
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Both trees in pre-order side by side (children are sorted): the same names, selfs and shape. */
static void same_tree(const struct fc_tree *a, const struct fc_tree *b)
{
    uint32_t *stack;
    size_t n = 0;

    if (a->n != b->n) {
        abort();
    }
    if (a->n == 0) {
        return;
    }
    stack = malloc(2 * sizeof(uint32_t) * ((size_t)a->n + 1));
    stack[n++] = 0;
    stack[n++] = 0;
    while (n > 0) {
        uint32_t j = stack[--n], i = stack[--n];
        uint32_t ci = a->nodes[i].first, cj = b->nodes[j].first;
        if (a->nodes[i].name != b->nodes[j].name || a->nodes[i].self != b->nodes[j].self) {
            abort();
        }
        for (; ci != 0 && cj != 0; ci = a->nodes[ci].next, cj = b->nodes[cj].next) {
            stack[n++] = ci;
            stack[n++] = cj;
        }
        if (ci != 0 || cj != 0) {
            abort();
        }
    }
    free(stack);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct parts a = {0}, b = {0};
    struct fc_buf enc;

    if (!fc_store_packed_decode(data, size, NULL, NULL, &a)) {
        fc_store_parts_release(&a);
        return 0;
    }
    fc_buf_init(&enc, 0);
    if (fc_store_packed_encode(&a, &enc) != FC_OK ||
        !fc_store_packed_decode(enc.data, enc.len, NULL, NULL, &b) || a.n != b.n) {
        abort();
    }
    for (uint32_t i = 0; i < a.n; i++) {
        if (a.v[i].series != b.v[i].series) {
            abort();
        }
        same_tree(&a.v[i].tree, &b.v[i].tree);
    }
    fc_buf_release(&enc);
    fc_store_parts_release(&a);
    fc_store_parts_release(&b);
    return 0;
}
