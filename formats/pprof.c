#include "formats/pprof.h"

#include "core/idmap.h"
#include "core/mem.h"
#include "formats/gzip.h"
#include "formats/otlp.h"
#include "formats/pb.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* pprof field numbers (profile.proto). */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_DROP_FRAMES = 7,
    PROFILE_KEEP_FRAMES = 8,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};

struct chunk {
    const uint8_t *data;
    size_t len;
};

struct chunks {
    struct chunk *v;
    size_t n;
    size_t cap;
};

static void chunks_push(struct chunks *c, const uint8_t *data, size_t len)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 64;
        c->v = fc_xrealloc(c->v, c->cap * sizeof(*c->v));
    }
    c->v[c->n].data = data;
    c->v[c->n].len = len;
    c->n++;
}

struct u64vec {
    uint64_t *v;
    size_t n;
    size_t cap;
};

static void u64_push(struct u64vec *a, uint64_t x)
{
    if (a->n == a->cap) {
        a->cap = a->cap ? a->cap * 2 : 64;
        a->v = fc_xrealloc(a->v, a->cap * sizeof(*a->v));
    }
    a->v[a->n++] = x;
}

/* A repeated varint field, packed (LEN) or one value (VARINT). */
static int read_repeated(const struct fc_pb_field *f, struct u64vec *out)
{
    struct fc_pb r;

    if (f->wire == FC_PB_VARINT) {
        u64_push(out, f->varint);
        return 0;
    }
    if (f->wire != FC_PB_LEN) {
        return -1;
    }
    fc_pb_init(&r, f->data, f->len);
    while (!fc_pb_done(&r)) {
        uint64_t v;
        if (fc_pb_varint(&r, &v) != 0) {
            return -1;
        }
        u64_push(out, v);
    }
    return 0;
}

struct decoder {
    struct fc_batch *b;
    const struct fc_pprof_limits *limits;
    struct fc_error *err;
    struct chunks sample_types, samples, mappings, locations, functions, strings;
    struct chunk period_type;
    struct u64vec comments;
    int64_t drop_frames, keep_frames, time_nanos, duration_nanos, period, default_sample_type;
    uint32_t *strmap; /* pprof string index -> dict string */
    struct fc_idmap functions_by_id, mappings_by_id, locations_by_id;
    struct u64vec scratch; /* location ids / values of one sample */
    struct u64vec values;
    struct fc_line *lines;
    size_t cap_lines;
    uint32_t *stack;
    size_t cap_stack;
    uint32_t *attrs;
    size_t cap_attrs;
};

static int malformed(struct decoder *d, const char *what)
{
    return fc_errorf(d->err, FC_EPROTO, "pprof: %s", what);
}

static int over_budget(struct decoder *d)
{
    return fc_errorf(d->err, FC_ETOOBIG,
                     "pprof: decoded profile exceeds the memory limit of %zu "
                     "bytes",
                     d->b->arena->budget);
}

static int check(struct decoder *d, int rc)
{
    return rc == FC_ETOOBIG ? over_budget(d) : rc;
}

static int string_ref(struct decoder *d, int64_t idx, uint32_t *out, const char *what, size_t item)
{
    if (idx < 0 || (uint64_t)idx >= d->strings.n) {
        return fc_errorf(d->err, FC_EPROTO,
                         "pprof: %s %zu: string index %" PRId64 " is outside the string table "
                         "(%zu entries)",
                         what, item, idx, d->strings.n);
    }
    *out = d->strmap[idx];
    return FC_OK;
}

static int scan_top(struct decoder *d, const uint8_t *data, size_t len)
{
    struct fc_pb r;
    struct fc_pb_field f;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return malformed(d, "not a valid Profile message (truncated or corrupt protobuf)");
        }
        switch (f.number) {
        case PROFILE_SAMPLE_TYPE:
        case PROFILE_SAMPLE:
        case PROFILE_MAPPING:
        case PROFILE_LOCATION:
        case PROFILE_FUNCTION:
        case PROFILE_STRING_TABLE:
        case PROFILE_PERIOD_TYPE:
            if (f.wire != FC_PB_LEN) {
                return fc_errorf(d->err, FC_EPROTO,
                                 "pprof: field %u has wire type %d, expected a "
                                 "length-delimited message",
                                 f.number, (int)f.wire);
            }
            break;
        default:
            break;
        }
        switch (f.number) {
        case PROFILE_SAMPLE_TYPE:
            chunks_push(&d->sample_types, f.data, f.len);
            break;
        case PROFILE_SAMPLE:
            chunks_push(&d->samples, f.data, f.len);
            break;
        case PROFILE_MAPPING:
            chunks_push(&d->mappings, f.data, f.len);
            break;
        case PROFILE_LOCATION:
            chunks_push(&d->locations, f.data, f.len);
            break;
        case PROFILE_FUNCTION:
            chunks_push(&d->functions, f.data, f.len);
            break;
        case PROFILE_STRING_TABLE:
            chunks_push(&d->strings, f.data, f.len);
            break;
        case PROFILE_PERIOD_TYPE:
            d->period_type.data = f.data;
            d->period_type.len = f.len;
            break;
        case PROFILE_DROP_FRAMES:
            d->drop_frames = fc_pb_i64(f.varint);
            break;
        case PROFILE_KEEP_FRAMES:
            d->keep_frames = fc_pb_i64(f.varint);
            break;
        case PROFILE_TIME_NANOS:
            d->time_nanos = fc_pb_i64(f.varint);
            break;
        case PROFILE_DURATION_NANOS:
            d->duration_nanos = fc_pb_i64(f.varint);
            break;
        case PROFILE_PERIOD:
            d->period = fc_pb_i64(f.varint);
            break;
        case PROFILE_COMMENT:
            if (read_repeated(&f, &d->comments) != 0) {
                return malformed(d, "comment: malformed packed field");
            }
            break;
        case PROFILE_DEFAULT_SAMPLE_TYPE:
            d->default_sample_type = fc_pb_i64(f.varint);
            break;
        default:
            break; /* unknown fields are skipped, as protobuf requires */
        }
    }
    return FC_OK;
}

