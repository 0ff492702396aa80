/* What the benchmarks share: the collector process, its CPU and RSS, HTTP posts. */
#ifndef FC_BENCH_UTIL_H
#define FC_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

double bench_cpu_self(void);       /* CPU seconds of this process */
double bench_cpu_of(pid_t pid);    /* utime + stime of another, from /proc */
long bench_peak_rss_kb(pid_t pid); /* VmHWM */
int bench_free_port(void);
int bench_connect(int port); /* TCP_NODELAY, -1 on failure */
/* A loopback HTTP/1.1 server answering every POST 200, counting requests and body bytes. */
int bench_start_http_sink(_Atomic int64_t *requests, _Atomic int64_t *bytes);
/* Starts `bin --config <tmp file with yaml>` and waits until port accepts. */
pid_t bench_start_collector(const char *bin, const char *yaml, int port);
void bench_stop_collector(pid_t pid);
/* One keep-alive HTTP/1.1 POST; returns the status or -1. */
/* From a collector's /metrics on port: the sum of every series of `name` whose label text
 * contains `labels` (may be ""); -1 when it cannot be read. */
double bench_metric(int port, const char *name, const char *labels);
int bench_http_post(int fd, const char *path, const char *content_type, const uint8_t *body,
                    size_t len);
/*
 * A timed load: clears *stop, starts n (at most 64) threads fn((void *)(i * arg_step)), sleeps
 * `seconds`, sets *stop and joins them. *wall: seconds from start to joined; *cpu: the CPU
 * seconds pid used meanwhile (bench_cpu_of).
 */
void bench_run_clients(void *(*fn)(void *), int n, uintptr_t arg_step, double seconds,
                       _Atomic int *stop, pid_t pid, double *wall, double *cpu);
/* Appends v to the growing array *lat (*n used of *cap); exits when out of memory. */
void bench_lat_push(int64_t **lat, size_t *n, size_t *cap, int64_t v);
/* rm -rf dir (a temporary directory of the bench's); 0, or -1 said on stderr. */
int bench_remove_dir(const char *dir);
/* Every *.pb.gz of dir, read whole; returns the count (at most max). */
size_t bench_load_corpus(const char *dir, uint8_t **data, size_t *len, size_t max);

/* Each corpus pprof as an OTLP ExportProfilesServiceRequest (service_name "bench"). */
struct bench_otlp_request {
    uint8_t *data;
    size_t len;
    uint32_t profiles;
    uint64_t samples;
};
/* Fills reqs (at most max) from dir's *.pb.gz; exits when there are none. */
size_t bench_otlp_requests(const char *dir, struct bench_otlp_request *reqs, size_t max);
/* The same with the given service_name, unless NULL a `pod` label, unless 0 this time. */
size_t bench_otlp_requests_of(const char *dir, struct bench_otlp_request *reqs, size_t max,
                              const char *service, const char *pod, int64_t time_ns);

/*
 * One unary Export call with gRPC core's client API; returns the gRPC status.
 * gzipped: data is already gzip-compressed and goes out as a compressed
 * message (the channel must have gzip as its default algorithm).
 */
struct grpc_channel;
struct grpc_completion_queue;
int bench_grpc_export(struct grpc_channel *ch, struct grpc_completion_queue *cq,
                      const uint8_t *data, size_t len, bool gzipped);
#endif
