/*
 * A tracer for the durability tests, loaded with LD_PRELOAD: it records, in
 * the order they happen, what a power loss would care about: the writes to
 * the store's data.mdb, lock.mdb and wal (its write-ahead log), the syncs of
 * those files (fsync,
 * fdatasync, sync_file_range, msync), the requests read from sockets and
 * the HTTP responses written to them. Not part of flamecol: only
 * tests/integration/test_durability.py uses it.
 *
 * Environment:
 *   FC_SYNC_TRACE     the file the events are appended to (no tracing without it)
 *   FC_SYNC_DELAY_MS  sleep this long before each fsync/fdatasync of data.mdb
 *                     (a slow disk: requests queue up behind the writer)
 *   FC_SYNC_HOLD      while this file exists, writes to data.mdb wait (before
 *                     writing anything): the commit under way, and every request
 *                     behind it, stays in flight until the process is killed
 *
 * One line per event: "<begin> <end> <kind> <fields>", where begin is a
 * sequence number taken before the call and end one taken after it returned
 * (one counter for the whole process, so the order of events across threads
 * is the order of the numbers: an event whose begin is above another's end
 * started after that one had finished). Kinds:
 *
 *   W <data|lock|wal> <fd> <dsync 0|1> <bytes> <markers>   a write (write, pwrite,
 *       writev, pwritev...); dsync = the fd was opened O_DSYNC/O_SYNC, so the
 *       write itself is synchronous; markers = the push ids ("FCDUR" and 7
 *       digits) found in the written bytes for the first time ("-" if none)
 *   S <data|lock|wal> <fd> <fsync|fdatasync|sync_file_range>   a sync of that file
 *   M - <bytes> <flags>   an msync (MS_SYNC only; the store's maps are data.mdb's)
 *   P data <fd>           a write to data.mdb starts waiting on FC_SYNC_HOLD
 *   R <fd> <marker>       a socket read carrying a push id (the request)
 *   H <fd> <status> <marker|->   a response ("HTTP/1.x NNN") written to a
 *       socket; begin is taken before the bytes are sent, and marker is the
 *       push id last read on that connection
 *
 * Markers are how a response is tied to the data it acknowledges: the test's
 * pushes each carry one unique function name FCDURnnnnnnn, which the store
 * keeps as plain text (its symbol table) and which the request carries too.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MARKER "FCDUR"
#define MARKER_DIGITS 7
#define MAX_ID 10000000
#define MAX_FD 65536
#define IDS_MAX 16384 /* a write group holds at most 256 requests: 2,048 ids */

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

static unsigned long seq_counter;
static int trace_fd = -2; /* -2: not opened yet; -1: no tracing */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned char seen[MAX_ID / 8]; /* markers already found in a data.mdb write */
static int last_marker[MAX_FD];        /* per socket: the push id last read, or 0 */

static unsigned long seq(void)
{
    return __atomic_add_fetch(&seq_counter, 1, __ATOMIC_SEQ_CST);
}

static ssize_t real_write(int fd, const void *buf, size_t n)
{
    static ssize_t (*fn)(int, const void *, size_t);
    if (fn == NULL) {
        fn = NEXT(write);
    }
    return fn(fd, buf, n);
}

