/*
 * The persistent sending queue (exporters/helper/persist.h), on real files
 * in a mkdtemp directory: through the sender (sending_queue.storage) where
 * the behaviour is the sender's, through fc_persist_* where a test needs
 * small segments or damaged files. A crash is a forked child killed with
 * SIGKILL while its consumer is inside a send.
 *
 * fdatasync is interposed (defined here; the real one is the syscall) to
 * count the syncs of segment files independently of the queue's own
 * counter, and to make them slow on demand so that group commit shows.
 * Damaged files are made by hand from the record layout in persist.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/metrics.h"
#include "core/timeutil.h"
#include "exporters/helper/persist.h"
#include "exporters/helper/sender.h"
#include "tests/unit/fc_test.h"

#define MS FC_NS_PER_MS

/* ---- fdatasync, interposed -------------------------------------------------------------- */

static _Atomic int seg_syncs;     /* fdatasync calls on seg-*.log files */
static _Atomic int sync_delay_ms; /* a slow disk */
static _Atomic int sync_fail;     /* a broken disk: segment syncs fail with EIO */

int fdatasync(int fd)
{
    char link[64], path[4096];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n > 0) {
        const char *base;
        path[n] = '\0';
        base = strrchr(path, '/');
        if (base != NULL && strncmp(base + 1, "seg-", 4) == 0) {
            atomic_fetch_add(&seg_syncs, 1);
            if (atomic_load(&sync_fail)) {
                errno = EIO;
                return -1;
            }
        }
    }
    if (atomic_load(&sync_delay_ms) > 0) {
        fc_sleep_ns(atomic_load(&sync_delay_ms) * MS);
    }
    return (int)syscall(SYS_fdatasync, fd);
}

/* ---- a scripted peer: accepts, records the order, holds attempts at a gate ---------------- */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool gate;
    int in_send;
    uint64_t order[512];
    size_t n;
} P;

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

static void gate(bool closed)
{
    pthread_mutex_lock(&P.mu);
    P.gate = closed;
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

static uint64_t item_id(const struct fc_send_item *it)
{
    uint64_t id = 0;
    memcpy(&id, it->body, it->body_len < sizeof(id) ? it->body_len : sizeof(id));
    return id;
}

static void peer_send(void *ctx, void *conn, const struct fc_send_item *it, int64_t timeout_ns,
                      struct fc_send_result *res)
{
    int64_t until = fc_now_mono_ns() + timeout_ns;
    bool timed_out = false;

    (void)ctx;
    (void)conn;
    memset(res, 0, sizeof(*res));
    pthread_mutex_lock(&P.mu);
    P.in_send++;
    pthread_cond_broadcast(&P.cv);
    while (P.gate && !timed_out) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        timed_out = pthread_cond_timedwait(&P.cv, &P.mu, &ts) != 0 && fc_now_mono_ns() >= until;
    }
    P.in_send--;
    if (timed_out) {
        res->outcome = FC_SEND_RETRY;
        snprintf(res->error_type, sizeof(res->error_type), "timeout");
    } else if (P.n < 512) {
        P.order[P.n++] = item_id(it);
    }
    pthread_cond_broadcast(&P.cv);
    pthread_mutex_unlock(&P.mu);
}

static const struct fc_sender_ops ops = {NULL, NULL, peer_send};

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

static void wait_accepted(size_t n)
{
    int64_t until = fc_now_mono_ns() + 10 * FC_NS_PER_SEC;
    pthread_mutex_lock(&P.mu);
    while (P.n < n && fc_now_mono_ns() < until) {
        struct timespec ts = {(time_t)(until / FC_NS_PER_SEC), (long)(until % FC_NS_PER_SEC)};
        pthread_cond_timedwait(&P.cv, &P.mu, &ts);
    }
    assert_int_equal(P.n, n);
    pthread_mutex_unlock(&P.mu);
}

/* ---- fixtures --------------------------------------------------------------------------- */

static char dir[256];
static struct fc_exporter E = {.id = "pq"};

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "%s/fc-persist-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL) {
        return -1;
    }
    peer_reset();
    fc_metrics_reset();
    atomic_store(&sync_delay_ms, 0);
    return 0;
}

static int teardown(void **state)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char path[512];

    (void)state;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] != '.') {
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            unlink(path);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    rmdir(dir);
    return 0;
}

