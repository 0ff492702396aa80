/*
 * spanlink processor (see spanlink.h). Per sample:
 *
 *   - its span is its Link when it has one, else its labels span_id (and
 *     trace_id), else the profile's series labels span_id / trace_id when a
 *     sender put them there (moved to every sample without a span of its own:
 *     a span id is never left as a series label, a series per span would
 *     blow up every index);
 *   - a Link and labels naming another span (or another trace) are a
 *     conflict: the Link wins (it is what an OTLP sender set explicitly) and
 *     the conflict is counted. A Link without a trace id takes the trace id
 *     of labels naming the same span: not a conflict;
 *   - `to: links`: the span becomes the sample's Link, and the span_id /
 *     trace_id labels that held it are removed; `to: labels`: the span
 *     becomes labels span_id (16 lowercase hex digits) and trace_id (32, when
 *     known), and the Link is removed; `to: both`: both;
 *   - labels that are not ids (bad hex, zero, a 17-digit hex string, ...) are
 *     malformed: counted and left as they are (with `labels`/`both` and a
 *     Link they are replaced by the Link's ids);
 *   - span_name (a sample label in Pyroscope's integrations, which Pyroscope
 *     turns into a series label, like every sample label but span_id) is
 *     removed from samples and series labels unless keep_span_name is set.
 *
 * Samples are never merged or dropped: values, timestamps and stacks stay as
 * they are, so every total is exact. Two samples that now look alike stay two.
 */
#include "processors/spanlink/spanlink.h"

#include "core/buf.h"
#include "core/component.h"
#include "core/mem.h"
#include "core/metrics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void hex_encode(const uint8_t *p, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = '\0';
}

/* ---- the transformation ------------------------------------------------------------------- */

/* The span a profile's series labels give its samples (moved off the series labels). */
struct series_span {
    bool has_span, has_trace;
    uint8_t span[8];
    uint8_t trace[16];
};

enum key_kind { K_OTHER, K_SPAN, K_TRACE, K_NAME };

static enum key_kind key_kind(const struct fc_batch *b, uint32_t key)
{
    const char *k = fc_str(b, key);

    if (b->dict.str_len[key] == 7 && strcmp(k, "span_id") == 0) {
        return K_SPAN;
    }
    if (b->dict.str_len[key] == 8 && strcmp(k, "trace_id") == 0) {
        return K_TRACE;
    }
    if (b->dict.str_len[key] == 9 && strcmp(k, "span_name") == 0) {
        return K_NAME;
    }
    return K_OTHER;
}

static int series_labels(struct fc_batch *b, struct fc_profile *p,
                         const struct fc_spanlink_config *cfg, struct series_span *ss,
                         struct fc_spanlink_stats *st)
{
    const char *v;

    memset(ss, 0, sizeof(*ss));
    if ((v = fc_profile_label(b, p, "span_id")) != NULL) {
        ss->has_span = fc_span_id_parse(v, strlen(v), ss->span);
        st->malformed += !ss->has_span;
        st->series_labels_moved++;
        fc_profile_remove_label(b, p, "span_id");
    }
    if ((v = fc_profile_label(b, p, "trace_id")) != NULL) {
        ss->has_trace = fc_trace_id_parse(v, strlen(v), ss->trace);
        st->malformed += !ss->has_trace;
        st->series_labels_moved++;
        fc_profile_remove_label(b, p, "trace_id");
    }
    if (!cfg->keep_span_name && fc_profile_label(b, p, "span_name") != NULL) {
        st->span_names_removed++;
        fc_profile_remove_label(b, p, "span_name");
    }
    return FC_OK;
}

static int str_attr(struct fc_batch *b, const char *key, const char *value, uint32_t *out)
{
    struct fc_attr a;
    int rc;

    memset(&a, 0, sizeof(a));
    a.kind = FC_ATTR_STR;
    rc = fc_dict_cstring(b, key, &a.key);
    if (rc == FC_OK) {
        rc = fc_dict_cstring(b, value, &a.v.str);
    }
    return rc == FC_OK ? fc_dict_attr(b, &a, out) : rc;
}

/* Scratch for one sample's new attribute list. */
struct scratch {
    uint32_t *idx;
    uint32_t cap;
};

