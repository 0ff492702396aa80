/*
 * A fault injector for tests, loaded with LD_PRELOAD: while the file named
 * by FC_ENOSPC_CONTROL exists, every write, pwrite, writev, pwritev,
 * fsync, fdatasync of a file under FC_ENOSPC_DIR fails with ENOSPC, as on
 * a full disk, and so does every msync. Remove the file and they succeed
 * again. Not part of flamecol: only tests/integration/test_store_limits.py
 * uses it.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

static int fault_on(void)
{
    const char *control = getenv("FC_ENOSPC_CONTROL");
    return control != NULL && access(control, F_OK) == 0;
}

/* Whether fd is a file under FC_ENOSPC_DIR and the fault is on. */
static int faulty(int fd)
{
    const char *dir = getenv("FC_ENOSPC_DIR");
    char link[64], path[PATH_MAX];
    ssize_t n;

    if (dir == NULL || fd < 0 || !fault_on()) {
        return 0;
    }
    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, path, sizeof(path) - 1);
    if (n <= 0) {
        return 0;
    }
    path[n] = '\0';
    return strncmp(path, dir, strlen(dir)) == 0;
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

#define FAIL_IF_FAULTY(fd)                                                                         \
    do {                                                                                           \
        if (faulty(fd)) {                                                                          \
            errno = ENOSPC;                                                                        \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

ssize_t write(int fd, const void *buf, size_t n)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(write)(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(pwrite)(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(pwrite64)(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(writev)(fd, iov, n);
}

ssize_t pwritev(int fd, const struct iovec *iov, int n, off_t off)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(pwritev)(fd, iov, n, off);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int n, off_t off)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(pwritev64)(fd, iov, n, off);
}

int fsync(int fd)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(fsync)(fd);
}

int fdatasync(int fd)
{
    FAIL_IF_FAULTY(fd);
    return NEXT(fdatasync)(fd);
}

int msync(void *addr, size_t len, int flags)
{
    if (getenv("FC_ENOSPC_DIR") != NULL && fault_on()) {
        errno = ENOSPC;
        return -1;
    }
    return NEXT(msync)(addr, len, flags);
}
