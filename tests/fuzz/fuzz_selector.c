/* The query selector parser (profile type id, matchers, quoting, regexes). */
#include "storage/selector.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    struct fc_selector sel;
    struct fc_error err = {0};

    memcpy(s, data, size);
    s[size] = '\0';
    if (fc_selector_parse(s, &sel, &err) == FC_OK) {
        for (size_t i = 0; i < sel.n; i++) {
            fc_matcher_match(&sel.matchers[i], "value");
            fc_matcher_match(&sel.matchers[i], "");
        }
        fc_selector_release(&sel);
    }
    free(s);
    return 0;
}
