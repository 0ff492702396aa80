#include "formats/folded.h"

#include <inttypes.h>
#include <stdio.h>

const char *fc_frame_name(const struct fc_batch *b, const struct fc_location *loc,
                          const struct fc_line *line, char *scratch, size_t *len)
{
    if (line != NULL) {
        const struct fc_function *f = &b->dict.functions[line->function];
        if (b->dict.str_len[f->name] > 0) {
            *len = b->dict.str_len[f->name];
            return fc_str(b, f->name);
        }
    }
    *len = (size_t)snprintf(scratch, 24, "0x%" PRIx64, loc->address);
    return scratch;
}

static int put_frame(const struct fc_batch *b, const struct fc_location *loc,
                     const struct fc_line *line, struct fc_buf *out)
{
    char scratch[24];
    size_t len;
    const char *name = fc_frame_name(b, loc, line, scratch, &len);

    return fc_buf_append(out, name, len);
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

#include "core/mem.h"

#include <stdlib.h>
#include <string.h>

/* Interns one frame name as function -> location (no mapping, no address). */
static int frame_location(struct fc_batch *b, const char *name, size_t len, uint32_t *out)
{
    struct fc_function f = {0};
    struct fc_line line = {0};
    struct fc_location loc = {0};
    int rc = fc_dict_string(b, name, len, &f.name);

    rc = rc ? rc : fc_dict_function(b, &f, &line.function);
    return rc ? rc : fc_dict_location(b, &loc, &line, 1, out);
}

int fc_folded_decode(struct fc_batch *b, struct fc_profile *p, const char *text, size_t len,
                     bool lines, uint32_t max_depth, struct fc_error *err)
{
    const char *end = text + len;
    const char *line = text;
    uint32_t *stack = NULL;
    size_t cap = 0;
    size_t line_no = 0;
    int rc = FC_OK;

    while (line < end && rc == FC_OK) {
        const char *nl = memchr(line, '\n', (size_t)(end - line));
        const char *eol = nl ? nl : end;
        const char *frames_end = eol;
        int64_t count = 1;
        size_t n = 0;
        struct fc_sample s = {0};

        line_no++;
        if (eol > line && eol[-1] == '\r') {
            frames_end = --eol;
        }
        if (!lines) {
            const char *sp = eol;
            char num[32];
            char *stop;
            while (sp > line && sp[-1] != ' ') {
                sp--;
            }
            if (sp == line) {
                goto next; /* no count: skipped, as Pyroscope does */
            }
            if ((size_t)(eol - sp) == 0 || (size_t)(eol - sp) >= sizeof(num)) {
                rc = fc_errorf(err, FC_EPROTO, "folded: line %zu: missing or oversized count",
                               line_no);
                break;
            }
            memcpy(num, sp, (size_t)(eol - sp));
            num[eol - sp] = '\0';
            count = strtoll(num, &stop, 10);
            if (*stop != '\0') {
                rc = fc_errorf(err, FC_EPROTO, "folded: line %zu: count \"%s\" is not an integer",
                               line_no, num);
                break;
            }
            frames_end = sp - 1;
            while (frames_end > line && frames_end[-1] == ' ') {
                frames_end--;
            }
        }
        if (frames_end <= line) {
            goto next;
        }
        /* Frames come root first; stacks are stored leaf first. */
        for (const char *f = line; f < frames_end;) {
            const char *semi = memchr(f, ';', (size_t)(frames_end - f));
            const char *fe = semi ? semi : frames_end;
            if (n == cap) {
                cap = cap ? cap * 2 : 64;
                stack = fc_xrealloc(stack, cap * sizeof(uint32_t));
            }
            rc = frame_location(b, f, (size_t)(fe - f), &stack[n]);
            if (rc != FC_OK) {
                break;
            }
            n++;
            f = semi ? semi + 1 : frames_end;
        }
        if (rc != FC_OK) {
            break;
        }
        if (max_depth && n > max_depth) {
            n = max_depth;
        }
        for (size_t i = 0; i < n / 2; i++) {
            uint32_t t = stack[i];
            stack[i] = stack[n - 1 - i];
            stack[n - 1 - i] = t;
        }
        rc = fc_dict_stack(b, stack, (uint32_t)n, &s.stack);
        if (rc == FC_OK) {
            int64_t values[8] = {0};
            uint32_t nv = p->n_sample_types ? p->n_sample_types : 1;
            values[0] = count;
            rc = fc_profile_add_sample(b, p, &s, values, nv > 8 ? 8 : nv, NULL, 0);
        }
    next:
        line = nl ? nl + 1 : end;
    }
    free(stack);
    if (rc == FC_ETOOBIG) {
        return fc_errorf(err, FC_ETOOBIG, "folded: profile exceeds the memory limit");
    }
    return rc;
}
