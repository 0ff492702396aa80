/*
 * The posting chunk decoder (storage/store_read.c fc_store_posting_ids):
 * `post` values come from the database, which a damaged file may hold. The
 * input's first byte is the key's length (at most 64, taken from what
 * follows; its (tenant, name, value) part the first 17 bytes, so that the
 * three layouts' suffixes, 0, 4 or 5 bytes, all occur), the rest the value.
 * Nothing may crash or read out of bounds, and what decodes is at most
 * FC_STORE_POSTING_IDS ids, strictly increasing, the first the key's.
 */
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint32_t ids[FC_STORE_POSTING_IDS];
    size_t klen, n = 0;
    MDB_val kv, v;

    if (size < 1) {
        return 0;
    }
    klen = data[0] % 65;
    if (klen > size - 1 || klen < 17) {
        return 0;
    }
    kv = (MDB_val){klen, (void *)(data + 1)};
    v = (MDB_val){size - 1 - klen, (void *)(data + 1 + klen)};
    if (fc_store_posting_ids(&kv, 17, &v, ids, &n)) {
        if (n == 0 || n > FC_STORE_POSTING_IDS || ids[0] != be32(data + 1 + 17)) {
            abort();
        }
        for (size_t i = 1; i < n; i++) {
            if (ids[i] <= ids[i - 1]) {
                abort();
            }
        }
    }
    return 0;
}
