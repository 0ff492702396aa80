#include "bench/bench_util.h"

#include "core/batch.h"
#include "core/timeutil.h"
#include "formats/otlp.h"
#include "formats/pprof.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

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
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#define OTLP_EXPORT_METHOD                                                                         \
    "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"

double bench_cpu_self(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

void bench_run_clients(void *(*fn)(void *), int n, uintptr_t arg_step, double seconds,
                       _Atomic int *stop, pid_t pid, double *wall, double *cpu)
{
    pthread_t threads[64];
    double c0;
    int64_t t0;

    n = n < 1 ? 1 : n > 64 ? 64 : n;
    atomic_store(stop, 0);
    c0 = bench_cpu_of(pid);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < n; i++) {
        pthread_create(&threads[i], NULL, fn, (void *)((uintptr_t)i * arg_step));
    }
    fc_sleep_ns((int64_t)(seconds * 1e9));
    atomic_store(stop, 1);
    for (int i = 0; i < n; i++) {
        pthread_join(threads[i], NULL);
    }
    *wall = (double)(fc_now_mono_ns() - t0) / 1e9;
    *cpu = bench_cpu_of(pid) - c0;
}

void bench_lat_push(int64_t **lat, size_t *n, size_t *cap, int64_t v)
{
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 4096;
        *lat = realloc(*lat, *cap * sizeof(int64_t));
        if (*lat == NULL) {
            exit(1);
        }
    }
    (*lat)[(*n)++] = v;
}

double bench_cpu_of(pid_t pid)
{
    char path[64], buf[4096];
    FILE *f;
    unsigned long ut = 0, st = 0;
    char *p;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return 0;
    }
    if (fgets(buf, sizeof(buf), f) == NULL) {
        fclose(f);
        return 0;
    }
    fclose(f);
    p = strrchr(buf, ')');
    /* Fields after ')': state ... utime(14) stime(15). */
    if (p == NULL ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) {
        return 0;
    }
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

long bench_peak_rss_kb(pid_t pid)
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
    if (f != NULL) {
        fclose(f);
    }
    return kb;
}

int bench_free_port(void)
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

