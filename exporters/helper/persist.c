/*
 * The persistent sending queue: formats, replay, group commit and segment
 * deletion are described in persist.h.
 *
 * Locks, in the order they may be taken:
 *   append_mu  the active segment's writes and next_seq
 *   mu         segments, their records' states, the queue, totals, acks.log
 *   sync_mu    written/synced positions, the group commit's leader flag
 * A sync leader holds none of them during fdatasync. Rolling to a new
 * segment waits (append_mu and sync_mu held) until no leader is syncing, so
 * the fd a leader syncs is never closed under it.
 */
#include "exporters/helper/persist.h"

#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define LOG_INTERVAL_NS (10 * FC_NS_PER_SEC)
#ifndef IOV_MAX
#define IOV_MAX 1024 /* POSIX minimum; <limits.h> hides it without _XOPEN_SOURCE */
#endif

enum { ST_NONE, ST_DISPATCHED = FC_PERSIST_DISPATCHED, ST_DONE = FC_PERSIST_DONE };

struct rec {
    uint64_t seq;
    uint64_t off; /* of the header in the segment */
    uint64_t samples;
    uint64_t bytes; /* body */
    uint32_t len;   /* whole record */
    uint8_t state;  /* what acks.log says about it */
    bool unsynced;  /* written, its append not acknowledged yet */
};

struct seg {
    uint64_t first_seq; /* the name */
    int fd;             /* read and (the active one) written */
    uint64_t size;      /* append_mu for the active segment */
    struct rec *recs;   /* in seq order; mu */
    size_t n, cap, n_done;
};

struct qent {
    struct seg *seg;
    uint32_t idx;
    uint64_t seq;
};

struct fc_persist {
    char *dir;
    char component[128];
    uint64_t seg_size;
    int lock_fd, dir_fd, ack_fd;
    _Atomic int64_t *corrupt, *redelivered, *fsyncs;
    struct fc_log_limit log_io;

    pthread_mutex_t append_mu;
    uint64_t next_seq;

    pthread_mutex_t mu;
    struct seg **segs; /* oldest first */
    size_t n_segs, segs_cap;
    struct seg *active; /* appended to; changed with append_mu and mu held; may be NULL */
    struct qent *q;     /* ring of records to send, in seq order */
    size_t q_head, q_count, q_cap;
    uint64_t tot_requests, tot_samples, tot_bytes; /* not done */

    pthread_mutex_t sync_mu;
    pthread_cond_t sync_cv;
    bool syncing;         /* a leader is in fdatasync */
    int sync_fd;          /* the active segment's fd */
    uint64_t written_lsn; /* bytes appended since open, over all segments */
    uint64_t synced_lsn;  /* of which known durable */
    int sync_err;         /* sticky: a sync failed, the queue is broken */
};

/* ---- files ------------------------------------------------------------------------------ */

static void count_sync(struct fc_persist *p)
{
    fc_metric_add(p->fsyncs, 1);
}

static int sync_dir(struct fc_persist *p)
{
    count_sync(p);
    return fsync(p->dir_fd);
}

