/*
 * The sending machinery (exporters/helper/sender.h) with the in-memory queue,
 * driven through its API. The peer is the unit's collaborator: an in-process
 * send() that answers from a script (an outcome per attempt, OK once the
 * script is over), records when each attempt began (CLOCK_MONOTONIC), the
 * order in which items reached it, and can hold attempts at a gate (up to
 * the attempt's timeout, as a real peer's timeout would end it).
 *
 * Expected values come from the Collector's exporterhelper rules as the
 * brief states them (backoff bounds, capacity in sizer units, partial
 * success estimate), worked out by hand from the inputs here. Waits are
 * checked for their lower bounds strictly and for upper bounds with a
 * generous slack: no performance claims.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "config/schema.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "exporters/helper/backoff.h"
#include "exporters/helper/sender.h"
#include "tests/unit/fc_test.h"

#define MS FC_NS_PER_MS
#define SLACK (250 * MS) /* upper bounds only: the machine is shared */

/* ---- the scripted peer ------------------------------------------------------------------ */

struct step {
    enum fc_send_outcome outcome;
    int64_t retry_after_ns;
    uint32_t rejected;
    const char *type;
    const char *message;
};

struct peer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct step steps[64];
    size_t n_steps, next;
    int64_t times[256]; /* when each attempt began */
    size_t n_attempts;
    uint64_t order[256]; /* ids of the items the peer accepted, in order */
    size_t n_order;
    bool gate; /* closed: attempts wait for it (or their timeout) */
    int in_send;
    int conns_new, conns_free;
    pthread_t thread[256];
};

static struct peer P;

static void peer_reset(void)
{
    pthread_condattr_t a;
    memset(&P, 0, sizeof(P));
    pthread_mutex_init(&P.mu, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&P.cv, &a);
    pthread_condattr_destroy(&a);
}

static void script(enum fc_send_outcome o, int64_t retry_after, uint32_t rejected, const char *type)
{
    P.steps[P.n_steps++] = (struct step){o, retry_after, rejected, type, "scripted answer"};
}

static void gate(bool closed)
{
    pthread_mutex_lock(&P.mu);
    P.gate = closed;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

static uint64_t item_id(const struct fc_send_item *it)
{
    uint64_t id;
    memcpy(&id, it->body, sizeof(id));
    return id;
}

static void *conn_new(void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&P.mu);
    P.conns_new++;
    pthread_mutex_unlock(&P.mu);
    return malloc(1);
}

static void conn_free(void *ctx, void *conn)
{
    (void)ctx;
    pthread_mutex_lock(&P.mu);
    P.conns_free++;
    pthread_mutex_unlock(&P.mu);
    free(conn);
}

static void peer_send(void *ctx, void *conn, const struct fc_send_item *it, int64_t timeout_ns,
                      struct fc_send_result *res)
{
    int64_t start = fc_now_mono_ns(), until = start + timeout_ns;
    struct step st = {FC_SEND_OK, 0, 0, "", ""};
    bool timed_out = false;

    (void)ctx;
    (void)conn;
    pthread_mutex_lock(&P.mu);
    if (P.n_attempts < 256) {
        P.thread[P.n_attempts] = pthread_self();
        P.times[P.n_attempts++] = start;
    }
    P.in_send++;
    pthread_cond_broadcast(&P.cv);
    while (P.gate && !timed_out) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        timed_out = pthread_cond_timedwait(&P.cv, &P.mu, &ts) != 0 && fc_now_mono_ns() >= until;
    }
    P.in_send--;
    if (timed_out) {
        st = (struct step){FC_SEND_RETRY, 0, 0, "timeout", "deadline exceeded"};
    } else if (P.next < P.n_steps) {
        st = P.steps[P.next++];
    }
    if (st.outcome == FC_SEND_OK && P.n_order < 256) {
        P.order[P.n_order++] = item_id(it);
    }
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    res->outcome = st.outcome;
    res->retry_after_ns = st.retry_after_ns;
    res->rejected_profiles = st.rejected;
    snprintf(res->error_type, sizeof(res->error_type), "%s", st.type);
    snprintf(res->message, sizeof(res->message), "%s", st.message);
}

static const struct fc_sender_ops ops = {conn_new, conn_free, peer_send};

