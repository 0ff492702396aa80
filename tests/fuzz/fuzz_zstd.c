/* zstd bodies (Content-Encoding: zstd): decode under a limit, which must hold. */
#include "formats/zstd.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    enum { LIMIT = 1 << 20 };
    struct fc_buf out;
    struct fc_error err = {0};

    fc_buf_init(&out, 0);
    if (fc_unzstd(data, size, LIMIT, &out, &err) == FC_OK && out.len > LIMIT) {
        abort();
    }
    fc_buf_release(&out);
    return 0;
}
