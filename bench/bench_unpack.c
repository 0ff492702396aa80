/*
 * Unpacking an OTLP ExportProfilesServiceRequest into protobuf-c structs:
 * the hand-written decoder (formats/otlp_unpack.h) beside what it replaced,
 * fc_pb_check_depth() then protobuf_c_message_unpack(), in the same run.
 *
 *   bench_unpack CORPUS_DIR [seconds=10]
 *
 * Requests: each corpus pprof converted to OTLP, as bench_otlp builds them.
 * The two take turns in rounds of a tenth of the time (a shared, noisy
 * machine); printed: requests per CPU-second of each, and their ratio.
 * Figures, not assertions.
 */
#include "bench/bench_util.h"
#include "core/arena.h"
#include "core/timeutil.h"
#include "formats/otlp_unpack.h"
#include "formats/pb.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdio.h>
#include <stdlib.h>

#define REQ_DESC                                                                                   \
    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor

static struct bench_otlp_request reqs[64];
static size_t n_reqs;

static void *arena_alloc(void *data, size_t size)
{
    return fc_arena_alloc(data, size);
}

static void arena_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

static void *with_protobuf_c(struct fc_arena *a, const struct bench_otlp_request *r)
{
    ProtobufCAllocator alloc = {arena_alloc, arena_free, a};

    if (fc_pb_check_depth(&REQ_DESC, r->data, r->len, FC_PB_DEFAULT_MAX_DEPTH, NULL) != FC_OK) {
        return NULL;
    }
    return protobuf_c_message_unpack(&REQ_DESC, &alloc, r->len, r->data);
}

static void *with_ours(struct fc_arena *a, const struct bench_otlp_request *r)
{
    return fc_otlp_unpack(a, r->data, r->len, FC_PB_DEFAULT_MAX_DEPTH);
}

/* Requests decoded in `seconds`; *cpu gets the CPU seconds they took. */
static int64_t run(void *(*fn)(struct fc_arena *, const struct bench_otlp_request *),
                   double seconds, double *cpu)
{
    int64_t t0 = fc_now_mono_ns();
    double c0 = bench_cpu_self();
    int64_t n = 0;

    while (fc_now_mono_ns() - t0 < (int64_t)(seconds * 1e9)) {
        for (size_t i = 0; i < n_reqs; i++) {
            struct fc_arena *a = fc_arena_new(256u << 20);
            if (fn(a, &reqs[i]) == NULL) {
                fprintf(stderr, "bench_unpack: request %zu refused\n", i);
                exit(1);
            }
            fc_arena_free(a);
            n++;
        }
    }
    *cpu += bench_cpu_self() - c0;
    return n;
}

int main(int argc, char **argv)
{
    double seconds = argc > 2 ? atof(argv[2]) : 10;
    int64_t n_old = 0, n_new = 0;
    double cpu_old = 0, cpu_new = 0, total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: bench_unpack CORPUS_DIR [seconds]\n");
        return 2;
    }
    n_reqs = bench_otlp_requests(argv[1], reqs, 64);
    for (size_t i = 0; i < n_reqs; i++) {
        total += (double)reqs[i].len;
    }
    for (int round = 0; round < 10; round++) {
        n_old += run(with_protobuf_c, seconds / 20, &cpu_old);
        n_new += run(with_ours, seconds / 20, &cpu_new);
    }
    printf("requests: %zu from the corpus, %.1f KB on average\n", n_reqs, total / n_reqs / 1024);
    printf("check_depth + protobuf-c unpack: %8.0f requests per CPU-second (%.1f us each)\n",
           n_old / cpu_old, cpu_old / n_old * 1e6);
    printf("fc_otlp_unpack:                  %8.0f requests per CPU-second (%.1f us each)\n",
           n_new / cpu_new, cpu_new / n_new * 1e6);
    printf("ratio (ours / protobuf-c): %.2fx\n", (n_new / cpu_new) / (n_old / cpu_old));
    return 0;
}