static int decode_strings(struct decoder *d)
{
    if (d->strings.n == 0) {
        return malformed(d, "string_table is empty (entry 0 must be \"\")");
    }
    if (d->strings.v[0].len != 0) {
        return malformed(d, "string_table[0] must be the empty string");
    }
    d->strmap = fc_xmalloc(d->strings.n * sizeof(uint32_t));
    for (size_t i = 0; i < d->strings.n; i++) {
        int rc = fc_dict_string(d->b, (const char *)d->strings.v[i].data, d->strings.v[i].len,
                                &d->strmap[i]);
        if (rc != FC_OK) {
            return check(d, rc);
        }
    }
    return FC_OK;
}

static int decode_value_type(struct decoder *d, struct chunk c, struct fc_value_type *vt,
                             const char *what, size_t item)
{
    struct fc_pb r;
    struct fc_pb_field f;
    int64_t type = 0;
    int64_t unit = 0;
    int rc;

    fc_pb_init(&r, c.data, c.len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: %s %zu: malformed ValueType", what, item);
        }
        if (f.number == 1) {
            type = fc_pb_i64(f.varint);
        } else if (f.number == 2) {
            unit = fc_pb_i64(f.varint);
        }
    }
    rc = string_ref(d, type, &vt->type, what, item);
    return rc ? rc : string_ref(d, unit, &vt->unit, what, item);
}

static int decode_functions(struct decoder *d)
{
    fc_idmap_init(&d->functions_by_id, d->functions.n);
    for (size_t i = 0; i < d->functions.n; i++) {
        struct fc_pb r;
        struct fc_pb_field f;
        uint64_t id = 0;
        int64_t name = 0, system_name = 0, filename = 0;
        struct fc_function fn = {0};
        uint32_t idx;
        int rc;

        fc_pb_init(&r, d->functions.v[i].data, d->functions.v[i].len);
        while (!fc_pb_done(&r)) {
            if (fc_pb_next(&r, &f) != 0) {
                return fc_errorf(d->err, FC_EPROTO, "pprof: function %zu: malformed message", i);
            }
            switch (f.number) {
            case 1:
                id = f.varint;
                break;
            case 2:
                name = fc_pb_i64(f.varint);
                break;
            case 3:
                system_name = fc_pb_i64(f.varint);
                break;
            case 4:
                filename = fc_pb_i64(f.varint);
                break;
            case 5:
                fn.start_line = fc_pb_i64(f.varint);
                break;
            default:
                break;
            }
        }
        if (id == 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: function %zu: id 0 is not allowed", i);
        }
        if ((rc = string_ref(d, name, &fn.name, "function", i)) != FC_OK ||
            (rc = string_ref(d, system_name, &fn.system_name, "function", i)) != FC_OK ||
            (rc = string_ref(d, filename, &fn.filename, "function", i)) != FC_OK) {
            return rc;
        }
        if ((rc = fc_dict_function(d->b, &fn, &idx)) != FC_OK) {
            return check(d, rc);
        }
        if (!fc_idmap_put(&d->functions_by_id, id, idx)) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: function %zu: duplicate id %" PRIu64, i,
                             id);
        }
    }
    return FC_OK;
}

