/*
 * The cost of the relabel processor: CPU per profile of `pprof` receiver ->
 * `relabel` -> `nop` beside the same pipeline without the processor,
 * measured in the same run.
 *
 *   bench_relabel FLAMECOL_BIN CORPUS_DIR [seconds=5]
 *
 * Processes (all `pprof` receiver -> `nop` exporter, telemetry on):
 *   baseline  no processor
 *   relabel   10 series rules (relabel_configs): a drop of a service that
 *             never comes, a drop by env that never matches, 2 regex replaces
 *             (blue/green folded into one service; namespace + pod into a
 *             `workload`), a labelmap (k8s_* -> *), a labeldrop (k8s_*), a
 *             static label, a lowercase, a hashmod into __tmp_shard and a keep
 *             by it (15 shards of 16 kept)
 *   samples   the same 10 rules plus sample_relabel_configs: `work` renamed
 *             `task` (labelmap + labeldrop) and `worker` dropped (labeldrop),
 *             so samples that differed only by it are merged
 * Load: 4 keep-alive connections post the corpus round-robin to /ingest as
 * raw gzipped pprof (as bench_ingest does), each request with one of 32
 * series names (8 services, blue or green, 4 pods each, k8s tags): a few
 * hundred series label sets with the corpus's profile types, which the
 * relabel cache holds, as a gateway's steady state (the same series every
 * 10 s). The baseline gets the same names, so parsing them costs both.
 * Each process is measured for `seconds` in two halves, in the order
 * baseline, relabel, samples, then samples, relabel, baseline, so that a
 * load that drifts during the run weighs on all three alike; only the
 * collectors' CPU (utime + stime from /proc) is counted, not the clients'.
 * Printed per process: profiles/s, profiles per collector CPU-second, CPU per
 * profile beside the baseline's; for the relabel ones also the profiles
 * dropped by rules, the cache hit rate and the samples merged.
 * Target (printed, not asserted): relabel adds at most 5 % CPU per profile.
 */
#include "bench/bench_util.h"
#include "core/timeutil.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CONNECTIONS 4
#define N_NAMES 32

struct collector {
    const char *label;
    pid_t pid;
    int port, metrics_port;
    double cpu, wall;
    int64_t requests, failures;
};

static uint8_t *files[64];
static size_t lens[64];
static size_t n_files;
static char paths[N_NAMES][512]; /* /ingest?name=... */
static int target_port;
static _Atomic int64_t requests_done, failures;
static _Atomic int stop;

static const char rules[] =
    "    relabel_configs:\n"
    "      - {action: drop, source_labels: [service_name], regex: \"debug-.*\"}\n"
    "      - {action: drop, source_labels: [env], regex: \"dev|test\"}\n"
    "      - source_labels: [service_name]\n"
    "        regex: \"(.+)-(blue|green)\"\n"
    "        target_label: service_name\n"
    "        replacement: \"$1\"\n"
    "      - source_labels: [k8s_namespace, k8s_pod]\n"
    "        regex: \"([^;]+);(.+)-[0-9a-f]{8,10}-[0-9a-z]{5}\"\n"
    "        target_label: workload\n"
    "        replacement: \"$1/$2\"\n"
    "      - {action: labelmap, regex: \"k8s_(.+)\", replacement: \"$${1}\"}\n"
    "      - {action: labeldrop, regex: \"k8s_.+\"}\n"
    "      - {target_label: cluster, replacement: gw-eu-1}\n"
    "      - {action: lowercase, source_labels: [env], target_label: env}\n"
    "      - action: hashmod\n"
    "        source_labels: [service_name, pod]\n"
    "        modulus: 16\n"
    "        target_label: __tmp_shard\n"
    "      - {action: keep, source_labels: [__tmp_shard], regex: \"[0-9]|1[0-4]\"}\n";

static const char sample_rules[] =
    "    sample_relabel_configs:\n"
    "      - {action: labelmap, regex: \"work\", replacement: task}\n"
    "      - {action: labeldrop, regex: \"work|worker\"}\n";

/* ---- the load ----------------------------------------------------------------------------- */

static void make_paths(void)
{
    static const char *services[8] = {"checkout", "cart",     "payment", "catalog",
                                      "search",   "shipping", "auth",    "frontend"};

    for (int i = 0; i < N_NAMES; i++) {
        const char *svc = services[i % 8];
        int pod = i / 8;
        snprintf(paths[i], sizeof(paths[i]),
                 "/ingest?name=%s-%s%%7Benv%%3DProd%%2Cregion%%3Deu-west-1%%2C"
                 "k8s_namespace%%3Dshop%%2Ck8s_pod%%3D%s-%08x-%c%c%c%c%c%%2C"
                 "k8s_node%%3Dnode-%d%%2Cversion%%3D1.%d.0%%7D"
                 "&from=1700000000&until=1700000010&spyName=gospy",
                 svc, i % 2 ? "green" : "blue", svc, 0x5f3a9c00u + (unsigned)(i * 7919), 'a' + pod,
                 'b' + i % 8, 'c' + pod, 'x', '0' + i % 10, i % 3, 4 + i % 5);
    }
}