/* Waits (up to 10 s) until the peer is inside n attempts at once. */
static void wait_in_send(int n)
{
    int64_t until = fc_now_mono_ns() + 10 * FC_NS_PER_SEC;
    pthread_mutex_lock(&P.mu);
    while (P.in_send < n && fc_now_mono_ns() < until) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        pthread_cond_timedwait(&P.cv, &P.mu, &ts);
    }
    assert_true(P.in_send >= n);
    pthread_mutex_unlock(&P.mu);
}

/* Waits (up to 10 s) until the peer accepted n items. */
static void wait_accepted(size_t n)
{
    int64_t until = fc_now_mono_ns() + 10 * FC_NS_PER_SEC;
    pthread_mutex_lock(&P.mu);
    while (P.n_order < n && fc_now_mono_ns() < until) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        pthread_cond_timedwait(&P.cv, &P.mu, &ts);
    }
    assert_int_equal(P.n_order, n);
    pthread_mutex_unlock(&P.mu);
}

/* ---- fixtures --------------------------------------------------------------------------- */

static struct fc_exporter E = {.id = "t"};

static struct fc_sender_config config(void)
{
    struct fc_sender_config c = {
        .timeout = 2 * FC_NS_PER_SEC,
        .retry_on_failure = {true, 20 * MS, 0.5, 1.5, 80 * MS, 0},
        .sending_queue = {true, 1, 10, FC_SIZER_REQUESTS, false, ""},
    };
    return c;
}

static struct fc_sender *sender(const struct fc_sender_config *c)
{
    struct fc_sender *s = NULL;
    struct fc_error err = {0};
    assert_int_equal(fc_sender_create(c, &E, &ops, NULL, &s, &err), FC_OK);
    assert_int_equal(fc_sender_start(s, &err), FC_OK);
    return s;
}

static struct fc_send_item *item(uint64_t id, uint64_t samples, size_t body_len)
{
    struct fc_send_item *it = fc_send_item_new("tenant-a", "/ingest?name=x", body_len);
    memset(it->body, 0, body_len);
    memcpy(it->body, &id, sizeof(id) < body_len ? sizeof(id) : body_len);
    it->samples = samples;
    it->profiles = 1;
    return it;
}

static int submit1(struct fc_sender *s, uint64_t id, uint64_t samples, struct fc_error *err)
{
    struct fc_send_item *it = item(id, samples, 8);
    return fc_sender_submit(s, &it, 1, err);
}

static int64_t metric(const char *name, const char *extra)
{
    char labels[256];
    snprintf(labels, sizeof(labels), "exporter=\"t\"%s%s", extra[0] ? "," : "", extra);
    return fc_metrics_value(name, labels);
}

static void finish(struct fc_sender *s)
{
    gate(false);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);
}

static int setup(void **state)
{
    (void)state;
    peer_reset();
    fc_metrics_reset();
    return 0;
}

/* ---- items and configuration ------------------------------------------------------------ */

static void test_item_layout(void **state)
{
    struct fc_send_item *it = fc_send_item_new("acme", "/ingest?name=app", 5);
    (void)state;
    assert_string_equal(it->tenant, "acme");
    assert_string_equal(it->target, "/ingest?name=app");
    assert_int_equal(it->body_len, 5);
    memcpy(it->body, "12345", 5); /* the body is writable and does not overlap the strings */
    assert_string_equal(it->tenant, "acme");
    assert_int_equal(it->seq, 0);
    fc_send_item_free(it);
    it = fc_send_item_new(NULL, NULL, 0);
    assert_string_equal(it->tenant, "");
    assert_string_equal(it->target, "");
    fc_send_item_free(it);
}

struct wrap {
    struct fc_sender_config s;
};

static const struct fc_field wrap_fields[] = {
    FC_SENDER_FIELDS(struct wrap, s),
    {NULL},
};

static int bind(const char *yaml, struct fc_sender_config *out, struct fc_diag *d)
{
    struct fc_arena *a = fc_arena_new(0);
    struct wrap w;
    struct fc_node *root;
    int rc;

    fc_diag_init(d);
    memset(&w, 0, sizeof(w));
    root = yaml != NULL ? fc_test_yaml(a, yaml, d) : NULL;
    rc = fc_schema_bind(a, wrap_fields, root, &w, "exporters.t", d);
    *out = w.s;
    out->sending_queue.storage = ""; /* the arena goes */
    fc_arena_free(a);
    return rc;
}

