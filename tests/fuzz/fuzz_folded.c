/* Folded and lines text. */
#include "formats/folded.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_batch *b = fc_batch_new(32 << 20);
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt = {0, 0};
    struct fc_error err = {0};
    struct fc_buf out;

    fc_profile_set_sample_types(b, p, &vt, 1);
    fc_folded_decode(b, p, (const char *)data, size, size > 0 && (data[0] & 1), 128, &err);
    fc_buf_init(&out, 0);
    fc_folded_write_profile(b, p, 0, &out);
    fc_buf_release(&out);
    fc_batch_unref(b);
    return 0;
}