static int decode_mappings(struct decoder *d)
{
    fc_idmap_init(&d->mappings_by_id, d->mappings.n);
    for (size_t i = 0; i < d->mappings.n; i++) {
        struct fc_pb r;
        struct fc_pb_field f;
        uint64_t id = 0;
        int64_t filename = 0, build_id = 0;
        struct fc_mapping m = {0};
        uint32_t idx;
        int rc;

        fc_pb_init(&r, d->mappings.v[i].data, d->mappings.v[i].len);
        while (!fc_pb_done(&r)) {
            if (fc_pb_next(&r, &f) != 0) {
                return fc_errorf(d->err, FC_EPROTO, "pprof: mapping %zu: malformed message", i);
            }
            switch (f.number) {
            case 1:
                id = f.varint;
                break;
            case 2:
                m.memory_start = f.varint;
                break;
            case 3:
                m.memory_limit = f.varint;
                break;
            case 4:
                m.file_offset = f.varint;
                break;
            case 5:
                filename = fc_pb_i64(f.varint);
                break;
            case 6:
                build_id = fc_pb_i64(f.varint);
                break;
            case 7:
                m.flags |= f.varint ? FC_MAPPING_HAS_FUNCTIONS : 0;
                break;
            case 8:
                m.flags |= f.varint ? FC_MAPPING_HAS_FILENAMES : 0;
                break;
            case 9:
                m.flags |= f.varint ? FC_MAPPING_HAS_LINE_NUMBERS : 0;
                break;
            case 10:
                m.flags |= f.varint ? FC_MAPPING_HAS_INLINE_FRAMES : 0;
                break;
            default:
                break;
            }
        }
        if (id == 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: mapping %zu: id 0 is not allowed", i);
        }
        if ((rc = string_ref(d, filename, &m.filename, "mapping", i)) != FC_OK ||
            (rc = string_ref(d, build_id, &m.build_id, "mapping", i)) != FC_OK) {
            return rc;
        }
        if ((rc = fc_dict_mapping(d->b, &m, &idx)) != FC_OK) {
            return check(d, rc);
        }
        if (!fc_idmap_put(&d->mappings_by_id, id, idx)) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: mapping %zu: duplicate id %" PRIu64, i, id);
        }
    }
    return FC_OK;
}

static int decode_line(struct decoder *d, struct chunk c, struct fc_line *line, size_t loc)
{
    struct fc_pb r;
    struct fc_pb_field f;
    uint64_t function_id = 0;

    memset(line, 0, sizeof(*line));
    fc_pb_init(&r, c.data, c.len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: location %zu: malformed Line", loc);
        }
        if (f.number == 1) {
            function_id = f.varint;
        } else if (f.number == 2) {
            line->line = fc_pb_i64(f.varint);
        } else if (f.number == 3) {
            line->column = fc_pb_i64(f.varint);
        }
    }
    if (function_id != 0 && !fc_idmap_get(&d->functions_by_id, function_id, &line->function)) {
        return fc_errorf(d->err, FC_EPROTO,
                         "pprof: location %zu: function_id %" PRIu64
                         " is not in the function table",
                         loc, function_id);
    }
    return FC_OK;
}

static int decode_locations(struct decoder *d)
{
    fc_idmap_init(&d->locations_by_id, d->locations.n);
    for (size_t i = 0; i < d->locations.n; i++) {
        struct fc_pb r;
        struct fc_pb_field f;
        uint64_t id = 0;
        uint64_t mapping_id = 0;
        struct fc_location loc = {0};
        size_t n_lines = 0;
        uint32_t idx;
        int rc;

        fc_pb_init(&r, d->locations.v[i].data, d->locations.v[i].len);
        while (!fc_pb_done(&r)) {
            if (fc_pb_next(&r, &f) != 0) {
                return fc_errorf(d->err, FC_EPROTO, "pprof: location %zu: malformed message", i);
            }
            switch (f.number) {
            case 1:
                id = f.varint;
                break;
            case 2:
                mapping_id = f.varint;
                break;
            case 3:
                loc.address = f.varint;
                break;
            case 4:
                if (f.wire != FC_PB_LEN) {
                    return fc_errorf(d->err, FC_EPROTO, "pprof: location %zu: malformed Line", i);
                }
                if (n_lines == d->cap_lines) {
                    d->cap_lines = d->cap_lines ? d->cap_lines * 2 : 16;
                    d->lines = fc_xrealloc(d->lines, d->cap_lines * sizeof(*d->lines));
                }
                rc = decode_line(d, (struct chunk){f.data, f.len}, &d->lines[n_lines], i);
                if (rc != FC_OK) {
                    return rc;
                }
                n_lines++;
                break;
            case 5:
                loc.is_folded = f.varint != 0;
                break;
            default:
                break;
            }
        }
        if (id == 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: location %zu: id 0 is not allowed", i);
        }
        if (mapping_id != 0 && !fc_idmap_get(&d->mappings_by_id, mapping_id, &loc.mapping)) {
            return fc_errorf(d->err, FC_EPROTO,
                             "pprof: location %zu: mapping_id %" PRIu64
                             " is not in the mapping table",
                             i, mapping_id);
        }
        if (n_lines > UINT32_MAX) {
            return over_budget(d);
        }
        if ((rc = fc_dict_location(d->b, &loc, d->lines, (uint32_t)n_lines, &idx)) != FC_OK) {
            return check(d, rc);
        }
        if (!fc_idmap_put(&d->locations_by_id, id, idx)) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: location %zu: duplicate id %" PRIu64, i,
                             id);
        }
    }
    return FC_OK;
}

