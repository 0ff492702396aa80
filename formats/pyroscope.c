#include "formats/pyroscope.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void trim(const char **s, const char **e)
{
    while (*s < *e && isspace((unsigned char)**s)) {
        (*s)++;
    }
    while (*e > *s && isspace((unsigned char)(*e)[-1])) {
        (*e)--;
    }
}

static bool app_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '-' || c == '/';
}

static bool key_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.';
}

int fc_pyro_parse_name(const char *name, struct fc_pyro_name *out, struct fc_error *err)
{
    const char *brace = strchr(name, '{');
    const char *s = name;
    const char *e = brace ? brace : name + strlen(name);

    memset(out, 0, sizeof(*out));
    trim(&s, &e);
    if (s == e) {
        return fc_errorf(err, FC_EPROTO, "name: service name is required");
    }
    if ((size_t)(e - s) >= sizeof(out->app)) {
        return fc_errorf(err, FC_EPROTO, "name: the application name is longer than %zu bytes",
                         sizeof(out->app) - 1);
    }
    for (const char *p = s; p < e; p++) {
        if (!app_char(*p)) {
            return fc_errorf(err, FC_EPROTO,
                             "name: invalid character '%c' in the application name \"%.*s\" "
                             "(allowed: A-Z a-z 0-9 _ . - /)",
                             *p, (int)(e - s), s);
        }
    }
    memcpy(out->app, s, (size_t)(e - s));
    if (brace == NULL) {
        return FC_OK;
    }
    {
        const char *p = brace + 1;
        const char *close = strchr(p, '}');
        if (close == NULL) {
            return fc_errorf(err, FC_EPROTO, "name: missing '}' after the labels");
        }
        for (const char *q = close + 1; *q; q++) {
            if (!isspace((unsigned char)*q)) {
                return fc_errorf(err, FC_EPROTO, "name: unexpected text after '}'");
            }
        }
        while (p < close) {
            const char *comma = memchr(p, ',', (size_t)(close - p));
            const char *pe = comma ? comma : close;
            const char *eq = memchr(p, '=', (size_t)(pe - p));
            const char *ks = p, *ke, *vs, *ve;
            if (eq == NULL) {
                const char *t = p, *te = pe;
                trim(&t, &te);
                if (t != te) {
                    return fc_errorf(err, FC_EPROTO, "name: label \"%.*s\" has no '='",
                                     (int)(te - t), t);
                }
                p = comma ? comma + 1 : close;
                continue;
            }
            ke = eq;
            vs = eq + 1;
            ve = pe;
            trim(&ks, &ke);
            trim(&vs, &ve);
            if (ks == ke) {
                return fc_errorf(err, FC_EPROTO, "name: a label has an empty name");
            }
            for (const char *k = ks; k < ke; k++) {
                if (!key_char(*k)) {
                    return fc_errorf(err, FC_EPROTO,
                                     "name: invalid label name \"%.*s\" (allowed: A-Z a-z 0-9 _ .)",
                                     (int)(ke - ks), ks);
                }
            }
            if (out->n_labels >= FC_PYRO_MAX_NAME_LABELS) {
                return fc_errorf(err, FC_EPROTO, "name: more than %d labels",
                                 FC_PYRO_MAX_NAME_LABELS);
            }
            if ((size_t)(ke - ks) >= sizeof(out->labels[0].key) ||
                (size_t)(ve - vs) >= sizeof(out->labels[0].value)) {
                return fc_errorf(err, FC_EPROTO, "name: label \"%.*s\" is too long",
                                 (int)(ke - ks > 64 ? 64 : ke - ks), ks);
            }
            for (size_t i = 0; i < out->n_labels; i++) {
                if (strlen(out->labels[i].key) == (size_t)(ke - ks) &&
                    memcmp(out->labels[i].key, ks, (size_t)(ke - ks)) == 0) {
                    return fc_errorf(err, FC_EPROTO, "name: duplicate label \"%.*s\"",
                                     (int)(ke - ks), ks);
                }
            }
            memcpy(out->labels[out->n_labels].key, ks, (size_t)(ke - ks));
            memcpy(out->labels[out->n_labels].value, vs, (size_t)(ve - vs));
            out->n_labels++;
            p = comma ? comma + 1 : close;
        }
    }
    return FC_OK;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    /* Howard Hinnant's algorithm: days since 1970-01-01 in the proleptic Gregorian calendar. */
    y -= m <= 2;
    {
        int64_t era = (y >= 0 ? y : y - 399) / 400;
        unsigned yoe = (unsigned)(y - era * 400);
        unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
        unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        return era * 146097 + (int64_t)doe - 719468;
    }
}

