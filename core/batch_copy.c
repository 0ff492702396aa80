/*
 * Copies between batches: fc_batch_clone (a deep copy with its own arena)
 * and fc_batch_merge (another batch's profiles re-interned into this one's
 * dictionary). The rest of the batch model is in core/batch.c.
 */
#include "core/batch.h"

#include "core/mem.h"

#include <stdlib.h>
#include <string.h>

/* ---- clone -------------------------------------------------------------------------------- */

#define DUP(dst, src, field, count)                                                                \
    do {                                                                                           \
        (dst)->field = NULL;                                                                       \
        if ((count) > 0) {                                                                         \
            (dst)->field =                                                                         \
                fc_arena_memdup(c->arena, (src)->field, (size_t)(count) * sizeof(*(src)->field));  \
            if ((dst)->field == NULL) {                                                            \
                goto over;                                                                         \
            }                                                                                      \
        }                                                                                          \
    } while (0)

static int dup_intern(struct fc_arena *a, struct fc_intern *dst, const struct fc_intern *src)
{
    *dst = *src;
    dst->slots = NULL;
    if (src->cap > 0) {
        dst->slots = fc_arena_memdup(a, src->slots, src->cap * sizeof(uint64_t));
        if (dst->slots == NULL) {
            return FC_ETOOBIG;
        }
    }
    return FC_OK;
}

int fc_batch_clone(const struct fc_batch *src, struct fc_batch **out, struct fc_error *err)
{
    struct fc_batch *c = fc_xcalloc(1, sizeof(*c));
    const struct fc_dict *sd = &src->dict;
    struct fc_dict *d = &c->dict;

    atomic_init(&c->refs, 1);
    c->arena = fc_arena_new(src->arena->budget);
    *d = *sd;
    /* Tables are copied at their length; the first append grows them again. */
    d->cap_strings = d->n_strings;
    d->cap_mappings = d->n_mappings;
    d->cap_functions = d->n_functions;
    d->cap_locations = d->n_locations;
    d->cap_lines = d->n_lines;
    d->cap_stacks = d->n_stacks;
    d->cap_attrs = d->n_attrs;
    d->cap_links = d->n_links;
    DUP(d, sd, strings, sd->n_strings);
    DUP(d, sd, str_len, sd->n_strings);
    for (uint32_t i = 0; i < sd->n_strings; i++) {
        d->strings[i] = fc_arena_strndup(c->arena, sd->strings[i], sd->str_len[i]);
        if (d->strings[i] == NULL) {
            goto over;
        }
    }
    DUP(d, sd, mappings, sd->n_mappings);
    DUP(d, sd, functions, sd->n_functions);
    DUP(d, sd, locations, sd->n_locations);
    DUP(d, sd, lines, sd->n_lines);
    DUP(d, sd, stacks, sd->n_stacks);
    DUP(d, sd, attrs, sd->n_attrs);
    for (uint32_t i = 0; i < sd->n_attrs; i++) {
        struct fc_attr *a = &d->attrs[i];
        if ((a->kind == FC_ATTR_BYTES || a->kind == FC_ATTR_ARRAY || a->kind == FC_ATTR_KVLIST) &&
            a->v.blob.len > 0) {
            a->v.blob.data = fc_arena_memdup(c->arena, a->v.blob.data, a->v.blob.len);
            if (a->v.blob.data == NULL) {
                goto over;
            }
        }
    }
    DUP(d, sd, links, sd->n_links);
    d->cap_idx = d->n_idx + 16;
    d->idx = fc_arena_alloc(c->arena, d->cap_idx * sizeof(uint32_t));
    if (d->idx == NULL) {
        goto over;
    }
    memcpy(d->idx, sd->idx, sd->n_idx * sizeof(uint32_t));
    if (dup_intern(c->arena, &d->i_strings, &sd->i_strings) ||
        dup_intern(c->arena, &d->i_mappings, &sd->i_mappings) ||
        dup_intern(c->arena, &d->i_functions, &sd->i_functions) ||
        dup_intern(c->arena, &d->i_locations, &sd->i_locations) ||
        dup_intern(c->arena, &d->i_stacks, &sd->i_stacks) ||
        dup_intern(c->arena, &d->i_attrs, &sd->i_attrs) ||
        dup_intern(c->arena, &d->i_links, &sd->i_links)) {
        goto over;
    }
    c->n_origins = c->cap_origins = src->n_origins;
    DUP(c, src, origins, src->n_origins);
    c->n_profiles = c->cap_profiles = src->n_profiles;
    DUP(c, src, profiles, src->n_profiles);
    for (uint32_t i = 0; i < src->n_profiles; i++) {
        const struct fc_profile *sp = &src->profiles[i];
        struct fc_profile *p = &c->profiles[i];
        p->cap_labels = p->n_labels;
        p->cap_samples = p->n_samples;
        p->cap_nums = p->n_nums;
        DUP(p, sp, labels, sp->n_labels);
        DUP(p, sp, sample_types, sp->n_sample_types);
        DUP(p, sp, samples, sp->n_samples);
        DUP(p, sp, nums, sp->n_nums);
        DUP(p, sp, original_payload, sp->original_payload_len);
    }
    if (fc_batch_set_tenant(c, src->tenant) != FC_OK) {
        goto over;
    }
    *out = c;
    return FC_OK;
over:
    fc_batch_unref(c);
    return fc_errorf(err, FC_ETOOBIG, "batch copy exceeds the memory budget of %zu bytes",
                     src->arena->budget);
}