static int decode_label(struct decoder *d, struct chunk c, struct fc_attr *a, size_t sample)
{
    struct fc_pb r;
    struct fc_pb_field f;
    int64_t key = 0, str = 0, num = 0, num_unit = 0;
    int rc;

    fc_pb_init(&r, c.data, c.len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return fc_errorf(d->err, FC_EPROTO, "pprof: sample %zu: malformed Label", sample);
        }
        switch (f.number) {
        case 1:
            key = fc_pb_i64(f.varint);
            break;
        case 2:
            str = fc_pb_i64(f.varint);
            break;
        case 3:
            num = fc_pb_i64(f.varint);
            break;
        case 4:
            num_unit = fc_pb_i64(f.varint);
            break;
        default:
            break;
        }
    }
    memset(a, 0, sizeof(*a));
    if ((rc = string_ref(d, key, &a->key, "sample label of sample", sample)) != FC_OK ||
        (rc = string_ref(d, str, &a->v.str, "sample label of sample", sample)) != FC_OK ||
        (rc = string_ref(d, num_unit, &a->unit, "sample label of sample", sample)) != FC_OK) {
        return rc;
    }
    if (str != 0) {
        a->kind = FC_ATTR_STR;
    } else {
        a->kind = FC_ATTR_INT;
        a->v.i = num;
    }
    return FC_OK;
}

static int decode_samples(struct decoder *d, struct fc_profile *p)
{
    for (size_t i = 0; i < d->samples.n; i++) {
        struct fc_pb r;
        struct fc_pb_field f;
        struct fc_sample s = {0};
        size_t n_attrs = 0;
        uint32_t depth;
        int rc;

        d->scratch.n = 0;
        d->values.n = 0;
        fc_pb_init(&r, d->samples.v[i].data, d->samples.v[i].len);
        while (!fc_pb_done(&r)) {
            if (fc_pb_next(&r, &f) != 0) {
                return fc_errorf(d->err, FC_EPROTO, "pprof: sample %zu: malformed message", i);
            }
            if (f.number == 1) {
                if (read_repeated(&f, &d->scratch) != 0) {
                    return fc_errorf(d->err, FC_EPROTO, "pprof: sample %zu: malformed location_id",
                                     i);
                }
            } else if (f.number == 2) {
                if (read_repeated(&f, &d->values) != 0) {
                    return fc_errorf(d->err, FC_EPROTO, "pprof: sample %zu: malformed value", i);
                }
            } else if (f.number == 3) {
                if (f.wire != FC_PB_LEN) {
                    return fc_errorf(d->err, FC_EPROTO, "pprof: sample %zu: malformed Label", i);
                }
                if (n_attrs == d->cap_attrs) {
                    d->cap_attrs = d->cap_attrs ? d->cap_attrs * 2 : 16;
                    d->attrs = fc_xrealloc(d->attrs, d->cap_attrs * sizeof(uint32_t));
                }
                {
                    struct fc_attr a;
                    rc = decode_label(d, (struct chunk){f.data, f.len}, &a, i);
                    if (rc == FC_OK) {
                        rc = check(d, fc_dict_attr(d->b, &a, &d->attrs[n_attrs]));
                    }
                    if (rc != FC_OK) {
                        return rc;
                    }
                    n_attrs++;
                }
            }
        }
        if (d->values.n != p->n_sample_types) {
            return fc_errorf(d->err, FC_EPROTO,
                             "pprof: sample %zu has %zu values for %u sample types", i, d->values.n,
                             p->n_sample_types);
        }
        /* Stacks too deep are cut by the receivers' caps (core/limits.h), not here. */
        depth = (uint32_t)d->scratch.n;
        if (depth > d->cap_stack) {
            d->cap_stack = depth;
            d->stack = fc_xrealloc(d->stack, d->cap_stack * sizeof(uint32_t));
        }
        for (size_t j = 0; j < depth; j++) {
            uint64_t id = d->scratch.v[j];
            if (!fc_idmap_get(&d->locations_by_id, id, &d->stack[j])) {
                return fc_errorf(d->err, FC_EPROTO,
                                 "pprof: sample %zu: location_id %" PRIu64
                                 " is not in the location table",
                                 i, id);
            }
        }
        if ((rc = fc_dict_stack(d->b, d->stack, depth, &s.stack)) != FC_OK ||
            (rc = fc_dict_span(d->b, d->attrs, (uint32_t)n_attrs, &s.attrs)) != FC_OK ||
            (rc = fc_profile_add_sample(d->b, p, &s, (const int64_t *)d->values.v,
                                        (uint32_t)d->values.n, NULL, 0)) != FC_OK) {
            return check(d, rc);
        }
    }
    return FC_OK;
}

