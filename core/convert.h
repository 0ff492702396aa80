/* `flamecol convert`: profiles between pprof, OTLP (protobuf, JSON) and folded text. */
#ifndef FC_CONVERT_H
#define FC_CONVERT_H

int fc_cmd_convert(int argc, char **argv);

#endif
