#include "core/default_config.h"

/*
 * A single-machine setup. It grows as components land: today the pprof push
 * receiver feeds the debug exporter; the otlp receiver and the store (query
 * API and UI on 127.0.0.1:4040, data in ./flamecol-data) join it when they exist.
 */
const char fc_default_config[] = "receivers:\n"
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
