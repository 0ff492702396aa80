#include "core/limits.h"

#include "core/metrics.h"

#include <inttypes.h>
#include <stdio.h>

const struct fc_input_limits fc_input_limits_default = {
    .max_message_depth = FC_PB_DEFAULT_MAX_DEPTH,
    .max_stack_depth = 1024,
    .max_sample_labels = 100,
    .max_labels = 30,
    .max_label_name_length = 1024,
    .max_label_value_length = 2048,
    .max_attributes = 128,
};

int fc_input_limits_validate(const struct fc_input_limits *l, struct fc_error *err)
{
    if (l->max_message_depth < 1 || l->max_message_depth > FC_PB_MAX_DEPTH_CEILING) {
        return fc_errorf(err, FC_ECONFIG, "max_message_depth must be between 1 and %d",
                         FC_PB_MAX_DEPTH_CEILING);
    }
    if (l->max_labels < 1) {
        return fc_errorf(err, FC_ECONFIG, "max_labels must be at least 1");
    }
    if (l->max_stack_depth < 0 || l->max_sample_labels < 0 || l->max_label_name_length < 0 ||
        l->max_label_value_length < 0 || l->max_attributes < 0) {
        return fc_errorf(err, FC_ECONFIG,
                         "max_stack_depth, max_sample_labels, max_label_name_length, "
                         "max_label_value_length and max_attributes must not be negative "
                         "(0 = no limit)");
    }
    return FC_OK;
}

/* True when n is over the cap (0 = no limit). */
static bool over(uint64_t n, int64_t cap)
{
    return cap > 0 && n > (uint64_t)cap;
}

/* The byte length of an attribute's value, 0 for kinds without one (numbers, bools). */
static uint64_t attr_value_len(const struct fc_batch *b, const struct fc_attr *a)
{
    switch (a->kind) {
    case FC_ATTR_STR:
        return b->dict.str_len[a->v.str];
    case FC_ATTR_BYTES:
    case FC_ATTR_ARRAY:
    case FC_ATTR_KVLIST:
        return a->v.blob.len;
    default:
        return 0;
    }
}

/* A label's name and value length, for series labels and sample labels alike. */
static int check_label(const struct fc_input_limits *l, const char *where, const char *name,
                       uint64_t name_len, uint64_t value_len, struct fc_error *err)
{
    if (over(name_len, l->max_label_name_length)) {
        return fc_errorf(err, FC_EPROTO,
                         "%s: label name \"%.64s...\" is %" PRIu64
                         " bytes, more than max_label_name_length (%" PRId64 ")",
                         where, name, name_len, l->max_label_name_length);
    }
    if (over(value_len, l->max_label_value_length)) {
        return fc_errorf(err, FC_EPROTO,
                         "%s: label \"%.64s\" value is %" PRIu64
                         " bytes, more than max_label_value_length (%" PRId64 ")",
                         where, name, value_len, l->max_label_value_length);
    }
    return FC_OK;
}

static int check_series_labels(const struct fc_input_limits *l, const struct fc_batch *b,
                               const struct fc_profile *p, const char *where, struct fc_error *err)
{
    if (over(p->n_labels, l->max_labels)) {
        return fc_errorf(err, FC_EPROTO,
                         "%s has %u series labels, more than max_labels (%" PRId64 ")", where,
                         p->n_labels, l->max_labels);
    }
    for (uint32_t i = 0; i < p->n_labels; i++) {
        const struct fc_label *lb = &p->labels[i];
        int rc = check_label(l, where, fc_str(b, lb->name), b->dict.str_len[lb->name],
                             b->dict.str_len[lb->value], err);
        if (rc != FC_OK) {
            return rc;
        }
    }
    return FC_OK;
}

static bool sample_within(const struct fc_input_limits *l, const struct fc_batch *b,
                          struct fc_span attrs)
{
    if (over(attrs.n, l->max_sample_labels)) {
        return false;
    }
    for (uint32_t j = 0; j < attrs.n; j++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, attrs)[j]];
        if (over(b->dict.str_len[a->key], l->max_label_name_length) ||
            over(attr_value_len(b, a), l->max_label_value_length)) {
            return false;
        }
    }
    return true;
}

