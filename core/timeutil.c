#include "core/timeutil.h"

#include <errno.h>
#include <time.h>

int64_t fc_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * FC_NS_PER_SEC + ts.tv_nsec;
}

int64_t fc_now_mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * FC_NS_PER_SEC + ts.tv_nsec;
}

void fc_sleep_ns(int64_t ns)
{
    struct timespec ts = {(time_t)(ns / FC_NS_PER_SEC), (long)(ns % FC_NS_PER_SEC)};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
