/*
 * pprof ingest throughput over HTTP, beside its floor measured in the same
 * run.
 *
 *   bench_ingest FLAMECOL_BIN CORPUS_DIR [seconds=10] [connections=8]
 *
 * Floor: in-process gunzip + protobuf decode into a batch of the same bytes
 * (the work no pipeline can avoid). Pipeline: the real flamecol binary,
 * `pprof` receiver -> `nop` exporter, driven by N keep-alive connections
 * posting the corpus round-robin as raw gzipped pprof (the Node.js SDK shape).
 * Printed: profiles/s, MB/s, collector CPU seconds per 1,000 profiles, peak
 * RSS, and the ratio of the collector's CPU per profile to the floor's.
 * Figures, not assertions: machines are shared and noisy.
 */
#include "core/batch.h"
#include "core/timeutil.h"
#include "formats/pprof.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct file {
    uint8_t *data;
    size_t len;
};

static struct file files[64];
static size_t n_files;
static int port;
static _Atomic int64_t requests_done;
static _Atomic int64_t bytes_sent;
static _Atomic int64_t failures;
static _Atomic int stop;

static void load_corpus(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d == NULL) {
        perror(dir);
        exit(2);
    }
    while ((e = readdir(d)) != NULL && n_files < 64) {
        char path[1024];
        FILE *f;
        long n;
        size_t len = strlen(e->d_name);
        if (len < 7 || strcmp(e->d_name + len - 6, ".pb.gz") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "rb");
        fseek(f, 0, SEEK_END);
        n = ftell(f);
        fseek(f, 0, SEEK_SET);
        files[n_files].data = malloc((size_t)n);
        files[n_files].len = fread(files[n_files].data, 1, (size_t)n, f);
        fclose(f);
        n_files++;
    }
    closedir(d);
}

static double cpu_seconds_self(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* utime + stime of a child, from /proc. */
static double cpu_seconds_of(pid_t pid)
{
    char path[64], buf[4096];
    FILE *f;
    unsigned long ut = 0, st = 0;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL || fgets(buf, sizeof(buf), f) == NULL) {
        if (f) {
            fclose(f);
        }
        return 0;
    }
    fclose(f);
    p = strrchr(buf, ')');
    /* Fields after ')': state(3) ... utime(14) stime(15). */
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static long peak_rss_kb(pid_t pid)
{
    char path[64], line[256];
    FILE *f;
    long kb = 0;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = atol(line + 6);
        }
    }
    if (f) {
        fclose(f);
    }
    return kb;
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int p;

    bind(fd, (struct sockaddr *)&a, sizeof(a));
    getsockname(fd, (struct sockaddr *)&a, &len);
    p = ntohs(a.sin_port);
    close(fd);
    return p;
}

static int connect_to(int p)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)p),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;

    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Sends one request and reads the whole answer; returns the status or -1. */
static int post(int fd, const struct file *f)
{
    char head[256];
    char resp[4096];
    int n = snprintf(head, sizeof(head),
                     "POST /ingest?name=bench&from=1700000000&until=1700000010 HTTP/1.1\r\n"
                     "Host: 127.0.0.1\r\nContent-Type: application/octet-stream\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     f->len);
    size_t got = 0;
    long content_length = -1;
    char *body;

    if (write(fd, head, (size_t)n) != n || write(fd, f->data, f->len) != (ssize_t)f->len) {
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, resp + got, sizeof(resp) - 1 - got);
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
        resp[got] = '\0';
        body = strstr(resp, "\r\n\r\n");
        if (body != NULL) {
            /* MHD writes the header as "Content-Length". */
            char *cl = strstr(resp, "Content-Length:");
            content_length = cl ? atol(cl + 15) : 0;
            if ((long)(got - (size_t)(body + 4 - resp)) >= content_length) {
                break;
            }
        }
    }
    return atoi(resp + 9);
}

