/*
 * What TLS costs the collector: /ingest (pprof receiver) and OTLP gRPC
 * requests per collector CPU-second with TLS beside plaintext, in one run
 * of one collector (a plaintext and a TLS listener of each kind, both into
 * `nop`), keep-alive connections throughout (libcurl reuses its connection;
 * one gRPC channel per phase).
 *
 *   bench_tls FLAMECOL_BIN CORPUS_DIR [seconds=5] [clients=4]
 *
 * Certificates (P-256 CA and server) are made with `openssl` in a temporary
 * directory. Printed per phase: requests/s, requests per collector CPU-second,
 * and the TLS/plaintext ratio of CPU per request (target: at most 1.3x).
 * Figures, not assertions.
 */
#include "bench/bench_util.h"
#include "core/timeutil.h"

#include <curl/curl.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_FILES 64

static uint8_t *files[MAX_FILES];
static size_t lens[MAX_FILES], n_files;
static struct bench_otlp_request reqs[MAX_FILES];
static size_t n_reqs;
static _Atomic int64_t done, failures;
static _Atomic int stop;
static char dir[64];
static char url[128];
static grpc_channel *channel;

static size_t discard(char *p, size_t size, size_t n, void *u)
{
    (void)p;
    (void)u;
    return size * n;
}

static void *http_client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    CURL *c = curl_easy_init();
    char ca[128];
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/octet-stream");

    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    while (!atomic_load(&stop)) {
        size_t k = i++ % n_files;
        long status = 0;
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, files[k]);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)lens[k]);
        if (curl_easy_perform(c) != CURLE_OK ||
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status != 200) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        atomic_fetch_add(&done, 1);
    }
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return NULL;
}

static void *grpc_client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_pluck(NULL);

    while (!atomic_load(&stop)) {
        const struct bench_otlp_request *r = &reqs[i++ % n_reqs];
        if (bench_grpc_export(channel, cq, r->data, r->len, false) != GRPC_STATUS_OK) {
            atomic_fetch_add(&failures, 1);
            continue;
        }
        atomic_fetch_add(&done, 1);
    }
    grpc_completion_queue_shutdown(cq);
    grpc_completion_queue_destroy(cq);
    return NULL;
}

static char *read_text(const char *name)
{
    char path[128];
    FILE *f;
    long n;
    char *s;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    f = fopen(path, "rb");
    if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) <= 0) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    rewind(f);
    s = calloc(1, (size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) {
        exit(1);
    }
    fclose(f);
    return s;
}

static grpc_channel *open_channel(int port, bool tls)
{
    char target[64];
    grpc_channel_credentials *creds;
    grpc_channel *ch;

    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    if (tls) {
        char *ca = read_text("ca.crt");
        creds = grpc_ssl_credentials_create(ca, NULL, NULL, NULL);
        free(ca);
    } else {
        creds = grpc_insecure_credentials_create();
    }
    ch = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    return ch;
}

/* Requests per collector CPU-second of one phase. */
static double phase(const char *name, void *(*fn)(void *), int n, double seconds, pid_t pid)
{
    double cpu, wall;

    atomic_store(&done, 0);
    atomic_store(&failures, 0);
    bench_run_clients(fn, n, 5, seconds, &stop, pid, &wall, &cpu);
    printf("%-16s %7.0f req/s %7.0f req per collector CPU-s %6.1f us CPU/req | failed %lld\n", name,
           (double)done / wall, (double)done / cpu, cpu / (double)done * 1e6,
           (long long)atomic_load(&failures));
    return (double)done / cpu;
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    int clients = argc > 4 ? atoi(argv[4]) : 4;
    int http_plain = bench_free_port(), http_tls = bench_free_port();
    int grpc_plain = bench_free_port(), grpc_tls = bench_free_port();
    char yaml[4096], cmd[1024], tls[256];
    double a, b;
    pid_t pid;

    if (argc < 3) {
        fprintf(stderr, "usage: bench_tls FLAMECOL_BIN CORPUS_DIR [seconds] [clients]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    clients = clients < 1 ? 1 : clients > 64 ? 64 : clients;
    n_files = bench_load_corpus(argv[2], files, lens, MAX_FILES);
    n_reqs = bench_otlp_requests(argv[2], reqs, MAX_FILES);
    snprintf(dir, sizeof(dir), "/tmp/flamecol-bench-tls.XXXXXX");
    if (mkdtemp(dir) == NULL) {
        return 1;
    }
    snprintf(cmd, sizeof(cmd),
             "(cd %s && E='-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes' && "
             "openssl req -x509 $E -keyout ca.key -out ca.crt -days 2 -subj /CN=bench-ca && "
             "openssl req $E -keyout s.key -out s.csr -subj /CN=localhost && "
             "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
             "openssl x509 -req -in s.csr -CA ca.crt -CAkey ca.key -set_serial 1 -days 2 "
             "-extfile san.ext -out s.crt) 2>/dev/null",
             dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "openssl failed\n");
        return 1;
    }
    snprintf(tls, sizeof(tls), "{cert_file: %s/s.crt, key_file: %s/s.key}", dir, dir);
    snprintf(yaml, sizeof(yaml),
             "receivers:\n"
             "  pprof: {endpoint: 127.0.0.1:%d}\n"
             "  pprof/tls: {endpoint: 127.0.0.1:%d, tls: %s}\n"
             "  otlp: {protocols: {grpc: {endpoint: 127.0.0.1:%d}}}\n"
             "  otlp/tls: {protocols: {grpc: {endpoint: 127.0.0.1:%d, tls: %s}}}\n"
             "exporters:\n  nop:\n"
             "service:\n  telemetry: {metrics: {level: none}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof, pprof/tls, otlp, otlp/tls], "
             "exporters: [nop]}\n",
             http_plain, http_tls, tls, grpc_plain, grpc_tls, tls);
    pid = bench_start_collector(argv[1], yaml, http_plain);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    grpc_init();
    printf("%zu corpus files; %d clients, keep-alive; %.0f s per phase\n", n_files, clients,
           seconds);

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/ingest?name=bench&from=1700000000", http_plain);
    a = phase("ingest plaintext", http_client, clients, seconds, pid);
    snprintf(url, sizeof(url), "https://127.0.0.1:%d/ingest?name=bench&from=1700000000", http_tls);
    b = phase("ingest TLS", http_client, clients, seconds, pid);
    printf("ingest: TLS costs %.2fx the collector CPU per request of plaintext\n", a / b);

    channel = open_channel(grpc_plain, false);
    a = phase("grpc plaintext", grpc_client, clients, seconds, pid);
    grpc_channel_destroy(channel);
    channel = open_channel(grpc_tls, true);
    b = phase("grpc TLS", grpc_client, clients, seconds, pid);
    grpc_channel_destroy(channel);
    printf("grpc: TLS costs %.2fx the collector CPU per request of plaintext (target <= 1.3x)\n",
           a / b);

    grpc_shutdown();
    curl_global_cleanup();
    bench_stop_collector(pid);
    return bench_remove_dir(dir) == 0 ? 0 : 1;
}