/* ---- merge -------------------------------------------------------------------------------- */

/* src index -> dst index, one array per table, freed at the end of a merge. */
struct remap {
    uint32_t *strings, *attrs, *mappings, *functions, *locations, *stacks, *links;
    /* index spans already copied, by their start in src's pool: dst off + 1 (0 = none) */
    uint32_t *span_off, *span_n;
    uint32_t *tmp; /* scratch for one span */
    uint32_t cap_tmp;
};

static uint32_t *remap_array(uint32_t n)
{
    return fc_xcalloc(n > 0 ? n : 1, sizeof(uint32_t));
}

static void remap_free(struct remap *m)
{
    free(m->strings);
    free(m->attrs);
    free(m->mappings);
    free(m->functions);
    free(m->locations);
    free(m->stacks);
    free(m->links);
    free(m->span_off);
    free(m->span_n);
    free(m->tmp);
}

/* Copies a span of src indices into dst's pool, each index through map (NULL = as is). */
static int merge_span(struct fc_batch *dst, const struct fc_batch *src, struct remap *m,
                      struct fc_span s, const uint32_t *map, struct fc_span *out)
{
    const uint32_t *in = fc_span_idx(src, s);
    int rc;

    if (s.n == 0) {
        *out = (struct fc_span){0, 0};
        return FC_OK;
    }
    /* Samples share their attribute lists: a list met before is copied once. */
    if (map == m->attrs && m->span_off[s.off] != 0 && m->span_n[s.off] == s.n) {
        *out = (struct fc_span){m->span_off[s.off] - 1, s.n};
        return FC_OK;
    }
    if (s.n > m->cap_tmp) {
        m->tmp = fc_xrealloc(m->tmp, (size_t)s.n * sizeof(uint32_t));
        m->cap_tmp = s.n;
    }
    for (uint32_t i = 0; i < s.n; i++) {
        m->tmp[i] = map != NULL ? map[in[i]] : in[i];
    }
    rc = fc_dict_span(dst, m->tmp, s.n, out);
    if (rc == FC_OK && map == m->attrs) {
        m->span_off[s.off] = out->off + 1;
        m->span_n[s.off] = s.n;
    }
    return rc;
}