static struct fc_sender_config config(void)
{
    struct fc_sender_config c = {
        .timeout = 60 * FC_NS_PER_SEC,
        .retry_on_failure = {true, 20 * MS, 0, 1.5, 80 * MS, 0},
        .sending_queue = {true, 1, 100, FC_SIZER_REQUESTS, false, dir},
    };
    return c;
}

static struct fc_sender *sender(const struct fc_sender_config *c)
{
    struct fc_sender *s = NULL;
    struct fc_error err = {0};
    assert_int_equal(fc_sender_create(c, &E, &ops, NULL, &s, &err), FC_OK);
    if (fc_sender_start(s, &err) != FC_OK) {
        fail_msg("start: %s", err.msg);
    }
    return s;
}

static struct fc_send_item *item(uint64_t id, uint64_t samples, size_t body_len)
{
    struct fc_send_item *it = fc_send_item_new("tenant-a", "/ingest?name=app", body_len);
    memset(it->body, 0xab, body_len);
    memcpy(it->body, &id, sizeof(id) < body_len ? sizeof(id) : body_len);
    it->samples = samples;
    it->profiles = 2;
    return it;
}

static int submit1(struct fc_sender *s, uint64_t id, struct fc_error *err)
{
    struct fc_send_item *it = item(id, 10, 64);
    return fc_sender_submit(s, &it, 1, err);
}

static int64_t metric(const char *name)
{
    return fc_metrics_value(name, "exporter=\"pq\"");
}

static size_t count_files(const char *prefix)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t n = 0;
    while (d != NULL && (de = readdir(d)) != NULL) {
        n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

/* The path of the only (or the first) segment file. */
static void first_segment(char *out, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char best[64] = "";
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (strncmp(de->d_name, "seg-", 4) == 0 &&
            (best[0] == '\0' || strcmp(de->d_name, best) < 0)) {
            snprintf(best, sizeof(best), "%s", de->d_name);
        }
    }
    if (d != NULL) {
        closedir(d);
    }
    assert_true(best[0] != '\0');
    snprintf(out, cap, "%s/%s", dir, best);
}

static off_t file_size(const char *path)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    return st.st_size;
}

static _Atomic int64_t corrupt_c, redelivered_c, fsyncs_c;

static struct fc_persist *popen_dir(uint64_t segment_size)
{
    struct fc_persist_options o = {dir,        "test",         segment_size,
                                   &corrupt_c, &redelivered_c, &fsyncs_c};
    struct fc_persist *p = NULL;
    struct fc_error err = {0};
    atomic_store(&corrupt_c, 0);
    atomic_store(&redelivered_c, 0);
    atomic_store(&fsyncs_c, 0);
    if (fc_persist_open(&o, &p, &err) != FC_OK) {
        fail_msg("open: %s", err.msg);
    }
    return p;
}

static void append1(struct fc_persist *p, uint64_t id, size_t body_len)
{
    struct fc_send_item *it = item(id, 5, body_len);
    struct fc_error err = {0};
    assert_int_equal(fc_persist_append(p, &it, 1, &err), FC_OK);
    fc_send_item_free(it);
}

/* Takes and loads the next record; returns its id (the body's first 8 bytes), 0 when none. */
static uint64_t take_id(struct fc_persist *p, struct fc_persist_ref *ref)
{
    struct fc_send_item *it = NULL;
    struct fc_error err = {0};
    uint64_t id;
    if (!fc_persist_take(p, ref)) {
        return 0;
    }
    assert_int_equal(fc_persist_load(p, ref, &it, &err), FC_OK);
    assert_string_equal(it->tenant, "tenant-a");
    assert_string_equal(it->target, "/ingest?name=app");
    assert_int_equal(it->samples, 5);
    assert_int_equal(it->profiles, 2);
    assert_int_equal(it->seq, ref->seq);
    id = item_id(it);
    fc_send_item_free(it);
    return id;
}

/* ---- crash and replay ------------------------------------------------------------------- */

/*
 * A child submits ids 1..5 with the peer's gate closed, tells us when its
 * consumer is inside the send of id 1, and is killed there. What was acked
 * (all five) must come back, oldest first; id 1 was dispatched and not done,
 * so it counts as redelivered.
 */