int bench_connect(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
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

pid_t bench_start_collector(const char *bin, const char *yaml, int port)
{
    char cfg_path[] = "/tmp/flamecol-bench-config-XXXXXX";
    int fd = mkstemp(cfg_path);
    FILE *cfg = fdopen(fd, "w");
    pid_t pid;

    fputs(yaml, cfg);
    fclose(cfg);
    pid = fork();
    if (pid == 0) {
        execl(bin, bin, "--config", cfg_path, (char *)NULL);
        perror("exec");
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        int c = bench_connect(port);
        if (c >= 0) {
            close(c);
            break;
        }
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
    /* The collector has read its config; the file can go. */
    fc_sleep_ns(50 * FC_NS_PER_MS);
    unlink(cfg_path);
    return pid;
}

void bench_stop_collector(pid_t pid)
{
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

int bench_http_post(int fd, const char *path, const char *content_type, const uint8_t *body,
                    size_t len)
{
    char head[512];
    char resp[4096];
    int n = snprintf(head, sizeof(head),
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\n\r\n",
                     path, content_type, len);
    size_t got = 0;

    if (write(fd, head, (size_t)n) != n || write(fd, body, len) != (ssize_t)len) {
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, resp + got, sizeof(resp) - 1 - got);
        char *end;
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
        resp[got] = '\0';
        end = strstr(resp, "\r\n\r\n");
        if (end != NULL) {
            /* libmicrohttpd writes the header as "Content-Length". */
            char *cl = strstr(resp, "Content-Length:");
            long want = cl ? atol(cl + 15) : 0;
            if ((long)(got - (size_t)(end + 4 - resp)) >= want) {
                break;
            }
        }
    }
    return atoi(resp + 9);
}

size_t bench_load_corpus(const char *dir, uint8_t **data, size_t *len, size_t max)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;

    while (d != NULL && (e = readdir(d)) != NULL && n < max) {
        char path[1024];
        FILE *f;
        long size;
        size_t l = strlen(e->d_name);
        if (l < 7 || strcmp(e->d_name + l - 6, ".pb.gz") != 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = fopen(path, "rb");
        if (f == NULL) {
            continue;
        }
        fseek(f, 0, SEEK_END);
        size = ftell(f);
        fseek(f, 0, SEEK_SET);
        data[n] = malloc((size_t)size);
        len[n] = fread(data[n], 1, (size_t)size, f);
        fclose(f);
        n++;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

size_t bench_otlp_requests(const char *dir, struct bench_otlp_request *reqs, size_t max)
{
    return bench_otlp_requests_of(dir, reqs, max, "bench", NULL, 0);
}

size_t bench_otlp_requests_of(const char *dir, struct bench_otlp_request *reqs, size_t max,
                              const char *service, const char *pod, int64_t time_ns)
{
    uint8_t *files[64];
    size_t lens[64];
    size_t n = bench_load_corpus(dir, files, lens, max < 64 ? max : 64);
    size_t n_reqs = 0;

    for (size_t i = 0; i < n; i++) {
        struct fc_batch *b = fc_batch_new(0);
        struct fc_profile *p = NULL;
        struct fc_error err = {0};
        struct fc_buf out;
        if (fc_pprof_decode(b, files[i], lens[i], NULL, &p, &err) != FC_OK) {
            fprintf(stderr, "corpus: %s\n", err.msg);
            exit(1);
        }
        fc_profile_set_label(b, p, "service_name", service);
        if (pod != NULL) {
            fc_profile_set_label(b, p, "pod", pod);
        }
        if (time_ns != 0) {
            p->time_ns = time_ns;
        }
        fc_buf_init(&out, 0);
        fc_otlp_encode(b, &out, &err);
        reqs[n_reqs].data = fc_buf_detach(&out, &reqs[n_reqs].len);
        reqs[n_reqs].profiles = p->n_sample_types;
        reqs[n_reqs].samples = (uint64_t)p->n_samples * p->n_sample_types;
        n_reqs++;
        fc_batch_unref(b);
        free(files[i]);
    }
    if (n_reqs == 0) {
        fprintf(stderr, "no *.pb.gz in %s\n", dir);
        exit(1);
    }
    return n_reqs;
}

int bench_grpc_export(grpc_channel *ch, grpc_completion_queue *cq, const uint8_t *data, size_t len,
                      bool gzipped)
{
    grpc_slice method = grpc_slice_from_static_string(OTLP_EXPORT_METHOD);
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_seconds(30, GPR_TIMESPAN));
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method, NULL,
                                               deadline, NULL);
    grpc_slice body = grpc_slice_from_static_buffer(data, len);
    grpc_byte_buffer *send =
        gzipped ? grpc_raw_compressed_byte_buffer_create(&body, 1, GRPC_COMPRESS_GZIP)
                : grpc_raw_byte_buffer_create(&body, 1);
    grpc_byte_buffer *recv = NULL;
    grpc_metadata_array initial, trailing;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details;
    grpc_op ops[6];
    int tag;

    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    grpc_call_start_batch(call, ops, 6, &tag, NULL);
    grpc_completion_queue_pluck(cq, &tag, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_byte_buffer_destroy(send);
    if (recv != NULL) {
        grpc_byte_buffer_destroy(recv);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    return (int)status;
}

/* The sum of every series of `name` whose label text contains `labels` (may be ""). */
double bench_metric(int port, const char *name, const char *labels)
{
    static char buf[1 << 20];
    const char *req = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    int fd = bench_connect(port);
    size_t got = 0, nl = strlen(name);
    double sum = 0;

    if (fd < 0) {
        return -1;
    }
    if (write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        return -1;
    }
    for (;;) {
        ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);
        if (r <= 0) {
            break;
        }
        got += (size_t)r;
    }
    close(fd);
    buf[got] = '\0';
    for (char *line = buf; line != NULL && *line;) {
        char *next = strchr(line, '\n');
        if (next != NULL) {
            *next++ = '\0';
        }
        if (strncmp(line, name, nl) == 0 && (line[nl] == '{' || line[nl] == ' ')) {
            char *sp = strrchr(line, ' ');
            char *brace = strchr(line, '}');
            if (brace != NULL) {
                *brace = '\0'; /* the labels end here; the value is after it */
            }
            if (sp != NULL && (labels[0] == '\0' || strstr(line, labels) != NULL)) {
                sum += atof(sp + 1);
            }
        }
        line = next;
    }
    return sum;
}

/* ---- an HTTP sink: HTTP/1.1 keep-alive, every POST answered 200 with an empty response -- */

struct sink {
    int fd;
    _Atomic int64_t *requests, *bytes;
};

static void *sink_conn(void *arg)
{
    struct sink *sk = arg;
    int fd = sk->fd;
    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Type: application/x-protobuf\r\n"
                             "Content-Length: 0\r\n\r\n";
    char *buf = malloc(1 << 25);
    size_t have = 0;

    for (;;) {
        char *end;
        ssize_t r;
        size_t head, body = 0;
        buf[have] = '\0';
        while ((end = strstr(buf, "\r\n\r\n")) == NULL) {
            r = read(fd, buf + have, (1 << 25) - 1 - have);
            if (r <= 0) {
                goto out;
            }
            have += (size_t)r;
            buf[have] = '\0';
        }
        head = (size_t)(end - buf) + 4;
        for (char *line = buf; line < end; line = strstr(line, "\r\n") + 2) {
            if (strncasecmp(line, "Content-Length:", 15) == 0) {
                body = strtoul(line + 15, NULL, 10);
            }
        }
        while (have < head + body) {
            r = read(fd, buf + have, (1 << 25) - 1 - have);
            if (r <= 0) {
                goto out;
            }
            have += (size_t)r;
        }
        atomic_fetch_add(sk->requests, 1);
        atomic_fetch_add(sk->bytes, (int64_t)body);
        if (write(fd, ok, sizeof(ok) - 1) != (ssize_t)(sizeof(ok) - 1)) {
            goto out;
        }
        memmove(buf, buf + head + body, have - head - body);
        have -= head + body;
    }
out:
    free(buf);
    close(fd);
    free(sk);
    return NULL;
}

static void *sink_main(void *arg)
{
    struct sink *l = arg;
    int lfd = l->fd;

    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        pthread_t t;
        struct sink *c = malloc(sizeof(*c));
        if (fd < 0 || c == NULL) {
            free(c);
            return NULL;
        }
        *c = *l;
        c->fd = fd;
        pthread_create(&t, NULL, sink_conn, c);
        pthread_detach(t);
    }
}

int bench_start_http_sink(_Atomic int64_t *requests, _Atomic int64_t *bytes)
{
    struct sink *l = malloc(sizeof(*l));
    int port = bench_free_port();
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    pthread_t t;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(lfd, 64) != 0) {
        perror("sink");
        exit(1);
    }
    l->fd = lfd;
    l->requests = requests;
    l->bytes = bytes;
    pthread_create(&t, NULL, sink_main, l); /* lives as long as the process */
    pthread_detach(t);
    return port;
}

int bench_remove_dir(const char *dir)
{
    char cmd[4200];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "could not remove %s\n", dir);
        return -1;
    }
    return 0;
}
