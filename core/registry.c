#include "core/registry.h"

#include <string.h>

/* Adding a component: its folder, and one line in the table below. */
extern const struct fc_receiver_type fc_pprof_receiver;
extern const struct fc_receiver_type fc_otlp_receiver;
extern const struct fc_exporter_type fc_debug_exporter;
extern const struct fc_exporter_type fc_nop_exporter;
extern const struct fc_exporter_type fc_store_exporter;
extern const struct fc_exporter_type fc_otlp_exporter;
extern const struct fc_exporter_type fc_otlphttp_exporter;
extern const struct fc_exporter_type fc_pyroscope_exporter;
extern const struct fc_processor_type fc_relabel_processor;
extern const struct fc_processor_type fc_limits_processor;
extern const struct fc_processor_type fc_memory_limiter_processor;
extern const struct fc_processor_type fc_batch_processor;
extern const struct fc_processor_type fc_downsample_processor;
extern const struct fc_processor_type fc_spanlink_processor;

static const struct fc_registry_entry types[] = {
    {FC_KIND_RECEIVER, &fc_otlp_receiver.info},
    {FC_KIND_RECEIVER, &fc_pprof_receiver.info},
    {FC_KIND_EXPORTER, &fc_debug_exporter.info},
    {FC_KIND_EXPORTER, &fc_nop_exporter.info},
    {FC_KIND_EXPORTER, &fc_store_exporter.info},
    /* The Collector renamed otlp -> otlp_grpc and otlphttp -> otlp_http; both names work. */
    {FC_KIND_EXPORTER, &fc_otlp_exporter.info, "otlp_grpc"},
    {FC_KIND_EXPORTER, &fc_otlphttp_exporter.info, "otlp_http"},
    {FC_KIND_EXPORTER, &fc_pyroscope_exporter.info},
    {FC_KIND_PROCESSOR, &fc_relabel_processor.info},
    {FC_KIND_PROCESSOR, &fc_limits_processor.info},
    {FC_KIND_PROCESSOR, &fc_memory_limiter_processor.info},
    {FC_KIND_PROCESSOR, &fc_batch_processor.info},
    {FC_KIND_PROCESSOR, &fc_downsample_processor.info},
    {FC_KIND_PROCESSOR, &fc_spanlink_processor.info},
};

const char *fc_kind_name(enum fc_kind kind)
{
    static const char *const names[] = {"receiver", "processor", "exporter"};
    return names[kind];
}

const char *fc_kind_section(enum fc_kind kind)
{
    static const char *const names[] = {"receivers", "processors", "exporters"};
    return names[kind];
}

const struct fc_registry_entry *fc_registry_find(enum fc_kind kind, const char *name)
{
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (types[i].kind == kind &&
            (strcmp(types[i].info->name, name) == 0 ||
             (types[i].alias != NULL && strcmp(types[i].alias, name) == 0))) {
            return &types[i];
        }
    }
    return NULL;
}

const struct fc_registry_entry *fc_registry_all(size_t *n)
{
    *n = sizeof(types) / sizeof(types[0]);
    return types;
}