static void test_kill_during_send_redelivers(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    int fds[2], status;
    char b;
    pid_t pid;
    (void)state;

    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(60); /* never outlives a parent that failed before killing it */
        close(fds[0]);
        gate(true);
        s = NULL;
        if (fc_sender_create(&c, &E, &ops, NULL, &s, &err) != FC_OK ||
            fc_sender_start(s, &err) != FC_OK) {
            _exit(2);
        }
        for (uint64_t id = 1; id <= 5; id++) {
            if (submit1(s, id, &err) != FC_OK) {
                _exit(3);
            }
            if (id == 1) {
                wait_in_send(1);
            }
        }
        (void)!write(fds[1], "s", 1); /* all five acknowledged, id 1 in flight */
        pause();
        _exit(4);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &b, 1), 1);
    kill(pid, SIGKILL);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    close(fds[0]);

    s = sender(&c);
    wait_accepted(5);
    for (size_t i = 0; i < 5; i++) {
        assert_int_equal(P.order[i], i + 1);
    }
    assert_int_equal(metric("flamecol_exporter_persistent_queue_redelivered_requests_total"), 1);
    assert_int_equal(metric("flamecol_exporter_persistent_queue_corrupt_records_total"), 0);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);

    /* all done now: a new start sends nothing again */
    fc_metrics_reset();
    peer_reset();
    s = sender(&c);
    assert_int_equal(metric("flamecol_exporter_queue_size"), 0);
    assert_int_equal(submit1(s, 6, &err), FC_OK);
    wait_accepted(1);
    assert_int_equal(P.order[0], 6);
    assert_int_equal(metric("flamecol_exporter_persistent_queue_redelivered_requests_total"), 0);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);
}

/* Undone records survive a plain stop (shutdown at once, peer down): none lost, none counted
 * as failed, the in-memory queue's "shutdown" drop does not apply. */
static void test_shutdown_keeps_records(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    c.timeout = 200 * MS;
    s = sender(&c);
    gate(true);
    for (uint64_t id = 1; id <= 4; id++) {
        assert_int_equal(submit1(s, id, &err), FC_OK);
    }
    wait_in_send(1);
    assert_int_equal(metric("flamecol_exporter_queue_size"), 4);
    fc_sender_shutdown(s, fc_now_mono_ns() + 50 * MS);
    fc_sender_free(s);
    assert_int_equal(fc_metrics_value("flamecol_exporter_send_failed_requests_total",
                                      "exporter=\"pq\",error_type=\"shutdown\""),
                     -1);

    fc_metrics_reset();
    peer_reset();
    gate(true);
    s = sender(&c);
    assert_int_equal(metric("flamecol_exporter_queue_size"), 4); /* from the disk */
    gate(false);
    wait_accepted(4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(P.order[i], i + 1);
    }
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    assert_int_equal(metric("flamecol_exporter_queue_size"), 0);
    fc_sender_free(s);
}

static void test_fifo_and_capacity(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    c.sending_queue.queue_size = 4;
    s = sender(&c);
    gate(true);
    assert_int_equal(submit1(s, 1, &err), FC_OK);
    wait_in_send(1);
    for (uint64_t id = 2; id <= 4; id++) {
        assert_int_equal(submit1(s, id, &err), FC_OK);
    }
    /* 4 on disk and not done, one of them being sent: full */
    assert_int_equal(submit1(s, 5, &err), FC_EAGAIN);
    assert_non_null(strstr(err.msg, "sending queue is full (4 of 4 requests)"));
    assert_int_equal(metric("flamecol_exporter_enqueue_failed_requests_total"), 1);
    gate(false);
    wait_accepted(4);
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(P.order[i], i + 1);
    }
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);
}

static void test_submit_is_synced_before_ok(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    int before;
    (void)state;

    s = sender(&c);
    gate(true);
    for (uint64_t id = 1; id <= 3; id++) {
        before = atomic_load(&seg_syncs);
        assert_int_equal(submit1(s, id, &err), FC_OK);
        /* acknowledged: a sync of the segment happened before the answer */
        assert_true(atomic_load(&seg_syncs) > before);
    }
    assert_true(metric("flamecol_exporter_persistent_queue_fsyncs_total") >= 3);
    gate(false);
    wait_accepted(3);
    fc_sender_shutdown(s, fc_now_mono_ns() + 10 * FC_NS_PER_SEC);
    fc_sender_free(s);
}

