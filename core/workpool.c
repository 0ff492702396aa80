#include "core/workpool.h"

#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct fc_workpool {
    unsigned max_in_flight;
    _Atomic unsigned in_flight;
    _Atomic int64_t *in_flight_gauge;
    _Atomic int64_t *refused;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct fc_work *head, *tail; /* jobs not yet picked up */
    unsigned n_queued, n_threads, idle;
    pthread_t *threads;
    bool stopping;       /* under lock: workers exit once the queue is empty */
    _Atomic bool closed; /* no more admissions */
};

static void *worker(void *arg)
{
    struct fc_workpool *p = arg;

    pthread_mutex_lock(&p->lock);
    for (;;) {
        struct fc_work *w;
        while (p->head == NULL && !p->stopping) {
            p->idle++;
            pthread_cond_wait(&p->wake, &p->lock);
            p->idle--;
        }
        if (p->head == NULL) {
            break; /* stopping, and nothing left to run */
        }
        w = p->head;
        p->n_queued--;
        p->head = w->next;
        if (p->head == NULL) {
            p->tail = NULL;
        }
        pthread_mutex_unlock(&p->lock);
        w->fn(w);
        pthread_mutex_lock(&p->lock);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

_Atomic int64_t *fc_server_refused_counter(const char *transport, const char *endpoint,
                                           const char *reason)
{
    char labels[300];

    snprintf(labels, sizeof(labels), "transport=\"%s\",endpoint=\"%s\",reason=\"%s\"", transport,
             endpoint, reason);
    return fc_metrics_counter("flamecol_server_refused_requests_total", labels,
                              "Requests refused or connections cut by a listener before any "
                              "component saw them, by reason.");
}

struct fc_workpool *fc_workpool_new(const char *kind, const char *name, unsigned max_in_flight)
{
    struct fc_workpool *p = fc_xcalloc(1, sizeof(*p));
    char labels[300];

    p->max_in_flight = max_in_flight > 0 ? max_in_flight : 1;
    atomic_init(&p->in_flight, 0);
    snprintf(labels, sizeof(labels), "transport=\"%s\",endpoint=\"%s\"", kind, name);
    p->in_flight_gauge = fc_metrics_gauge("flamecol_server_in_flight_requests", labels,
                                          "Requests admitted and not yet answered.");
    p->refused = fc_server_refused_counter(kind, name, "overload");
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    p->threads = fc_xcalloc(p->max_in_flight, sizeof(*p->threads));
    return p;
}

void fc_workpool_stop(struct fc_workpool *p)
{
    if (p == NULL) {
        return;
    }
    atomic_store(&p->closed, true);
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = 0; i < p->n_threads; i++) {
        pthread_join(p->threads[i], NULL);
    }
    p->n_threads = 0;
}

void fc_workpool_free(struct fc_workpool *p)
{
    if (p == NULL) {
        return;
    }
    fc_workpool_stop(p);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->wake);
    free(p->threads);
    free(p);
}

bool fc_workpool_admit(struct fc_workpool *p)
{
    unsigned n = atomic_load(&p->in_flight);

    do {
        if (n >= p->max_in_flight || atomic_load(&p->closed)) {
            fc_metric_add(p->refused, 1);
            return false;
        }
    } while (!atomic_compare_exchange_weak(&p->in_flight, &n, n + 1));
    fc_metric_add(p->in_flight_gauge, 1);
    return true;
}

void fc_workpool_release(struct fc_workpool *p)
{
    atomic_fetch_sub(&p->in_flight, 1);
    fc_metric_add(p->in_flight_gauge, -1);
}

unsigned fc_workpool_in_flight(const struct fc_workpool *p)
{
    return atomic_load(&((struct fc_workpool *)p)->in_flight);
}

void fc_workpool_run(struct fc_workpool *p, struct fc_work *w)
{
    w->next = NULL;
    pthread_mutex_lock(&p->lock);
    if (p->tail != NULL) {
        p->tail->next = w;
    } else {
        p->head = w;
    }
    p->tail = w;
    p->n_queued++;
    /* Every queued job holds a slot, so one thread per slot means none waits for a thread. */
    if (p->n_queued > p->idle && p->n_threads < p->max_in_flight) {
        if (pthread_create(&p->threads[p->n_threads], NULL, worker, p) == 0) {
            p->n_threads++;
        } else if (p->n_threads == 0) {
            fc_log_error("workpool", "cannot start a worker thread");
        }
    } else {
        pthread_cond_signal(&p->wake);
    }
    pthread_mutex_unlock(&p->lock);
}