static void test_defaults_are_the_collectors(void **state)
{
    struct fc_sender_config c;
    struct fc_diag d;
    (void)state;

    assert_int_equal(bind(NULL, &c, &d), 0);
    fc_diag_release(&d);
    assert_int_equal(c.timeout, 5 * FC_NS_PER_SEC);
    assert_true(c.retry_on_failure.enabled);
    assert_int_equal(c.retry_on_failure.initial_interval, 5 * FC_NS_PER_SEC);
    assert_true(c.retry_on_failure.randomization_factor == 0.5);
    assert_true(c.retry_on_failure.multiplier == 1.5);
    assert_int_equal(c.retry_on_failure.max_interval, 30 * FC_NS_PER_SEC);
    assert_int_equal(c.retry_on_failure.max_elapsed_time, 300 * FC_NS_PER_SEC);
    assert_true(c.sending_queue.enabled);
    assert_int_equal(c.sending_queue.num_consumers, 10);
    assert_int_equal(c.sending_queue.queue_size, 1000);
    assert_int_equal(c.sending_queue.sizer, FC_SIZER_REQUESTS);
    assert_false(c.sending_queue.block_on_overflow);

    assert_int_equal(bind("sending_queue:\n  sizer: bytes\n  queue_size: 5\n", &c, &d), 0);
    fc_diag_release(&d);
    assert_int_equal(c.sending_queue.sizer, FC_SIZER_BYTES);
    assert_int_equal(c.sending_queue.queue_size, 5);
    assert_int_equal(bind("sending_queue:\n  sizer: samples\n", &c, &d), 0);
    fc_diag_release(&d);
    assert_int_equal(c.sending_queue.sizer, FC_SIZER_SAMPLES);
    /* The Collector's spelling is accepted (and counts samples, see test_sizer_items) */
    assert_int_equal(bind("sending_queue:\n  sizer: items\n", &c, &d), 0);
    fc_diag_release(&d);
    assert_int_not_equal(bind("sending_queue:\n  sizer: pounds\n", &c, &d), 0);
    assert_true(fc_test_diag_has(&d, "sizer"));
    fc_diag_release(&d);
}

static void expect_refused(struct fc_sender_config c, const char *key)
{
    struct fc_error err = {0};
    struct fc_sender *s = NULL;
    assert_int_equal(fc_sender_config_check(&c, &err), FC_ECONFIG);
    assert_non_null(strstr(err.msg, key));
    assert_int_equal(fc_sender_create(&c, &E, &ops, NULL, &s, &err), FC_ECONFIG);
    assert_null(s);
}

static void test_config_check(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    (void)state;

    assert_int_equal(fc_sender_config_check(&c, &err), FC_OK);
    c.sending_queue.num_consumers = 0;
    expect_refused(c, "sending_queue.num_consumers");
    c = config();
    c.sending_queue.queue_size = 0;
    expect_refused(c, "sending_queue.queue_size");
    c = config();
    c.retry_on_failure.multiplier = 0.9;
    expect_refused(c, "retry_on_failure.multiplier");
    c = config();
    c.retry_on_failure.randomization_factor = 1.5;
    expect_refused(c, "retry_on_failure.randomization_factor");
    c.retry_on_failure.randomization_factor = -0.1;
    expect_refused(c, "retry_on_failure.randomization_factor");
    c = config();
    c.retry_on_failure.initial_interval = -1;
    expect_refused(c, "retry_on_failure.initial_interval");
    c = config();
    c.retry_on_failure.max_interval = -1;
    expect_refused(c, "retry_on_failure.max_interval");
    c = config();
    c.retry_on_failure.max_elapsed_time = -1;
    expect_refused(c, "retry_on_failure.max_elapsed_time");
    c = config();
    c.timeout = 0;
    expect_refused(c, "timeout");
    c = config();
    c.sending_queue.enabled = false;
    c.sending_queue.storage = "/tmp/x";
    expect_refused(c, "sending_queue.storage");
    /* Retry disabled: its numbers do not matter. */
    c = config();
    c.retry_on_failure.enabled = false;
    c.retry_on_failure.multiplier = 0;
    assert_int_equal(fc_sender_config_check(&c, &err), FC_OK);
}

