/*
 * downsample processor, stateless part: fewer bytes, same picture.
 *
 *   - sampling: {fraction: f} keeps a deterministic fraction of series: a
 *     profile is kept when the XXH3-64 hash of its series labels (sorted by
 *     name, each as name NUL value NUL) divided by 2^64 is below f. The same
 *     series is kept, or dropped, whole, on every run and in every process.
 *     Dropped profiles' samples are counted as dropped.
 *   - min_fraction / max_nodes / max_depth fold each kept profile's call tree
 *     (fold.h): totals of the profile and of every kept node stay exact.
 *
 *   - window (window.h): a series' profiles are merged over a window, in a
 *     buffer that is durable with `storage`; the request is answered once
 *     its profiles are buffered, the merged profiles are sent from the
 *     processor's own thread. Sampling and folding run first.
 */
#include "core/component.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "processors/downsample/fold.h"
#include "processors/downsample/window.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

struct sampling_config {
    bool enabled;
    double fraction;
};

struct downsample_config {
    int64_t window;
    const char *storage;
    int64_t max_buffer_bytes;
    double min_fraction;
    int64_t max_nodes;
    int64_t max_depth;
    const char *sample_type;
    struct sampling_config sampling;
};

static const struct fc_field sampling_fields[] = {
    {"fraction", FC_FIELD_FLOAT, "1", offsetof(struct sampling_config, fraction),
     "share of series kept (above 0, at most 1), chosen by a hash of the series labels: a "
     "series is kept or dropped whole, the same on every run"},
    {NULL},
};

#define OFF(m) offsetof(struct downsample_config, m)
static const struct fc_field downsample_fields[] = {
    {"window", FC_FIELD_DURATION, "0s", OFF(window),
     "merge the profiles of one series (tenant, labels, profile type) whose time falls in one "
     "window (aligned to multiples of it) into one profile, equal samples summed; a request is "
     "answered once buffered, windows are sent when they close (and at shutdown); 0s = off"},
    {"storage", FC_FIELD_STR, "", OFF(storage),
     "a directory: the window buffer is durable (each request is synced to disk before it is "
     "answered and replayed on start until its windows are accepted downstream); empty = in "
     "memory, a crash loses the open windows"},
    {"max_buffer_bytes", FC_FIELD_INT, "268435456", OFF(max_buffer_bytes),
     "bytes the open and unsent windows may hold; when full, requests are refused as "
     "retryable (429 / RESOURCE_EXHAUSTED) and counted"},
    {"min_fraction", FC_FIELD_FLOAT, "0", OFF(min_fraction),
     "call-tree nodes lighter than this share of the profile's total (driving sample type) are "
     "folded into their parent's `other` child; 0 = off"},
    {"max_nodes", FC_FIELD_INT, "0", OFF(max_nodes),
     "call-tree nodes (frames, `other` ones included) a profile keeps, heaviest first; the "
     "rest are folded into their parent's `other` child; 0 = off"},
    {"max_depth", FC_FIELD_INT, "0", OFF(max_depth),
     "stack levels (locations) kept from the root; deeper ones are folded into one `other` "
     "frame under the deepest kept one; 0 = off"},
    {"sample_type", FC_FIELD_STR, "", OFF(sample_type),
     "the sample type whose values weigh nodes (e.g. `alloc_space`), when a profile has it; "
     "otherwise the profile's default_sample_type, else its last type, as `go tool pprof`"},
    {"sampling", FC_FIELD_OBJECT, NULL, OFF(sampling),
     "keep a deterministic fraction of series; on when the key is present", .sub = sampling_fields,
     .flags = FC_FIELD_PRESENCE},
    {NULL},
};
#undef OFF

struct downsample {
    const struct downsample_config *cfg;
    struct fc_fold_options fold;
    bool folds;
    struct fc_dswin *win;
    _Atomic int64_t *folded_samples, *merged_samples, *sampled_out_profiles;
};

