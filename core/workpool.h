/*
 * Bounded in-flight work for one listener (an HTTP endpoint, the gRPC
 * server). A request takes a slot when it arrives (fc_workpool_admit) and
 * gives it back once answered (fc_workpool_release); with every slot taken
 * the listener refuses at once (429 / RESOURCE_EXHAUSTED with Retry-After)
 * instead of queueing, so an overload is answered, never waited out.
 *
 * Admitted work runs on the pool's threads (fc_workpool_run), so the threads
 * that read sockets never block on a pipeline. Threads are started as work
 * needs them, up to one per slot: a job never waits for a thread.
 */
#ifndef FC_WORKPOOL_H
#define FC_WORKPOOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct fc_workpool;

/* The retry delay a listener at max_in_flight asks for: overload clears fast. */
#define FC_OVERLOAD_RETRY_AFTER_NS 1000000000LL

/* A unit of work, embedded in the caller's request state (the caller owns it). */
struct fc_work {
    void (*fn)(struct fc_work *w);
    struct fc_work *next;
};

/* name labels the metrics (e.g. the endpoint); max_in_flight >= 1. */
struct fc_workpool *fc_workpool_new(const char *kind, const char *name, unsigned max_in_flight);
/*
 * Admits no more, runs what is queued, and joins the threads. Slots held by
 * requests still being answered may be released afterwards, until
 * fc_workpool_free() (which stops first when that was not done).
 */
void fc_workpool_stop(struct fc_workpool *p);
void fc_workpool_free(struct fc_workpool *p);

/* Takes a slot; false (and counted as refused) when all are taken or the pool is stopping. */
bool fc_workpool_admit(struct fc_workpool *p);
void fc_workpool_release(struct fc_workpool *p);
/* Runs w->fn(w) on a pool thread; the caller holds a slot. */
void fc_workpool_run(struct fc_workpool *p, struct fc_work *w);
unsigned fc_workpool_in_flight(const struct fc_workpool *p);

/*
 * flamecol_server_refused_requests_total{transport, endpoint, reason}: what a
 * listener refused or cut before any component saw it (reason "overload" is
 * the pool's own; "header_timeout", "body_timeout", "max_connections_per_client",
 * "too_large" are the transports').
 */
_Atomic int64_t *fc_server_refused_counter(const char *transport, const char *endpoint,
                                           const char *reason);

#endif