static void *client(void *arg)
{
    size_t i = (size_t)(uintptr_t)arg;
    int fd = bench_connect(target_port);

    while (!atomic_load(&stop) && fd >= 0) {
        size_t k = i % n_files;
        const char *path = paths[(i / n_files + i) % N_NAMES];
        i++;
        if (bench_http_post(fd, path, "application/octet-stream", files[k], lens[k]) != 200) {
            atomic_fetch_add(&failures, 1);
            close(fd);
            fd = bench_connect(target_port);
            continue;
        }
        atomic_fetch_add(&requests_done, 1);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/* ---- the collectors and their /metrics ----------------------------------------------------- */

static void start(struct collector *c, const char *bin, const char *processor_yaml)
{
    char yaml[4096];

    c->port = bench_free_port();
    c->metrics_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "%s%s"
             "exporters:\n  nop:\n"
             "service:\n  telemetry: {metrics: {endpoint: 127.0.0.1:%d}, logs: {level: warn}}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], %sexporters: [nop]}\n",
             c->port, processor_yaml ? "processors:\n  relabel:\n" : "",
             processor_yaml ? processor_yaml : "", c->metrics_port,
             processor_yaml ? "processors: [relabel], " : "");
    c->pid = bench_start_collector(bin, yaml, c->port);
    /* The telemetry server may come up a moment after the receiver's port. */
    for (int i = 0; i < 500 && bench_metric(c->metrics_port,
                                            "flamecol_receiver_accepted_requests_total", "") < 0;
         i++) {
        fc_sleep_ns(10 * FC_NS_PER_MS);
    }
}

/* One half of a process's measurement; adds to its totals. */
static void phase(struct collector *c, double seconds)
{
    pthread_t threads[CONNECTIONS];
    double c0;
    int64_t t0;

    target_port = c->port;
    atomic_store(&stop, 0);
    atomic_store(&requests_done, 0);
    atomic_store(&failures, 0);
    c0 = bench_cpu_of(c->pid);
    t0 = fc_now_mono_ns();
    for (int i = 0; i < CONNECTIONS; i++) {
        pthread_create(&threads[i], NULL, client, (void *)(uintptr_t)(i * 7));
    }
    fc_sleep_ns((int64_t)(seconds * 1e9));
    atomic_store(&stop, 1);
    for (int i = 0; i < CONNECTIONS; i++) {
        pthread_join(threads[i], NULL);
    }
    c->wall += (double)(fc_now_mono_ns() - t0) / 1e9;
    c->cpu += bench_cpu_of(c->pid) - c0;
    c->requests += atomic_load(&requests_done);
    c->failures += atomic_load(&failures);
}

static double per_cpu(const struct collector *c)
{
    return c->cpu > 0 ? (double)c->requests / c->cpu : 0;
}

static void print_line(const struct collector *c, const struct collector *base)
{
    printf("%-44s %7.0f profiles/s | %6.0f profiles per collector CPU-s | %.3f CPU-s per "
           "1,000 profiles",
           c->label, (double)c->requests / c->wall, per_cpu(c), c->cpu / (double)c->requests * 1e3);
    if (c == base) {
        printf(" | refused %lld\n", (long long)c->failures);
        return;
    }
    {
        const char *p = "flamecol_processor_relabel_";
        char name[128];
        double dropped, hits, misses, merged;
        snprintf(name, sizeof(name), "%sdropped_profiles_total", p);
        dropped = bench_metric(c->metrics_port, name, "reason=\"rule\"");
        snprintf(name, sizeof(name), "%scache_hits_total", p);
        hits = bench_metric(c->metrics_port, name, "");
        snprintf(name, sizeof(name), "%scache_misses_total", p);
        misses = bench_metric(c->metrics_port, name, "");
        snprintf(name, sizeof(name), "%smerged_samples_total", p);
        merged = bench_metric(c->metrics_port, name, "");
        printf(" | CPU per profile %.3fx the baseline (%+.1f %%) | dropped by rules %.1f %%, "
               "cache hits %.1f %%, merged samples %.0f | refused %lld\n",
               per_cpu(base) / per_cpu(c), (per_cpu(base) / per_cpu(c) - 1) * 100,
               100 * dropped / (double)c->requests,
               hits + misses > 0 ? 100 * hits / (hits + misses) : 0, merged,
               (long long)c->failures);
    }
}

int main(int argc, char **argv)
{
    double seconds = argc > 3 ? atof(argv[3]) : 5;
    struct collector col[3] = {{.label = "baseline: pprof -> nop"},
                               {.label = "relabel, 10 series rules"},
                               {.label = "relabel, 10 series + 2 sample rules"}};
    char both[sizeof(rules) + sizeof(sample_rules)];

    if (argc < 3 || seconds <= 0) {
        fprintf(stderr, "usage: bench_relabel FLAMECOL_BIN CORPUS_DIR [seconds]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    n_files = bench_load_corpus(argv[2], files, lens, 64);
    if (n_files == 0) {
        fprintf(stderr, "no .pb.gz files in %s\n", argv[2]);
        return 2;
    }
    make_paths();
    snprintf(both, sizeof(both), "%s%s", rules, sample_rules);
    start(&col[0], argv[1], NULL);
    start(&col[1], argv[1], rules);
    start(&col[2], argv[1], both);

    printf("corpus: %zu files, %d series names; %d keep-alive connections; %.0f s per process "
           "(halves: baseline, relabel, samples, then the reverse)\n",
           n_files, N_NAMES, CONNECTIONS, seconds);
    for (int i = 0; i < 3; i++) {
        phase(&col[i], seconds / 2);
    }
    for (int i = 2; i >= 0; i--) {
        phase(&col[i], seconds / 2);
    }
    for (int i = 0; i < 3; i++) {
        print_line(&col[i], &col[0]);
    }
    printf("target: relabel adds at most 5 %% CPU per profile (10 series rules: %+.1f %%, with "
           "sample rules: %+.1f %%)\n",
           (per_cpu(&col[0]) / per_cpu(&col[1]) - 1) * 100,
           (per_cpu(&col[0]) / per_cpu(&col[2]) - 1) * 100);
    for (int i = 0; i < 3; i++) {
        bench_stop_collector(col[i].pid);
    }
    for (size_t i = 0; i < n_files; i++) {
        free(files[i]);
    }
    return 0;
}
