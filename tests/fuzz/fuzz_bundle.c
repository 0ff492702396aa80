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

/*
 * A bundle compressed with a dictionary (format 14) is given this one, as
 * a reader gives the one it found (tests/fuzz/corpus/bundle/dict-* were made
 * with it; a wrong one makes the contents fail their checksum).
 */
static const char fuzz_dict[] = "flamecol fuzz_bundle dictionary: any bytes serve as one";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct bundle_cache c = {0};

    if (fc_store_bundle_set(&c, data, size)) {
        if (c.dict) {
            c.prefix = (const uint8_t *)fuzz_dict;
            c.prefix_len = sizeof(fuzz_dict) - 1;
        }
        for (int k = FC_STORE_BUNDLE_SLOTS - 1; k >= 0; k--) {
            struct parts ps = {0};
            fc_store_bundle_slot_decode(&c, k, NULL, NULL, &ps);
            fc_store_parts_release(&ps);
        }
    }
    fc_store_bundle_cache_release(&c);
    return 0;
}