int fc_pyro_parse_time(const char *in, int64_t now_ns, int64_t *out_ns, struct fc_error *err)
{
    char s[64];
    size_t n = 0;
    bool digits = true;

    for (const char *p = in; *p && n + 1 < sizeof(s); p++) {
        if (*p == '_' || *p == ',' || *p == ' ') {
            continue;
        }
        digits = digits && isdigit((unsigned char)*p);
        s[n++] = *p;
    }
    s[n] = '\0';
    if (n == 0) {
        return fc_errorf(err, FC_EPROTO, "empty time");
    }
    if (digits) {
        int64_t v = strtoll(s, NULL, 10);
        if (n == 8) {
            unsigned y = (unsigned)(v / 10000), m = (unsigned)(v / 100 % 100),
                     d = (unsigned)(v % 100);
            if (y >= 1970 && y < 2262 && m >= 1 && m <= 12 && d >= 1 && d <= 31) {
                *out_ns = days_from_civil(y, m, d) * 86400LL * 1000000000LL;
                return FC_OK;
            }
        }
        if (n > 19) {
            return fc_errorf(err, FC_EPROTO, "time \"%s\" has too many digits", in);
        }
        {
            int64_t mult = n == 13 ? 1000000LL : n == 16 ? 1000LL : n == 19 ? 1 : 1000000000LL;
            if (v < 0 || __builtin_mul_overflow(v, mult, out_ns)) {
                return fc_errorf(err, FC_EPROTO, "time \"%s\" is out of range", in);
            }
        }
        return FC_OK;
    }
    {
        /* <ref>[+-]<n><unit>; the reference is always now. */
        const char *p = s;
        int64_t sign;
        int64_t num;
        char *unit;
        static const struct {
            const char *u;
            int64_t sec;
        } units[] = {{"s", 1},      {"min", 60},      {"m", 60},      {"h", 3600},    {"d", 86400},
                     {"w", 604800}, {"mon", 2592000}, {"M", 2592000}, {"y", 31536000}};
        if (strncmp(p, "now", 3) == 0) {
            p += 3;
        }
        if (*p == '\0') {
            *out_ns = now_ns;
            return FC_OK;
        }
        if (*p != '-' && *p != '+') {
            return fc_errorf(err, FC_EPROTO,
                             "time \"%s\": expected unix seconds/ms/us/ns or now-<n><unit>", in);
        }
        sign = *p == '-' ? -1 : 1;
        p++;
        if (!isdigit((unsigned char)*p)) {
            return fc_errorf(err, FC_EPROTO, "time \"%s\": expected a number after the sign", in);
        }
        num = strtoll(p, &unit, 10);
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            int64_t offset;
            if (strcmp(unit, units[i].u) != 0) {
                continue;
            }
            if (__builtin_mul_overflow(num, units[i].sec * 1000000000LL, &offset) ||
                __builtin_add_overflow(now_ns, sign * offset, out_ns)) {
                return fc_errorf(err, FC_EPROTO, "time \"%s\" is out of range", in);
            }
            return FC_OK;
        }
        return fc_errorf(err, FC_EPROTO, "time \"%s\": unknown unit \"%s\"", in, unit);
    }
}

static const struct fc_pyro_suffix_type suffix_types[] = {
    {"cpu", "process_cpu", "samples", "count"},
    {"itimer", "process_cpu", "samples", "count"},
    {"wall", "wall", "samples", "count"},
    {"seconds", "wall", "samples", "count"},
    {"nanoseconds", "wall", "samples", "count"},
    {"microseconds", "wall", "samples", "count"},
    {"milliseconds", "wall", "samples", "count"},
    {"inuse_objects", "memory", NULL, "count"},
    {"alloc_objects", "memory", NULL, "count"},
    {"inuse_space", "memory", NULL, "bytes"},
    {"alloc_space", "memory", NULL, "bytes"},
    {"goroutines", "goroutine", "goroutines", "count"},
    {"mutex_count", "mutex", "contentions", "count"},
    {"mutex_duration", "mutex", "delay", "nanoseconds"},
    {"block_count", "block", "contentions", "count"},
    {"block_duration", "block", "delay", "nanoseconds"},
    {"lock_count", "block", "contentions", "count"},
    {"lock_duration", "block", "delay", "nanoseconds"},
    {"alloc_in_new_tlab_objects", "memory", NULL, "count"},
    {"alloc_in_new_tlab_bytes", "memory", NULL, "bytes"},
    {"alloc_outside_tlab_objects", "memory", NULL, "count"},
    {"alloc_outside_tlab_bytes", "memory", NULL, "bytes"},
    {"live", "memory", NULL, "count"},
    {"exceptions", "exceptions", "samples", "count"},
    {"bytes", "memory", "samples", "bytes"},
};

