/* The `service:` block's settings: schema and range checks (core/service_config.h). */
#include "core/service_config.h"

#include "core/service.h"

#include <stddef.h>

static const struct fc_field logs_fields[] = {
    {"level", FC_FIELD_ENUM, "info",
     offsetof(struct service_config, telemetry.logs.level) -
         offsetof(struct service_config, telemetry.logs),
     "least severe level written to stderr", .choices = "debug|info|warn|error"},
    {NULL},
};

static const struct fc_field metrics_fields[] = {
    {"endpoint", FC_FIELD_STR, "127.0.0.1:8888",
     offsetof(struct service_config, telemetry.metrics.endpoint) -
         offsetof(struct service_config, telemetry.metrics),
     "serves /metrics (Prometheus), /healthz and /ready"},
    {"level", FC_FIELD_ENUM, "normal",
     offsetof(struct service_config, telemetry.metrics.level) -
         offsetof(struct service_config, telemetry.metrics),
     "`none` turns the telemetry server off", .choices = "none|basic|normal|detailed"},
    FC_TLS_SERVER_FIELD(offsetof(struct service_config, telemetry.metrics.tls) -
                        offsetof(struct service_config, telemetry.metrics)),
    FC_SERVER_AUTH_FIELD(offsetof(struct service_config, telemetry.metrics.auth) -
                         offsetof(struct service_config, telemetry.metrics)),
    {NULL},
};

static const struct fc_field telemetry_fields[] = {
    {"logs", FC_FIELD_OBJECT, NULL,
     offsetof(struct service_config, telemetry.logs) - offsetof(struct service_config, telemetry),
     "logs on stderr, one line per event", .sub = logs_fields},
    {"metrics", FC_FIELD_OBJECT, NULL,
     offsetof(struct service_config, telemetry.metrics) -
         offsetof(struct service_config, telemetry),
     "self-telemetry server", .sub = metrics_fields},
    {NULL},
};

static const struct fc_field http_fields[] = {
    {"threads", FC_FIELD_INT, "0",
     offsetof(struct service_config, http.threads) - offsetof(struct service_config, http),
     "threads per HTTP listener (0 = one per CPU, at most 16)"},
    {"read_timeout", FC_FIELD_DURATION, "30s",
     offsetof(struct service_config, http.read_timeout) - offsetof(struct service_config, http),
     "a connection idle this long is closed (slow or stuck clients)"},
    {"header_timeout", FC_FIELD_DURATION, "10s",
     offsetof(struct service_config, http.header_timeout) - offsetof(struct service_config, http),
     "a request's headers must be complete this long after the connection opened (or after "
     "the idle time following the previous answer), however slowly they trickle in"},
    {"body_timeout", FC_FIELD_DURATION, "60s",
     offsetof(struct service_config, http.body_timeout) - offsetof(struct service_config, http),
     "a request's body must be complete this long after its headers"},
    {"max_connections", FC_FIELD_INT, "4096",
     offsetof(struct service_config, http.max_connections) - offsetof(struct service_config, http),
     "open connections per listener"},
    {"max_connections_per_client", FC_FIELD_INT, "1024",
     offsetof(struct service_config, http.max_connections_per_client) -
         offsetof(struct service_config, http),
     "open connections per client address per listener; more are closed at once (0 = "
     "max_connections)"},
    {"max_in_flight", FC_FIELD_INT, "64",
     offsetof(struct service_config, http.max_in_flight) - offsetof(struct service_config, http),
     "requests handled at once per listener; more get 429 with Retry-After at once, never "
     "queued"},
    {NULL},
};

const struct fc_field fc_service_fields[] = {
    {"telemetry", FC_FIELD_OBJECT, NULL, offsetof(struct service_config, telemetry),
     "the service's own logs and metrics", .sub = telemetry_fields},
    {"shutdown_timeout", FC_FIELD_DURATION, "10s",
     offsetof(struct service_config, shutdown_timeout),
     "on SIGTERM/SIGINT: time to finish requests and drain exporters"},
    {"http", FC_FIELD_OBJECT, NULL, offsetof(struct service_config, http),
     "the shared HTTP listeners", .sub = http_fields},
    {"extensions", FC_FIELD_NODE, "[]", offsetof(struct service_config, extensions),
     "the extensions started (ids under the top-level `extensions:`; see Authentication)"},
    {NULL},
};

/* Ranges the schema cannot say; errors point at service.http. */
void fc_service_check_settings(const struct service_config *cfg, const struct fc_node *service,
                               struct fc_diag *diag)
{
    const struct fc_node *http = fc_node_get(service, "http");
    const struct fc_node *at = http != NULL ? http : service;

    if (cfg->http.threads < 0 || cfg->http.threads > 16) {
        fc_diag_error(diag, at, "service.http.threads must be between 0 and 16");
    }
    if (cfg->http.max_in_flight < 1 || cfg->http.max_in_flight > 4096) {
        fc_diag_error(diag, at, "service.http.max_in_flight must be between 1 and 4096");
    }
    if (cfg->http.max_connections < 1 || cfg->http.max_connections > 1000000 ||
        cfg->http.max_connections_per_client < 0) {
        fc_diag_error(diag, at,
                      "service.http.max_connections must be between 1 and 1000000 and "
                      "max_connections_per_client not negative");
    }
    if (cfg->http.read_timeout <= 0 || cfg->http.header_timeout <= 0 ||
        cfg->http.body_timeout <= 0) {
        fc_diag_error(diag, at, "service.http timeouts must be positive");
    }
    if (cfg->telemetry.metrics.level != 0) {
        struct fc_error err = {0};
        if (fc_tls_server_check(&cfg->telemetry.metrics.tls, &err) != FC_OK) {
            fc_diag_error(diag, service, "service.telemetry.metrics.%s", err.msg);
        }
    }
}