/* The series hash of p, as documented above. */
static uint64_t series_hash(const struct fc_batch *b, const struct fc_profile *p)
{
    size_t len = 0, at = 0;
    char *buf;
    uint64_t h;

    for (uint32_t i = 0; i < p->n_labels; i++) {
        len += (size_t)b->dict.str_len[p->labels[i].name] + b->dict.str_len[p->labels[i].value] + 2;
    }
    buf = fc_xmalloc(len + 1);
    for (uint32_t i = 0; i < p->n_labels; i++) {
        uint32_t n = p->labels[i].name, v = p->labels[i].value;
        memcpy(buf + at, fc_str(b, n), b->dict.str_len[n]);
        at += b->dict.str_len[n];
        buf[at++] = 0;
        memcpy(buf + at, fc_str(b, v), b->dict.str_len[v]);
        at += b->dict.str_len[v];
        buf[at++] = 0;
    }
    h = XXH3_64bits(buf, at);
    free(buf);
    return h;
}

static bool sampled_in(const struct fc_batch *b, const struct fc_profile *p, double fraction)
{
    if (fraction >= 1) {
        return true;
    }
    /* The top 53 bits as a double in [0, 1): exact, no rounding up to 1. */
    return (double)(series_hash(b, p) >> 11) * 0x1p-53 < fraction;
}

static int downsample_process(struct fc_processor *self, struct fc_batch **batchp,
                              struct fc_error *err)
{
    struct downsample *D = self->ctx;
    struct fc_batch *b = *batchp;
    int64_t dropped = 0, dropped_profiles = 0, folded = 0, merged = 0;
    uint32_t kept = 0;
    int rc = FC_OK;

    if (D->cfg->sampling.enabled && D->cfg->sampling.fraction < 1) {
        for (uint32_t i = 0; i < b->n_profiles; i++) {
            if (!sampled_in(b, &b->profiles[i], D->cfg->sampling.fraction)) {
                dropped += b->profiles[i].n_samples;
                dropped_profiles++;
                continue;
            }
            if (kept != i) {
                b->profiles[kept] = b->profiles[i];
            }
            kept++;
        }
        if (kept != b->n_profiles) {
            b->n_profiles = kept;
            fc_batch_drop_wire(b);
        }
    }
    for (uint32_t i = 0; D->folds && i < b->n_profiles && rc == FC_OK; i++) {
        struct fc_fold_stats st;
        rc = fc_fold_profile(b, i, &D->fold, &st, err);
        if (rc == FC_OK && st.samples_folded > 0) {
            folded += (int64_t)st.samples_folded;
            merged += (int64_t)st.samples_merged;
            fc_batch_drop_wire(b);
        }
    }
    fc_metric_add(self->dropped_samples, dropped);
    fc_metric_add(D->sampled_out_profiles, dropped_profiles);
    fc_metric_add(D->folded_samples, folded);
    fc_metric_add(D->merged_samples, merged);
    if (rc != FC_OK) {
        return rc;
    }
    if (b->n_profiles > 0 && D->win != NULL) {
        /* Buffered (merged copies): answered now, sent when the windows close. */
        rc = fc_dswin_add(D->win, b, err);
        if (rc != FC_OK) {
            return rc;
        }
        b->n_profiles = 0;
    }
    if (b->n_profiles == 0) {
        fc_batch_unref(b);
        *batchp = NULL;
    }
    return FC_OK;
}