/* ---- the backoff schedule, deterministic ------------------------------------------------ */

static void test_backoff_bounds(void **state)
{
    struct fc_retry_config r = {true, 100 * MS, 0.5, 1.5, 400 * MS, 0};
    /* intervals 100, 150, 225, 337.5, 400, 400: each wait in [0.5 x, 1.5 x] */
    const double centre[] = {100, 150, 225, 337.5, 400, 400, 400};
    (void)state;

    for (uint64_t seed = 1; seed < 200; seed++) {
        struct fc_backoff b;
        fc_backoff_init(&b, &r, 0, seed * 7919);
        for (size_t i = 0; i < FC_ARRAY_LEN(centre); i++) {
            int64_t w = fc_backoff_next(&b, 0, 0);
            assert_true(w >= (int64_t)(centre[i] * 0.5 * MS) - 1);
            assert_true(w <= (int64_t)(centre[i] * 1.5 * MS) + 1);
        }
    }
    /* rf 0: exactly the interval */
    r.randomization_factor = 0;
    {
        struct fc_backoff b;
        fc_backoff_init(&b, &r, 0, 1);
        for (size_t i = 0; i < FC_ARRAY_LEN(centre); i++) {
            int64_t w = fc_backoff_next(&b, 0, 0);
            assert_true(w >= (int64_t)(centre[i] * MS) - 1 && w <= (int64_t)(centre[i] * MS) + 1);
        }
    }
}

static void test_backoff_stop_and_throttle(void **state)
{
    struct fc_retry_config r = {true, 100 * MS, 0, 2, 1000 * MS, 1000 * MS};
    struct fc_backoff b;
    (void)state;

    fc_backoff_init(&b, &r, 0, 1);
    /* elapsed 0 + 100 <= 1000: wait 100; a throttle asking 700 waits 700 */
    assert_int_equal(fc_backoff_next(&b, 0, 700 * MS), 700 * MS);
    /* elapsed 700 + 200 <= 1000: 200, and a smaller ask changes nothing */
    assert_int_equal(fc_backoff_next(&b, 700 * MS, 50 * MS), 200 * MS);
    /* elapsed 900 + 400 > 1000: no more retries, whatever the peer asked */
    assert_int_equal(fc_backoff_next(&b, 900 * MS, 10 * MS), -1);
    /* max_elapsed_time 0: for ever */
    r.max_elapsed_time = 0;
    fc_backoff_init(&b, &r, 0, 1);
    assert_int_equal(fc_backoff_next(&b, 1000 * FC_NS_PER_SEC, 0), 100 * MS);
}

/* ---- queue order and capacity ----------------------------------------------------------- */

static void test_fifo(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    s = sender(&c);
    gate(true);
    assert_int_equal(submit1(s, 100, 1, &err), FC_OK);
    wait_in_send(1); /* 100 is being sent: the rest wait in the queue */
    for (uint64_t i = 1; i <= 6; i++) {
        assert_int_equal(submit1(s, 100 + i, 1, &err), FC_OK);
    }
    gate(false);
    wait_accepted(7);
    for (size_t i = 0; i < 7; i++) {
        assert_int_equal(P.order[i], 100 + i);
    }
    finish(s);
    assert_int_equal(P.conns_new, 1); /* one consumer, one connection */
    assert_int_equal(P.conns_free, 1);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 7);
}

static void test_capacity_requests(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_send_item *two[2];
    struct fc_sender *s;
    (void)state;

    c.sending_queue.queue_size = 3;
    s = sender(&c);
    assert_int_equal(metric("flamecol_exporter_queue_capacity", ""), 3);
    gate(true);
    assert_int_equal(submit1(s, 1, 10, &err), FC_OK);
    wait_in_send(1);
    assert_int_equal(metric("flamecol_exporter_in_flight_requests", ""), 1);
    assert_int_equal(submit1(s, 2, 10, &err), FC_OK);
    /* two at once with one place left: neither goes in */
    two[0] = item(3, 10, 8);
    two[1] = item(4, 10, 8);
    assert_int_equal(fc_sender_submit(s, two, 2, &err), FC_EAGAIN);
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 2);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total", ""), 2);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_profile_samples_total", ""), 20);
    /* the last place: the item being sent still counts, so 3 of 3 */
    assert_int_equal(submit1(s, 5, 10, &err), FC_OK);
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 3);
    assert_int_equal(submit1(s, 6, 10, &err), FC_EAGAIN);
    assert_non_null(strstr(err.msg, "sending queue is full (3 of 3 requests)"));
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total", ""), 3);
    gate(false);
    wait_accepted(3);
    assert_int_equal(P.order[0], 1);
    assert_int_equal(P.order[1], 2);
    assert_int_equal(P.order[2], 5);
    finish(s);
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 0);
    assert_int_equal(metric("flamecol_exporter_in_flight_requests", ""), 0);
    assert_int_equal(metric("flamecol_exporter_sent_profile_samples_total", ""), 30);
}

