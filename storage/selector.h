/*
 * Label selectors as Pyroscope's query API takes them (PromQL metric
 * selectors): `process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="api",
 * region=~"eu-.*", env!="dev", pod!~"canary-.*"}`. The metric-name position
 * holds the profile type id. Regexes are RE2-style and fully anchored
 * (compiled with PCRE2, JIT when available). A label that a series lacks
 * matches as "".
 */
#ifndef FC_STORAGE_SELECTOR_H
#define FC_STORAGE_SELECTOR_H

#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>

enum fc_match_op { FC_MATCH_EQ, FC_MATCH_NE, FC_MATCH_RE, FC_MATCH_NRE };

struct fc_matcher {
    char *name;
    char *value;
    enum fc_match_op op;
    void *re; /* pcre2_code *, for =~ and !~ */
};

struct fc_selector {
    char *profile_type; /* NULL when the selector has none */
    struct fc_matcher *matchers;
    size_t n;
};

/* Parses text; errors say where ("selector: col 14: expected '=', '!=', '=~' or '!~'"). */
int fc_selector_parse(const char *text, struct fc_selector *out, struct fc_error *err);
void fc_selector_release(struct fc_selector *s);
/* value: the series' value for m->name, or "" when it has none. */
bool fc_matcher_match(const struct fc_matcher *m, const char *value);

#endif
