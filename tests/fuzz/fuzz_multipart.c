/* multipart/form-data bodies: the first line is the Content-Type, the rest the body. */
#include "formats/multipart.h"

#include <stdint.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char ct[256];
    const uint8_t *nl = memchr(data, '\n', size < 255 ? size : 255);
    struct fc_multipart_part parts[FC_MULTIPART_MAX_PARTS];
    size_t n = 0;
    struct fc_error err = {0};
    size_t ct_len;

    if (nl == NULL) {
        return 0;
    }
    ct_len = (size_t)(nl - data);
    memcpy(ct, data, ct_len);
    ct[ct_len] = '\0';
    if (fc_multipart_parse(ct, nl + 1, size - ct_len - 1, parts, &n, &err) == FC_OK) {
        for (size_t i = 0; i < n; i++) {
            /* Every part must lie inside the body. */
            if (parts[i].data < nl + 1 || parts[i].data + parts[i].len > data + size) {
                __builtin_trap();
            }
        }
    }
    return 0;
}
