/*
 * The older-layout scanner and the v1.9 translation on any bytes: no read
 * past the end (ASan), and three invariants:
 *  - nothing our encoder writes is ever taken for an older layout;
 *  - the translation renumbers Sample fields 2 -> 4 -> 3 -> 2, so three
 *    rounds give the bytes back, and it never changes the length;
 *  - the JSON key scan only reports keys it was given.
 */
#include "formats/otlp.h"
#include "formats/otlp_layout.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int contains(const uint8_t *data, size_t size, const char *s)
{
    size_t n = strlen(s);

    for (size_t i = 0; n <= size && i <= size - n; i++) {
        if (memcmp(data + i, s, n) == 0) {
            return 1;
        }
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_otlp_layout_info info;
    struct fc_batch *b = fc_batch_new(32 << 20);
    struct fc_otlp_result res;
    struct fc_error err = {0};
    uint8_t *copy = malloc(size ? size : 1);

    fc_otlp_layout_scan(data, size, &info);
    if (info.layout != FC_OTLP_LAYOUT_NONE && (info.field == NULL || info.versions == NULL)) {
        abort(); /* a layout is always named */
    }
    if (fc_otlp_layout_scan_json((const char *)data, size, &info) != FC_OTLP_LAYOUT_NONE &&
        !contains(data, size, info.field)) {
        abort();
    }
    if (size > 0) {
        int rounds = 0;
        memcpy(copy, data, size);
        while (rounds < 3 && fc_otlp_layout_translate(copy, size) == FC_OK) {
            rounds++;
        }
        if (rounds == 3 && memcmp(copy, data, size) != 0) {
            abort();
        }
    }
    if (fc_otlp_decode(b, data, size, &res, &err) == FC_OK) {
        struct fc_buf out;
        fc_buf_init(&out, 0);
        if (fc_otlp_encode(b, &out, &err) == FC_OK &&
            fc_otlp_layout_scan(out.data, out.len, &info) != FC_OTLP_LAYOUT_NONE) {
            abort(); /* our own encoding, taken for an older layout */
        }
        fc_buf_release(&out);
    }
    free(copy);
    fc_batch_unref(b);
    return 0;
}