static int downsample_create(struct fc_processor *self, struct fc_error *err)
{
    const struct downsample_config *cfg = self->config;
    struct downsample *D;
    char labels[320];

    if (cfg->window < 0) {
        return fc_errorf(err, FC_ECONFIG, "window: must not be negative");
    }
    if (cfg->window == 0 && cfg->storage != NULL && cfg->storage[0] != '\0') {
        return fc_errorf(err, FC_ECONFIG, "storage: is the durable buffer of `window`; set window");
    }
    if (!(cfg->min_fraction >= 0 && cfg->min_fraction <= 1)) {
        return fc_errorf(err, FC_ECONFIG, "min_fraction: %g is not between 0 and 1",
                         cfg->min_fraction);
    }
    if (cfg->max_nodes < 0 || cfg->max_nodes > UINT32_MAX / 2) {
        return fc_errorf(err, FC_ECONFIG, "max_nodes: %lld is not between 0 and %u",
                         (long long)cfg->max_nodes, UINT32_MAX / 2);
    }
    if (cfg->max_depth < 0 || cfg->max_depth > UINT32_MAX / 2) {
        return fc_errorf(err, FC_ECONFIG, "max_depth: %lld is not between 0 and %u",
                         (long long)cfg->max_depth, UINT32_MAX / 2);
    }
    if (cfg->sampling.enabled && !(cfg->sampling.fraction > 0 && cfg->sampling.fraction <= 1)) {
        return fc_errorf(err, FC_ECONFIG,
                         "sampling.fraction: %g is not above 0 and at most 1 (to drop every "
                         "profile, use relabel's drop)",
                         cfg->sampling.fraction);
    }
    D = fc_xcalloc(1, sizeof(*D));
    D->cfg = cfg;
    if (cfg->window > 0) {
        struct fc_dswin_options wo = {cfg->window, cfg->storage, cfg->max_buffer_bytes};
        int rc = fc_dswin_create(self, &wo, &D->win, err);
        if (rc != FC_OK) {
            free(D);
            return rc;
        }
    }
    D->fold.min_fraction = cfg->min_fraction;
    D->fold.max_nodes = (uint32_t)cfg->max_nodes;
    D->fold.max_depth = (uint32_t)cfg->max_depth;
    D->fold.sample_type = cfg->sample_type;
    D->folds = cfg->min_fraction > 0 || cfg->max_nodes > 0 || cfg->max_depth > 0;
    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", self->id, self->pipeline);
    D->folded_samples =
        fc_metrics_counter("flamecol_processor_downsample_folded_samples_total", labels,
                           "Samples whose stack the downsample processor cut to an `other` frame.");
    D->merged_samples =
        fc_metrics_counter("flamecol_processor_downsample_merged_samples_total", labels,
                           "Samples summed into an equal sample after folding (nothing lost).");
    D->sampled_out_profiles =
        fc_metrics_counter("flamecol_processor_downsample_sampled_out_profiles_total", labels,
                           "Profiles dropped by sampling (their samples count as dropped).");
    self->ctx = D;
    return FC_OK;
}

static int downsample_start(struct fc_processor *self, struct fc_host *host, struct fc_error *err)
{
    struct downsample *D = self->ctx;
    return D->win != NULL ? fc_dswin_start(D->win, host, err) : FC_OK;
}

static void downsample_shutdown(struct fc_processor *self)
{
    struct downsample *D = self->ctx;
    if (D != NULL) {
        fc_dswin_shutdown(D->win);
    }
}

static void downsample_destroy(struct fc_processor *self)
{
    struct downsample *D = self->ctx;
    if (D != NULL) {
        fc_dswin_destroy(D->win);
    }
    free(self->ctx);
    self->ctx = NULL;
}

const struct fc_processor_type fc_downsample_processor = {
    .info = {"downsample",
             "fewer bytes, same picture: fold light call-tree nodes into `other` (exact totals), "
             "keep a deterministic fraction of series, merge a series' profiles over a window",
             FC_STABILITY_DEVELOPMENT, downsample_fields, sizeof(struct downsample_config)},
    .create = downsample_create,
    .start = downsample_start,
    .process = downsample_process,
    .shutdown = downsample_shutdown,
    .destroy = downsample_destroy,
    .preserves_batch = false,
    /* Sampled-out samples are counted here; merged ones are not drops. */
    .counts_dropped = true,
};