static int tracing(void)
{
    int fd = __atomic_load_n(&trace_fd, __ATOMIC_ACQUIRE);
    if (fd == -2) {
        const char *path = getenv("FC_SYNC_TRACE");
        pthread_mutex_lock(&lock);
        if (trace_fd == -2) {
            int (*open_fn)(const char *, int, ...) = NEXT(open);
            int t =
                path != NULL ? open_fn(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
            __atomic_store_n(&trace_fd, t, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&lock);
        fd = trace_fd;
    }
    return fd >= 0;
}

/* One event line, written with one append. */
static void emit(const char *fmt, ...)
{
    char line[IDS_MAX + 256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (n > 0 && (size_t)n < sizeof(line)) {
        (void)real_write(trace_fd, line, (size_t)n);
    }
}

enum kind { OTHER, DATA, LOCK, WAL, SOCKET };

static enum kind classify(int fd)
{
    char link[64], path[PATH_MAX];
    ssize_t n;
    const char *base;

    if (fd < 0 || fd == trace_fd || !tracing()) {
        return OTHER;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0) {
        return OTHER;
    }
    path[n] = '\0';
    if (strncmp(path, "socket:", 7) == 0) {
        return SOCKET;
    }
    base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    return strcmp(base, "data.mdb") == 0   ? DATA
           : strcmp(base, "lock.mdb") == 0 ? LOCK
           : strcmp(base, "wal") == 0      ? WAL
                                           : OTHER;
}

static const char *kind_name(enum kind k)
{
    return k == DATA ? "data" : k == WAL ? "wal" : "lock";
}

/* The first marker id in [p, p + n), or 0; *next is where to look on. */
static int find_marker(const char *p, size_t n, const char **next)
{
    const char *end = p + n;
    while (p < end) {
        const char *m = memmem(p, (size_t)(end - p), MARKER, sizeof(MARKER) - 1);
        int id = 0, d;
        if (m == NULL) {
            break;
        }
        p = m + sizeof(MARKER) - 1;
        for (d = 0; d < MARKER_DIGITS && p < end && *p >= '0' && *p <= '9'; d++, p++) {
            id = id * 10 + (*p - '0');
        }
        if (d == MARKER_DIGITS && id > 0) {
            *next = p;
            return id;
        }
    }
    *next = end;
    return 0;
}

/* Appends to out (of size cap) the ids in the buffers not seen in a data write before. */
static void new_markers(const struct iovec *iov, int iovcnt, size_t len, char *out, size_t cap)
{
    size_t used = 0;
    int overflow = 0;

    out[0] = '\0';
    pthread_mutex_lock(&lock);
    for (int i = 0; i < iovcnt && len > 0; i++) {
        size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;
        const char *p = iov[i].iov_base, *end = p + n;
        len -= n;
        while (p < end) {
            int id = find_marker(p, (size_t)(end - p), &p);
            if (id == 0) {
                break;
            }
            if (seen[id / 8] & (1u << (id % 8))) {
                continue;
            }
            seen[id / 8] |= (unsigned char)(1u << (id % 8));
            if (used + 16 < cap) {
                used += (size_t)snprintf(out + used, cap - used, "%s%d", used ? "," : "", id);
            } else {
                overflow = 1; /* the test fails on it: an id it cannot place */
            }
        }
    }
    pthread_mutex_unlock(&lock);
    if (used == 0) {
        snprintf(out, cap, "-");
    } else if (overflow) {
        snprintf(out + used, cap - used, ",overflow");
    }
}

/* Whether the first len bytes of the buffers are all zeros (the log growing its file). */
static int all_zeros(const struct iovec *iov, int iovcnt, size_t len)
{
    for (int i = 0; i < iovcnt && len > 0; i++) {
        size_t n = iov[i].iov_len < len ? iov[i].iov_len : len;
        const unsigned char *p = iov[i].iov_base;
        for (size_t j = 0; j < n; j++) {
            if (p[j] != 0) {
                return 0;
            }
        }
        len -= n;
    }
    return 1;
}

static void trace_write(enum kind k, int fd, const struct iovec *iov, int iovcnt, ssize_t rc,
                        unsigned long b, unsigned long e)
{
    if (rc < 0) {
        return;
    }
    if (k == DATA || k == LOCK || k == WAL) {
        char ids[IDS_MAX];
        int fl = fcntl(fd, F_GETFL);
        new_markers(iov, iovcnt, (size_t)rc, ids, sizeof(ids));
        emit("%lu %lu W %s %d %d %zd %s %d\n", b, e, kind_name(k), fd,
             fl >= 0 && (fl & (O_DSYNC | O_SYNC)) != 0, rc, ids,
             k == WAL && all_zeros(iov, iovcnt, (size_t)rc));
    }
}

/* Called before a socket write: a response is recorded before any byte of it leaves. */
static void trace_response(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    int status = 0, m = 0;

    if (n < 12 || memcmp(p, "HTTP/1.", 7) != 0) {
        return;
    }
    for (int i = 9; i < 12; i++) {
        status = status * 10 + (p[i] - '0');
    }
    if (fd >= 0 && fd < MAX_FD) {
        m = __atomic_exchange_n(&last_marker[fd], 0, __ATOMIC_SEQ_CST);
    }
    if (m > 0) {
        emit("%lu 0 H %d %d %d\n", seq(), fd, status, m);
    } else {
        emit("%lu 0 H %d %d -\n", seq(), fd, status);
    }
}

static void trace_read(int fd, const void *buf, ssize_t rc)
{
    const char *next;
    int id;

    if (rc <= 0 || fd < 0 || fd >= MAX_FD) {
        return;
    }
    id = find_marker(buf, (size_t)rc, &next);
    if (id > 0) {
        __atomic_store_n(&last_marker[fd], id, __ATOMIC_SEQ_CST);
        emit("%lu 0 R %d %d\n", seq(), fd, id);
    }
}

static void forget(int fd)
{
    if (fd >= 0 && fd < MAX_FD) {
        __atomic_store_n(&last_marker[fd], 0, __ATOMIC_SEQ_CST);
    }
}

static void slow_disk(void)
{
    const char *ms = getenv("FC_SYNC_DELAY_MS");
    long v = ms != NULL ? strtol(ms, NULL, 10) : 0;
    if (v > 0) {
        struct timespec ts = {v / 1000, (v % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
}

static void hold(enum kind k, int fd)
{
    const char *path = getenv("FC_SYNC_HOLD");
    int announced = 0;

    if (k != DATA || path == NULL) {
        return;
    }
    while (access(path, F_OK) == 0) {
        struct timespec ts = {0, 1000000L};
        if (!announced) {
            emit("%lu 0 P data %d\n", seq(), fd);
            announced = 1;
        }
        nanosleep(&ts, NULL);
    }
}

/* ---- writes ------------------------------------------------------------------------------ */

#define WRITE_LIKE(call, fd, iov, iovcnt, sock_buf, sock_len)                                      \
    do {                                                                                           \
        enum kind k = classify(fd);                                                                \
        unsigned long b, e;                                                                        \
        ssize_t rc;                                                                                \
        int saved;                                                                                 \
        if (k == SOCKET) {                                                                         \
            trace_response(fd, sock_buf, sock_len);                                                \
        }                                                                                          \
        hold(k, fd);                                                                               \
        b = seq();                                                                                 \
        rc = call;                                                                                 \
        saved = errno;                                                                             \
        e = seq();                                                                                 \
        trace_write(k, fd, iov, iovcnt, rc, b, e);                                                 \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n)
{
    struct iovec v = {(void *)buf, n};
    WRITE_LIKE(real_write(fd, buf, n), fd, &v, 1, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    struct iovec v = {(void *)buf, n};
    WRITE_LIKE(NEXT(pwrite)(fd, buf, n, off), fd, &v, 1, buf, n);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    struct iovec v = {(void *)buf, n};
    WRITE_LIKE(NEXT(pwrite64)(fd, buf, n, off), fd, &v, 1, buf, n);
}

static const void *first_base(const struct iovec *iov, int n, size_t *len)
{
    for (int i = 0; i < n; i++) {
        if (iov[i].iov_len > 0) {
            *len = iov[i].iov_len;
            return iov[i].iov_base;
        }
    }
    *len = 0;
    return "";
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    size_t len;
    const void *p = first_base(iov, n, &len);
    WRITE_LIKE(NEXT(writev)(fd, iov, n), fd, iov, n, p, len);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    size_t len;
    const void *p = first_base(iov, n, &len);
    WRITE_LIKE(NEXT(pwritev)(fd, iov, n, off), fd, iov, n, p, len);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
    size_t len;
    const void *p = first_base(iov, n, &len);
    WRITE_LIKE(NEXT(pwritev64)(fd, iov, n, off), fd, iov, n, p, len);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    struct iovec v = {(void *)buf, n};
    WRITE_LIKE(NEXT(send)(fd, buf, n, flags), fd, &v, 1, buf, n);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *to,
               socklen_t tolen)
{
    struct iovec v = {(void *)buf, n};
    WRITE_LIKE(NEXT(sendto)(fd, buf, n, flags, to, tolen), fd, &v, 1, buf, n);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    size_t len;
    const void *p = first_base(msg->msg_iov, (int)msg->msg_iovlen, &len);
    WRITE_LIKE(NEXT(sendmsg)(fd, msg, flags), fd, msg->msg_iov, (int)msg->msg_iovlen, p, len);
}

/* ---- syncs ------------------------------------------------------------------------------- */

#define SYNC_LIKE(name, call, fd)                                                                  \
    do {                                                                                           \
        enum kind k = classify(fd);                                                                \
        unsigned long b, e;                                                                        \
        int rc, saved;                                                                             \
        if (k == DATA) {                                                                           \
            slow_disk();                                                                           \
        }                                                                                          \
        b = seq();                                                                                 \
        rc = call;                                                                                 \
        saved = errno;                                                                             \
        e = seq();                                                                                 \
        if ((k == DATA || k == LOCK || k == WAL) && rc == 0) {                                     \
            emit("%lu %lu S %s %d %s\n", b, e, kind_name(k), fd, name);                            \
        }                                                                                          \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    } while (0)

int fsync(int fd)
{
    SYNC_LIKE("fsync", NEXT(fsync)(fd), fd);
}

int fdatasync(int fd)
{
    SYNC_LIKE("fdatasync", NEXT(fdatasync)(fd), fd);
}

int sync_file_range(int fd, off_t off, off_t n, unsigned int flags)
{
    SYNC_LIKE("sync_file_range", NEXT(sync_file_range)(fd, off, n, flags), fd);
}

int msync(void *addr, size_t len, int flags)
{
    unsigned long b = seq(), e;
    int rc = NEXT(msync)(addr, len, flags), saved = errno;
    e = seq();
    if (rc == 0 && (flags & MS_SYNC) != 0 && tracing()) {
        emit("%lu %lu M - %zu %d\n", b, e, len, flags);
    }
    errno = saved;
    return rc;
}

/* ---- reads and connections --------------------------------------------------------------- */

#define READ_LIKE(call, fd, buf)                                                                   \
    do {                                                                                           \
        ssize_t rc = call;                                                                         \
        int saved = errno;                                                                         \
        if (rc > 0 && classify(fd) == SOCKET) {                                                    \
            trace_read(fd, buf, rc);                                                               \
        }                                                                                          \
        errno = saved;                                                                             \
        return rc;                                                                                 \
    } while (0)

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    READ_LIKE(NEXT(recv)(fd, buf, n, flags), fd, buf);
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *from, socklen_t *len)
{
    READ_LIKE(NEXT(recvfrom)(fd, buf, n, flags, from, len), fd, buf);
}

ssize_t read(int fd, void *buf, size_t n)
{
    READ_LIKE(NEXT(read)(fd, buf, n), fd, buf);
}

int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    int c = NEXT(accept)(fd, addr, len);
    forget(c);
    return c;
}

int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int c = NEXT(accept4)(fd, addr, len, flags);
    forget(c);
    return c;
}

int close(int fd)
{
    forget(fd);
    return NEXT(close)(fd);
}
