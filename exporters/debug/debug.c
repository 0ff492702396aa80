/*
 * debug exporter: shows what reaches the end of a pipeline. `basic` writes
 * one line per batch; `detailed` adds every profile's samples as folded
 * stacks. Output goes to the log (stderr), or to `path` when set.
 */
#include "core/buf.h"
#include "core/component.h"
#include "core/log.h"
#include "core/mem.h"
#include "formats/folded.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum verbosity { VERBOSITY_BASIC, VERBOSITY_DETAILED };

struct debug_config {
    int verbosity; /* enum verbosity */
    const char *path;
};

struct debug_exporter {
    const struct debug_config *cfg;
    FILE *out; /* NULL: the log */
    pthread_mutex_t lock;
};

static const struct fc_field debug_fields[] = {
    {"verbosity", FC_FIELD_ENUM, "basic", offsetof(struct debug_config, verbosity),
     "`basic`: one line per batch; `detailed`: also every sample as folded stacks",
     .choices = "basic|detailed"},
    {"path", FC_FIELD_STR, "", offsetof(struct debug_config, path),
     "append output to this file instead of the log"},
    {NULL},
};

static int debug_create(struct fc_exporter *self, struct fc_error *err)
{
    struct debug_exporter *d = fc_xcalloc(1, sizeof(*d));

    (void)err;
    d->cfg = self->config;
    pthread_mutex_init(&d->lock, NULL);
    self->ctx = d;
    return FC_OK;
}

static int debug_start(struct fc_exporter *self, struct fc_host *host, struct fc_error *err)
{
    struct debug_exporter *d = self->ctx;

    (void)host;
    if (d->cfg->path[0] != '\0') {
        d->out = fopen(d->cfg->path, "a");
        if (d->out == NULL) {
            return fc_errorf(err, FC_EIO, "cannot open path %s: %s", d->cfg->path, strerror(errno));
        }
    }
    return FC_OK;
}

static void labels_text(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out)
{
    fc_buf_puts(out, "{");
    for (uint32_t i = 0; i < p->n_labels; i++) {
        fc_buf_printf(out, "%s%s=\"", i ? ", " : "", fc_str(b, p->labels[i].name));
        fc_buf_json_escape(out, fc_str(b, p->labels[i].value), b->dict.str_len[p->labels[i].value]);
        fc_buf_puts(out, "\"");
    }
    fc_buf_puts(out, "}");
}

/* The distinct keys of the sample labels (pprof labels, OTLP sample attributes). */
static void sample_label_keys(const struct fc_batch *b, const struct fc_profile *p,
                              struct fc_buf *out)
{
    uint32_t keys[32];
    uint32_t n = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        const uint32_t *attrs = fc_span_idx(b, p->samples[i].attrs);
        for (uint32_t j = 0; j < p->samples[i].attrs.n; j++) {
            uint32_t k = b->dict.attrs[attrs[j]].key;
            uint32_t m = 0;
            while (m < n && keys[m] != k) {
                m++;
            }
            if (m == n && n < 32) {
                keys[n++] = k;
            }
        }
    }
    if (n == 0) {
        return;
    }
    fc_buf_puts(out, " sample_labels=[");
    for (uint32_t m = 0; m < n; m++) {
        fc_buf_printf(out, "%s%s", m ? "," : "", fc_str(b, keys[m]));
    }
    fc_buf_puts(out, "]");
}

static void summary(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out)
{
    labels_text(b, p, out);
    fc_buf_printf(out, " samples=%u", p->n_samples);
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        fc_buf_printf(out, " %s:%s=%" PRId64, fc_str(b, p->sample_types[t].type),
                      fc_str(b, p->sample_types[t].unit), fc_profile_total(p, t));
    }
    sample_label_keys(b, p, out);
}

static int debug_export(struct fc_exporter *self, struct fc_batch *b, struct fc_error *err)
{
    struct debug_exporter *d = self->ctx;
    struct fc_buf text;

    (void)err;
    fc_buf_init(&text, 0);
    fc_buf_printf(&text, "batch tenant=%s profiles=%u samples=%" PRIu64, b->tenant, b->n_profiles,
                  fc_batch_sample_count(b));
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        fc_buf_printf(&text, "%sprofile %u ", d->out ? "\n" : " | ", i);
        summary(b, &b->profiles[i], &text);
    }
    if (d->out == NULL) {
        fc_log_info(self->id, "%s", (const char *)text.data);
        fc_buf_reset(&text);
    } else {
        fc_buf_puts(&text, "\n");
    }
    if (d->cfg->verbosity == VERBOSITY_DETAILED) {
        for (uint32_t i = 0; i < b->n_profiles; i++) {
            const struct fc_profile *p = &b->profiles[i];
            for (uint32_t t = 0; t < p->n_sample_types; t++) {
                fc_buf_printf(&text,
                              "# profile %u type=%s:%s period=%" PRId64 " time_ns=%" PRId64
                              " duration_ns=%" PRId64 "\n",
                              i, fc_str(b, p->sample_types[t].type),
                              fc_str(b, p->sample_types[t].unit), p->period, p->time_ns,
                              p->duration_ns);
                fc_folded_write_profile(b, p, t, &text);
            }
        }
    }
    if (text.len > 0) {
        pthread_mutex_lock(&d->lock);
        if (d->out != NULL) {
            fwrite(text.data, 1, text.len, d->out);
            fflush(d->out);
        } else {
            fwrite(text.data, 1, text.len, stderr);
        }
        pthread_mutex_unlock(&d->lock);
    }
    fc_buf_release(&text);
    return FC_OK;
}

static void debug_shutdown(struct fc_exporter *self, int64_t deadline_ns)
{
    struct debug_exporter *d = self->ctx;

    (void)deadline_ns;
    if (d->out != NULL) {
        fclose(d->out);
        d->out = NULL;
    }
}

static void debug_destroy(struct fc_exporter *self)
{
    struct debug_exporter *d = self->ctx;

    if (d->out != NULL) {
        fclose(d->out);
    }
    pthread_mutex_destroy(&d->lock);
    free(d);
    self->ctx = NULL;
}

const struct fc_exporter_type fc_debug_exporter = {
    .info =
        {
            .name = "debug",
            .description = "logs or writes a summary, or every sample as folded stacks",
            .stability = FC_STABILITY_BETA,
            .fields = debug_fields,
            .config_size = sizeof(struct debug_config),
        },
    .create = debug_create,
    .start = debug_start,
    .export = debug_export,
    .shutdown = debug_shutdown,
    .destroy = debug_destroy,
};
