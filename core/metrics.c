#include "core/metrics.h"

#include "core/buf.h"
#include "core/mem.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct metric {
    char *name;
    char *labels;
    char *help;
    int is_counter;
    _Atomic int64_t value;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct metric **metrics;
static size_t n_metrics;
static size_t cap_metrics;
static struct timespec started;

static _Atomic int64_t *get(const char *name, const char *labels, const char *help, int counter)
{
    struct metric *m;

    pthread_mutex_lock(&lock);
    if (started.tv_sec == 0) {
        clock_gettime(CLOCK_MONOTONIC, &started);
    }
    for (size_t i = 0; i < n_metrics; i++) {
        if (strcmp(metrics[i]->name, name) == 0 && strcmp(metrics[i]->labels, labels) == 0) {
            pthread_mutex_unlock(&lock);
            return &metrics[i]->value;
        }
    }
    if (n_metrics == cap_metrics) {
        cap_metrics = cap_metrics ? cap_metrics * 2 : 64;
        metrics = fc_xrealloc(metrics, cap_metrics * sizeof(*metrics));
    }
    m = fc_xcalloc(1, sizeof(*m));
    m->name = fc_xstrdup(name);
    m->labels = fc_xstrdup(labels);
    m->help = fc_xstrdup(help);
    m->is_counter = counter;
    atomic_init(&m->value, 0);
    metrics[n_metrics++] = m;
    pthread_mutex_unlock(&lock);
    return &m->value;
}

_Atomic int64_t *fc_metrics_counter(const char *name, const char *labels, const char *help)
{
    return get(name, labels, help, 1);
}

_Atomic int64_t *fc_metrics_gauge(const char *name, const char *labels, const char *help)
{
    return get(name, labels, help, 0);
}

static int by_name(const void *a, const void *b)
{
    const struct metric *x = *(struct metric *const *)a;
    const struct metric *y = *(struct metric *const *)b;
    int c = strcmp(x->name, y->name);

    return c ? c : strcmp(x->labels, y->labels);
}

static void process_metrics(struct fc_buf *out)
{
    struct rusage ru;
    struct timespec now;
    long pages = 0;
    long rss_pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");

    if (f != NULL) {
        if (fscanf(f, "%ld %ld", &pages, &rss_pages) != 2) {
            rss_pages = 0;
        }
        fclose(f);
    }
    getrusage(RUSAGE_SELF, &ru);
    clock_gettime(CLOCK_MONOTONIC, &now);
    fc_buf_printf(out,
                  "# HELP flamecol_process_memory_rss_bytes Resident set size of the process.\n"
                  "# TYPE flamecol_process_memory_rss_bytes gauge\n"
                  "flamecol_process_memory_rss_bytes %ld\n",
                  rss_pages * sysconf(_SC_PAGESIZE));
    fc_buf_printf(out,
                  "# HELP flamecol_process_memory_peak_rss_bytes Peak resident set size.\n"
                  "# TYPE flamecol_process_memory_peak_rss_bytes gauge\n"
                  "flamecol_process_memory_peak_rss_bytes %ld\n",
                  ru.ru_maxrss * 1024L);
    fc_buf_printf(out,
                  "# HELP flamecol_process_cpu_seconds_total User and system CPU time.\n"
                  "# TYPE flamecol_process_cpu_seconds_total counter\n"
                  "flamecol_process_cpu_seconds_total %.6f\n",
                  (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
                      (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
    fc_buf_printf(out,
                  "# HELP flamecol_process_uptime_seconds_total Seconds since start.\n"
                  "# TYPE flamecol_process_uptime_seconds_total counter\n"
                  "flamecol_process_uptime_seconds_total %.3f\n",
                  (double)(now.tv_sec - started.tv_sec) +
                      (double)(now.tv_nsec - started.tv_nsec) / 1e9);
}

void fc_metrics_render(struct fc_buf *out)
{
    const char *last = "";

    pthread_mutex_lock(&lock);
    if (started.tv_sec == 0) {
        clock_gettime(CLOCK_MONOTONIC, &started);
    }
    qsort(metrics, n_metrics, sizeof(*metrics), by_name);
    for (size_t i = 0; i < n_metrics; i++) {
        struct metric *m = metrics[i];
        if (strcmp(m->name, last) != 0) {
            fc_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
                          m->is_counter ? "counter" : "gauge");
            last = m->name;
        }
        fc_buf_printf(out, "%s%s%s%s %lld\n", m->name, m->labels[0] ? "{" : "", m->labels,
                      m->labels[0] ? "}" : "", (long long)atomic_load(&m->value));
    }
    pthread_mutex_unlock(&lock);
    process_metrics(out);
}

int64_t fc_metrics_value(const char *name, const char *labels)
{
    int64_t v = -1;

    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_metrics; i++) {
        if (strcmp(metrics[i]->name, name) == 0 && strcmp(metrics[i]->labels, labels) == 0) {
            v = atomic_load(&metrics[i]->value);
        }
    }
    pthread_mutex_unlock(&lock);
    return v;
}

void fc_metrics_reset(void)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_metrics; i++) {
        free(metrics[i]->name);
        free(metrics[i]->labels);
        free(metrics[i]->help);
        free(metrics[i]);
    }
    free(metrics);
    metrics = NULL;
    n_metrics = 0;
    cap_metrics = 0;
    pthread_mutex_unlock(&lock);
}
