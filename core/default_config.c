#include "core/default_config.h"

/*
 * A single-machine setup. It grows as components land: today the otlp and
 * pprof receivers feed the debug exporter; the store (query API and UI on
 * 127.0.0.1:4040, data in ./flamecol-data) joins them when it exists.
 */
const char fc_default_config[] = "receivers:\n"
                                 "  otlp:\n"
                                 "    protocols:\n"
                                 "      grpc:\n"
                                 "        endpoint: 127.0.0.1:4317\n"
                                 "      http:\n"
                                 "        endpoint: 127.0.0.1:4318\n"
                                 "  pprof:\n"
                                 "    endpoint: 127.0.0.1:4040\n"
                                 "exporters:\n"
                                 "  debug:\n"
                                 "    verbosity: basic\n"
                                 "service:\n"
                                 "  pipelines:\n"
                                 "    profiles:\n"
                                 "      receivers: [otlp, pprof]\n"
                                 "      exporters: [debug]\n"
                                 "  telemetry:\n"
                                 "    metrics:\n"
                                 "      endpoint: 127.0.0.1:8888\n";
