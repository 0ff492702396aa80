/* Durations ("10s", "1h30m", "30d", "250ms") and sizes ("64MiB", "1GB", "512"). */
#ifndef FC_CONFIG_UNITS_H
#define FC_CONFIG_UNITS_H

#include <stdint.h>

/* Nanoseconds. "0" alone is allowed without a unit. Returns 0 or -1 with why. */
int fc_parse_duration(const char *s, int64_t *ns, const char **why);
/* Bytes. A bare number is bytes; K/M/G/T are powers of 1000, Ki/Mi/Gi/Ti of 1024. */
int fc_parse_size(const char *s, int64_t *bytes, const char **why);
/* A decimal integer, the whole string. */
int fc_parse_int64(const char *s, int64_t *v);
/* Formats a duration the way it is best written back ("1h", "10s", "500ms"). */
void fc_format_duration(int64_t ns, char *out, unsigned size);

#endif
