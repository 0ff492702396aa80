#include "core/log.h"

#include "core/timeutil.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static _Atomic int current_level = FC_LOG_INFO;

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void fc_log_set_level(enum fc_log_level level)
{
    atomic_store(&current_level, (int)level);
}

enum fc_log_level fc_log_get_level(void)
{
    return (enum fc_log_level)atomic_load(&current_level);
}

int fc_log_parse_level(const char *s)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            return i;
        }
    }
    if (strcmp(s, "warning") == 0) {
        return FC_LOG_WARN;
    }
    return -1;
}

void fc_log(enum fc_log_level level, const char *component, const char *fmt, ...)
{
    char msg[1024];
    char line[1400];
    char ts[32];
    struct timespec now;
    struct tm tm;
    size_t n = 0;
    va_list ap;

    if ((int)level < atomic_load(&current_level)) {
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
    n += (size_t)snprintf(line + n, sizeof(line) - n, "ts=%s.%03ldZ level=%s", ts,
                          now.tv_nsec / 1000000, level_names[level]);
    if (component != NULL) {
        n += (size_t)snprintf(line + n, sizeof(line) - n, " component=%s", component);
    }
    n += (size_t)snprintf(line + n, sizeof(line) - n, " msg=\"");
    for (const char *p = msg; *p != '\0' && n + 3 < sizeof(line); p++) {
        if (*p == '"' || *p == '\\') {
            line[n++] = '\\';
        }
        line[n++] = (*p == '\n') ? ' ' : *p;
    }
    if (n + 2 >= sizeof(line)) {
        n = sizeof(line) - 3;
    }
    line[n++] = '"';
    line[n++] = '\n';
    /* One fwrite per line keeps lines whole when threads log at once. */
    fwrite(line, 1, n, stderr);
}

void fc_log_limited(struct fc_log_limit *l, int64_t interval_ns, enum fc_log_level level,
                    const char *component, const char *fmt, ...)
{
    int64_t now = fc_now_mono_ns();
    int64_t last = atomic_load(&l->last_ns);
    uint64_t more;
    char msg[1024];
    va_list ap;

    if ((int)level < atomic_load(&current_level)) {
        return;
    }
    if ((last != 0 && now - last < interval_ns) ||
        !atomic_compare_exchange_strong(&l->last_ns, &last, now)) {
        atomic_fetch_add(&l->suppressed, 1);
        return;
    }
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    more = atomic_exchange(&l->suppressed, 0);
    if (more > 0) {
        fc_log(level, component, "%s (and %llu more like it since the last such line)", msg,
               (unsigned long long)more);
    } else {
        fc_log(level, component, "%s", msg);
    }
}
