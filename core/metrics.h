/*
 * Self-telemetry in the Prometheus text format. Counters and gauges are
 * atomics registered once by (name, labels) and never freed before
 * fc_metrics_reset(); hot paths only do an atomic add.
 */
#ifndef FC_METRICS_H
#define FC_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

struct fc_buf;

/* labels: the inside of {...}, e.g. `receiver="pprof",transport="http"`, or "". */
_Atomic int64_t *fc_metrics_counter(const char *name, const char *labels, const char *help);
_Atomic int64_t *fc_metrics_gauge(const char *name, const char *labels, const char *help);

static inline void fc_metric_add(_Atomic int64_t *m, int64_t v)
{
    if (m != NULL) {
        atomic_fetch_add_explicit(m, v, memory_order_relaxed);
    }
}

static inline void fc_metric_set(_Atomic int64_t *m, int64_t v)
{
    if (m != NULL) {
        atomic_store_explicit(m, v, memory_order_relaxed);
    }
}

/* Appends every metric, plus process RSS, CPU and uptime. */
void fc_metrics_render(struct fc_buf *out);
/* Reads a registered metric (tests, debug); -1 when absent. */
int64_t fc_metrics_value(const char *name, const char *labels);
void fc_metrics_reset(void);

#endif
