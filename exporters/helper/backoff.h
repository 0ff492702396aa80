/*
 * The retry schedule of the Collector's exporterhelper, which uses Go's
 * cenkalti/backoff ExponentialBackOff:
 *
 *   interval starts at initial_interval; each retry waits a random value in
 *   [interval * (1 - rf), interval * (1 + rf)], then
 *   interval = min(interval * multiplier, max_interval).
 *   Retries stop when the time elapsed since the first attempt plus the next
 *   wait would pass max_elapsed_time (0 = never stop).
 *
 * A throttled answer (the peer sent Retry-After or RetryInfo) waits
 * max(backoff wait, what the peer asked): at least the peer's delay, as
 * exporterhelper's throttle retry. The stop rule looks at the backoff wait
 * only, as exporterhelper does.
 *
 * One struct per item being sent; not shared between threads.
 */
#ifndef FC_EXPORTERS_HELPER_BACKOFF_H
#define FC_EXPORTERS_HELPER_BACKOFF_H

#include "exporters/helper/sender.h"

#include <stdint.h>

struct fc_backoff {
    struct fc_retry_config cfg;
    int64_t interval; /* ns: the centre of the next wait */
    int64_t start_ns; /* CLOCK_MONOTONIC of the first attempt */
    uint64_t rng;     /* splitmix64 state */
};

/* start_ns: when the first attempt began; seed: any value (jitter). */
void fc_backoff_init(struct fc_backoff *b, const struct fc_retry_config *cfg, int64_t start_ns,
                     uint64_t seed);

/*
 * The wait in ns before the next attempt, at now_ns, after a retryable
 * failure whose peer asked for retry_after_ns (0 = nothing asked); or -1
 * when there are no retries left (max_elapsed_time).
 */
int64_t fc_backoff_next(struct fc_backoff *b, int64_t now_ns, int64_t retry_after_ns);

#endif
