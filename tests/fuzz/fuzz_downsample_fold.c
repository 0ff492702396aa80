/*
 * downsample's call-tree folding on any profile: the first 3 bytes choose
 * max_nodes, max_depth and min_fraction, the rest is a pprof (gzip or not).
 * Aborts when a total of any sample type changed, when the folded tree has
 * more nodes than max_nodes, or when the folded profile does not encode and
 * decode again.
 */
#include "core/limits.h"
#include "formats/pprof.h"
#include "processors/downsample/fold.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static __int128 total(const struct fc_profile *p, uint32_t t)
{
    __int128 sum = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        sum += fc_sample_value(p, &p->samples[i], t);
    }
    return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_pprof_limits lim = {.max_decompressed = 4 << 20};
    struct fc_fold_options o = {0};
    struct fc_batch *b;
    struct fc_profile *p = NULL;
    struct fc_error err = {0};

    if (size < 3) {
        return 0;
    }
    o.max_nodes = data[0];
    o.max_depth = data[1] % 16;
    o.min_fraction = data[2] / 512.0;
    b = fc_batch_new(32 << 20);
    if (fc_pprof_decode(b, data + 3, size - 3, &lim, &p, &err) == FC_OK &&
        fc_input_limits_apply(&fc_input_limits_default, b, NULL, &err) == FC_OK) {
        uint32_t types = b->profiles[0].n_sample_types;
        __int128 *before = calloc(types + 1, sizeof(*before));
        struct fc_fold_stats st;
        for (uint32_t t = 0; t < types; t++) {
            before[t] = total(&b->profiles[0], t);
        }
        if (fc_fold_profile(b, 0, &o, &st, &err) == FC_OK) {
            struct fc_buf out;
            struct fc_batch *c = fc_batch_new(32 << 20);
            p = &b->profiles[0];
            for (uint32_t t = 0; t < types; t++) {
                if (total(p, t) != before[t]) {
                    abort(); /* folding must keep every total exact */
                }
            }
            if (o.max_nodes > 0 && st.nodes_after > o.max_nodes) {
                abort();
            }
            for (uint32_t i = 0; i < p->n_samples; i++) {
                if (p->samples[i].stack >= b->dict.n_stacks) {
                    abort(); /* a dangling stack index */
                }
            }
            fc_buf_init(&out, 0);
            if (fc_pprof_encode(b, p, &out, &err) == FC_OK &&
                fc_pprof_decode(c, out.data, out.len, &lim, NULL, &err) != FC_OK) {
                abort();
            }
            fc_buf_release(&out);
            fc_batch_unref(c);
        }
        free(before);
    }
    fc_batch_unref(b);
    return 0;
}