static int mkdir_p(const char *dir)
{
    char path[PATH_MAX];
    size_t n = strlen(dir);

    if (n == 0 || n >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(path, dir, n + 1);
    for (char *s = path + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            if (mkdir(path, 0700) != 0 && errno != EEXIST) {
                return -1;
            }
            *s = '/';
        }
    }
    return mkdir(path, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* Reads a whole file (malloc'd); NULL with errno on failure. */
static uint8_t *read_all(int fd, size_t *len)
{
    struct stat st;
    uint8_t *buf;
    size_t got = 0;

    if (fstat(fd, &st) != 0) {
        return NULL;
    }
    buf = fc_xmalloc(st.st_size > 0 ? (size_t)st.st_size : 1);
    while (got < (size_t)st.st_size) {
        ssize_t r = pread(fd, buf + got, (size_t)st.st_size - got, (off_t)got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break; /* shorter than fstat said: scan what there is */
        }
        got += (size_t)r;
    }
    *len = got;
    return buf;
}

/* One process per directory (the idea of storage/store.c's lock_dir). */
static int lock_dir(struct fc_persist *p, struct fc_error *err)
{
    char file[PATH_MAX], pid[32];
    int n;

    snprintf(file, sizeof(file), "%s/LOCK", p->dir);
    p->lock_fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (p->lock_fd < 0) {
        return fc_errorf(err, FC_EIO, "sending_queue.storage: cannot open %s: %s", file,
                         strerror(errno));
    }
    if (flock(p->lock_fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        n = (int)pread(p->lock_fd, pid, sizeof(pid) - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        if (e != EWOULDBLOCK) {
            return fc_errorf(err, FC_EIO, "sending_queue.storage: cannot lock %s: %s", file,
                             strerror(e));
        }
        return fc_errorf(err, FC_EIO,
                         "sending_queue.storage: %s is in use by another flamecol (pid %s): one "
                         "process per persistent queue directory",
                         p->dir, pid[0] ? pid : "unknown");
    }
    n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
    if (ftruncate(p->lock_fd, 0) != 0 || pwrite(p->lock_fd, pid, (size_t)n, 0) != n) {
        /* Only the message of a second process would lack the pid. */
    }
    return FC_OK;
}

static void seg_path(const struct fc_persist *p, uint64_t first, char *out, size_t cap)
{
    snprintf(out, cap, "%s/seg-%016llx.log", p->dir, (unsigned long long)first);
}

static void ack_write(struct fc_persist *p, uint64_t seq, int kind)
{
    uint8_t e[FC_PERSIST_ACK_SIZE];

    fc_persist_encode_ack(e, seq, kind);
    /* One small O_APPEND write: it lands whole or not at all on kill -9. */
    if (p->ack_fd < 0 || write(p->ack_fd, e, sizeof(e)) != (ssize_t)sizeof(e)) {
        fc_log_limited(&p->log_io, LOG_INTERVAL_NS, FC_LOG_ERROR, p->component,
                       "persistent queue %s: cannot append to acks.log: %s (records may be sent "
                       "twice after a restart)",
                       p->dir, strerror(errno));
    }
}

/* Rewrites acks.log with the entries of the remaining segments only. mu held. */
static void compact_acks(struct fc_persist *p)
{
    char tmp[PATH_MAX], final[PATH_MAX];
    uint8_t *buf;
    size_t n = 0, len = 0;
    int fd, nfd;
    bool ok;

    for (size_t i = 0; i < p->n_segs; i++) {
        n += p->segs[i]->n;
    }
    buf = fc_xmalloc(n * FC_PERSIST_ACK_SIZE + 1);
    for (size_t i = 0; i < p->n_segs; i++) {
        for (size_t j = 0; j < p->segs[i]->n; j++) {
            const struct rec *r = &p->segs[i]->recs[j];
            if (r->state != ST_NONE) {
                fc_persist_encode_ack(buf + len, r->seq, r->state);
                len += FC_PERSIST_ACK_SIZE;
            }
        }
    }
    snprintf(tmp, sizeof(tmp), "%s/acks.log.tmp", p->dir);
    snprintf(final, sizeof(final), "%s/acks.log", p->dir);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ok = fd >= 0 && (len == 0 || write(fd, buf, len) == (ssize_t)len);
    if (ok) {
        count_sync(p);
        ok = fsync(fd) == 0;
    }
    if (fd >= 0) {
        close(fd);
    }
    ok = ok && rename(tmp, final) == 0;
    free(buf);
    if (!ok) {
        fc_log_limited(&p->log_io, LOG_INTERVAL_NS, FC_LOG_ERROR, p->component,
                       "persistent queue %s: cannot rewrite acks.log: %s", p->dir, strerror(errno));
        unlink(tmp);
        if (p->ack_fd < 0) {
            p->ack_fd = open(final, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        }
        return;
    }
    (void)sync_dir(p);
    nfd = open(final, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (nfd < 0) {
        fc_log_limited(&p->log_io, LOG_INTERVAL_NS, FC_LOG_ERROR, p->component,
                       "persistent queue %s: cannot open acks.log: %s", p->dir, strerror(errno));
        return;
    }
    if (p->ack_fd >= 0) {
        close(p->ack_fd);
    }
    p->ack_fd = nfd;
}

static void seg_free(struct seg *s)
{
    if (s->fd >= 0) {
        close(s->fd);
    }
    free(s->recs);
    free(s);
}

/* Deletes s when every record in it is done and it is not appended to. mu held. */
static void maybe_delete(struct fc_persist *p, struct seg *s, bool compact)
{
    char path[PATH_MAX];
    size_t i;

    if (s == p->active || s->n_done < s->n) {
        return;
    }
    seg_path(p, s->first_seq, path, sizeof(path));
    if (unlink(path) != 0 && errno != ENOENT) {
        fc_log_limited(&p->log_io, LOG_INTERVAL_NS, FC_LOG_ERROR, p->component,
                       "persistent queue: cannot delete %s: %s", path, strerror(errno));
        return;
    }
    /* The segment goes first, then its acks: see persist.h. */
    (void)sync_dir(p);
    for (i = 0; i < p->n_segs && p->segs[i] != s; i++) {
    }
    if (i < p->n_segs) {
        memmove(&p->segs[i], &p->segs[i + 1], (p->n_segs - i - 1) * sizeof(*p->segs));
        p->n_segs--;
    }
    seg_free(s);
    if (compact) {
        compact_acks(p);
    }
}

static void seg_add_rec(struct seg *s, const struct rec *r)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->recs = fc_xrealloc(s->recs, s->cap * sizeof(*s->recs));
    }
    s->recs[s->n++] = *r;
}

static void segs_push(struct fc_persist *p, struct seg *s)
{
    if (p->n_segs == p->segs_cap) {
        p->segs_cap = p->segs_cap ? p->segs_cap * 2 : 8;
        p->segs = fc_xrealloc(p->segs, p->segs_cap * sizeof(*p->segs));
    }
    p->segs[p->n_segs++] = s;
}

/* Queues a record in seq order (appends finish their syncs in any order). mu held. */
static void queue_insert(struct fc_persist *p, struct seg *s, uint32_t idx)
{
    struct qent e = {s, idx, s->recs[idx].seq};
    size_t i;

    if (p->q_count == p->q_cap) {
        size_t cap = p->q_cap ? p->q_cap * 2 : 64;
        struct qent *q = fc_xcalloc(cap, sizeof(*q));
        for (i = 0; i < p->q_count; i++) {
            q[i] = p->q[(p->q_head + i) % p->q_cap];
        }
        free(p->q);
        p->q = q;
        p->q_cap = cap;
        p->q_head = 0;
    }
    i = p->q_count++;
    while (i > 0 && p->q[(p->q_head + i - 1) % p->q_cap].seq > e.seq) {
        p->q[(p->q_head + i) % p->q_cap] = p->q[(p->q_head + i - 1) % p->q_cap];
        i--;
    }
    p->q[(p->q_head + i) % p->q_cap] = e;
}

static void totals_add(struct fc_persist *p, const struct rec *r, int sign)
{
    p->tot_requests += (uint64_t)sign;
    p->tot_samples += (uint64_t)sign * r->samples;
    p->tot_bytes += (uint64_t)sign * r->bytes;
}

/* ---- open: replay ----------------------------------------------------------------------- */

struct ack {
    uint64_t seq;
    int kind;
};

struct acks {
    struct ack *a;
    size_t n, cap;
};

static void on_ack(void *arg, uint64_t seq, int kind)
{
    struct acks *as = arg;
    if (as->n == as->cap) {
        as->cap = as->cap ? as->cap * 2 : 256;
        as->a = fc_xrealloc(as->a, as->cap * sizeof(*as->a));
    }
    as->a[as->n++] = (struct ack){seq, kind};
}

static int ack_cmp(const void *x, const void *y)
{
    const struct ack *a = x, *b = y;
    return a->seq < b->seq ? -1 : a->seq > b->seq ? 1 : a->kind - b->kind;
}

/* The strongest ack of seq (done over dispatched), or ST_NONE. as is sorted. */
static int ack_state(const struct acks *as, uint64_t seq)
{
    size_t lo = 0, hi = as->n;
    int st = ST_NONE;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (as->a[mid].seq < seq) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (; lo < as->n && as->a[lo].seq == seq; lo++) {
        st = as->a[lo].kind > st ? as->a[lo].kind : st;
    }
    return st;
}

struct replay {
    struct fc_persist *p;
    struct seg *seg;
    const struct acks *acks;
    uint64_t last_seq; /* seqs only grow: anything else is damage */
    uint64_t out_of_order;
};

static void on_record(void *arg, const struct fc_persist_record *r)
{
    struct replay *rp = arg;
    struct rec rec = {0};

    if (r->seq <= rp->last_seq) {
        rp->out_of_order++;
        return;
    }
    rp->last_seq = r->seq;
    rec.seq = r->seq;
    rec.off = r->off;
    rec.len = r->len;
    rec.samples = r->samples;
    rec.bytes = r->body_len;
    rec.state = (uint8_t)ack_state(rp->acks, r->seq);
    seg_add_rec(rp->seg, &rec);
    if (rec.state == ST_DONE) {
        rp->seg->n_done++;
    }
}

static int name_cmp(const void *x, const void *y)
{
    uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

/* The first seqs of the segment files in dir, sorted. */
static uint64_t *list_segments(struct fc_persist *p, size_t *n)
{
    DIR *d = opendir(p->dir);
    uint64_t *v = NULL;
    size_t cap = 0;
    struct dirent *de;

    *n = 0;
    if (d == NULL) {
        return NULL;
    }
    while ((de = readdir(d)) != NULL) {
        unsigned long long first;
        char check[64];
        if (sscanf(de->d_name, "seg-%16llx.log", &first) != 1) {
            continue;
        }
        snprintf(check, sizeof(check), "seg-%016llx.log", first);
        if (strcmp(check, de->d_name) != 0) {
            continue; /* not a name we write */
        }
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            v = fc_xrealloc(v, cap * sizeof(*v));
        }
        v[(*n)++] = first;
    }
    closedir(d);
    if (*n > 0) {
        qsort(v, *n, sizeof(*v), name_cmp);
    }
    return v;
}

static int replay(struct fc_persist *p, struct fc_error *err)
{
    char path[PATH_MAX];
    struct acks acks = {0};
    struct replay rp = {.p = p, .acks = &acks};
    uint64_t ack_bad = 0, corrupt = 0, redelivered = 0, max_seq = 0, *firsts;
    size_t n_firsts, len;
    uint8_t *buf;
    int fd;

    snprintf(path, sizeof(path), "%s/acks.log", p->dir);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        buf = read_all(fd, &len);
        close(fd);
        if (buf != NULL) {
            fc_persist_scan_acks(buf, len, on_ack, &acks, &ack_bad);
            free(buf);
        }
    }
    if (acks.n > 0) {
        qsort(acks.a, acks.n, sizeof(*acks.a), ack_cmp);
        max_seq = acks.a[acks.n - 1].seq;
    }
    if (ack_bad > 0) {
        fc_log_warn(p->component,
                    "persistent queue %s: acks.log: skipped %llu damaged region(s) (records "
                    "may be sent again)",
                    p->dir, (unsigned long long)ack_bad);
    }

    firsts = list_segments(p, &n_firsts);
    for (size_t i = 0; i < n_firsts; i++) {
        struct seg *s = fc_xcalloc(1, sizeof(*s));
        uint64_t bad = 0;
        size_t end;

        s->first_seq = firsts[i];
        seg_path(p, s->first_seq, path, sizeof(path));
        s->fd = open(path, O_RDWR | O_CLOEXEC);
        if (s->fd < 0 || (buf = read_all(s->fd, &len)) == NULL) {
            int e = errno;
            seg_free(s);
            free(firsts);
            free(acks.a);
            return fc_errorf(err, FC_EIO, "sending_queue.storage: cannot read %s: %s", path,
                             strerror(e));
        }
        rp.seg = s;
        rp.out_of_order = 0;
        end = fc_persist_scan(buf, len, on_record, &rp, &bad);
        free(buf);
        bad += rp.out_of_order;
        s->size = len;
        if (bad > 0) {
            fc_log_warn(p->component,
                        "persistent queue: %s: skipped %llu damaged region(s) (%zu good records)",
                        path, (unsigned long long)bad, s->n);
            corrupt += bad;
        }
        if (i + 1 == n_firsts && end < len) {
            /* A torn tail of the last segment: appends resume after the last good record. */
            if (ftruncate(s->fd, (off_t)end) == 0) {
                s->size = end;
            }
        }
        if (s->first_seq > max_seq) {
            max_seq = s->first_seq; /* an empty segment's name is never reused */
        }
        segs_push(p, s);
    }
    free(firsts);
    free(acks.a);
    if (rp.last_seq > max_seq) {
        max_seq = rp.last_seq;
    }
    p->next_seq = max_seq + 1;
    fc_metric_add(p->corrupt, (int64_t)corrupt);

    for (size_t i = 0; i < p->n_segs; i++) {
        struct seg *s = p->segs[i];
        for (size_t j = 0; j < s->n; j++) {
            if (s->recs[j].state != ST_DONE) {
                redelivered += s->recs[j].state == ST_DISPATCHED;
                totals_add(p, &s->recs[j], 1);
                queue_insert(p, s, (uint32_t)j);
            }
        }
    }
    if (redelivered > 0) {
        fc_metric_add(p->redelivered, (int64_t)redelivered);
        fc_log_warn(p->component,
                    "persistent queue %s: %llu request(s) were being sent when flamecol stopped: "
                    "sending them again (the peer may get them twice)",
                    p->dir, (unsigned long long)redelivered);
    }
    if (p->n_segs > 0 && p->segs[p->n_segs - 1]->size < p->seg_size) {
        p->active = p->segs[p->n_segs - 1];
        p->sync_fd = p->active->fd;
    }
    for (size_t i = p->n_segs; i-- > 0;) {
        maybe_delete(p, p->segs[i], false);
    }
    compact_acks(p);
    return FC_OK;
}

int fc_persist_open(const struct fc_persist_options *o, struct fc_persist **out,
                    struct fc_error *err)
{
    struct fc_persist *p = fc_xcalloc(1, sizeof(*p));
    pthread_condattr_t a;
    int rc;

    *out = NULL;
    p->dir = fc_xstrdup(o->dir);
    snprintf(p->component, sizeof(p->component), "%s", o->component ? o->component : "persist");
    p->seg_size = o->segment_size > 0 ? o->segment_size : FC_PERSIST_SEGMENT_SIZE;
    p->corrupt = o->corrupt_records;
    p->redelivered = o->redelivered;
    p->fsyncs = o->fsyncs;
    p->lock_fd = p->dir_fd = p->ack_fd = p->sync_fd = -1;
    pthread_mutex_init(&p->append_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_mutex_init(&p->sync_mu, NULL);
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&p->sync_cv, &a);
    pthread_condattr_destroy(&a);

    if (mkdir_p(p->dir) != 0) {
        rc = fc_errorf(err, FC_EIO, "sending_queue.storage: cannot create %s: %s", p->dir,
                       strerror(errno));
        goto fail;
    }
    if ((rc = lock_dir(p, err)) != FC_OK) {
        goto fail;
    }
    p->dir_fd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (p->dir_fd < 0) {
        rc = fc_errorf(err, FC_EIO, "sending_queue.storage: cannot open %s: %s", p->dir,
                       strerror(errno));
        goto fail;
    }
    pthread_mutex_lock(&p->mu);
    rc = replay(p, err);
    pthread_mutex_unlock(&p->mu);
    if (rc != FC_OK) {
        goto fail;
    }
    *out = p;
    return FC_OK;
fail:
    fc_persist_close(p);
    return rc;
}

void fc_persist_close(struct fc_persist *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n_segs; i++) {
        seg_free(p->segs[i]);
    }
    free(p->segs);
    free(p->q);
    if (p->ack_fd >= 0) {
        close(p->ack_fd);
    }
    if (p->dir_fd >= 0) {
        close(p->dir_fd);
    }
    if (p->lock_fd >= 0) {
        close(p->lock_fd); /* releases the lock */
    }
    pthread_cond_destroy(&p->sync_cv);
    pthread_mutex_destroy(&p->sync_mu);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->append_mu);
    free(p->dir);
    free(p);
}

void fc_persist_totals(struct fc_persist *p, uint64_t *requests, uint64_t *samples, uint64_t *bytes)
{
    pthread_mutex_lock(&p->mu);
    *requests = p->tot_requests;
    *samples = p->tot_samples;
    *bytes = p->tot_bytes;
    pthread_mutex_unlock(&p->mu);
}

/* ---- append: write, then group commit --------------------------------------------------- */

static int io_code(int e)
{
    return e == ENOSPC || e == EDQUOT ? FC_EUNAVAIL : FC_EIO;
}

/*
 * A new active segment (append_mu held). The old one is synced first, so
 * synced_lsn can cover everything written before the roll.
 */
static int roll(struct fc_persist *p, struct fc_error *err)
{
    char path[PATH_MAX];
    struct seg *old = p->active, *s;
    int fd, rc = FC_OK;

    seg_path(p, p->next_seq, path, sizeof(path));
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return fc_errorf(err, io_code(errno), "cannot create %s: %s", path, strerror(errno));
    }
    pthread_mutex_lock(&p->sync_mu);
    while (p->syncing) {
        pthread_cond_wait(&p->sync_cv, &p->sync_mu);
    }
    if (old != NULL && p->written_lsn > p->synced_lsn) {
        count_sync(p);
        if (fdatasync(old->fd) != 0) {
            p->sync_err = errno;
            rc = fc_errorf(err, FC_EIO, "fdatasync of a segment: %s", strerror(errno));
        } else {
            p->synced_lsn = p->written_lsn;
        }
        pthread_cond_broadcast(&p->sync_cv);
    }
    if (rc == FC_OK && sync_dir(p) != 0) {
        rc = fc_errorf(err, FC_EIO, "fsync of %s: %s", p->dir, strerror(errno));
    }
    if (rc != FC_OK) {
        pthread_mutex_unlock(&p->sync_mu);
        close(fd);
        unlink(path);
        return rc;
    }
    s = fc_xcalloc(1, sizeof(*s));
    s->first_seq = p->next_seq;
    s->fd = fd;
    p->sync_fd = fd;
    pthread_mutex_unlock(&p->sync_mu);

    pthread_mutex_lock(&p->mu);
    segs_push(p, s);
    p->active = s;
    if (old != NULL) {
        maybe_delete(p, old, true);
    }
    pthread_mutex_unlock(&p->mu);
    return FC_OK;
}

/* Writes iov fully at off; false with errno on failure. */
static bool write_all(int fd, struct iovec *iov, int n, uint64_t off)
{
    while (n > 0) {
        ssize_t w = pwritev(fd, iov, n > IOV_MAX ? IOV_MAX : n, (off_t)off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            if (w == 0) {
                errno = EIO;
            }
            return false;
        }
        off += (uint64_t)w;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return true;
}

/* Returns once a sync covers byte `end` of the log: one leader syncs for everyone. */
static int wait_synced(struct fc_persist *p, uint64_t end)
{
    int rc = FC_OK;

    pthread_mutex_lock(&p->sync_mu);
    for (;;) {
        if (p->synced_lsn >= end) {
            break;
        }
        if (p->sync_err != 0) {
            rc = FC_EIO;
            break;
        }
        if (p->syncing) {
            pthread_cond_wait(&p->sync_cv, &p->sync_mu);
            continue;
        }
        {
            int fd = p->sync_fd, r, e;
            uint64_t target = p->written_lsn; /* everything written so far is in fd or synced */
            p->syncing = true;
            pthread_mutex_unlock(&p->sync_mu);
            count_sync(p);
            r = fdatasync(fd);
            e = errno;
            pthread_mutex_lock(&p->sync_mu);
            p->syncing = false;
            if (r == 0) {
                if (target > p->synced_lsn) {
                    p->synced_lsn = target;
                }
            } else {
                p->sync_err = e;
            }
            pthread_cond_broadcast(&p->sync_cv);
        }
    }
    pthread_mutex_unlock(&p->sync_mu);
    return rc;
}

int fc_persist_append(struct fc_persist *p, struct fc_send_item *const *items, size_t n,
                      struct fc_error *err)
{
    struct iovec *iov = fc_xcalloc(2 * n, sizeof(*iov));
    uint8_t *heads;
    size_t heads_len = 0, first_idx;
    uint64_t total = 0, end, start_off;
    struct seg *s;
    int rc = FC_OK;

    for (size_t i = 0; i < n; i++) {
        size_t tl = strlen(items[i]->tenant), gl = strlen(items[i]->target);
        uint64_t plen = (uint64_t)FC_PERSIST_META + tl + gl + items[i]->body_len;
        if (tl > UINT16_MAX || gl > UINT16_MAX || plen > FC_PERSIST_MAX_PAYLOAD) {
            free(iov);
            return fc_errorf(err, FC_ETOOBIG, "a request of %zu bytes cannot be a record",
                             items[i]->body_len);
        }
        total += FC_PERSIST_HEADER + plen;
        heads_len += FC_PERSIST_HEADER + FC_PERSIST_META + tl + gl;
    }
    heads = fc_xmalloc(heads_len);

    pthread_mutex_lock(&p->append_mu);
    pthread_mutex_lock(&p->sync_mu);
    rc = p->sync_err != 0 ? fc_errorf(err, FC_EIO, "a sync failed earlier (%s): restart flamecol",
                                      strerror(p->sync_err))
                          : FC_OK;
    pthread_mutex_unlock(&p->sync_mu);
    if (rc == FC_OK &&
        (p->active == NULL || (p->active->size > 0 && p->active->size + total > p->seg_size))) {
        rc = roll(p, err);
    }
    if (rc != FC_OK) {
        pthread_mutex_unlock(&p->append_mu);
        free(heads);
        free(iov);
        return rc;
    }
    s = p->active;
    start_off = s->size;
    {
        uint8_t *h = heads;
        for (size_t i = 0; i < n; i++) {
            const struct fc_send_item *it = items[i];
            size_t hl = fc_persist_encode_head(h, p->next_seq + i, it);
            iov[2 * i] = (struct iovec){h, hl};
            iov[2 * i + 1] = (struct iovec){it->body, it->body_len};
            h += hl;
        }
    }
    if (!write_all(s->fd, iov, (int)(2 * n), start_off)) {
        int e = errno;
        /* All or nothing: cut what this call wrote (a replay would skip a torn tail anyway). */
        if (ftruncate(s->fd, (off_t)start_off) != 0) {
            /* the next start truncates the torn tail */
        }
        p->next_seq += n; /* never reused: a failed truncation may have left them on disk */
        pthread_mutex_unlock(&p->append_mu);
        free(heads);
        free(iov);
        return fc_errorf(err, io_code(e), "cannot write to a segment: %s", strerror(e));
    }
    pthread_mutex_lock(&p->mu);
    first_idx = s->n;
    {
        uint64_t off = start_off;
        for (size_t i = 0; i < n; i++) {
            struct rec r = {0};
            r.seq = p->next_seq + i;
            r.off = off;
            r.len = (uint32_t)(FC_PERSIST_HEADER + FC_PERSIST_META + strlen(items[i]->tenant) +
                               strlen(items[i]->target) + items[i]->body_len);
            r.samples = items[i]->samples;
            r.bytes = items[i]->body_len;
            r.unsynced = true;
            seg_add_rec(s, &r);
            off += r.len;
        }
    }
    pthread_mutex_unlock(&p->mu);
    p->next_seq += n;
    s->size += total;
    pthread_mutex_lock(&p->sync_mu);
    p->written_lsn += total;
    end = p->written_lsn;
    pthread_mutex_unlock(&p->sync_mu);
    pthread_mutex_unlock(&p->append_mu);
    free(heads);
    free(iov);

    rc = wait_synced(p, end);

    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < n; i++) {
        struct rec *r = &s->recs[first_idx + i];
        r->unsynced = false;
        if (rc == FC_OK) {
            totals_add(p, r, 1);
            queue_insert(p, s, (uint32_t)(first_idx + i));
        } else {
            /* Refused to the client, who will send it again: never deliver this copy. */
            r->state = ST_DONE;
            ack_write(p, r->seq, ST_DONE);
            s->n_done++;
        }
    }
    if (rc != FC_OK) {
        maybe_delete(p, s, true);
    }
    pthread_mutex_unlock(&p->mu);
    if (rc != FC_OK) {
        return fc_errorf(err, FC_EIO, "fdatasync of a segment failed");
    }
    return FC_OK;
}

/* ---- consumers -------------------------------------------------------------------------- */

bool fc_persist_take(struct fc_persist *p, struct fc_persist_ref *ref)
{
    struct qent e;
    const struct rec *r;

    pthread_mutex_lock(&p->mu);
    if (p->q_count == 0) {
        pthread_mutex_unlock(&p->mu);
        return false;
    }
    e = p->q[p->q_head];
    p->q_head = (p->q_head + 1) % p->q_cap;
    p->q_count--;
    r = &e.seg->recs[e.idx];
    ref->seg = e.seg;
    ref->idx = e.idx;
    ref->seq = r->seq;
    ref->samples = r->samples;
    ref->bytes = r->bytes;
    pthread_mutex_unlock(&p->mu);
    return true;
}

/* Marks a record done (mu held). */
static void mark_done(struct fc_persist *p, struct seg *s, uint32_t idx)
{
    struct rec *r = &s->recs[idx];
    if (r->state == ST_DONE) {
        return;
    }
    r->state = ST_DONE;
    ack_write(p, r->seq, ST_DONE);
    s->n_done++;
    totals_add(p, r, -1);
    maybe_delete(p, s, true);
}

int fc_persist_load(struct fc_persist *p, const struct fc_persist_ref *ref,
                    struct fc_send_item **out, struct fc_error *err)
{
    struct seg *s = ref->seg;
    struct fc_persist_record pr;
    struct rec r;
    uint8_t *buf;
    size_t got = 0;

    pthread_mutex_lock(&p->mu);
    r = s->recs[ref->idx];
    s->recs[ref->idx].state = ST_DISPATCHED;
    ack_write(p, r.seq, ST_DISPATCHED);
    pthread_mutex_unlock(&p->mu);

    buf = fc_xmalloc(r.len);
    while (got < r.len) {
        ssize_t n = pread(s->fd, buf + got, r.len - got, (off_t)(r.off + got));
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            break;
        }
        got += (size_t)n;
    }
    if (got < r.len || fc_persist_parse(buf, r.len, &pr) != FC_OK || pr.seq != r.seq) {
        free(buf);
        fc_metric_add(p->corrupt, 1);
        pthread_mutex_lock(&p->mu);
        mark_done(p, s, ref->idx);
        pthread_mutex_unlock(&p->mu);
        return fc_errorf(err, FC_EIO, "record %llu: damaged on disk, dropped",
                         (unsigned long long)r.seq);
    }
    {
        char *tenant = fc_xstrndup(pr.tenant, pr.tenant_len);
        char *target = fc_xstrndup(pr.target, pr.target_len);
        struct fc_send_item *it = fc_send_item_new(tenant, target, pr.body_len);
        memcpy(it->body, pr.body, pr.body_len);
        it->samples = pr.samples;
        it->profiles = pr.profiles;
        it->seq = pr.seq;
        free(tenant);
        free(target);
        *out = it;
    }
    free(buf);
    return FC_OK;
}

void fc_persist_done(struct fc_persist *p, const struct fc_persist_ref *ref)
{
    pthread_mutex_lock(&p->mu);
    mark_done(p, ref->seg, ref->idx);
    pthread_mutex_unlock(&p->mu);
}