static int decode_profile(struct decoder *d, struct fc_profile *p)
{
    struct fc_value_type *types;
    uint32_t *comments;
    int rc;

    if ((rc = decode_strings(d)) != FC_OK || (rc = decode_functions(d)) != FC_OK ||
        (rc = decode_mappings(d)) != FC_OK || (rc = decode_locations(d)) != FC_OK) {
        return rc;
    }
    types = fc_xcalloc(d->sample_types.n + 1, sizeof(*types));
    for (size_t i = 0; i < d->sample_types.n && rc == FC_OK; i++) {
        rc = decode_value_type(d, d->sample_types.v[i], &types[i], "sample_type", i);
    }
    if (rc == FC_OK) {
        rc = check(d, fc_profile_set_sample_types(d->b, p, types, (uint32_t)d->sample_types.n));
    }
    free(types);
    if (rc != FC_OK) {
        return rc;
    }
    if (d->sample_types.n == 0) {
        return malformed(d, "the profile has no sample_type");
    }
    if (d->period_type.data != NULL &&
        (rc = decode_value_type(d, d->period_type, &p->period_type, "period_type", 0)) != FC_OK) {
        return rc;
    }
    p->period = d->period;
    p->time_ns = d->time_nanos;
    p->duration_ns = d->duration_nanos;
    if ((rc = string_ref(d, d->drop_frames, &p->drop_frames, "drop_frames", 0)) != FC_OK ||
        (rc = string_ref(d, d->keep_frames, &p->keep_frames, "keep_frames", 0)) != FC_OK ||
        (rc = string_ref(d, d->default_sample_type, &p->default_sample_type, "default_sample_type",
                         0)) != FC_OK) {
        return rc;
    }
    comments = fc_xcalloc(d->comments.n + 1, sizeof(uint32_t));
    for (size_t i = 0; i < d->comments.n && rc == FC_OK; i++) {
        rc = string_ref(d, (int64_t)d->comments.v[i], &comments[i], "comment", i);
    }
    if (rc == FC_OK) {
        rc = check(d, fc_dict_span(d->b, comments, (uint32_t)d->comments.n, &p->comments));
    }
    free(comments);
    if (rc != FC_OK) {
        return rc;
    }
    return decode_samples(d, p);
}

int fc_pprof_decode(struct fc_batch *b, const uint8_t *data, size_t len,
                    const struct fc_pprof_limits *limits, struct fc_profile **out,
                    struct fc_error *err)
{
    struct decoder d;
    struct fc_buf plain;
    struct fc_profile *p;
    uint32_t profile_index;
    int rc;

    memset(&d, 0, sizeof(d));
    d.b = b;
    d.limits = limits;
    d.err = err;
    fc_buf_init(&plain, 0);
    if (len == 0) {
        return fc_errorf(err, FC_EPROTO, "pprof: empty profile");
    }
    if (fc_is_gzip(data, len)) {
        rc = fc_gunzip(data, len, limits ? limits->max_decompressed : 0, &plain, err);
        if (rc != FC_OK) {
            fc_buf_release(&plain);
            return rc;
        }
        data = plain.data;
        len = plain.len;
    }
    p = fc_batch_add_profile(b);
    if (p == NULL) {
        fc_buf_release(&plain);
        return over_budget(&d);
    }
    profile_index = b->n_profiles - 1;
    rc = scan_top(&d, data, len);
    if (rc == FC_OK) {
        rc = decode_profile(&d, p);
    }
    if (rc != FC_OK) {
        b->n_profiles--; /* the half-built profile is not part of the batch */
    } else if (out != NULL) {
        *out = &b->profiles[profile_index];
    }
    free(d.sample_types.v);
    free(d.samples.v);
    free(d.mappings.v);
    free(d.locations.v);
    free(d.functions.v);
    free(d.strings.v);
    free(d.comments.v);
    free(d.strmap);
    fc_idmap_release(&d.functions_by_id);
    fc_idmap_release(&d.mappings_by_id);
    fc_idmap_release(&d.locations_by_id);
    free(d.scratch.v);
    free(d.values.v);
    free(d.lines);
    free(d.stack);
    free(d.attrs);
    fc_buf_release(&plain);
    return rc;
}

/* ---- encoding ----------------------------------------------------------------------------- */

struct encoder {
    const struct fc_batch *b;
    uint32_t *str_ids;     /* dict string -> pprof index + 1 (0 = not yet) */
    struct u64vec strings; /* pprof index -> dict string, or extra (high bit set) */
    char **extra;          /* strings made while encoding (numbers as text) */
    size_t n_extra;
    uint32_t *fn_ids;  /* dict function -> pprof id (0 = unused) */
    uint32_t *map_ids; /* dict mapping -> pprof id */
    uint32_t *loc_ids; /* dict location -> pprof id */
    struct u64vec fn_order, map_order, loc_order;
    uint64_t span_key, trace_key; /* string index of "span_id"/"trace_id" labels, 0 = none yet */
};

#define EXTRA_BIT (1ull << 63)

static uint64_t enc_str(struct encoder *e, uint32_t s)
{
    if (e->str_ids[s] == 0) {
        u64_push(&e->strings, s);
        e->str_ids[s] = (uint32_t)e->strings.n;
    }
    return e->str_ids[s] - 1;
}