static int merge_dict(struct fc_batch *dst, const struct fc_batch *src, struct remap *m)
{
    const struct fc_dict *sd = &src->dict;
    int rc = FC_OK;

    for (uint32_t i = 0; i < sd->n_strings && rc == FC_OK; i++) {
        rc = fc_dict_string(dst, sd->strings[i], sd->str_len[i], &m->strings[i]);
    }
    for (uint32_t i = 0; i < sd->n_attrs && rc == FC_OK; i++) {
        struct fc_attr a = sd->attrs[i];
        a.key = m->strings[a.key];
        a.unit = m->strings[a.unit];
        if (a.kind == FC_ATTR_STR) {
            a.v.str = m->strings[a.v.str];
        }
        rc = fc_dict_attr(dst, &a, &m->attrs[i]); /* blobs are copied into dst's arena */
    }
    for (uint32_t i = 0; i < sd->n_mappings && rc == FC_OK; i++) {
        struct fc_mapping x = sd->mappings[i];
        x.filename = m->strings[x.filename];
        x.build_id = m->strings[x.build_id];
        rc = merge_span(dst, src, m, x.attrs, m->attrs, &x.attrs);
        rc = rc ? rc : fc_dict_mapping(dst, &x, &m->mappings[i]);
    }
    for (uint32_t i = 0; i < sd->n_functions && rc == FC_OK; i++) {
        struct fc_function f = sd->functions[i];
        f.name = m->strings[f.name];
        f.system_name = m->strings[f.system_name];
        f.filename = m->strings[f.filename];
        rc = fc_dict_function(dst, &f, &m->functions[i]);
    }
    for (uint32_t i = 0; i < sd->n_locations && rc == FC_OK; i++) {
        struct fc_location loc = sd->locations[i];
        struct fc_line *lines = NULL;
        if (loc.n_lines > 0) {
            lines = fc_xcalloc(loc.n_lines, sizeof(*lines));
            for (uint32_t j = 0; j < loc.n_lines; j++) {
                lines[j] = sd->lines[loc.lines_off + j];
                lines[j].function = m->functions[lines[j].function];
            }
        }
        loc.mapping = m->mappings[loc.mapping];
        rc = merge_span(dst, src, m, loc.attrs, m->attrs, &loc.attrs);
        rc = rc ? rc : fc_dict_location(dst, &loc, lines, loc.n_lines, &m->locations[i]);
        free(lines);
    }
    for (uint32_t i = 0; i < sd->n_stacks && rc == FC_OK; i++) {
        struct fc_span s = sd->stacks[i].locations;
        const uint32_t *in = fc_span_idx(src, s);
        if (s.n > m->cap_tmp) {
            m->tmp = fc_xrealloc(m->tmp, (size_t)s.n * sizeof(uint32_t));
            m->cap_tmp = s.n;
        }
        for (uint32_t j = 0; j < s.n; j++) {
            m->tmp[j] = m->locations[in[j]];
        }
        rc = fc_dict_stack(dst, m->tmp, s.n, &m->stacks[i]);
    }
    for (uint32_t i = 0; i < sd->n_links && rc == FC_OK; i++) {
        rc = fc_dict_link(dst, &sd->links[i], &m->links[i]);
    }
    return rc;
}

static bool origin_eq(const struct fc_batch *b, const struct fc_origin *x,
                      const struct fc_origin *y)
{
    return fc_span_eq(b, x->resource_attrs, y->resource_attrs) &&
           x->resource_dropped == y->resource_dropped &&
           x->resource_schema_url == y->resource_schema_url && x->scope_name == y->scope_name &&
           x->scope_version == y->scope_version && fc_span_eq(b, x->scope_attrs, y->scope_attrs) &&
           x->scope_dropped == y->scope_dropped && x->scope_schema_url == y->scope_schema_url;
}

/* The dst origin equal to src's origin i, added when dst has none (0 stays 0). */
static int merge_origin(struct fc_batch *dst, const struct fc_batch *src, struct remap *m,
                        uint32_t i, uint32_t *out)
{
    const struct fc_origin *so = &src->origins[i];
    struct fc_origin o = *so;
    int rc;

    if (i == 0) {
        *out = 0;
        return FC_OK;
    }
    o.resource_schema_url = m->strings[so->resource_schema_url];
    o.scope_name = m->strings[so->scope_name];
    o.scope_version = m->strings[so->scope_version];
    o.scope_schema_url = m->strings[so->scope_schema_url];
    rc = merge_span(dst, src, m, so->resource_attrs, m->attrs, &o.resource_attrs);
    rc = rc ? rc : merge_span(dst, src, m, so->scope_attrs, m->attrs, &o.scope_attrs);
    if (rc != FC_OK) {
        return rc;
    }
    /* Requests of one service share their resource: it is sent once. */
    for (uint32_t j = 1; j < dst->n_origins; j++) {
        if (origin_eq(dst, &dst->origins[j], &o)) {
            *out = j;
            return FC_OK;
        }
    }
    return fc_batch_add_origin(dst, &o, out);
}

