/*
 * Logs: one line per event on stderr, logfmt style:
 *   ts=2026-11-21T12:00:00.123Z level=info component=receiver/pprof msg="listening on
 * 127.0.0.1:4040" Messages are lower case without a full stop. Never log per sample.
 */
#ifndef FC_LOG_H
#define FC_LOG_H

#include <stdatomic.h>
#include <stdint.h>

enum fc_log_level { FC_LOG_DEBUG, FC_LOG_INFO, FC_LOG_WARN, FC_LOG_ERROR };

void fc_log_set_level(enum fc_log_level level);
enum fc_log_level fc_log_get_level(void);
/* "debug", "info", "warn", "error"; returns -1 when unknown. */
int fc_log_parse_level(const char *s);

/* component: "receiver/pprof", "service", ... (NULL for none). */
void fc_log(enum fc_log_level level, const char *component, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * One kind of line that can repeat under a lasting failure or a flood: at
 * most one per interval goes out, the rest are counted and the count goes
 * with the next line. Zero-initialised; safe from any thread.
 */
struct fc_log_limit {
    _Atomic int64_t last_ns; /* CLOCK_MONOTONIC of the last line written */
    _Atomic uint64_t suppressed;
};

void fc_log_limited(struct fc_log_limit *l, int64_t interval_ns, enum fc_log_level level,
                    const char *component, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define fc_log_debug(c, ...) fc_log(FC_LOG_DEBUG, (c), __VA_ARGS__)
#define fc_log_info(c, ...) fc_log(FC_LOG_INFO, (c), __VA_ARGS__)
#define fc_log_warn(c, ...) fc_log(FC_LOG_WARN, (c), __VA_ARGS__)
#define fc_log_error(c, ...) fc_log(FC_LOG_ERROR, (c), __VA_ARGS__)

#endif