static void samples_capacity(int sizer)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;

    c.sending_queue.queue_size = 100;
    c.sending_queue.sizer = sizer;
    s = sender(&c);
    gate(true);
    assert_int_equal(submit1(s, 1, 40, &err), FC_OK);
    wait_in_send(1);
    assert_int_equal(submit1(s, 2, 40, &err), FC_OK); /* 80 */
    assert_int_equal(submit1(s, 3, 30, &err), FC_EAGAIN);
    assert_non_null(strstr(err.msg, "(80 of 100 samples)"));
    assert_int_equal(submit1(s, 4, 20, &err), FC_OK); /* exactly 100 */
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 100);
    assert_int_equal(submit1(s, 5, 1, &err), FC_EAGAIN);
    /* bigger than the whole queue: never fits */
    assert_int_equal(submit1(s, 6, 101, &err), FC_ETOOBIG);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_profile_samples_total", ""), 132);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total", ""), 3);
    finish(s);
    assert_int_equal(P.n_order, 3);
}

static void test_capacity_samples(void **state)
{
    (void)state;
    samples_capacity(FC_SIZER_SAMPLES);
}

static void test_sizer_items(void **state)
{
    (void)state;
    samples_capacity(3); /* "items", the 4th choice of the schema's enum */
}

static void test_capacity_bytes(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_send_item *it;
    struct fc_sender *s;
    (void)state;

    c.sending_queue.queue_size = 100;
    c.sending_queue.sizer = FC_SIZER_BYTES;
    s = sender(&c);
    gate(true);
    it = item(1, 1000, 50);
    assert_int_equal(fc_sender_submit(s, &it, 1, &err), FC_OK);
    wait_in_send(1);
    it = item(2, 1, 51);
    assert_int_equal(fc_sender_submit(s, &it, 1, &err), FC_EAGAIN);
    it = item(3, 1, 50);
    assert_int_equal(fc_sender_submit(s, &it, 1, &err), FC_OK);
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 100);
    it = item(4, 1, 101);
    assert_int_equal(fc_sender_submit(s, &it, 1, &err), FC_ETOOBIG);
    finish(s);
    assert_int_equal(P.n_order, 2);
}

struct blocked {
    struct fc_sender *s;
    int rc;
    bool done;
    int64_t returned_at;
};

static void *submit_thread(void *arg)
{
    struct blocked *b = arg;
    struct fc_error err = {0};
    int rc = submit1(b->s, 2, 1, &err);
    pthread_mutex_lock(&P.mu);
    b->rc = rc;
    b->done = true;
    b->returned_at = fc_now_mono_ns();
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
    return NULL;
}

static bool blocked_done(struct blocked *b, int64_t within_ns)
{
    int64_t until = fc_now_mono_ns() + within_ns;
    bool done;
    pthread_mutex_lock(&P.mu);
    while (!b->done && fc_now_mono_ns() < until) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        pthread_cond_timedwait(&P.cv, &P.mu, &ts);
    }
    done = b->done;
    pthread_mutex_unlock(&P.mu);
    return done;
}

static void test_block_on_overflow(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct blocked b = {0};
    pthread_t t;
    (void)state;

    c.sending_queue.queue_size = 1;
    c.sending_queue.block_on_overflow = true;
    b.s = sender(&c);
    gate(true);
    assert_int_equal(submit1(b.s, 1, 1, &err), FC_OK);
    wait_in_send(1);
    pthread_create(&t, NULL, submit_thread, &b);
    assert_false(blocked_done(&b, 150 * MS)); /* full: it waits, it is not refused */
    gate(false);                              /* item 1 is sent: room for item 2 */
    assert_true(blocked_done(&b, 10 * FC_NS_PER_SEC));
    pthread_join(t, NULL);
    assert_int_equal(b.rc, FC_OK);
    wait_accepted(2);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total", ""), 0);
    finish(b.s);
}

