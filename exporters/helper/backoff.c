#include "exporters/helper/backoff.h"

#include <math.h>

void fc_backoff_init(struct fc_backoff *b, const struct fc_retry_config *cfg, int64_t start_ns,
                     uint64_t seed)
{
    b->cfg = *cfg;
    b->interval = cfg->initial_interval;
    b->start_ns = start_ns;
    b->rng = seed;
}

/* splitmix64: a uniform double in [0, 1). Jitter needs no better. */
static double uniform(struct fc_backoff *b)
{
    uint64_t z = (b->rng += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0; /* 2^53 */
}

int64_t fc_backoff_next(struct fc_backoff *b, int64_t now_ns, int64_t retry_after_ns)
{
    double rf = b->cfg.randomization_factor;
    double centre = (double)b->interval;
    double lo = centre * (1.0 - rf), hi = centre * (1.0 + rf);
    int64_t wait = (int64_t)(lo + uniform(b) * (hi - lo));
    int64_t elapsed = now_ns - b->start_ns;

    /* cenkalti: interval grows first, then the stop rule is checked. */
    if (centre >= (double)b->cfg.max_interval / b->cfg.multiplier) {
        b->interval = b->cfg.max_interval;
    } else {
        b->interval = (int64_t)llround(centre * b->cfg.multiplier);
    }
    if (b->cfg.max_elapsed_time > 0 && elapsed + wait > b->cfg.max_elapsed_time) {
        return -1;
    }
    return retry_after_ns > wait ? retry_after_ns : wait;
}
