#include "formats/folded.h"

#include <inttypes.h>

/* A frame's name: the function's, else the address (unsymbolized native code). */
static int put_frame(const struct fc_batch *b, const struct fc_location *loc,
                     const struct fc_line *line, struct fc_buf *out)
{
    if (line != NULL) {
        const struct fc_function *f = &b->dict.functions[line->function];
        if (b->dict.str_len[f->name] > 0) {
            return fc_buf_append(out, fc_str(b, f->name), b->dict.str_len[f->name]);
        }
    }
    return fc_buf_printf(out, "0x%" PRIx64, loc->address);
}

int fc_folded_stack(const struct fc_batch *b, uint32_t stack, struct fc_buf *out)
{
    const struct fc_stack *s = &b->dict.stacks[stack];
    const uint32_t *locs = fc_span_idx(b, s->locations);
    int first = 1;
    int rc = FC_OK;

    for (uint32_t i = s->locations.n; i-- > 0 && rc == FC_OK;) {
        const struct fc_location *loc = &b->dict.locations[locs[i]];
        if (loc->n_lines == 0) {
            if (!first) {
                rc = fc_buf_append(out, ";", 1);
            }
            rc = rc ? rc : put_frame(b, loc, NULL, out);
            first = 0;
            continue;
        }
        for (uint32_t j = loc->n_lines; j-- > 0 && rc == FC_OK;) {
            if (!first) {
                rc = fc_buf_append(out, ";", 1);
            }
            rc = rc ? rc : put_frame(b, loc, &b->dict.lines[loc->lines_off + j], out);
            first = 0;
        }
    }
    return rc;
}

int fc_folded_write_profile(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                            struct fc_buf *out)
{
    int rc = FC_OK;

    for (uint32_t i = 0; i < p->n_samples && rc == FC_OK; i++) {
        const struct fc_sample *s = &p->samples[i];
        int64_t v = fc_sample_value(p, s, t);
        if (v == 0) {
            continue;
        }
        rc = fc_folded_stack(b, s->stack, out);
        rc = rc ? rc : fc_buf_printf(out, " %" PRId64 "\n", v);
    }
    return rc;
}