const struct fc_pyro_suffix_type *fc_pyro_suffix_type(const char *suffix)
{
    for (size_t i = 0; i < sizeof(suffix_types) / sizeof(suffix_types[0]); i++) {
        if (strcmp(suffix_types[i].suffix, suffix) == 0) {
            return &suffix_types[i];
        }
    }
    return NULL;
}

bool fc_pyro_default_type_config(const char *type, struct fc_pyro_type_config *out)
{
    static const struct {
        const char *type, *display, *units, *aggregation;
        bool cumulative, sampled;
    } defaults[] = {
        {"samples", "cpu", "samples", "sum", false, true},
        {"inuse_objects", "", "objects", "average", false, false},
        {"alloc_objects", "", "objects", "sum", true, false},
        {"inuse_space", "", "bytes", "average", false, false},
        {"alloc_space", "", "bytes", "sum", true, false},
        {"goroutine", "goroutines", "goroutines", "average", false, false},
        {"contentions", "mutex_count", "lock_samples", "sum", true, false},
        {"delay", "mutex_duration", "lock_nanoseconds", "sum", true, false},
    };

    memset(out, 0, sizeof(*out));
    snprintf(out->type, sizeof(out->type), "%s", type);
    for (size_t i = 0; i < sizeof(defaults) / sizeof(defaults[0]); i++) {
        if (strcmp(defaults[i].type, type) == 0) {
            snprintf(out->display_name, sizeof(out->display_name), "%s", defaults[i].display);
            snprintf(out->units, sizeof(out->units), "%s", defaults[i].units);
            snprintf(out->aggregation, sizeof(out->aggregation), "%s", defaults[i].aggregation);
            out->cumulative = defaults[i].cumulative;
            out->sampled = defaults[i].sampled;
            return true;
        }
    }
    return false;
}

static const char *name_rule(const char *t)
{
    if (strstr(t, "cpu") != NULL) {
        return "process_cpu";
    }
    if (strstr(t, "alloc_") != NULL || strstr(t, "inuse_") != NULL || strcmp(t, "space") == 0 ||
        strcmp(t, "objects") == 0) {
        return "memory";
    }
    if (strstr(t, "mutex_") != NULL) {
        return "mutex";
    }
    if (strstr(t, "block_") != NULL) {
        return "block";
    }
    if (strstr(t, "goroutines") != NULL) {
        return "goroutines";
    }
    return NULL;
}

void fc_pyro_profile_name(const struct fc_batch *b, const struct fc_profile *p,
                          const struct fc_pyro_type_config *configs, size_t n_configs, char *out,
                          size_t size)
{
    const char *last = "unknown";

    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        if (strcmp(fc_str(b, p->sample_types[t].type), "wall") == 0) {
            snprintf(out, size, "wall");
            return;
        }
    }
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        const char *type = fc_str(b, p->sample_types[t].type);
        struct fc_pyro_type_config dflt;
        const char *display = type;
        const char *rule;
        bool found = false;
        for (size_t i = 0; i < n_configs; i++) {
            if (strcmp(configs[i].type, type) == 0) {
                display = configs[i].display_name[0] ? configs[i].display_name : type;
                found = true;
            }
        }
        if (!found && fc_pyro_default_type_config(type, &dflt) && dflt.display_name[0]) {
            display = NULL;
            rule = name_rule(dflt.display_name);
            if (rule != NULL) {
                snprintf(out, size, "%s", rule);
                return;
            }
            last = type;
            continue;
        }
        rule = name_rule(display);
        if (rule != NULL) {
            snprintf(out, size, "%s", rule);
            return;
        }
        last = display;
    }
    snprintf(out, size, "%s", last);
}

void fc_pyro_profile_type_id(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                             struct fc_buf *out)
{
    const char *name = fc_profile_label(b, p, "__name__");

    fc_buf_printf(out, "%s:%s:%s:%s:%s", name ? name : "", fc_str(b, p->sample_types[t].type),
                  fc_str(b, p->sample_types[t].unit), fc_str(b, p->period_type.type),
                  fc_str(b, p->period_type.unit));
}

void fc_pyro_stored_type(const struct fc_batch *b, const struct fc_profile *p, uint32_t t,
                         struct fc_buf *id, int64_t *scale)
{
    const char *name = fc_profile_label(b, p, "__name__");

    *scale = 1;
    if (p->cpu_samples_as_ns && p->period > 0) {
        fc_buf_printf(id, "%s:cpu:nanoseconds:cpu:nanoseconds", name ? name : "");
        *scale = p->period;
        return;
    }
    fc_pyro_profile_type_id(b, p, t, id);
}
