/*
 * The `service:` block's settings (telemetry, shutdown_timeout, http,
 * extensions): its schema (fc_service_fields, core/service.h) and the
 * ranges the schema cannot say. Internal to core/service*.c.
 */
#ifndef FC_CORE_SERVICE_CONFIG_H
#define FC_CORE_SERVICE_CONFIG_H

#include "config/schema.h"
#include "core/extensions.h"
#include "core/tls_server.h"

#include <stdint.h>

struct service_config {
    struct {
        struct {
            int level; /* enum fc_log_level */
        } logs;
        struct {
            const char *endpoint;
            int level; /* 0 = none: no telemetry server */
            struct fc_tls_server_config tls;
            struct fc_server_auth_config auth;
        } metrics;
    } telemetry;
    int64_t shutdown_timeout;
    const struct fc_node *extensions; /* read by core/extensions.c */
    struct {
        int64_t threads;
        int64_t read_timeout;
        int64_t header_timeout;
        int64_t body_timeout;
        int64_t max_connections;
        int64_t max_connections_per_client;
        int64_t max_in_flight;
    } http;
};

/* Errors (pointing at service.http or service) for values out of range. */
void fc_service_check_settings(const struct service_config *cfg, const struct fc_node *service,
                               struct fc_diag *diag);

#endif
