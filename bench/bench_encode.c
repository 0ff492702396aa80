/*
 * What re-encoding costs beside decoding, in one process: why batching
 * before sending (the Collector's sending_queue.batch) is not built.
 *
 *   bench_encode CORPUS_DIR [rounds=3000]
 *
 * Requests: each corpus pprof converted to an OTLP ExportProfilesServiceRequest
 * (bench_otlp_requests). Per request, CPU of this process:
 *   decode                   fc_otlp_decode alone (the same-run baseline)
 *   decode + encode          the request encoded again on its own
 *   decode + merge + encode  merged into a pending batch (fc_batch_merge), the
 *                            batch encoded once per N requests (N = 1, 4, 16, 64)
 * and what each adds to decoding, beside the ~100 us a pass-through send
 * costs in bench_forward (forwarder minus receive-only). Figures, not
 * assertions.
 */
#include "bench/bench_util.h"
#include "core/batch.h"
#include "core/buf.h"
#include "formats/otlp.h"

#include <stdio.h>
#include <stdlib.h>

static struct bench_otlp_request reqs[64];
static size_t n_reqs;

static void die(const char *what, const struct fc_error *err)
{
    fprintf(stderr, "%s: %s\n", what, err->msg);
    exit(1);
}

/* Encodes b; returns the bytes written. */
static size_t encode(const struct fc_batch *b)
{
    struct fc_buf out;
    struct fc_error err = {0};
    size_t n;

    fc_buf_init(&out, 0);
    if (fc_otlp_encode(b, &out, &err) != FC_OK) {
        die("encode", &err);
    }
    n = out.len;
    fc_buf_release(&out);
    return n;
}

/*
 * CPU microseconds per request over rounds requests: decoded, then encoded
 * alone (per == 0), merged and encoded once per `per` (per > 0), or nothing
 * more (per < 0). *out_kb: encoded KB per request.
 */
static double run(int rounds, int per, double *out_kb)
{
    double c0 = bench_cpu_self();
    struct fc_batch *pending = NULL;
    int in_pending = 0;
    size_t out = 0;

    for (int i = 0; i < rounds; i++) {
        const struct bench_otlp_request *r = &reqs[(size_t)i % n_reqs];
        struct fc_batch *b = fc_batch_new(0);
        struct fc_otlp_result res;
        struct fc_error err = {0};
        if (fc_otlp_decode(b, r->data, r->len, &res, &err) != FC_OK) {
            die("decode", &err);
        }
        if (per == 0) {
            out += encode(b);
        } else if (per > 0) {
            if (pending == NULL) {
                pending = fc_batch_new(0);
                fc_batch_set_tenant(pending, b->tenant);
            }
            if (fc_batch_merge(pending, b, &err) != FC_OK) {
                die("merge", &err);
            }
            if (++in_pending == per || i == rounds - 1) {
                out += encode(pending);
                fc_batch_unref(pending);
                pending = NULL;
                in_pending = 0;
            }
        }
        fc_batch_unref(b);
    }
    *out_kb = (double)out / 1024.0 / rounds;
    return (bench_cpu_self() - c0) / rounds * 1e6;
}

int main(int argc, char **argv)
{
    int rounds = argc > 2 ? atoi(argv[2]) : 3000;
    double kb, base, us;

    if (argc < 2 || rounds <= 0) {
        fprintf(stderr, "usage: bench_encode CORPUS_DIR [rounds=3000]\n");
        return 2;
    }
    n_reqs = bench_otlp_requests(argv[1], reqs, 64);
    base = run(rounds, -1, &kb);
    printf("%zu corpus requests, %d rounds; CPU per request:\n", n_reqs, rounds);
    printf("decode (baseline)                   %7.1f us\n", base);
    us = run(rounds, 0, &kb);
    printf("decode + encode                     %7.1f us  (+%.1f us, %.1fx the decode; %.1f KB "
           "out per request)\n",
           us, us - base, (us - base) / base, kb);
    for (int per = 1; per <= 64; per *= 4) {
        us = run(rounds, per, &kb);
        printf("decode + merge + encode, %2d per batch %6.1f us  (+%.1f us, %.1fx the decode; %.1f "
               "KB out per request)\n",
               per, us, us - base, (us - base) / base, kb);
    }
    return 0;
}