static uint64_t enc_extra(struct encoder *e, const char *text)
{
    e->extra = fc_xrealloc(e->extra, (e->n_extra + 1) * sizeof(char *));
    e->extra[e->n_extra] = fc_xstrdup(text);
    u64_push(&e->strings, EXTRA_BIT | e->n_extra);
    e->n_extra++;
    return e->strings.n - 1;
}

static uint64_t enc_function(struct encoder *e, uint32_t f)
{
    if (e->fn_ids[f] == 0) {
        u64_push(&e->fn_order, f);
        e->fn_ids[f] = (uint32_t)e->fn_order.n;
    }
    return e->fn_ids[f];
}

static uint64_t enc_mapping(struct encoder *e, uint32_t m)
{
    if (m == 0) {
        return 0;
    }
    if (e->map_ids[m] == 0) {
        u64_push(&e->map_order, m);
        e->map_ids[m] = (uint32_t)e->map_order.n;
    }
    return e->map_ids[m];
}

static uint64_t enc_location(struct encoder *e, uint32_t l)
{
    if (e->loc_ids[l] == 0) {
        u64_push(&e->loc_order, l);
        e->loc_ids[l] = (uint32_t)e->loc_order.n;
    }
    return e->loc_ids[l];
}

static void put_msg(struct fc_buf *out, uint32_t number, struct fc_buf *msg)
{
    fc_pb_put_bytes(out, number, msg->data, msg->len);
    fc_buf_reset(msg);
}

static void put_value_type(struct encoder *e, struct fc_buf *out, uint32_t number,
                           const struct fc_value_type *vt, struct fc_buf *tmp)
{
    fc_pb_put_int(tmp, 1, (int64_t)enc_str(e, vt->type));
    fc_pb_put_int(tmp, 2, (int64_t)enc_str(e, vt->unit));
    put_msg(out, number, tmp);
}

/* A sample attribute as a pprof Label: strings stay strings, ints become num. */
static void put_label(struct encoder *e, struct fc_buf *out, const struct fc_attr *a,
                      struct fc_buf *tmp)
{
    char text[64];

    fc_pb_put_int(tmp, 1, (int64_t)enc_str(e, a->key));
    switch (a->kind) {
    case FC_ATTR_STR:
        fc_pb_put_int(tmp, 2, (int64_t)enc_str(e, a->v.str));
        break;
    case FC_ATTR_INT:
        fc_pb_put_int(tmp, 3, a->v.i);
        if (a->unit != 0) {
            fc_pb_put_int(tmp, 4, (int64_t)enc_str(e, a->unit));
        }
        break;
    case FC_ATTR_BOOL:
        fc_pb_put_int(tmp, 2, (int64_t)enc_extra(e, a->v.b ? "true" : "false"));
        break;
    case FC_ATTR_DOUBLE:
        snprintf(text, sizeof(text), "%.17g", a->v.d);
        fc_pb_put_int(tmp, 2, (int64_t)enc_extra(e, text));
        break;
    default:
        fc_buf_reset(tmp); /* bytes, arrays and maps have no pprof form */
        return;
    }
    put_msg(out, 3, tmp);
}

/* A string attribute's value (string index), or 0. */
static uint32_t attr_str(const struct fc_batch *b, struct fc_span attrs, const char *key)
{
    const struct fc_attr *a = fc_attrs_find(b, attrs, key);

    return a != NULL && a->kind == FC_ATTR_STR ? a->v.str : 0;
}

static bool attr_true(const struct fc_batch *b, struct fc_span attrs, const char *key)
{
    const struct fc_attr *a = fc_attrs_find(b, attrs, key);

    return a != NULL && a->kind == FC_ATTR_BOOL && a->v.b;
}

static uint32_t mapping_flags_from_attrs(const struct fc_batch *b, struct fc_span attrs)
{
    return (attr_true(b, attrs, FC_OTLP_HAS_FUNCTIONS_KEY) ? FC_MAPPING_HAS_FUNCTIONS : 0) |
           (attr_true(b, attrs, FC_OTLP_HAS_FILENAMES_KEY) ? FC_MAPPING_HAS_FILENAMES : 0) |
           (attr_true(b, attrs, FC_OTLP_HAS_LINE_NUMBERS_KEY) ? FC_MAPPING_HAS_LINE_NUMBERS : 0) |
           (attr_true(b, attrs, FC_OTLP_HAS_INLINE_FRAMES_KEY) ? FC_MAPPING_HAS_INLINE_FRAMES : 0);
}

/* A Link as the labels Pyroscope reads: span_id (16 hex) and trace_id (32 hex). */
static void put_link_labels(struct encoder *e, struct fc_buf *out, const struct fc_sample *s,
                            struct fc_buf *tmp)
{
    static const char hex[] = "0123456789abcdef";
    const struct fc_batch *b = e->b;
    const struct fc_link *k = &b->dict.links[s->link];
    char span[17], trace[33];
    bool has_trace = false;

