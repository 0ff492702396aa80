#include "config/units.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fc_parse_int64(const char *s, int64_t *v)
{
    char *end;
    long long x;

    if (s == NULL || *s == '\0') {
        return -1;
    }
    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0' || end == s) {
        return -1;
    }
    *v = (int64_t)x;
    return 0;
}

static const struct {
    const char *unit;
    double ns;
} duration_units[] = {
    {"ns", 1.0}, {"us", 1e3},   {"µs", 1e3},    {"ms", 1e6},        {"s", 1e9},
    {"m", 60e9}, {"h", 3600e9}, {"d", 86400e9}, {"w", 7 * 86400e9},
};

int fc_parse_duration(const char *s, int64_t *ns, const char **why)
{
    double total = 0;
    const char *p = s;

    if (s == NULL || *s == '\0') {
        *why = "empty duration";
        return -1;
    }
    if (strcmp(s, "0") == 0) {
        *ns = 0;
        return 0;
    }
    while (*p != '\0') {
        char *end;
        double v;
        size_t best = 0;
        double mult = 0;

        if (!(*p >= '0' && *p <= '9') && *p != '.') {
            *why = "a duration is a number with a unit, e.g. 10s, 5m, 1h30m, 30d";
            return -1;
        }
        v = strtod(p, &end);
        if (end == p) {
            *why = "a duration is a number with a unit, e.g. 10s, 5m, 1h30m, 30d";
            return -1;
        }
        p = end;
        for (size_t i = 0; i < sizeof(duration_units) / sizeof(duration_units[0]); i++) {
            size_t n = strlen(duration_units[i].unit);
            /* Longest match wins: "ms" before "m". */
            if (n > best && strncmp(p, duration_units[i].unit, n) == 0) {
                best = n;
                mult = duration_units[i].ns;
            }
        }
        if (best == 0) {
            *why = "missing or unknown unit (use ns, us, ms, s, m, h, d, w)";
            return -1;
        }
        p += best;
        total += v * mult;
    }
    if (total > 9.2e18) {
        *why = "duration too large";
        return -1;
    }
    *ns = (int64_t)(total + 0.5);
    return 0;
}

int fc_parse_size(const char *s, int64_t *bytes, const char **why)
{
    static const struct {
        const char *unit;
        double mult;
    } units[] = {
        {"B", 1},
        {"K", 1e3},
        {"KB", 1e3},
        {"KiB", 1024.0},
        {"M", 1e6},
        {"MB", 1e6},
        {"MiB", 1048576.0},
        {"G", 1e9},
        {"GB", 1e9},
        {"GiB", 1073741824.0},
        {"T", 1e12},
        {"TB", 1e12},
        {"TiB", 1099511627776.0},
        {"k", 1e3},
        {"kB", 1e3},
        {"Ki", 1024.0},
        {"Mi", 1048576.0},
        {"Gi", 1073741824.0},
        {"Ti", 1099511627776.0},
    };
    char *end;
    double v;

    if (s == NULL || *s == '\0') {
        *why = "empty size";
        return -1;
    }
    if (!(*s >= '0' && *s <= '9')) {
        *why = "a size is a number with an optional unit, e.g. 512, 64KiB, 16MiB, 1GB";
        return -1;
    }
    v = strtod(s, &end);
    while (*end == ' ') {
        end++;
    }
    if (*end != '\0') {
        int found = 0;
        for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
            if (strcmp(end, units[i].unit) == 0) {
                v *= units[i].mult;
                found = 1;
                break;
            }
        }
        if (!found) {
            *why = "unknown size unit (use B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)";
            return -1;
        }
    }
    if (v > 9.2e18) {
        *why = "size too large";
        return -1;
    }
    *bytes = (int64_t)(v + 0.5);
    return 0;
}

void fc_format_duration(int64_t ns, char *out, unsigned size)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {{"d", 86400000000000LL}, {"h", 3600000000000LL}, {"m", 60000000000LL},
                 {"s", 1000000000LL},     {"ms", 1000000LL},      {"us", 1000LL}};

    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (ns != 0 && ns % units[i].ns == 0) {
            snprintf(out, size, "%lld%s", (long long)(ns / units[i].ns), units[i].unit);
            return;
        }
    }
    snprintf(out, size, ns == 0 ? "0s" : "%lldns", (long long)ns);
}