static void test_block_on_overflow_until_stopping(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct blocked b = {0};
    int64_t deadline;
    pthread_t t;
    (void)state;

    c.sending_queue.queue_size = 1;
    c.sending_queue.block_on_overflow = true;
    b.s = sender(&c);
    gate(true);
    assert_int_equal(submit1(b.s, 1, 1, &err), FC_OK);
    wait_in_send(1);
    pthread_create(&t, NULL, submit_thread, &b);
    assert_false(blocked_done(&b, 50 * MS));
    deadline = fc_now_mono_ns() + 100 * MS;
    fc_sender_stopping(b.s, deadline);
    assert_true(blocked_done(&b, 10 * FC_NS_PER_SEC));
    pthread_join(t, NULL);
    assert_int_equal(b.rc, FC_EUNAVAIL); /* never room before the deadline */
    assert_true(b.returned_at >= deadline);
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total", ""), 1);
    /* after the deadline: refused at once */
    assert_int_equal(submit1(b.s, 3, 1, &err), FC_EUNAVAIL);
    finish(b.s);
}

/* ---- retries ---------------------------------------------------------------------------- */

/* Sends one item through a script of n RETRY answers then OK; returns the attempts' times. */
static void run_retries(struct fc_sender_config *c, size_t n_retry, int64_t retry_after)
{
    struct fc_error err = {0};
    struct fc_sender *s;

    for (size_t i = 0; i < n_retry; i++) {
        script(FC_SEND_RETRY, retry_after, 0, "http_503");
    }
    s = sender(c);
    assert_int_equal(submit1(s, 7, 3, &err), FC_OK);
    wait_accepted(1);
    finish(s);
    assert_int_equal(P.n_attempts, n_retry + 1);
    assert_int_equal(metric("flamecol_exporter_retries_total", ""), (int64_t)n_retry);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 1);
    assert_int_equal(metric("flamecol_exporter_sent_profile_samples_total", ""), 3);
}

static void test_retry_schedule_grows(void **state)
{
    struct fc_sender_config c = config();
    /* rf 0: waits are the intervals, 40, 80, 160, then 200 (max_interval) */
    const int64_t want[] = {40, 80, 160, 200, 200};
    (void)state;

    c.retry_on_failure = (struct fc_retry_config){true, 40 * MS, 0, 2, 200 * MS, 0};
    run_retries(&c, 5, 0);
    for (size_t i = 0; i < 5; i++) {
        int64_t w = P.times[i + 1] - P.times[i];
        assert_true(w >= want[i] * MS);
        assert_true(w <= want[i] * MS + SLACK);
    }
}

static void test_retry_schedule_jitter(void **state)
{
    struct fc_sender_config c = config();
    /* rf 0.5, x1.5 from 40 ms up to 100: intervals 40, 60, 90, 100, 100 */
    const int64_t centre[] = {40, 60, 90, 100, 100};
    (void)state;

    c.retry_on_failure = (struct fc_retry_config){true, 40 * MS, 0.5, 1.5, 100 * MS, 0};
    run_retries(&c, 5, 0);
    for (size_t i = 0; i < 5; i++) {
        int64_t w = P.times[i + 1] - P.times[i];
        assert_true(w >= centre[i] * MS / 2);
        assert_true(w <= centre[i] * MS * 3 / 2 + SLACK);
    }
}

static void test_retry_after_honoured(void **state)
{
    struct fc_sender_config c = config();
    (void)state;

    /* backoff would wait 10 ms; the peer asked for 300 ms */
    c.retry_on_failure = (struct fc_retry_config){true, 10 * MS, 0, 1.5, 20 * MS, 0};
    run_retries(&c, 2, 300 * MS);
    assert_true(P.times[1] - P.times[0] >= 300 * MS);
    assert_true(P.times[2] - P.times[1] >= 300 * MS);
}