    for (int i = 0; i < 8; i++) {
        span[2 * i] = hex[k->span_id[i] >> 4];
        span[2 * i + 1] = hex[k->span_id[i] & 15];
    }
    span[16] = '\0';
    for (int i = 0; i < 16; i++) {
        trace[2 * i] = hex[k->trace_id[i] >> 4];
        trace[2 * i + 1] = hex[k->trace_id[i] & 15];
        has_trace = has_trace || k->trace_id[i] != 0;
    }
    trace[32] = '\0';
    if (e->span_key == 0) {
        e->span_key = enc_extra(e, "span_id");
        e->trace_key = enc_extra(e, "trace_id");
    }
    if (fc_attrs_find(b, s->attrs, "span_id") == NULL) {
        fc_pb_put_int(tmp, 1, (int64_t)e->span_key);
        fc_pb_put_int(tmp, 2, (int64_t)enc_extra(e, span));
        put_msg(out, 3, tmp);
    }
    if (has_trace && fc_attrs_find(b, s->attrs, "trace_id") == NULL) {
        fc_pb_put_int(tmp, 1, (int64_t)e->trace_key);
        fc_pb_put_int(tmp, 2, (int64_t)enc_extra(e, trace));
        put_msg(out, 3, tmp);
    }
}

int fc_pprof_encode(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out,
                    struct fc_error *err)
{
    struct encoder e;
    struct fc_buf tmp, inner;
    const struct fc_dict *d = &b->dict;
    struct u64vec ids = {0};
    int64_t *values = NULL;
    int rc = FC_OK;