static int do_sample(struct fc_batch *b, struct fc_sample *s, const struct fc_spanlink_config *cfg,
                     const struct series_span *ss, struct scratch *sc, struct fc_spanlink_stats *st)
{
    const uint32_t *attrs = fc_span_idx(b, s->attrs);
    uint8_t lspan[8], ltrace[16] = {0}, fspan[8], ftrace[16] = {0};
    bool lhas = false, ltrace_ok = false, any_span_attr = false, any_trace_attr = false, has;
    bool make_link = cfg->to != FC_SPANLINK_TO_LABELS,
         make_labels = cfg->to != FC_SPANLINK_TO_LINKS;
    uint32_t n = 0, link = 0;
    int rc = FC_OK;

    /* What the labels say. */
    for (uint32_t i = 0; i < s->attrs.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[attrs[i]];
        uint8_t tmp[16];
        switch (key_kind(b, a->key)) {
        case K_SPAN:
            any_span_attr = true;
            if (fc_span_id_attr(b, a, tmp)) {
                if (!lhas) {
                    memcpy(lspan, tmp, 8);
                    lhas = true;
                }
            } else {
                st->malformed++;
            }
            break;
        case K_TRACE:
            any_trace_attr = true;
            if (fc_trace_id_attr(b, a, tmp)) {
                if (!ltrace_ok) {
                    memcpy(ltrace, tmp, 16);
                    ltrace_ok = true;
                }
            } else {
                st->malformed++;
            }
            break;
        default:
            break;
        }
    }
    /* A profile's series span_id / trace_id apply to samples that name none. */
    if (!any_span_attr && ss->has_span) {
        memcpy(lspan, ss->span, 8);
        lhas = true;
    }
    if (!any_trace_attr && ss->has_trace) {
        memcpy(ltrace, ss->trace, 16);
        ltrace_ok = true;
    }

    /* The sample's span: the Link wins. */
    if (s->link != 0) {
        const struct fc_link *k = &b->dict.links[s->link];
        memcpy(fspan, k->span_id, 8);
        memcpy(ftrace, k->trace_id, 16);
        has = true;
        if (lhas) {
            bool trace_known = !fc_id_is_zero(ftrace, 16);
            if (memcmp(lspan, fspan, 8) != 0 ||
                (ltrace_ok && trace_known && memcmp(ltrace, ftrace, 16) != 0)) {
                st->conflicts++;
            } else if (ltrace_ok && !trace_known) {
                memcpy(ftrace, ltrace, 16); /* the same span: the labels' trace completes it */
            }
        }
    } else if (lhas) {
        memcpy(fspan, lspan, 8);
        if (ltrace_ok) {
            memcpy(ftrace, ltrace, 16);
        }
        has = true;
    } else {
        has = false;
    }

    /* The new attribute list. */
    if (sc->cap < s->attrs.n + 2) {
        sc->cap = s->attrs.n + 2;
        sc->idx = fc_xrealloc(sc->idx, sc->cap * sizeof(uint32_t));
    }
    for (uint32_t i = 0; i < s->attrs.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[attrs[i]];
        uint8_t tmp[16];
        bool drop = false;
        switch (key_kind(b, a->key)) {
        case K_SPAN:
            /* With links, only what became the Link goes; with labels, the span's own replace all.
             */
            drop = has && (make_labels || fc_span_id_attr(b, a, tmp));
            break;
        case K_TRACE:
            drop =
                has && ((make_labels && !fc_id_is_zero(ftrace, 16)) || fc_trace_id_attr(b, a, tmp));
            break;
        case K_NAME:
            drop = !cfg->keep_span_name;
            st->span_names_removed += drop;
            break;
        default:
            break;
        }
        if (!drop) {
            sc->idx[n++] = attrs[i];
        }
    }
    if (has && make_labels) {
        char hex[33];
        hex_encode(fspan, 8, hex);
        rc = str_attr(b, "span_id", hex, &sc->idx[n]);
        n += rc == FC_OK;
        if (rc == FC_OK && !fc_id_is_zero(ftrace, 16)) {
            hex_encode(ftrace, 16, hex);
            rc = str_attr(b, "trace_id", hex, &sc->idx[n]);
            n += rc == FC_OK;
        }
    }
    if (rc == FC_OK && has && make_link) {
        struct fc_link k;
        memcpy(k.trace_id, ftrace, 16);
        memcpy(k.span_id, fspan, 8);
        rc = fc_dict_link(b, &k, &link);
    }
    if (rc != FC_OK) {
        return rc;
    }
    if (has && s->link == 0 && make_link) {
        st->linked++;
    }
    if (s->link != 0 && make_labels) {
        st->labeled++;
    }
    s->link = link;
    if (n != s->attrs.n || (n > 0 && memcmp(sc->idx, attrs, n * sizeof(uint32_t)) != 0)) {
        rc = fc_dict_span(b, sc->idx, n, &s->attrs);
    }
    return rc;
}

int fc_spanlink_apply(struct fc_batch *b, const struct fc_spanlink_config *cfg,
                      struct fc_spanlink_stats *st, struct fc_error *err)
{
    struct scratch sc = {NULL, 0};
    int rc = FC_OK;

