/* The JSON reader (sample_type_config, Connect JSON, OTLP JSON) and base64. */
#include "formats/json.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_arena *a = fc_arena_new(16 << 20);
    struct fc_json *v;
    struct fc_error err = {0};
    uint8_t *bytes;
    size_t n;

    fc_json_parse(a, (const char *)data, size, &v, &err);
    fc_base64_decode(a, (const char *)data, size, &bytes, &n);
    fc_arena_free(a);
    return 0;
}