static void test_second_process_refused(void **state)
{
    struct fc_persist *p = popen_dir(0), *q = NULL;
    struct fc_persist_options o = {dir, "test", 0, NULL, NULL, NULL};
    struct fc_error err = {0};
    char pid[32];
    (void)state;

    /* a second open file description conflicts like a second process would */
    assert_int_equal(fc_persist_open(&o, &q, &err), FC_EIO);
    assert_null(q);
    assert_non_null(strstr(err.msg, dir));
    snprintf(pid, sizeof(pid), "pid %ld", (long)getpid());
    assert_non_null(strstr(err.msg, pid));
    fc_persist_close(p);
    assert_int_equal(fc_persist_open(&o, &q, &err), FC_OK);
    fc_persist_close(q);
}

static void test_creates_missing_dirs(void **state)
{
    char sub[300];
    struct fc_persist_options o = {sub, "test", 0, NULL, NULL, NULL};
    struct fc_persist *p = NULL;
    struct fc_error err = {0};
    struct stat st;
    (void)state;

    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    assert_int_equal(fc_persist_open(&o, &p, &err), FC_OK);
    assert_int_equal(stat(sub, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    fc_persist_close(p);
    {
        char f[400];
        snprintf(f, sizeof(f), "%s/LOCK", sub);
        unlink(f);
        snprintf(f, sizeof(f), "%s/acks.log", sub);
        unlink(f);
        rmdir(sub);
        snprintf(f, sizeof(f), "%s/a", dir);
        rmdir(f);
    }
}

/* ---- damage ----------------------------------------------------------------------------- */

/* Bytes of one record of item(): header, meta, tenant, target, body. */
static size_t record_len(size_t body_len)
{
    return FC_PERSIST_HEADER + FC_PERSIST_META + strlen("tenant-a") + strlen("/ingest?name=app") +
           body_len;
}

static void test_torn_tail_and_flipped_byte(void **state)
{
    struct fc_persist *p = popen_dir(0);
    struct fc_persist_ref ref;
    size_t rl = record_len(100);
    char seg[512];
    int fd;
    uint8_t byte;
    (void)state;

    for (uint64_t id = 1; id <= 4; id++) {
        append1(p, id, 100);
    }
    fc_persist_close(p); /* nothing taken: all four are queued on disk */
    first_segment(seg, sizeof(seg));
    assert_int_equal(file_size(seg), (off_t)(4 * rl));

    /* a flipped bit in the body of record 2, and record 4 cut in the middle */
    fd = open(seg, O_RDWR);
    assert_true(fd >= 0);
    assert_int_equal(pread(fd, &byte, 1, (off_t)(rl + rl - 10)), 1);
    byte ^= 0x10;
    assert_int_equal(pwrite(fd, &byte, 1, (off_t)(rl + rl - 10)), 1);
    assert_int_equal(ftruncate(fd, (off_t)(3 * rl + rl / 2)), 0);
    close(fd);

    p = popen_dir(0);
    assert_int_equal(atomic_load(&corrupt_c), 2);      /* two damaged regions */
    assert_int_equal(file_size(seg), (off_t)(3 * rl)); /* the torn tail is cut */
    assert_int_equal(take_id(p, &ref), 1);
    assert_int_equal(take_id(p, &ref), 3);
    assert_int_equal(take_id(p, &ref), 0);
    append1(p, 5, 100); /* appended after record 3 */
    fc_persist_close(p);
    assert_int_equal(file_size(seg), (off_t)(4 * rl));

    p = popen_dir(0);
    assert_int_equal(atomic_load(&corrupt_c), 1); /* record 2 is still there, still skipped */
    /* 1 and 3 were dispatched, never done: redelivered */
    assert_int_equal(atomic_load(&redelivered_c), 2);
    assert_int_equal(take_id(p, &ref), 1);
    assert_int_equal(take_id(p, &ref), 3);
    assert_int_equal(take_id(p, &ref), 5);
    assert_int_equal(take_id(p, &ref), 0);
    fc_persist_close(p);
}

static void test_damaged_acks_only_redeliver(void **state)
{
    struct fc_persist *p = popen_dir(0);
    struct fc_persist_ref ref;
    char path[512];
    int fd;
    (void)state;

    for (uint64_t id = 1; id <= 3; id++) {
        append1(p, id, 16);
    }
    assert_int_equal(take_id(p, &ref), 1);
    fc_persist_done(p, &ref);
    assert_int_equal(take_id(p, &ref), 2);
    fc_persist_done(p, &ref);
    fc_persist_close(p);
    /* acks.log: dispatched 1, done 1, dispatched 2, done 2; tear the last entry */
    snprintf(path, sizeof(path), "%s/acks.log", dir);
    assert_int_equal(file_size(path), 4 * FC_PERSIST_ACK_SIZE);
    fd = open(path, O_RDWR);
    assert_int_equal(ftruncate(fd, 4 * FC_PERSIST_ACK_SIZE - 5), 0);
    close(fd);
    p = popen_dir(0);
    /* 2 lost its done: delivered again (a duplicate, never a loss), then 3 */
    assert_int_equal(take_id(p, &ref), 2);
    assert_int_equal(take_id(p, &ref), 3);
    assert_int_equal(take_id(p, &ref), 0);
    assert_int_equal(atomic_load(&redelivered_c), 1);
    fc_persist_close(p);
}

/* ---- segments ---------------------------------------------------------------------------- */

static void test_segments_roll_and_go(void **state)
{
    struct fc_persist *p;
    struct fc_persist_ref ref;
    size_t rl = record_len(100);
    char path[512];
    uint64_t last_seq = 0;
    (void)state;

    /* two records per segment */
    p = popen_dir(2 * rl);
    for (uint64_t id = 1; id <= 9; id++) {
        append1(p, id, 100);
    }
    assert_int_equal(count_files("seg-"), 5);
    for (uint64_t id = 1; id <= 4; id++) {
        assert_int_equal(take_id(p, &ref), id);
        fc_persist_done(p, &ref);
    }
    /* the first two segments are all done */
    assert_int_equal(count_files("seg-"), 3);
    /* acks.log keeps the entries of the remaining segments only: none are acked yet */
    snprintf(path, sizeof(path), "%s/acks.log", dir);
    assert_int_equal(file_size(path), 0);
    for (uint64_t id = 5; id <= 9; id++) {
        assert_int_equal(take_id(p, &ref), id);
        fc_persist_done(p, &ref);
        last_seq = ref.seq;
    }
    /* the segment being appended to stays */
    assert_int_equal(count_files("seg-"), 1);
    assert_int_equal(file_size(path), 2 * FC_PERSIST_ACK_SIZE); /* 9 dispatched, done */
    fc_persist_close(p);

    p = popen_dir(2 * rl);
    assert_int_equal(take_id(p, &ref), 0);
    append1(p, 10, 100);
    assert_int_equal(take_id(p, &ref), 10);
    assert_true(ref.seq > last_seq); /* seqs never go back */
    fc_persist_done(p, &ref);
    fc_persist_close(p);
    assert_int_equal(count_files("seg-"), 1);
}

struct appender {
    struct fc_persist *p;
    uint64_t base;
};

static void *append_thread(void *arg)
{
    struct appender *a = arg;
    for (uint64_t i = 0; i < 10; i++) {
        struct fc_send_item *it = item(a->base + i, 5, 32);
        struct fc_error err = {0};
        if (fc_persist_append(a->p, &it, 1, &err) != FC_OK) {
            abort();
        }
        fc_send_item_free(it);
    }
    return NULL;
}

static void test_group_commit(void **state)
{
    struct fc_persist *p = popen_dir(0);
    struct appender a[8];
    pthread_t t[8];
    struct fc_persist_ref ref;
    bool seen[8][10] = {{false}};
    uint64_t prev = 0;
    (void)state;

    atomic_store(&sync_delay_ms, 20); /* a slow disk: writers queue up behind a sync */
    for (int i = 0; i < 8; i++) {
        a[i] = (struct appender){p, (uint64_t)(i + 1) * 100};
        pthread_create(&t[i], NULL, append_thread, &a[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(t[i], NULL);
    }
    atomic_store(&sync_delay_ms, 0);
    /* 80 acknowledged appends, fewer syncs: they were shared */
    assert_true(atomic_load(&fsyncs_c) >= 1);
    assert_true(atomic_load(&fsyncs_c) < 80);
    for (int n = 0; n < 80; n++) {
        uint64_t id = take_id(p, &ref);
        assert_true(ref.seq > prev); /* in seq order */
        prev = ref.seq;
        assert_true(id >= 100 && id / 100 <= 8 && id % 100 < 10);
        assert_false(seen[id / 100 - 1][id % 100]);
        seen[id / 100 - 1][id % 100] = true;
    }
    assert_int_equal(take_id(p, &ref), 0);
    fc_persist_close(p);
}

/*
 * A disk that cannot sync: the request is refused as retryable (503 /
 * UNAVAILABLE at the receiver), never as a permanent error a client drops.
 */
static void test_failed_sync_is_retryable(void **state)
{
    struct fc_sender_config c = config();
    struct fc_error err = {0};
    struct fc_sender *s;
    (void)state;

    s = sender(&c);
    atomic_store(&sync_fail, 1);
    assert_int_equal(submit1(s, 1, &err), FC_EUNAVAIL);
    assert_true(fc_err_retryable(FC_EUNAVAIL));
    atomic_store(&sync_fail, 0);
    fc_sender_shutdown(s, fc_now_mono_ns() + 2 * FC_NS_PER_SEC);
    fc_sender_free(s);
}

static void count_record(void *arg, const struct fc_persist_record *r)
{
    (void)r;
    (*(int *)arg)++;
}

/*
 * A client's payload may hold the bytes of a whole valid record. When the
 * record around it is torn (a crash mid-write) or fails its checksum, the
 * scanner must not resynchronise inside that payload and deliver the forged
 * record (its own tenant, its own target).
 */
static void test_no_record_found_inside_a_damaged_one(void **state)
{
    struct fc_send_item *forged = fc_send_item_new("evil", "/x", 8);
    uint8_t inner[256];
    size_t inner_len;
    struct fc_send_item *outer;
    uint8_t buf[1024];
    size_t head, total;
    uint64_t corrupt;
    int n;

    (void)state;
    memset(forged->body, 'f', 8);
    inner_len = fc_persist_encode_head(inner, 7, forged);
    memcpy(inner + inner_len, forged->body, 8);
    inner_len += 8;
    /* The forged record alone is valid: the scanner would deliver it. */
    n = 0;
    corrupt = 0;
    fc_persist_scan(inner, inner_len, count_record, &n, &corrupt);
    assert_int_equal(n, 1);

    outer = fc_send_item_new("tenant-a", "", inner_len + 16);
    memset(outer->body, 0, inner_len + 16);
    memcpy(outer->body + 8, inner, inner_len);
    head = fc_persist_encode_head(buf, 9, outer);
    memcpy(buf + head, outer->body, outer->body_len);
    total = head + outer->body_len;

    /* Torn: the last byte never reached the disk. */
    n = 0;
    corrupt = 0;
    assert_int_equal(fc_persist_scan(buf, total - 1, count_record, &n, &corrupt), 0);
    assert_int_equal(n, 0);
    assert_int_equal(corrupt, 1);

    /* Whole, but a byte after the embedded record flipped: its checksum fails. */
    buf[total - 1] ^= 0x5a;
    n = 0;
    corrupt = 0;
    fc_persist_scan(buf, total, count_record, &n, &corrupt);
    assert_int_equal(n, 0);
    assert_int_equal(corrupt, 1);
    fc_send_item_free(forged);
    fc_send_item_free(outer);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_kill_during_send_redelivers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shutdown_keeps_records, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fifo_and_capacity, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_is_synced_before_ok, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_process_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_creates_missing_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_torn_tail_and_flipped_byte, setup, teardown),
        cmocka_unit_test_setup_teardown(test_damaged_acks_only_redeliver, setup, teardown),
        cmocka_unit_test_setup_teardown(test_segments_roll_and_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_group_commit, setup, teardown),
        cmocka_unit_test(test_no_record_found_inside_a_damaged_one),
        cmocka_unit_test_setup_teardown(test_failed_sync_is_retryable, setup, teardown),
    };
    /* A planted bug may make a wait endless (a full queue that never empties): fail, not hang. */
    alarm(120);
    return cmocka_run_group_tests_name("persist_queue", tests, NULL, NULL);
}
