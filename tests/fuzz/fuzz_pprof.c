/* pprof decoder (gzip or not), then encode -> decode of whatever decoded. */
#include "core/limits.h"
#include "formats/pprof.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_pprof_limits lim = {.max_decompressed = 4 << 20};
    struct fc_batch *b = fc_batch_new(32 << 20);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};

    /* The receivers' caps run on what decoded, as in pprof_deliver. */
    if (fc_pprof_decode(b, data, size, &lim, &p, &err) == FC_OK &&
        fc_input_limits_apply(&fc_input_limits_default, b, NULL, &err) == FC_OK) {
        struct fc_buf out;
        struct fc_batch *c = fc_batch_new(32 << 20);
        fc_buf_init(&out, 0);
        if (fc_pprof_encode(b, p, &out, &err) == FC_OK &&
            fc_pprof_decode(c, out.data, out.len, &lim, NULL, &err) != FC_OK) {
            abort(); /* what we encode, we must decode */
        }
        fc_buf_release(&out);
        fc_batch_unref(c);
    }
    fc_batch_unref(b);
    return 0;
}