static void test_permanent_not_retried(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    script(FC_SEND_PERMANENT, 0, 0, "http_400");
    s = sender(&c);
    assert_int_equal(submit1(s, 1, 9, &err), FC_OK); /* queued: the peer answers later */
    assert_int_equal(submit1(s, 2, 4, &err), FC_OK); /* and the next one goes on */
    wait_accepted(1);
    finish(s);
    assert_int_equal(P.n_attempts, 2);
    assert_int_equal(P.order[0], 2);
    assert_int_equal(metric("flamecol_exporter_retries_total", ""), 0);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"http_400\""), 1);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_profile_samples_total", "error_type=\"http_400\""),
        9);
    assert_int_equal(metric("flamecol_exporter_sent_profile_samples_total", ""), 4);
}

static void test_partial_success(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_send_item *it;
    struct fc_sender *s;
    (void)state;

    script(FC_SEND_OK, 0, 1, "");
    s = sender(&c);
    it = item(1, 100, 8);
    it->profiles = 4;
    assert_int_equal(fc_sender_submit(s, &it, 1, &err), FC_OK);
    wait_accepted(1);
    finish(s);
    assert_int_equal(P.n_attempts, 1); /* never retried */
    /* 1 of 4 profiles rejected: 100 * 1 / 4 = 25 samples failed, 75 sent */
    assert_int_equal(metric("flamecol_exporter_send_failed_profile_samples_total",
                            "error_type=\"partial_success\""),
                     25);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"partial_success\""),
        1);
    assert_int_equal(metric("flamecol_exporter_sent_profile_samples_total", ""), 75);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 1);
}

static void test_max_elapsed_time(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    /* waits of 30 ms, given up once elapsed + 30 ms would pass 150 ms */
    c.retry_on_failure = (struct fc_retry_config){true, 30 * MS, 0, 1, 30 * MS, 150 * MS};
    for (int i = 0; i < 60; i++) {
        script(FC_SEND_RETRY, 0, 0, "grpc_UNAVAILABLE");
    }
    s = sender(&c);
    assert_int_equal(submit1(s, 1, 5, &err), FC_OK);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC); /* drains: until given up */
    fc_sender_free(s);
    /* at most 1 + 150/30 attempts, all within 150 ms of the first */
    assert_true(P.n_attempts >= 2 && P.n_attempts <= 6);
    assert_true(P.times[P.n_attempts - 1] - P.times[0] <= 150 * MS + SLACK);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"grpc_UNAVAILABLE\""),
        1);
    assert_int_equal(metric("flamecol_exporter_send_failed_profile_samples_total",
                            "error_type=\"grpc_UNAVAILABLE\""),
                     5);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 0);
}

static void test_retry_disabled(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    c.retry_on_failure.enabled = false;
    script(FC_SEND_RETRY, 0, 0, "http_503");
    s = sender(&c);
    assert_int_equal(submit1(s, 1, 5, &err), FC_OK);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);
    assert_int_equal(P.n_attempts, 1);
    assert_int_equal(metric("flamecol_exporter_retries_total", ""), 0);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"http_503\""), 1);
}

/* ---- no queue: the caller's thread sends ------------------------------------------------ */

static void test_queue_disabled(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    c.sending_queue.enabled = false;
    c.retry_on_failure = (struct fc_retry_config){true, 10 * MS, 0, 1, 10 * MS, 50 * MS};
    script(FC_SEND_OK, 0, 0, "");
    script(FC_SEND_RETRY, 0, 0, "http_502");
    script(FC_SEND_OK, 0, 0, "");
    script(FC_SEND_PERMANENT, 0, 0, "http_413");
    for (int i = 0; i < 20; i++) {
        script(FC_SEND_RETRY, 0, 0, "http_503");
    }
    s = sender(&c);
    assert_int_equal(metric("flamecol_exporter_queue_capacity", ""), 0);
    assert_int_equal(submit1(s, 1, 2, &err), FC_OK);
    assert_int_equal(P.n_order, 1); /* sent before submit returned */
    assert_true(pthread_equal(P.thread[0], pthread_self()));
    assert_int_equal(submit1(s, 2, 2, &err), FC_OK); /* after one retry */
    assert_int_equal(P.n_attempts, 3);
    assert_int_equal(submit1(s, 3, 2, &err), FC_EPROTO);
    assert_non_null(strstr(err.msg, "scripted answer"));
    assert_non_null(strstr(err.msg, "http_413"));
    assert_int_equal(submit1(s, 4, 2, &err), FC_EUNAVAIL); /* retries exhausted */
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"http_503\""), 1);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 2);
    assert_int_equal(metric("flamecol_exporter_retries_total", ""), 1 + (int64_t)P.n_attempts - 5);
    assert_int_equal(P.conns_new, 1); /* one caller at a time: one connection, kept */
    fc_sender_stopping(s, fc_now_mono_ns());
    assert_int_equal(submit1(s, 5, 2, &err), FC_EUNAVAIL);
    fc_sender_shutdown(s, fc_now_mono_ns());
    fc_sender_free(s);
    assert_int_equal(P.conns_free, 1);
}

