/* Saturating arithmetic for values that come from outside (sample values, totals). */
#ifndef FC_CORE_SAT_H
#define FC_CORE_SAT_H

#include <stdint.h>

/*
 * Sums of values that come from outside saturate at INT64_MAX / INT64_MIN
 * (both ways: diffs carry negative values) instead of wrapping.
 */
static inline int64_t fc_sat_add(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) {
        return b > 0 ? INT64_MAX : INT64_MIN;
    }
    return r;
}

static inline int64_t fc_sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r)) {
        return (a < 0) != (b < 0) ? INT64_MIN : INT64_MAX;
    }
    return r;
}

#endif
