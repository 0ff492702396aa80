/*
 * Pyroscope's push conventions, as its server applies them:
 * the `name` label set of /ingest, from/until times, how pprof sample types
 * name a profile (`__name__`), the type of a folded push from its name
 * suffix, and profile type ids (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`).
 */
#ifndef FC_FORMATS_PYROSCOPE_H
#define FC_FORMATS_PYROSCOPE_H

#include "core/batch.h"
#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FC_PYRO_MAX_NAME_LABELS 64

struct fc_pyro_name {
    char app[256]; /* before '{', trimmed */
    size_t n_labels;
    struct {
        char key[128];
        char value[512];
    } labels[FC_PYRO_MAX_NAME_LABELS];
};

/*
 * Parses "app.name{k=v,k2=v2}" (no quoting; keys [A-Za-z0-9_.], app
 * [A-Za-z0-9_.-/]). FC_EPROTO names the problem ("name: ...").
 */
int fc_pyro_parse_name(const char *name, struct fc_pyro_name *out, struct fc_error *err);

/*
 * Parses a from/until value into unix ns: digits whose count gives the unit
 * (13 = ms, 16 = us, 19 = ns, 8 = YYYYMMDD, else s), or now[+-]N<unit>.
 */
int fc_pyro_parse_time(const char *s, int64_t now_ns, int64_t *out_ns, struct fc_error *err);

/* The type a folded push gets from its name suffix ("app.cpu" -> cpu). */
struct fc_pyro_suffix_type {
    const char *suffix;
    const char *name; /* __name__ */
    const char *type; /* sample type; NULL = the suffix itself */
    const char *unit;
};
/* NULL when the suffix is not a known type. */
const struct fc_pyro_suffix_type *fc_pyro_suffix_type(const char *suffix);

/* Per-sample-type settings from multipart sample_type_config (or the defaults). */
struct fc_pyro_type_config {
    char type[64];
    char display_name[64];
    char units[32];
    char aggregation[16];
    bool cumulative;
    bool sampled;
};

/* Pyroscope's default mapping for pprof sample types (alloc_space is cumulative, ...). */
bool fc_pyro_default_type_config(const char *type, struct fc_pyro_type_config *out);

/*
 * `__name__` for a pprof profile from its sample types, as Pyroscope v1
 * derives it (wall, process_cpu, memory, mutex, block, goroutines, ...).
 * configs (n_configs may be 0) override display names.
 */
void fc_pyro_profile_name(const struct fc_batch *b, const struct fc_profile *p,
                          const struct fc_pyro_type_config *configs, size_t n_configs, char *out,
                          size_t size);

/* "__name__:type:unit:period_type:period_unit" for sample type t. */
void fc_pyro_profile_type_id(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                             struct fc_buf *out);

/*
 * The profile type under which Pyroscope stores sample type t, and the
 * factor its values are multiplied by: for a profile the OTLP decoder named
 * process_cpu from samples:count with a cpu:nanoseconds period
 * (p->cpu_samples_as_ns, as Pyroscope's OTLP ingest converts the eBPF
 * profiler's), "<__name__>:cpu:nanoseconds:cpu:nanoseconds" with values x
 * period; otherwise the id above and 1. The batch itself is never
 * rewritten: this is for the store and queries.
 */
void fc_pyro_stored_type(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                         struct fc_buf *id, int64_t *scale);

#endif