/* ---- shutdown --------------------------------------------------------------------------- */

static void test_shutdown_drains(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    c.sending_queue.num_consumers = 2;
    s = sender(&c);
    gate(true);
    for (uint64_t i = 0; i < 6; i++) {
        assert_int_equal(submit1(s, i, 1, &err), FC_OK);
    }
    wait_in_send(2);
    gate(false);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    assert_int_equal(P.n_order, 6); /* shutdown returned after the queue was empty */
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 6);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"shutdown\""), -1);
    assert_int_equal(submit1(s, 9, 1, &err), FC_EUNAVAIL);
    fc_sender_free(s);
    assert_int_equal(P.conns_new, 2);
    assert_int_equal(P.conns_free, 2);
}

static void test_shutdown_deadline_drops(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    int64_t deadline;
    (void)state;

    c.timeout = 400 * MS;
    s = sender(&c);
    gate(true); /* the peer never answers: attempts end at their timeout */
    for (uint64_t i = 0; i < 4; i++) {
        assert_int_equal(submit1(s, i, 10, &err), FC_OK);
    }
    wait_in_send(1);
    deadline = fc_now_mono_ns() + 100 * MS;
    fc_sender_shutdown(s, deadline);
    /* 1 being sent (given up at the deadline: its retry would come after it), 3 queued */
    assert_int_equal(
        metric("flamecol_exporter_send_failed_requests_total", "error_type=\"shutdown\""), 4);
    assert_int_equal(
        metric("flamecol_exporter_send_failed_profile_samples_total", "error_type=\"shutdown\""),
        40);
    assert_int_equal(metric("flamecol_exporter_sent_requests_total", ""), 0);
    assert_int_equal(metric("flamecol_exporter_queue_size", ""), 0);
    fc_sender_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_item_layout, setup),
        cmocka_unit_test_setup(test_defaults_are_the_collectors, setup),
        cmocka_unit_test_setup(test_config_check, setup),
        cmocka_unit_test_setup(test_backoff_bounds, setup),
        cmocka_unit_test_setup(test_backoff_stop_and_throttle, setup),
        cmocka_unit_test_setup(test_fifo, setup),
        cmocka_unit_test_setup(test_capacity_requests, setup),
        cmocka_unit_test_setup(test_capacity_samples, setup),
        cmocka_unit_test_setup(test_sizer_items, setup),
        cmocka_unit_test_setup(test_capacity_bytes, setup),
        cmocka_unit_test_setup(test_block_on_overflow, setup),
        cmocka_unit_test_setup(test_block_on_overflow_until_stopping, setup),
        cmocka_unit_test_setup(test_retry_schedule_grows, setup),
        cmocka_unit_test_setup(test_retry_schedule_jitter, setup),
        cmocka_unit_test_setup(test_retry_after_honoured, setup),
        cmocka_unit_test_setup(test_permanent_not_retried, setup),
        cmocka_unit_test_setup(test_partial_success, setup),
        cmocka_unit_test_setup(test_max_elapsed_time, setup),
        cmocka_unit_test_setup(test_retry_disabled, setup),
        cmocka_unit_test_setup(test_queue_disabled, setup),
        cmocka_unit_test_setup(test_shutdown_drains, setup),
        cmocka_unit_test_setup(test_shutdown_deadline_drops, setup),
    };
    /* A planted bug may make a wait endless (a full queue that never empties): fail, not hang. */
    alarm(120);
    return cmocka_run_group_tests_name("sender", tests, NULL, NULL);
}