static int check_samples(const struct fc_input_limits *l, const struct fc_batch *b,
                         const struct fc_profile *p, const char *profile, struct fc_error *err)
{
    char where[96];

    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_span attrs = p->samples[i].attrs;
        if (sample_within(l, b, attrs)) {
            continue; /* the common case: no message to compose */
        }
        snprintf(where, sizeof(where), "%s sample %u", profile, i);
        if (over(attrs.n, l->max_sample_labels)) {
            return fc_errorf(err, FC_EPROTO,
                             "%s has %u labels, more than max_sample_labels (%" PRId64 ")", where,
                             attrs.n, l->max_sample_labels);
        }
        for (uint32_t j = 0; j < attrs.n; j++) {
            const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, attrs)[j]];
            int rc = check_label(l, where, fc_str(b, a->key), b->dict.str_len[a->key],
                                 attr_value_len(b, a), err);
            if (rc != FC_OK) {
                return rc;
            }
        }
    }
    return FC_OK;
}

/* OTLP resource, scope and profile attributes, counted together. */
static int check_attributes(const struct fc_input_limits *l, const struct fc_batch *b,
                            const struct fc_profile *p, const char *where, struct fc_error *err)
{
    const struct fc_origin *o = p->origin != 0 ? &b->origins[p->origin] : NULL;
    uint64_t n = p->attrs.n;

    if (o != NULL) {
        n += (uint64_t)o->resource_attrs.n + o->scope_attrs.n;
    }
    if (over(n, l->max_attributes)) {
        return fc_errorf(err, FC_EPROTO,
                         "%s has %" PRIu64 " attributes (resource %u, scope %u, profile %u), more "
                         "than max_attributes (%" PRId64 ")",
                         where, n, o ? o->resource_attrs.n : 0, o ? o->scope_attrs.n : 0,
                         p->attrs.n, l->max_attributes);
    }
    return FC_OK;
}

/*
 * Cuts every stack deeper than the cap to its root-most frames. Stacks are
 * leaf first, so the kept frames are the last ones of the span; the batch
 * is still the receiver's own, so its dictionary may change in place.
 */
static uint64_t truncate_stacks(struct fc_batch *b, int64_t max_depth)
{
    uint64_t cut = 0;

    if (max_depth <= 0) {
        return 0;
    }
    for (uint32_t i = 1; i < b->dict.n_stacks; i++) {
        struct fc_span *s = &b->dict.stacks[i].locations;
        if (s->n > (uint64_t)max_depth) {
            s->off += s->n - (uint32_t)max_depth;
            s->n = (uint32_t)max_depth;
            cut++;
        }
    }
    return cut;
}

int fc_input_limits_apply(const struct fc_input_limits *l, struct fc_batch *b, uint64_t *truncated,
                          struct fc_error *err)
{
    char where[32];
    uint64_t cut;

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        const struct fc_profile *p = &b->profiles[i];
        int rc;
        snprintf(where, sizeof(where), "profile %u", i);
        rc = check_attributes(l, b, p, where, err);
        rc = rc ? rc : check_series_labels(l, b, p, where, err);
        rc = rc ? rc : check_samples(l, b, p, where, err);
        if (rc != FC_OK) {
            return rc;
        }
    }
    cut = truncate_stacks(b, l->max_stack_depth);
    if (truncated != NULL) {
        *truncated += cut;
    }
    return FC_OK;
}

_Atomic int64_t *fc_input_limits_truncated_counter(const char *receiver_id)
{
    char labels[256];

    snprintf(labels, sizeof(labels), "receiver=\"%s\"", receiver_id);
    return fc_metrics_counter("flamecol_receiver_truncated_stacks_total", labels,
                              "Stacks cut to max_stack_depth (their root-most frames kept).");
}
