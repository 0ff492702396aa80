/*
 * The frame record decoder (storage/frame.h): symbol bytes come from the
 * database, which a damaged file or another build may have written. Every
 * string of a decoded frame lies inside the input, and its encoding is a
 * fixed point (decodes to a frame that encodes to the same bytes).
 */
#include "storage/frame.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void inside(struct fc_frame_str s, const uint8_t *data, size_t size)
{
    if (s.n > 0 && ((const uint8_t *)s.p < data || (const uint8_t *)s.p + s.n > data + size)) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_frame f;
    struct fc_buf b;

    if (fc_frame_decode(data, size, &f) != FC_OK) {
        return 0;
    }
    inside(f.name, data, size);
    inside(f.system_name, data, size);
    inside(f.file, data, size);
    inside(f.mapping.file, data, size);
    inside(f.mapping.build_id, data, size);
    fc_buf_init(&b, 0);
    fc_frame_display(&f, FC_FRAME_LINES, &b);
    fc_buf_reset(&b);
    fc_frame_encode(&f, &b);
    /*
     * Records are not canonical (a flag for an empty field, a varint longer
     * than needed), but the encoding of what decoded is: it must decode to a
     * frame that encodes to the same bytes.
     */
    {
        struct fc_frame g;
        struct fc_buf c;
        fc_buf_init(&c, 0);
        if (fc_frame_decode(b.data, b.len, &g) != FC_OK) {
            abort();
        }
        fc_frame_encode(&g, &c);
        if (c.len != b.len || (c.len > 0 && memcmp(c.data, b.data, c.len) != 0)) {
            abort();
        }
        fc_buf_release(&c);
    }
    fc_buf_release(&b);
    return 0;
}
