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
#include <zstd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * A bundle compressed with a dictionary (format 14) is given this one, as
 * a reader gives the one it found, as it is stored: a zstd frame
 * (tests/fuzz/corpus/bundle/dict-* were made with it; a wrong one makes the
 * contents fail their checksum).
 */
static const char fuzz_dict[] = "flamecol fuzz_bundle dictionary: any bytes serve as one";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t dict_frame[256];
    static size_t dict_frame_len;
    struct bundle_cache c = {0};

    if (dict_frame_len == 0) {
        dict_frame_len =
            ZSTD_compress(dict_frame, sizeof(dict_frame), fuzz_dict, sizeof(fuzz_dict) - 1, 3);
        if (ZSTD_isError(dict_frame_len)) {
            abort();
        }
    }
    if (fc_store_bundle_set(&c, data, size)) {
        if (c.dict) {
            c.dict_frame = dict_frame;
            c.dict_frame_len = dict_frame_len;
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
