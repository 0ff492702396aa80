/* Every built-in component type, in one hand-written table (core/registry.c). */
#ifndef FC_REGISTRY_H
#define FC_REGISTRY_H

#include "core/component.h"

#include <stddef.h>

enum fc_kind { FC_KIND_RECEIVER, FC_KIND_PROCESSOR, FC_KIND_EXPORTER };

struct fc_registry_entry {
    enum fc_kind kind;
    const struct fc_type_info *info; /* first member of the kind's type struct */
    const char *alias;               /* another name of the type (the Collector's), or NULL */
};

const char *fc_kind_name(enum fc_kind kind);    /* "receiver" */
const char *fc_kind_section(enum fc_kind kind); /* "receivers" */
/* NULL when no type of that kind has the name (or alias). */
const struct fc_registry_entry *fc_registry_find(enum fc_kind kind, const char *name);
/* All types, receivers first. */
const struct fc_registry_entry *fc_registry_all(size_t *n);

static inline const struct fc_receiver_type *fc_receiver_type_of(const struct fc_registry_entry *e)
{
    return (const struct fc_receiver_type *)(const void *)e->info;
}
static inline const struct fc_processor_type *
fc_processor_type_of(const struct fc_registry_entry *e)
{
    return (const struct fc_processor_type *)(const void *)e->info;
}
static inline const struct fc_exporter_type *fc_exporter_type_of(const struct fc_registry_entry *e)
{
    return (const struct fc_exporter_type *)(const void *)e->info;
}

#endif
