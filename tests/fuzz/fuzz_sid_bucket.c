/*
 * The `sid` bucket decoder (storage/store_series.c fc_store_sid_bucket_decode,
 * format 18): a bucket's value comes from the database, which a damaged file
 * may hold. The input is decoded twice: as a value (which its check almost
 * always refuses), and as a value's entries, behind the check they need
 * (be32 of the low 32 bits of their xxh3), so that the fuzzer reaches the
 * parser. Nothing may crash or read out of bounds; what decodes is at most
 * FC_STORE_SID_SLOTS entries, slots strictly increasing and under
 * FC_STORE_SID_SLOTS, and encodes back to a value that decodes to the same
 * entries.
 */
#include "storage/store_int.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void decode_value(const uint8_t *data, size_t size)
{
    struct sid_entry e[FC_STORE_SID_SLOTS], again[FC_STORE_SID_SLOTS];
    MDB_val v = {size, (void *)data};
    struct fc_buf out;
    size_t n = 0, m = 0;

    if (!fc_store_sid_bucket_decode(&v, e, &n)) {
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (e[i].slot >= FC_STORE_SID_SLOTS || (i > 0 && e[i].slot <= e[i - 1].slot)) {
            abort();
        }
    }
    fc_buf_init(&out, 0);
    fc_store_sid_bucket_encode(e, n, &out);
    v = (MDB_val){out.len, out.data};
    if (!fc_store_sid_bucket_decode(&v, again, &m) || m != n ||
        (n > 0 && memcmp(again, e, n * sizeof(e[0])) != 0)) {
        abort();
    }
    fc_buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *checked = malloc(size + 4);
    uint32_t check = (uint32_t)XXH3_64bits(data, size);

    decode_value(data, size);
    for (int i = 0; i < 4; i++) {
        checked[i] = (uint8_t)(check >> (24 - 8 * i));
    }
    if (size > 0) {
        memcpy(checked + 4, data, size);
    }
    decode_value(checked, size + 4);
    free(checked);
    return 0;
}