static int merge_profile(struct fc_batch *dst, const struct fc_batch *src, struct remap *m,
                         const struct fc_profile *sp, const uint32_t *origins)
{
    struct fc_profile *p = fc_batch_add_profile(dst);
    int rc = FC_OK;

    if (p == NULL) {
        return FC_ETOOBIG;
    }
    p->period_type.type = m->strings[sp->period_type.type];
    p->period_type.unit = m->strings[sp->period_type.unit];
    p->period = sp->period;
    p->time_ns = sp->time_ns;
    p->duration_ns = sp->duration_ns;
    p->origin = origins[sp->origin];
    p->cpu_samples_as_ns = sp->cpu_samples_as_ns;
    p->drop_frames = m->strings[sp->drop_frames];
    p->keep_frames = m->strings[sp->keep_frames];
    p->default_sample_type = m->strings[sp->default_sample_type];
    memcpy(p->profile_id, sp->profile_id, sizeof(p->profile_id));
    p->dropped_attributes_count = sp->dropped_attributes_count;
    p->original_payload_format = m->strings[sp->original_payload_format];
    if (sp->original_payload_len > 0) {
        p->original_payload =
            fc_arena_memdup(dst->arena, sp->original_payload, sp->original_payload_len);
        if (p->original_payload == NULL) {
            return FC_ETOOBIG;
        }
        p->original_payload_len = sp->original_payload_len;
    }
    rc = merge_span(dst, src, m, sp->comments, m->strings, &p->comments);
    rc = rc ? rc : merge_span(dst, src, m, sp->attrs, m->attrs, &p->attrs);
    if (rc == FC_OK && sp->n_labels > 0) {
        /* Names keep their order (sorted by the strings, not the indices). */
        p->labels = fc_arena_alloc(dst->arena, sp->n_labels * sizeof(*p->labels));
        if (p->labels == NULL) {
            return FC_ETOOBIG;
        }
        for (uint32_t i = 0; i < sp->n_labels; i++) {
            p->labels[i].name = m->strings[sp->labels[i].name];
            p->labels[i].value = m->strings[sp->labels[i].value];
        }
        p->n_labels = p->cap_labels = sp->n_labels;
    }
    if (rc == FC_OK && sp->n_sample_types > 0) {
        struct fc_value_type *t = fc_xcalloc(sp->n_sample_types, sizeof(*t));
        for (uint32_t i = 0; i < sp->n_sample_types; i++) {
            t[i].type = m->strings[sp->sample_types[i].type];
            t[i].unit = m->strings[sp->sample_types[i].unit];
        }
        rc = fc_profile_set_sample_types(dst, p, t, sp->n_sample_types);
        free(t);
    }
    for (uint32_t i = 0; i < sp->n_samples && rc == FC_OK; i++) {
        const struct fc_sample *ss = &sp->samples[i];
        struct fc_sample s = *ss;
        s.stack = m->stacks[ss->stack];
        s.link = m->links[ss->link];
        rc = merge_span(dst, src, m, ss->attrs, m->attrs, &s.attrs);
        rc = rc ? rc
                : fc_profile_add_sample(dst, p, &s, sp->nums + ss->values_off, ss->n_values,
                                        sp->nums + ss->ts_off, ss->n_ts);
    }
    return rc;
}

int fc_batch_merge(struct fc_batch *dst, const struct fc_batch *src, struct fc_error *err)
{
    return fc_batch_merge_profiles(dst, src, NULL, src->n_profiles, err);
}

int fc_batch_merge_profiles(struct fc_batch *dst, const struct fc_batch *src, const uint32_t *which,
                            uint32_t n, struct fc_error *err)
{
    const struct fc_dict *sd = &src->dict;
    struct remap m = {0};
    uint32_t n_profiles = dst->n_profiles;
    uint32_t n_origins = dst->n_origins;
    uint32_t *origins;
    int rc;

    if (strcmp(dst->tenant, src->tenant) != 0) {
        return fc_errorf(err, FC_EINVAL, "tenants \"%s\" and \"%s\" never share a batch",
                         dst->tenant, src->tenant);
    }
    fc_batch_drop_wire(dst);
    m.strings = remap_array(sd->n_strings);
    m.attrs = remap_array(sd->n_attrs);
    m.mappings = remap_array(sd->n_mappings);
    m.functions = remap_array(sd->n_functions);
    m.locations = remap_array(sd->n_locations);
    m.stacks = remap_array(sd->n_stacks);
    m.links = remap_array(sd->n_links);
    m.span_off = remap_array(sd->n_idx);
    m.span_n = remap_array(sd->n_idx);
    origins = remap_array(src->n_origins);
    rc = merge_dict(dst, src, &m);
    for (uint32_t i = 0; i < src->n_origins && rc == FC_OK; i++) {
        rc = merge_origin(dst, src, &m, i, &origins[i]);
    }
    for (uint32_t i = 0; i < n && rc == FC_OK; i++) {
        rc = merge_profile(dst, src, &m, &src->profiles[which != NULL ? which[i] : i], origins);
    }
    free(origins);
    remap_free(&m);
    if (rc != FC_OK) {
        dst->n_profiles = n_profiles;
        dst->n_origins = n_origins;
        return fc_errorf(err, rc, "merged batch exceeds the memory budget of %zu bytes",
                         dst->arena->budget);
    }
    return FC_OK;
}
