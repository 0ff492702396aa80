/*
 * The service: a loaded config turned into running pipelines.
 *
 * Graph rules (as in the OpenTelemetry Collector): a receiver used by
 * several pipelines is one instance that fans out to each; processors are
 * instantiated per pipeline; an exporter used by several pipelines is one
 * instance. Start order is exporters -> processors -> receivers -> shared
 * HTTP listeners; shutdown runs the reverse within service.shutdown_timeout.
 */
#ifndef FC_SERVICE_H
#define FC_SERVICE_H

#include "config/diag.h"
#include "config/node.h"
#include "core/component.h"

#include <stdint.h>

struct fc_service;

/* Builds (creates every component, opens nothing). NULL with errors in diag. */
struct fc_service *fc_service_build(const struct fc_node *root, struct fc_diag *diag);
int fc_service_start(struct fc_service *svc, struct fc_error *err);
/* Stops accepting, drains, stops everything; safe after a failed start. */
void fc_service_shutdown(struct fc_service *svc);
void fc_service_free(struct fc_service *svc);

/* Lookups for tests and tools; NULL when absent. */
struct fc_receiver *fc_service_receiver(struct fc_service *svc, const char *id);
struct fc_exporter *fc_service_exporter(struct fc_service *svc, const char *id);
size_t fc_service_processor_count(const struct fc_service *svc);

/* The service's own schema (telemetry, shutdown_timeout, http), for the docs. */
extern const struct fc_field fc_service_fields[];

#endif
