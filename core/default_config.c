#include "core/default_config.h"

/*
 * A single-machine profiling backend: OTLP (gRPC 4317, HTTP 4318) and
 * Pyroscope SDK pushes (4040) into the store, whose query API answers on
 * 4040 too, like a Pyroscope server. Data goes to ./flamecol-data.
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
                                 "  store:\n"
                                 "    path: ./flamecol-data\n"
                                 "    query:\n"
                                 "      endpoint: 127.0.0.1:4040\n"
                                 "service:\n"
                                 "  pipelines:\n"
                                 "    profiles:\n"
                                 "      receivers: [otlp, pprof]\n"
                                 "      exporters: [store]\n"
                                 "  telemetry:\n"
                                 "    metrics:\n"
                                 "      endpoint: 127.0.0.1:8888\n";
