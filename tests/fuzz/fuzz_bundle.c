/*
 * The bundle decoder (storage/store_bundle.c): bundle values come from the
 * database, which a damaged file may hold. The index and every slot's
 * window are decoded, the 100 s window (a prefix of the contents) first,
 * then the 10 s windows (the whole contents), as a reader may: nothing may
 * crash, leak or read out of bounds, whatever the index and slices claim.
 */
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bundle_cache c = {0};

    if (fc_store_bundle_set(&c, data, size)) {
        for (int k = FC_STORE_BUNDLE_SLOTS - 1; k >= 0; k--) {
            struct parts ps = {0};
            fc_store_bundle_slot_decode(&c, k, NULL, NULL, &ps);
            fc_store_parts_release(&ps);
        }
    }
    fc_store_bundle_cache_release(&c);
    return 0;
}