    for (uint32_t i = 0; i < b->n_profiles && rc == FC_OK; i++) {
        struct fc_profile *p = &b->profiles[i];
        struct series_span ss;
        rc = series_labels(b, p, cfg, &ss, st);
        for (uint32_t j = 0; j < p->n_samples && rc == FC_OK; j++) {
            rc = do_sample(b, &p->samples[j], cfg, &ss, &sc, st);
        }
    }
    free(sc.idx);
    fc_batch_drop_wire(b);
    if (rc != FC_OK) {
        return fc_errorf(err, rc, "spanlink: the batch's budget is spent");
    }
    return FC_OK;
}

/* ---- the processor ------------------------------------------------------------------------ */

#define OFF(m) offsetof(struct fc_spanlink_config, m)
static const struct fc_field spanlink_fields[] = {
    {"to", FC_FIELD_ENUM, "links", OFF(to),
     "where a sample's span ends up: `links` (OTLP Link; span_id/trace_id labels removed), "
     "`labels` (sample labels span_id/trace_id as hex; Link removed) or `both`",
     .choices = "links|labels|both"},
    {"keep_span_name", FC_FIELD_BOOL, "false", OFF(keep_span_name),
     "keep span_name labels (a sample label, which Pyroscope and the store make a series "
     "label); false removes them from samples and series labels"},
    {NULL},
};
#undef OFF

struct spanlink {
    const struct fc_spanlink_config *cfg;
    _Atomic int64_t *linked, *labeled, *conflicts, *malformed, *moved, *names;
};

static int spanlink_create(struct fc_processor *self, struct fc_error *err)
{
    struct spanlink *S = fc_xcalloc(1, sizeof(*S));
    char labels[512];

    (void)err;
    S->cfg = self->config;
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
    S->linked = fc_metrics_counter("flamecol_processor_spanlink_linked_samples_total", labels,
                                   "Samples whose span_id/trace_id labels became an OTLP Link.");
    S->labeled = fc_metrics_counter("flamecol_processor_spanlink_labeled_samples_total", labels,
                                    "Samples whose OTLP Link became span_id/trace_id labels.");
    S->conflicts = fc_metrics_counter(
        "flamecol_processor_spanlink_conflicts_total", labels,
        "Samples with a Link and span_id/trace_id labels naming another span: the Link won.");
    S->malformed = fc_metrics_counter(
        "flamecol_processor_spanlink_malformed_labels_total", labels,
        "span_id/trace_id labels that are not ids (bad hex, zero, wrong length): left as they are "
        "(series labels: removed).");
    S->moved = fc_metrics_counter(
        "flamecol_processor_spanlink_series_labels_moved_total", labels,
        "span_id/trace_id series labels removed from a profile and given to its samples.");
    S->names = fc_metrics_counter("flamecol_processor_spanlink_span_names_removed_total", labels,
                                  "span_name labels removed (keep_span_name: false).");
    self->ctx = S;
    return FC_OK;
}

static int spanlink_start(struct fc_processor *self, struct fc_host *host, struct fc_error *err)
{
    (void)self;
    (void)host;
    (void)err;
    return FC_OK;
}

static int spanlink_process(struct fc_processor *self, struct fc_batch **batchp,
                            struct fc_error *err)
{
    struct spanlink *S = self->ctx;
    struct fc_spanlink_stats st;
    int rc;

    memset(&st, 0, sizeof(st));
    rc = fc_spanlink_apply(*batchp, S->cfg, &st, err);
    fc_metric_add(S->linked, st.linked);
    fc_metric_add(S->labeled, st.labeled);
    fc_metric_add(S->conflicts, st.conflicts);
    fc_metric_add(S->malformed, st.malformed);
    fc_metric_add(S->moved, st.series_labels_moved);
    fc_metric_add(S->names, st.span_names_removed);
    return rc;
}

static void spanlink_shutdown(struct fc_processor *self)
{
    (void)self;
}

static void spanlink_destroy(struct fc_processor *self)
{
    free(self->ctx);
    self->ctx = NULL;
}

const struct fc_processor_type fc_spanlink_processor = {
    .info = {"spanlink",
             "links samples to trace spans both ways: pprof labels span_id/trace_id <-> OTLP "
             "Links; keeps span and trace ids out of series labels",
             FC_STABILITY_ALPHA, spanlink_fields, sizeof(struct fc_spanlink_config)},
    .create = spanlink_create,
    .start = spanlink_start,
    .process = spanlink_process,
    .shutdown = spanlink_shutdown,
    .destroy = spanlink_destroy,
    /* It rewrites samples' labels and links. */
    .preserves_batch = false,
    /* It never drops a sample. */
    .counts_dropped = false,
};
