/* Pyroscope's /ingest `name` label set and from/until time values. */
#include "formats/pyroscope.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    struct fc_pyro_name *name = malloc(sizeof(*name));
    struct fc_error err = {0};
    int64_t t;

    memcpy(s, data, size);
    s[size] = '\0';
    fc_pyro_parse_name(s, name, &err);
    fc_pyro_parse_time(s, 1700000000000000000LL, &t, &err);
    free(name);
    free(s);
    return 0;
}
