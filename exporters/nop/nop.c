/*
 * nop exporter: accepts every batch and keeps nothing, as the Collector's
 * nop exporter does. For benchmarks and for pipelines under test.
 */
#include "core/component.h"

static const struct fc_field nop_fields[] = {
    {NULL},
};

static int nop_create(struct fc_exporter *self, struct fc_error *err)
{
    (void)self;
    (void)err;
    return FC_OK;
}

static int nop_export(struct fc_exporter *self, struct fc_batch *batch, struct fc_error *err)
{
    (void)self;
    (void)batch;
    (void)err;
    return FC_OK;
}

const struct fc_exporter_type fc_nop_exporter = {
    .info =
        {
            .name = "nop",
            .description = "accepts and drops everything (benchmarks, tests)",
            .stability = FC_STABILITY_STABLE,
            .fields = nop_fields,
            .config_size = 0,
        },
    .create = nop_create,
    .export = nop_export,
};
