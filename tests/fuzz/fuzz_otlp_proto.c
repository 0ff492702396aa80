/* OTLP ExportProfilesServiceRequest (protobuf) decoder, then re-encode and decode again. */
#include "core/limits.h"
#include "formats/otlp.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_batch *b = fc_batch_new(32 << 20);
    struct fc_otlp_result res;
    struct fc_error err = {0};

    /* As the otlp receiver does: decode, then the input caps (deep stacks are cut). */
    if (fc_otlp_decode(b, data, size, &res, &err) == FC_OK &&
        fc_input_limits_apply(&fc_input_limits_default, b, NULL, &err) == FC_OK) {
        struct fc_buf out;
        struct fc_batch *c = fc_batch_new(64 << 20);
        fc_buf_init(&out, 0);
        if (fc_otlp_encode(b, &out, &err) == FC_OK &&
            (fc_otlp_decode(c, out.data, out.len, &res, &err) != FC_OK ||
             res.rejected_profiles != 0)) {
            abort(); /* what we encode, we must decode */
        }
        fc_buf_release(&out);
        fc_batch_unref(c);
    }
    fc_batch_unref(b);
    return 0;
}