static void *client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    int fd = connect_to(port);

    while (!atomic_load(&stop) && fd >= 0) {
        const struct file *f = &files[i++ % n_files];
        int status = post(fd, f);
        if (status != 200) {
            atomic_fetch_add(&failures, 1);
            close(fd);
            fd = connect_to(port);
            continue;
        }
        atomic_fetch_add(&requests_done, 1);
        atomic_fetch_add(&bytes_sent, (int64_t)f->len);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

static void floor_run(double seconds, double *profiles_per_cpu_s, double *mb_s)
{
    int64_t t0 = fc_now_mono_ns();
    double c0 = cpu_seconds_self();
    int64_t n = 0, bytes = 0;
    struct fc_pprof_limits lim = {.max_decompressed = 128 << 20};

    while (fc_now_mono_ns() - t0 < (int64_t)(seconds * 1e9)) {
        for (size_t i = 0; i < n_files; i++) {
            struct fc_batch *b = fc_batch_new(512u << 20);
            struct fc_error err = {0};
            if (fc_pprof_decode(b, files[i].data, files[i].len, &lim, NULL, &err) != FC_OK) {
                fprintf(stderr, "floor: %s\n", err.msg);
                exit(1);
            }
            fc_batch_unref(b);
            n++;
            bytes += (int64_t)files[i].len;
        }
    }
    *profiles_per_cpu_s = (double)n / (cpu_seconds_self() - c0);
    *mb_s = (double)bytes / 1e6 / ((double)(fc_now_mono_ns() - t0) / 1e9);
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 10;
    int conns = argc > 4 ? atoi(argv[4]) : 8;
    char cfg_path[] = "/tmp/flamecol-bench-XXXXXX";
    double floor_rate, floor_mb;
    pthread_t threads[64];
    pid_t pid;
    int fd;
    FILE *cfg;
    double c0, c1;
    int64_t t0, t1;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_ingest FLAMECOL_BIN CORPUS_DIR [seconds] [connections]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    load_corpus(argv[2]);
    if (n_files == 0) {
        fprintf(stderr, "no .pb.gz files in %s\n", argv[2]);
        return 2;
    }
    conns = conns < 1 ? 1 : conns > 64 ? 64 : conns;
    port = free_port();
    fd = mkstemp(cfg_path);
    cfg = fdopen(fd, "w");
    fprintf(cfg,
            "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
            "exporters:\n  nop:\n"
            "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
            "  pipelines:\n    profiles: {receivers: [pprof], exporters: [nop]}\n",
            port);
    fclose(cfg);
    pid = fork();
    if (pid == 0) {
        execl(argv[1], argv[1], "--config", cfg_path, (char *)NULL);
        perror("exec");
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        int c = connect_to(port);
        if (c >= 0) {
            close(c);
            break;
        }
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }

    printf("corpus: %zu files; %d connections; %.0f s per phase\n", n_files, conns, seconds);
    floor_run(seconds, &floor_rate, &floor_mb);
    printf("floor    (in-process gunzip + pprof decode, 1 thread): %8.0f profiles per CPU-second, "
           "%.1f MB/s\n",
           floor_rate, floor_mb);

    c0 = cpu_seconds_of(pid);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < conns; i++) {
        pthread_create(&threads[i], NULL, client, (void *)(uintptr_t)(i * 3));
    }
    fc_sleep_ns((int64_t)(seconds * 1e9));
    atomic_store(&stop, 1);
    for (int i = 0; i < conns; i++) {
        pthread_join(threads[i], NULL);
    }
    t1 = fc_now_mono_ns();
    c1 = cpu_seconds_of(pid);
    {
        double wall = (double)(t1 - t0) / 1e9;
        double n = (double)atomic_load(&requests_done);
        double cpu = c1 - c0;
        double per_cpu = n / cpu;
        printf(
            "pipeline (HTTP /ingest -> pprof receiver -> nop):      %8.0f profiles/s, %.1f MB/s, "
            "%.0f profiles per CPU-second\n",
            n / wall, (double)atomic_load(&bytes_sent) / 1e6 / wall, per_cpu);
        printf("collector CPU: %.3f s per 1,000 profiles; peak RSS %.1f MB; failed requests %lld\n",
               cpu / n * 1000, (double)peak_rss_kb(pid) / 1024, (long long)atomic_load(&failures));
        printf("ratio pipeline/floor (CPU per profile): %.2fx  (target: <= 2x)\n",
               floor_rate / per_cpu);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    unlink(cfg_path);
    return 0;
}
