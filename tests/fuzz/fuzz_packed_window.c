/*
 * The packed window decoder (storage/store_pack.c): node values come from
 * the database, which a damaged file or another build may have written,
 * in columns (format 7) or interleaved (format 6 and older). A value that
 * decodes is a fixed point: packed again and decoded, it gives the same
 * series with the same nodes (totals are left out: saturating sums of
 * hostile values depend on the order of merging).
 */
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
        if (a.v[i].series != b.v[i].series || a.v[i].tree.n != b.v[i].tree.n) {
            abort();
        }
    }
    fc_buf_release(&enc);
    fc_store_parts_release(&a);
    fc_store_parts_release(&b);
    return 0;
}
