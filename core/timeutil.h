/* Clocks and sleeps, in nanoseconds. */
#ifndef FC_TIMEUTIL_H
#define FC_TIMEUTIL_H

#include <stdint.h>

#define FC_NS_PER_US 1000LL
#define FC_NS_PER_MS 1000000LL
#define FC_NS_PER_SEC 1000000000LL

int64_t fc_now_ns(void);      /* CLOCK_REALTIME, unix ns */
int64_t fc_now_mono_ns(void); /* CLOCK_MONOTONIC */
void fc_sleep_ns(int64_t ns);

#endif