    memset(&e, 0, sizeof(e));
    e.b = b;
    e.str_ids = fc_xcalloc(d->n_strings + 1, sizeof(uint32_t));
    e.fn_ids = fc_xcalloc(d->n_functions + 1, sizeof(uint32_t));
    e.map_ids = fc_xcalloc(d->n_mappings + 1, sizeof(uint32_t));
    e.loc_ids = fc_xcalloc(d->n_locations + 1, sizeof(uint32_t));
    fc_buf_init(&tmp, 0);
    fc_buf_init(&inner, 0);
    values = fc_xcalloc(p->n_sample_types + 1, sizeof(int64_t));
    enc_str(&e, 0); /* string_table[0] = "" */

    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        put_value_type(&e, out, PROFILE_SAMPLE_TYPE, &p->sample_types[t], &tmp);
    }
    for (uint32_t i = 0; i < p->n_samples; i++) {
        const struct fc_sample *s = &p->samples[i];
        const struct fc_stack *st = &d->stacks[s->stack];
        const uint32_t *locs = fc_span_idx(b, st->locations);
        const uint32_t *attrs = fc_span_idx(b, s->attrs);
        ids.n = 0;
        for (uint32_t j = 0; j < st->locations.n; j++) {
            u64_push(&ids, enc_location(&e, locs[j]));
        }
        fc_pb_put_packed(&tmp, 1, ids.v, ids.n);
        for (uint32_t t = 0; t < p->n_sample_types; t++) {
            values[t] = fc_sample_value(p, s, t);
        }
        fc_pb_put_packed_i64(&tmp, 2, values, p->n_sample_types);
        for (uint32_t j = 0; j < s->attrs.n; j++) {
            put_label(&e, &tmp, &d->attrs[attrs[j]], &inner);
        }
        if (s->link != 0) {
            put_link_labels(&e, &tmp, s, &inner);
        }
        put_msg(out, PROFILE_SAMPLE, &tmp);
    }
    /* Locations first: they name the mappings and functions that are used. */
    for (size_t k = 0; k < e.loc_order.n; k++) {
        const struct fc_location *l = &d->locations[e.loc_order.v[k]];
        fc_pb_put_uint(&tmp, 1, k + 1);
        fc_pb_put_uint(&tmp, 2, enc_mapping(&e, l->mapping));
        fc_pb_put_uint(&tmp, 3, l->address);
        for (uint32_t j = 0; j < l->n_lines; j++) {
            const struct fc_line *ln = &d->lines[l->lines_off + j];
            fc_pb_put_uint(&inner, 1, ln->function ? enc_function(&e, ln->function) : 0);
            fc_pb_put_int(&inner, 2, ln->line);
            fc_pb_put_int(&inner, 3, ln->column);
            put_msg(&tmp, 4, &inner);
        }
        fc_pb_put_bool(&tmp, 5, l->is_folded || attr_true(b, l->attrs, FC_OTLP_IS_FOLDED_KEY));
        put_msg(out, PROFILE_LOCATION, &tmp);
    }
    for (size_t k = 0; k < e.map_order.n; k++) {
        const struct fc_mapping *m = &d->mappings[e.map_order.v[k]];
        uint32_t build_id = m->build_id ? m->build_id : attr_str(b, m->attrs, FC_OTLP_BUILD_ID_KEY);
        uint32_t flags = m->flags | mapping_flags_from_attrs(b, m->attrs);
        fc_pb_put_uint(&tmp, 1, k + 1);
        fc_pb_put_uint(&tmp, 2, m->memory_start);
        fc_pb_put_uint(&tmp, 3, m->memory_limit);
        fc_pb_put_uint(&tmp, 4, m->file_offset);
        fc_pb_put_int(&tmp, 5, (int64_t)enc_str(&e, m->filename));
        fc_pb_put_int(&tmp, 6, (int64_t)enc_str(&e, build_id));
        fc_pb_put_bool(&tmp, 7, flags & FC_MAPPING_HAS_FUNCTIONS);
        fc_pb_put_bool(&tmp, 8, flags & FC_MAPPING_HAS_FILENAMES);
        fc_pb_put_bool(&tmp, 9, flags & FC_MAPPING_HAS_LINE_NUMBERS);
        fc_pb_put_bool(&tmp, 10, flags & FC_MAPPING_HAS_INLINE_FRAMES);
        put_msg(out, PROFILE_MAPPING, &tmp);
    }
    for (size_t k = 0; k < e.fn_order.n; k++) {
        const struct fc_function *f = &d->functions[e.fn_order.v[k]];
        fc_pb_put_uint(&tmp, 1, k + 1);
        fc_pb_put_int(&tmp, 2, (int64_t)enc_str(&e, f->name));
        fc_pb_put_int(&tmp, 3, (int64_t)enc_str(&e, f->system_name));
        fc_pb_put_int(&tmp, 4, (int64_t)enc_str(&e, f->filename));
        fc_pb_put_int(&tmp, 5, f->start_line);
        put_msg(out, PROFILE_FUNCTION, &tmp);
    }
    {
        /* Scalars reference strings too, so they are numbered before the table is written. */
        uint64_t drop = enc_str(
            &e, p->drop_frames ? p->drop_frames : attr_str(b, p->attrs, FC_OTLP_DROP_FRAMES_KEY));
        uint64_t keep = enc_str(
            &e, p->keep_frames ? p->keep_frames : attr_str(b, p->attrs, FC_OTLP_KEEP_FRAMES_KEY));
        uint64_t dflt =
            enc_str(&e, p->default_sample_type ? p->default_sample_type
                                               : attr_str(b, p->attrs, FC_OTLP_DEFAULT_TYPE_KEY));
        const uint32_t *comments = fc_span_idx(b, p->comments);
        ids.n = 0;
        for (uint32_t j = 0; j < p->comments.n; j++) {
            u64_push(&ids, enc_str(&e, comments[j]));
        }
        /* Comments that came through OTLP as pprof.profile.comment.<n>. */
        for (uint32_t j = 0; p->comments.n == 0 && j < p->attrs.n; j++) {
            const struct fc_attr *a = &d->attrs[fc_span_idx(b, p->attrs)[j]];
            if (a->kind == FC_ATTR_STR && strncmp(fc_str(b, a->key), FC_OTLP_COMMENT_KEY ".",
                                                  sizeof(FC_OTLP_COMMENT_KEY)) == 0) {
                u64_push(&ids, enc_str(&e, a->v.str));
            }
        }
        if (p->period_type.type != 0 || p->period_type.unit != 0) {
            put_value_type(&e, &inner, PROFILE_PERIOD_TYPE, &p->period_type, &tmp);
        }
        for (size_t k = 0; k < e.strings.n; k++) {
            uint64_t s = e.strings.v[k];
            if (s & EXTRA_BIT) {
                const char *x = e.extra[s & ~EXTRA_BIT];
                fc_pb_put_bytes(out, PROFILE_STRING_TABLE, x, strlen(x));
            } else {
                fc_pb_put_bytes(out, PROFILE_STRING_TABLE, d->strings[s], d->str_len[s]);
            }
        }
        fc_pb_put_int(out, PROFILE_DROP_FRAMES, (int64_t)drop);
        fc_pb_put_int(out, PROFILE_KEEP_FRAMES, (int64_t)keep);
        fc_pb_put_int(out, PROFILE_TIME_NANOS, p->time_ns);
        fc_pb_put_int(out, PROFILE_DURATION_NANOS, p->duration_ns);
        fc_buf_append(out, inner.data, inner.len); /* period_type */
        fc_pb_put_int(out, PROFILE_PERIOD, p->period);
        fc_pb_put_packed(out, PROFILE_COMMENT, ids.v, ids.n);
        fc_pb_put_int(out, PROFILE_DEFAULT_SAMPLE_TYPE, (int64_t)dflt);
    }
    if (out->limit != 0 && out->len >= out->limit) {
        rc = fc_errorf(err, FC_ETOOBIG, "pprof: encoded profile exceeds %zu bytes", out->limit);
    }
    for (size_t k = 0; k < e.n_extra; k++) {
        free(e.extra[k]);
    }
    free(e.extra);
    free(e.str_ids);
    free(e.fn_ids);
    free(e.map_ids);
    free(e.loc_ids);
    free(e.strings.v);
    free(e.fn_order.v);
    free(e.map_order.v);
    free(e.loc_order.v);
    free(ids.v);
    free(values);
    fc_buf_release(&tmp);
    fc_buf_release(&inner);
    return rc;
}
