/*
 * The store fed in real time for a long while, as a single-node backend runs.
 *
 *   bench_soak FLAMECOL_BIN CORPUS_DIR PODS MINUTES [CLIENTS=4]
 *
 * Starts the flamecol binary (pprof receiver -> store exporter with its
 * defaults: sync batch, default retention; query API and /metrics on ports of
 * their own) and has PODS pods of service "soak" (label pod=pod-N) push one
 * profile every 10 s of real time to /ingest, as the Go SDK does: the 3 Go CPU
 * profiles of the store bench in turn, time_nanos removed so that the store
 * takes the request's from/until (from = now - 10 s, until = now, unix
 * seconds), the pods spread evenly over each 10 s, from CLIENTS keep-alive
 * connections. A request is due at a fixed time; when every connection is
 * busy it leaves late, and the rows show how late.
 *
 * Every minute one row: profiles acknowledged, failed requests (cumulative),
 * the latest a request left after its due time, the collector's CPU seconds
 * and CPU-ms per profile, its RssAnon and VmHWM, data.mdb on disk (allocated
 * and apparent size), store gauges from /metrics (pages in use, open windows,
 * log file, caches), commits, and acknowledgement p50/p99/max. Every 5
 * minutes and after the last: the median of 5 timings of four queries (the
 * service's flame graph over the last 1 h and 24 h, one pod's over 1 h, the
 * values of `pod`), and a
 * check that the service's 1 h flame graph ending a minute ago totals what was
 * acknowledged for that hour (each profile's CPU total is computed here by
 * summing its cpu samples). At the end the same check up to the last push, the
 * 24 h total against everything acknowledged, and a summary: the first 10
 * minutes against the last 10 (CPU-ms per profile, RSS), disk growth per hour.
 *
 * SIGINT/SIGTERM end the run early with the same summary. Figures, not
 * assertions.
 *
 * FC_SOAK_FINE_RETENTION and FC_SOAK_RETENTION (durations such as 10m,
 * 40m; unset: the store's defaults, 24h and 30d, and the run as above) go
 * into the store's config as fine_retention and retention (retention_interval
 * stays 1m), so that compaction and deletion by age run within a soak. Then
 * each row also has the windows retention deleted (compaction's included)
 * and bundled that minute, the pods forgotten and the coarse windows whose
 * rebuild was deferred, and the checks, computed from what was acknowledged
 * alone, become: the 1 h check with its start on 100 s (a range's ends in
 * the compacted past are rounded out to whole 100 s windows), its end too
 * if it may be compacted, and its start no earlier than 3 minutes (three
 * retention passes) past now - retention, on 100 s; the compacted past (older
 * than fine_retention by those 3 minutes, on 100 s) within retention, whole
 * and its last 300 s, against what was acknowledged there; everything older
 * than retention by 3 minutes, on 100 s, against 0 (a pass deletes the
 * windows, of every level, that end by its start - retention); at the end
 * everything retained instead of the 24 h total. A summary line gives the
 * disk from the first minute past retention on.
 */
#include "bench/bench_util.h"
#include "config/units.h"
#include "core/batch.h"
#include "core/buf.h"
#include "core/timeutil.h"
#include "formats/gzip.h"
#include "formats/pprof.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define PERIOD_S 10
#define MAX_CLIENTS 64
#define QUERY_EVERY_MIN 5
#define QUERY_REPS 5
#define CPU_TYPE "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
/* The selector {service_name="soak"}, percent-encoded. */
#define SVC_SEL "%7Bservice_name%3D%22soak%22%7D"
#define POD0_SEL "%7Bservice_name%3D%22soak%22%2Cpod%3D%22pod-0%22%7D"
/* The store's defaults (README: the store exporter's configuration). */
#define DEFAULT_FINE_S (24 * 3600)
#define DEFAULT_RETENTION_S (30 * 86400)
/*
 * How far the checks keep from a moving cutoff: three retention intervals
 * (the default 1 m; a pass starts at most one interval plus the previous
 * pass's length after the last), rounded to whole 100 s windows on top.
 */
#define CUTOFF_MARGIN_S 180
#define COARSE_S 100

static const char *const profile_names[3] = {"go-1s-cpu.pb.gz", "go-3s-cpu.pb.gz",
                                             "pyroscope-go-cpu.pb.gz"};

static int ingest_port, query_port, metrics_port;
static int n_pods;
static uint8_t *body[3];
static size_t body_len[3];
static int64_t cpu_total[3]; /* each profile's sum of cpu sample values, ns */

static int64_t t0_mono, end_mono, interval_ns;
static _Atomic int64_t next_job;
static _Atomic int stop_clients;
static volatile sig_atomic_t interrupted;

/* Acknowledged CPU per 10 s window of `from`, for the totals check. */
static _Atomic int64_t *win_sum;
static int64_t win_base_s;
static size_t n_win;
static _Atomic int64_t last_from_s;

/*
 * FC_SOAK_FINE_RETENTION / FC_SOAK_RETENTION: written into the store's
 * config when set (the strings as given); the durations in effect, whether
 * set or the store's defaults, in seconds (0 = none). aged: either was set.
 */
static const char *fine_str, *ret_str;
static int64_t fine_s = DEFAULT_FINE_S, ret_s = DEFAULT_RETENTION_S;
static int aged;

/* What the clients record until the next row takes it. */
struct minute {
    int64_t *lat;
    size_t n, cap;
    int64_t max_late_ns;
    int64_t late_1s; /* requests that left more than 1 s after their due time */
};
static pthread_mutex_t cur_mu = PTHREAD_MUTEX_INITIALIZER;
static struct minute cur;
static _Atomic int64_t failed, failed_conn, failed_status[6]; /* 1xx..5xx by class */
static _Atomic int64_t acked_total;

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void on_signal(int sig)
{
    (void)sig;
    interrupted = 1;
}

/* ---- the corpus ----------------------------------------------------------------------- */

static int read_varint(const uint8_t *p, size_t len, size_t *off, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *off < len; shift += 7) {
        uint8_t c = p[(*off)++];
        *v |= (uint64_t)(c & 0x7f) << shift;
        if ((c & 0x80) == 0) {
            return 0;
        }
    }
    return -1;
}

/*
 * The pprof without its time_nanos (Profile field 9), gzipped again: the store
 * then times it by the request's `from`, as for an SDK whose profile has none.
 */
static void strip_time(const uint8_t *gz, size_t gz_len, uint8_t **out, size_t *out_len)
{
    struct fc_buf raw, kept, zipped;
    struct fc_error err = {0};
    size_t off = 0;

    fc_buf_init(&raw, 0);
    fc_buf_init(&kept, 0);
    fc_buf_init(&zipped, 0);
    if (fc_gunzip(gz, gz_len, 64u << 20, &raw, &err) != FC_OK) {
        fprintf(stderr, "gunzip: %s\n", err.msg);
        exit(1);
    }
    while (off < raw.len) {
        size_t start = off;
        uint64_t key, n;
        if (read_varint(raw.data, raw.len, &off, &key) != 0) {
            goto bad;
        }
        switch (key & 7) {
        case 0:
            if (read_varint(raw.data, raw.len, &off, &n) != 0) {
                goto bad;
            }
            break;
        case 1:
            off += 8;
            break;
        case 2:
            if (read_varint(raw.data, raw.len, &off, &n) != 0 || n > raw.len - off) {
                goto bad;
            }
            off += (size_t)n;
            break;
        case 5:
            off += 4;
            break;
        default:
            goto bad;
        }
        if (off > raw.len) {
            goto bad;
        }
        if ((key >> 3) != 9) {
            fc_buf_append(&kept, raw.data + start, off - start);
        }
    }
    if (fc_gzip(kept.data, kept.len, 6, &zipped, &err) != FC_OK) {
        fprintf(stderr, "gzip: %s\n", err.msg);
        exit(1);
    }
    *out = fc_buf_detach(&zipped, out_len);
    fc_buf_release(&raw);
    fc_buf_release(&kept);
    return;
bad:
    fprintf(stderr, "malformed pprof\n");
    exit(1);
}

/* The sum of the values of sample type "cpu"; *time_ns: the profile's time. */
static int64_t cpu_sum(const uint8_t *data, size_t len, int64_t *time_ns)
{
    struct fc_batch *b = fc_batch_new(0);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};
    int64_t sum = 0;
    int idx = -1;

    if (fc_pprof_decode(b, data, len, NULL, &p, &err) != FC_OK) {
        fprintf(stderr, "decode: %s\n", err.msg);
        exit(1);
    }
    for (uint32_t i = 0; i < p->n_sample_types; i++) {
        if (strcmp(fc_str(b, p->sample_types[i].type), "cpu") == 0) {
            idx = (int)i;
        }
    }
    if (idx < 0) {
        fprintf(stderr, "no cpu sample type\n");
        exit(1);
    }
    for (uint32_t i = 0; i < p->n_samples; i++) {
        if ((uint32_t)idx < p->samples[i].n_values) {
            sum += p->nums[p->samples[i].values_off + (uint32_t)idx];
        }
    }
    *time_ns = p->time_ns;
    fc_batch_unref(b);
    return sum;
}

static void load_profiles(const char *dir)
{
    for (int k = 0; k < 3; k++) {
        char path[1024];
        uint8_t *orig;
        size_t orig_len;
        int64_t t_orig, t_new, sum_new;
        FILE *f;

        snprintf(path, sizeof(path), "%s/%s", dir, profile_names[k]);
        if ((f = fopen(path, "rb")) == NULL) {
            fprintf(stderr, "missing %s\n", path);
            exit(2);
        }
        orig = malloc(1 << 20);
        orig_len = fread(orig, 1, 1 << 20, f);
        fclose(f);
        cpu_total[k] = cpu_sum(orig, orig_len, &t_orig);
        strip_time(orig, orig_len, &body[k], &body_len[k]);
        sum_new = cpu_sum(body[k], body_len[k], &t_new);
        if (sum_new != cpu_total[k] || t_new != 0) {
            fprintf(stderr, "%s: stripping time_nanos changed it\n", profile_names[k]);
            exit(1);
        }
        printf("profile %d: %s, %zu bytes gzipped (%zu as sent, time_nanos %lld removed), "
               "cpu total %lld ns\n",
               k, profile_names[k], orig_len, body_len[k], (long long)t_orig,
               (long long)cpu_total[k]);
        free(orig);
    }
}

/* ---- HTTP ----------------------------------------------------------------------------- */

/*
 * GET path over HTTP/1.0 (no chunking; the server closes). Returns the status
 * or -1; *body_out (may be NULL) receives the body, NUL-terminated, to free.
 */
static int http_get(int port, const char *path, char **body_out, size_t *body_len_out)
{
    char head[1024];
    struct fc_buf resp;
    int fd = bench_connect(port), n, status;
    char *sep;

    if (body_out != NULL) {
        *body_out = NULL;
    }
    if (fd < 0) {
        return -1;
    }
    n = snprintf(head, sizeof(head), "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path);
    if (write(fd, head, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    fc_buf_init(&resp, 0);
    for (;;) {
        char chunk[65536];
        ssize_t r = read(fd, chunk, sizeof(chunk));
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            break;
        }
        fc_buf_append(&resp, chunk, (size_t)r);
    }
    close(fd);
    fc_buf_append(&resp, "", 1);
    sep = strstr((char *)resp.data, "\r\n\r\n");
    if (resp.len < 13 || sep == NULL) {
        fc_buf_release(&resp);
        return -1;
    }
    status = atoi((char *)resp.data + 9);
    if (body_out != NULL) {
        *body_len_out = resp.len - 1 - (size_t)(sep + 4 - (char *)resp.data);
        *body_out = strdup(sep + 4);
    }
    fc_buf_release(&resp);
    return status;
}

/* The sum of every series of `name` in a Prometheus text; -1 when there is none. */
static double metric_sum(const char *text, const char *name, const char *labels)
{
    size_t nl = strlen(name);
    double sum = -1;

    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        if (line[0] != '#' && len > nl && strncmp(line, name, nl) == 0 &&
            (line[nl] == '{' || line[nl] == ' ')) {
            const char *sp = line + len;
            char val[64];
            while (sp > line && sp[-1] != ' ') {
                sp--;
            }
            if (labels[0] == '\0' || (strstr(line, labels) != NULL && strstr(line, labels) < sp)) {
                size_t vl = (size_t)(line + len - sp);
                vl = vl < sizeof(val) - 1 ? vl : sizeof(val) - 1;
                memcpy(val, sp, vl);
                val[vl] = '\0';
                sum = (sum < 0 ? 0 : sum) + atof(val);
            }
        }
        line = eol ? eol + 1 : NULL;
    }
    return sum;
}

/* ---- the pods ------------------------------------------------------------------------- */

static void record_ack(int64_t lat_ns, int64_t late_ns)
{
    pthread_mutex_lock(&cur_mu);
    if (cur.n == cur.cap) {
        cur.cap = cur.cap ? cur.cap * 2 : 16384;
        cur.lat = realloc(cur.lat, cur.cap * sizeof(int64_t));
        if (cur.lat == NULL) {
            exit(1);
        }
    }
    cur.lat[cur.n++] = lat_ns;
    if (late_ns > cur.max_late_ns) {
        cur.max_late_ns = late_ns;
    }
    if (late_ns > FC_NS_PER_SEC) {
        cur.late_1s++;
    }
    pthread_mutex_unlock(&cur_mu);
}

/* Takes the next due push (pod j % PODS, round j / PODS), waits for its time, sends it. */
static void *client_run(void *arg)
{
    int fd = bench_connect(ingest_port);
    char path[256];

    (void)arg;
    while (!atomic_load(&stop_clients)) {
        int64_t j = atomic_fetch_add(&next_job, 1);
        int64_t due = t0_mono + j * interval_ns, now = fc_now_mono_ns(), late, t, until_s;
        int pod = (int)(j % n_pods), k = (int)((j / n_pods + pod) % 3), status;

        if (due >= end_mono) {
            break;
        }
        while (due > now && !atomic_load(&stop_clients)) {
            fc_sleep_ns(due - now < 100 * FC_NS_PER_MS ? due - now : 100 * FC_NS_PER_MS);
            now = fc_now_mono_ns();
        }
        if (atomic_load(&stop_clients)) {
            break;
        }
        late = now - due;
        until_s = fc_now_ns() / FC_NS_PER_SEC;
        snprintf(path, sizeof(path),
                 "/ingest?name=soak%%7Bpod%%3Dpod-%d%%7D&spyName=gospy&from=%lld&until=%lld", pod,
                 (long long)(until_s - PERIOD_S), (long long)until_s);
        if (fd < 0) {
            fd = bench_connect(ingest_port);
        }
        t = fc_now_mono_ns();
        status = fd >= 0
                     ? bench_http_post(fd, path, "application/octet-stream", body[k], body_len[k])
                     : -1;
        t = fc_now_mono_ns() - t;
        if (status == 200) {
            int64_t from_s = until_s - PERIOD_S;
            size_t w = (size_t)((from_s - win_base_s) / PERIOD_S);
            if (from_s >= win_base_s && w < n_win) {
                atomic_fetch_add(&win_sum[w], cpu_total[k]);
            }
            if (from_s > atomic_load(&last_from_s)) {
                atomic_store(&last_from_s, from_s);
            }
            atomic_fetch_add(&acked_total, 1);
            record_ack(t, late);
            continue;
        }
        atomic_fetch_add(&failed, 1);
        if (status < 100 || status > 599) {
            atomic_fetch_add(&failed_conn, 1);
        } else {
            atomic_fetch_add(&failed_status[status / 100], 1);
        }
        fprintf(stderr, "push pod-%d: status %d\n", pod, status);
        if (fd >= 0) {
            close(fd);
        }
        fd = bench_connect(ingest_port);
    }
    if (fd >= 0) {
        close(fd);
    }
    return NULL;
}

/* What was acknowledged with `from` in [a_s, b_s) (both on 10 s). */
static int64_t expected_cpu(int64_t a_s, int64_t b_s)
{
    int64_t sum = 0;
    for (int64_t t = a_s; t < b_s; t += PERIOD_S) {
        if (t >= win_base_s && (size_t)((t - win_base_s) / PERIOD_S) < n_win) {
            sum += atomic_load(&win_sum[(t - win_base_s) / PERIOD_S]);
        }
    }
    return sum;
}

/* numTicks of a flamebearer JSON render; -1 when the answer has none. */
static int64_t render_total(const char *path, int *status)
{
    char *b = NULL;
    size_t len;
    int64_t ticks = -1;
    const char *p;

    *status = http_get(query_port, path, &b, &len);
    if (b != NULL && (p = strstr(b, "\"numTicks\":")) != NULL) {
        ticks = strtoll(p + 11, NULL, 10);
    }
    free(b);
    return ticks;
}

/* The service's flame graph over [a_s, b_s) against what was acknowledged for it. */
static void check_total(const char *what, int64_t a_s, int64_t b_s)
{
    char path[512];
    int status;
    int64_t got, want = expected_cpu(a_s, b_s);

    snprintf(path, sizeof(path), "%s&from=%lld&until=%lld&format=json",
             "/pyroscope/render?query=" CPU_TYPE SVC_SEL, (long long)a_s, (long long)b_s);
    got = render_total(path, &status);
    printf("  check %s [%lld, %lld): flame graph total %lld ns, acknowledged %lld ns: %s (HTTP "
           "%d)\n",
           what, (long long)a_s, (long long)b_s, (long long)got, (long long)want,
           got == want ? "equal" : "DIFFERENT", status);
}

static int64_t floor_coarse(int64_t t)
{
    return (t >= 0 ? t / COARSE_S : (t - COARSE_S + 1) / COARSE_S) * COARSE_S;
}

static int64_t ceil_coarse(int64_t t)
{
    return floor_coarse(t + COARSE_S - 1);
}

/*
 * The first 100 s boundary safely past the retention cutoff: a pass deletes
 * every window ending at or before (its start - retention); this stays
 * CUTOFF_MARGIN_S ahead of any cutoff a pass during the query can reach.
 */
static int64_t retained_from(int64_t now_s)
{
    return ret_s > 0 ? ceil_coarse(now_s - ret_s + CUTOFF_MARGIN_S) : INT64_MIN;
}

/*
 * The 1 h check ending at b_s. With FC_SOAK_* set: the start on 100 s (the
 * store rounds a range's ends in the compacted past out to whole 100 s
 * windows), the end too when it may lie there, and the start no earlier
 * than retained_from.
 */
static void check_hour(const char *what, int64_t b_s)
{
    int64_t a_s = b_s - 3600, now_s = fc_now_ns() / FC_NS_PER_SEC;
    char label[256];

    if (!aged) {
        check_total(what, a_s, b_s);
        return;
    }
    if (fine_s > 0) {
        a_s = floor_coarse(a_s);
        if (b_s <= now_s - fine_s + 60) {
            b_s = floor_coarse(b_s);
        }
    }
    if (a_s < retained_from(now_s)) {
        a_s = retained_from(now_s);
    }
    snprintf(label, sizeof(label), "%s (ends on 100 s, within retention)", what);
    if (a_s >= b_s) {
        printf("  check %s: empty range, skipped\n", label);
        return;
    }
    check_total(label, a_s, b_s);
}

/*
 * With FC_SOAK_* set: the compacted past (100 s windows only) within
 * retention against what was acknowledged there, whole and its last 300 s
 * (read from 100 s windows alone); and everything older than retention (by
 * CUTOFF_MARGIN_S and whole 100 s windows) against 0. Each once its range
 * is not empty.
 */
static void check_aged(void)
{
    int64_t now_s = fc_now_ns() / FC_NS_PER_SEC, first = floor_coarse(win_base_s);

    if (!aged) {
        return;
    }
    if (fine_s > 0 && (ret_s == 0 || fine_s < ret_s)) {
        int64_t hi = floor_coarse(now_s - fine_s - CUTOFF_MARGIN_S);
        int64_t lo = retained_from(now_s) > first ? retained_from(now_s) : first;
        if (hi - lo >= COARSE_S) {
            check_total("compacted past within retention", lo, hi);
        }
        if (hi - 3 * COARSE_S >= lo) {
            check_total("compacted past, its last 300 s", hi - 3 * COARSE_S, hi);
        }
    }
    if (ret_s > 0) {
        int64_t hi = floor_coarse(now_s - ret_s - CUTOFF_MARGIN_S);
        if (hi > first) {
            char path[512];
            int status;
            int64_t got;
            snprintf(path, sizeof(path), "%s&from=%lld&until=%lld&format=json",
                     "/pyroscope/render?query=" CPU_TYPE SVC_SEL, (long long)first, (long long)hi);
            got = render_total(path, &status);
            printf("  check past retention [%lld, %lld): flame graph total %lld ns, expected 0 "
                   "(%lld ns were acknowledged there): %s (HTTP %d)\n",
                   (long long)first, (long long)hi, (long long)got,
                   (long long)expected_cpu(first, hi), got == 0 ? "equal" : "DIFFERENT", status);
        }
    }
}

/* ---- queries -------------------------------------------------------------------------- */

static void time_query(const char *what, const char *path)
{
    int64_t ms[QUERY_REPS];
    int status = 0;
    size_t len = 0;
    int64_t ticks = -1;

    for (int i = 0; i < QUERY_REPS; i++) {
        char *b = NULL;
        const char *p;
        int64_t t = fc_now_mono_ns();
        status = http_get(query_port, path, &b, &len);
        ms[i] = fc_now_mono_ns() - t;
        if (b != NULL && (p = strstr(b, "\"numTicks\":")) != NULL) {
            ticks = strtoll(p + 11, NULL, 10);
        }
        free(b);
    }
    qsort(ms, QUERY_REPS, sizeof(int64_t), cmp_i64);
    printf("  query %-22s median %8.1f ms (min %8.1f, max %8.1f)  HTTP %d  %zu bytes", what,
           (double)ms[QUERY_REPS / 2] / 1e6, (double)ms[0] / 1e6, (double)ms[QUERY_REPS - 1] / 1e6,
           status, len);
    if (ticks >= 0) {
        printf("  total %.3e ns", (double)ticks);
    }
    printf("\n");
}

static void queries(void)
{
    time_query("service 1h",
               "/pyroscope/render?query=" CPU_TYPE SVC_SEL "&from=now-1h&until=now&format=json");
    time_query("pod-0 1h",
               "/pyroscope/render?query=" CPU_TYPE POD0_SEL "&from=now-1h&until=now&format=json");
    time_query("service 24h",
               "/pyroscope/render?query=" CPU_TYPE SVC_SEL "&from=now-24h&until=now&format=json");
    time_query("label-values pod", "/pyroscope/label-values?label=pod");
}

/* ---- the collector -------------------------------------------------------------------- */

static long status_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    size_t fl = strlen(field);
    long kb = -1;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "r")) == NULL) {
        return -1;
    }
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, field, fl) == 0 && line[fl] == ':') {
            kb = atol(line + fl + 1);
            break;
        }
    }
    fclose(f);
    return kb;
}

struct row {
    int64_t acked;
    double cpu_s;
    long rss_kb, hwm_kb;
    int64_t disk_alloc, disk_size;
    double used;
    double deleted, bundled; /* cumulative, from /metrics */
};

/* FC_SOAK_FINE_RETENTION / FC_SOAK_RETENTION into *str and *secs when set. */
static void aged_option(const char *name, const char **str, int64_t *secs)
{
    const char *v = getenv(name), *why = NULL;
    int64_t ns;

    if (v == NULL || v[0] == '\0') {
        return;
    }
    if (fc_parse_duration(v, &ns, &why) != 0 || ns % FC_NS_PER_SEC != 0 ||
        strspn(v, "0123456789smhd") != strlen(v)) {
        fprintf(stderr, "%s=%s: %s\n", name, v, why ? why : "whole seconds, s/m/h/d only");
        exit(2);
    }
    *str = v;
    *secs = ns / FC_NS_PER_SEC;
    aged = 1;
}

static int collector_alive(pid_t pid, int *wstatus)
{
    return waitpid(pid, wstatus, WNOHANG) == 0;
}

static void print_header(void)
{
    printf("%4s %7s %6s %8s %6s %7s %8s %8s %9s %9s %9s %7s %7s %7s %7s %6s %7s %7s %8s", "min",
           "acked", "failed", "late-max", ">1s", "cpu-s", "cpu-ms/p", "RssAnon", "VmHWM",
           "mdb-alloc", "mdb-size", "used", "openwin", "logfile", "idcache", "commit", "ack-p50",
           "ack-p99", "ack-max");
    if (aged) {
        printf("%8s %8s %7s %7s", "deleted", "bundled", "forgot", "rebuild");
    }
    printf("\n%4s %7s %6s %8s %6s %7s %8s %8s %9s %9s %9s %7s %7s %7s %7s %6s %7s %7s %8s", "",
           "/min", "cum", "s", "/min", "/min", "", "MB", "MB", "MB", "MB", "MB", "MB", "MB", "MB",
           "/min", "ms", "ms", "ms");
    if (aged) {
        printf("%8s %8s %7s %7s", "win/min", "win/min", "pods", "defer");
    }
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *bin, *corpus;
    int minutes, n_clients;
    pthread_t clients[MAX_CLIENTS];
    char dir[] = "/tmp/flamecol-soak-XXXXXX", yaml[2048], mdb[512];
    struct row *rows;
    pid_t pid;
    int wstatus = 0, died = 0, m;
    double cpu_prev, commits_prev, self0;
    int64_t now_s, start_ns;

    if (argc < 5) {
        fprintf(stderr, "usage: [FC_SOAK_FINE_RETENTION=D] [FC_SOAK_RETENTION=D] bench_soak "
                        "FLAMECOL_BIN CORPUS_DIR PODS MINUTES [CLIENTS=4]\n");
        return 2;
    }
    bin = argv[1];
    corpus = argv[2];
    n_pods = atoi(argv[3]);
    minutes = atoi(argv[4]);
    n_clients = argc > 5 ? atoi(argv[5]) : 4;
    if (n_pods < 1 || minutes < 1 || n_clients < 1 || n_clients > MAX_CLIENTS) {
        fprintf(stderr, "bad PODS, MINUTES or CLIENTS\n");
        return 2;
    }
    aged_option("FC_SOAK_FINE_RETENTION", &fine_str, &fine_s);
    aged_option("FC_SOAK_RETENTION", &ret_str, &ret_s);
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    load_profiles(corpus);

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(mdb, sizeof(mdb), "%s/data.mdb", dir);
    ingest_port = bench_free_port();
    query_port = bench_free_port();
    metrics_port = bench_free_port();
    snprintf(yaml, sizeof(yaml),
             "receivers:\n  pprof:\n    endpoint: 127.0.0.1:%d\n"
             "exporters:\n  store:\n    path: %s\n    query: {endpoint: 127.0.0.1:%d}\n"
             "%s%s%s%s%s%s"
             "service:\n  telemetry:\n    metrics: {endpoint: 127.0.0.1:%d}\n"
             "    logs: {level: warn}\n"
             "  pipelines:\n    profiles: {receivers: [pprof], exporters: [store]}\n",
             ingest_port, dir, query_port, fine_str ? "    fine_retention: " : "",
             fine_str ? fine_str : "", fine_str ? "\n" : "", ret_str ? "    retention: " : "",
             ret_str ? ret_str : "", ret_str ? "\n" : "", metrics_port);
    printf("config:\n%s", yaml);
    pid = bench_start_collector(bin, yaml, ingest_port);
    if (!collector_alive(pid, &wstatus)) {
        fprintf(stderr, "the collector did not start\n");
        return 1;
    }
    printf("collector pid %d; %d pods, one push each per %d s (%.1f pushes/s), %d connections, "
           "%d minutes; pprof :%d, query :%d, metrics :%d\n",
           (int)pid, n_pods, PERIOD_S, (double)n_pods / PERIOD_S, n_clients, minutes, ingest_port,
           query_port, metrics_port);

    start_ns = fc_now_ns();
    now_s = start_ns / FC_NS_PER_SEC;
    win_base_s = (now_s - 3 * PERIOD_S) / PERIOD_S * PERIOD_S;
    n_win = (size_t)(minutes * 60 / PERIOD_S + 120);
    win_sum = calloc(n_win, sizeof(*win_sum));
    rows = calloc((size_t)minutes + 1, sizeof(*rows));
    interval_ns = PERIOD_S * FC_NS_PER_SEC / n_pods;
    t0_mono = fc_now_mono_ns();
    end_mono = t0_mono + (int64_t)minutes * 60 * FC_NS_PER_SEC;
    cpu_prev = bench_cpu_of(pid);
    commits_prev = 0;
    self0 = bench_cpu_self();
    for (int i = 0; i < n_clients; i++) {
        pthread_create(&clients[i], NULL, client_run, NULL);
    }
    print_header();

    for (m = 1; m <= minutes; m++) {
        int64_t due = t0_mono + (int64_t)m * 60 * FC_NS_PER_SEC;
        struct minute got;
        char *metrics = NULL;
        size_t mlen;
        struct stat st;
        double cpu, commits, p50 = 0, p99 = 0, pmax = 0;
        struct row *r = &rows[m];

        while (fc_now_mono_ns() < due && !interrupted) {
            int64_t left = due - fc_now_mono_ns();
            fc_sleep_ns(left < 200 * FC_NS_PER_MS ? left : 200 * FC_NS_PER_MS);
        }
        if (interrupted) {
            printf("interrupted during minute %d\n", m);
            break;
        }
        pthread_mutex_lock(&cur_mu);
        got = cur;
        memset(&cur, 0, sizeof(cur));
        pthread_mutex_unlock(&cur_mu);
        if (!collector_alive(pid, &wstatus)) {
            died = 1;
            printf("THE COLLECTOR EXITED during minute %d: %s %d\n", m,
                   WIFSIGNALED(wstatus) ? "signal" : "status",
                   WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : WEXITSTATUS(wstatus));
            free(got.lat);
            break;
        }
        cpu = bench_cpu_of(pid);
        http_get(metrics_port, "/metrics", &metrics, &mlen);
        qsort(got.lat, got.n, sizeof(int64_t), cmp_i64);
        if (got.n > 0) {
            p50 = (double)got.lat[got.n / 2] / 1e6;
            p99 = (double)got.lat[got.n * 99 / 100] / 1e6;
            pmax = (double)got.lat[got.n - 1] / 1e6;
        }
        r->acked = (int64_t)got.n;
        r->cpu_s = cpu - cpu_prev;
        cpu_prev = cpu;
        r->rss_kb = status_kb(pid, "RssAnon");
        r->hwm_kb = status_kb(pid, "VmHWM");
        if (stat(mdb, &st) == 0) {
            r->disk_alloc = (int64_t)st.st_blocks * 512;
            r->disk_size = (int64_t)st.st_size;
        }
        r->used = metrics ? metric_sum(metrics, "flamecol_store_used_bytes", "") : -1;
        commits = metrics ? metric_sum(metrics, "flamecol_store_commits_total", "") : -1;
        r->deleted =
            metrics ? metric_sum(metrics, "flamecol_store_retention_deleted_total", "") : -1;
        r->bundled = metrics ? metric_sum(metrics, "flamecol_store_bundled_windows_total", "") : -1;
        printf(
            "%4d %7lld %6lld %8.2f %6lld %7.2f %8.3f %8.1f %9.1f %9.1f %9.1f %7.1f %7.2f "
            "%7.2f %7.2f %6.0f %7.2f %7.2f %8.1f",
            m, (long long)r->acked, (long long)atomic_load(&failed), (double)got.max_late_ns / 1e9,
            (long long)got.late_1s, r->cpu_s, r->acked ? 1000.0 * r->cpu_s / (double)r->acked : 0.0,
            (double)r->rss_kb / 1024, (double)r->hwm_kb / 1024, (double)r->disk_alloc / 1048576,
            (double)r->disk_size / 1048576, r->used / 1048576,
            metrics ? metric_sum(metrics, "flamecol_store_open_windows_bytes", "") / 1048576 : -1.0,
            metrics ? metric_sum(metrics, "flamecol_store_log_file_bytes", "") / 1048576 : -1.0,
            metrics ? metric_sum(metrics, "flamecol_store_id_cache_bytes", "") / 1048576 : -1.0,
            commits - commits_prev, p50, p99, pmax);
        if (aged) {
            /* A counter not yet in /metrics reads -1: as 0. */
            double del0 = m > 1 && rows[m - 1].deleted > 0 ? rows[m - 1].deleted : 0;
            double bun0 = m > 1 && rows[m - 1].bundled > 0 ? rows[m - 1].bundled : 0;
            printf(" %8.0f %8.0f %7.0f %7.0f", r->deleted > 0 ? r->deleted - del0 : 0,
                   r->bundled > 0 ? r->bundled - bun0 : 0,
                   metrics ? metric_sum(metrics, "flamecol_store_pods_forgotten_total", "") : -1,
                   metrics ? metric_sum(metrics, "flamecol_store_rebuilds_deferred", "") : -1.0);
        }
        printf("\n");
        commits_prev = commits;
        free(got.lat);
        if (m % QUERY_EVERY_MIN == 0 || m == minutes) {
            int64_t b_s = (fc_now_ns() / FC_NS_PER_SEC - 60) / PERIOD_S * PERIOD_S;
            if (metrics != NULL) {
                printf("  metrics: bundle cache %.2f MB, id cache hits %.0f misses %.0f, bundled "
                       "windows %.0f, retention deleted %.0f, pods forgotten %.0f, corrupt "
                       "windows %.0f, refused writes %.0f, receiver refused requests %.0f, "
                       "server refused requests %.0f, log damaged %.0f\n",
                       metric_sum(metrics, "flamecol_store_bundle_cache_bytes", "") / 1048576,
                       metric_sum(metrics, "flamecol_store_id_cache_lookups_total", "\"hit\""),
                       metric_sum(metrics, "flamecol_store_id_cache_lookups_total", "\"miss\""),
                       metric_sum(metrics, "flamecol_store_bundled_windows_total", ""),
                       metric_sum(metrics, "flamecol_store_retention_deleted_total", ""),
                       metric_sum(metrics, "flamecol_store_pods_forgotten_total", ""),
                       metric_sum(metrics, "flamecol_store_corrupt_windows_total", ""),
                       metric_sum(metrics, "flamecol_store_refused_writes_total", ""),
                       metric_sum(metrics, "flamecol_receiver_refused_requests_total", ""),
                       metric_sum(metrics, "flamecol_server_refused_requests_total", ""),
                       metric_sum(metrics, "flamecol_store_log_damaged_total", ""));
            }
            queries();
            check_hour("1h ending a minute ago", b_s);
            check_aged();
        }
        free(metrics);
    }
    m--;

    atomic_store(&stop_clients, 1);
    for (int i = 0; i < n_clients; i++) {
        pthread_join(clients[i], NULL);
    }
    printf("pushes acknowledged %lld, failed %lld (connection/no answer %lld, 4xx %lld, 5xx "
           "%lld); this bench's own CPU %.1f s\n",
           (long long)atomic_load(&acked_total), (long long)atomic_load(&failed),
           (long long)atomic_load(&failed_conn), (long long)atomic_load(&failed_status[4]),
           (long long)atomic_load(&failed_status[5]), bench_cpu_self() - self0);

    if (!died && collector_alive(pid, &wstatus)) {
        int64_t last = atomic_load(&last_from_s);
        int64_t b_s = (last / PERIOD_S + 1) * PERIOD_S, t;
        int status;
        int64_t got24;
        char *metrics = NULL;
        size_t mlen;

        /* A flush every 2 s: let the last pushes' windows be written. */
        fc_sleep_ns(5 * FC_NS_PER_SEC);
        check_hour("final, 1h up to the last push", b_s);
        check_aged();
        if (aged && ret_s > 0) {
            /* The 24 h total would depend on where the last pass put the cutoff. */
            int64_t a_s = retained_from(fc_now_ns() / FC_NS_PER_SEC);
            if (a_s < b_s) {
                check_total("final, everything retained", a_s, b_s);
            }
        } else {
            got24 = render_total("/pyroscope/render?query=" CPU_TYPE SVC_SEL
                                 "&from=now-24h&until=now&format=json",
                                 &status);
            printf(
                "  check final, 24h: flame graph total %lld ns, everything acknowledged %lld ns: "
                "%s (HTTP %d)\n",
                (long long)got24,
                (long long)expected_cpu(win_base_s, win_base_s + (int64_t)n_win * PERIOD_S),
                got24 == expected_cpu(win_base_s, win_base_s + (int64_t)n_win * PERIOD_S)
                    ? "equal"
                    : "DIFFERENT",
                status);
        }
        http_get(metrics_port, "/metrics", &metrics, &mlen);
        if (metrics != NULL) {
            printf("final /metrics, store and refusal lines:\n");
            for (char *line = strtok(metrics, "\n"); line != NULL; line = strtok(NULL, "\n")) {
                if (line[0] != '#' &&
                    (strstr(line, "store") != NULL || strstr(line, "refused") != NULL ||
                     strstr(line, "failed") != NULL)) {
                    printf("  %s\n", line);
                }
            }
            free(metrics);
        }
        t = fc_now_mono_ns();
        kill(pid, SIGTERM);
        waitpid(pid, &wstatus, 0);
        printf("collector stopped in %.2f s: %s %d\n", (double)(fc_now_mono_ns() - t) / 1e9,
               WIFSIGNALED(wstatus) ? "signal" : "exit status",
               WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : WEXITSTATUS(wstatus));
    }

    if (m >= 1) {
        int w = m >= 20 ? 10 : m / 2 > 0 ? m / 2 : 1;
        double cpu_a = 0, cpu_b = 0;
        int64_t n_a = 0, n_b = 0;
        for (int i = 1; i <= w; i++) {
            cpu_a += rows[i].cpu_s;
            n_a += rows[i].acked;
            cpu_b += rows[m - w + i].cpu_s;
            n_b += rows[m - w + i].acked;
        }
        printf("summary over %d minutes (first %d vs last %d minutes):\n", m, w, w);
        printf("  CPU-ms per profile: minutes 1-%d %.3f, minutes %d-%d %.3f\n", w,
               n_a ? 1000.0 * cpu_a / (double)n_a : 0.0, m - w + 1, m,
               n_b ? 1000.0 * cpu_b / (double)n_b : 0.0);
        printf("  RssAnon: minute %d %.1f MB, minute %d %.1f MB; VmHWM at the end %.1f MB\n", w,
               (double)rows[w].rss_kb / 1024, m, (double)rows[m].rss_kb / 1024,
               (double)rows[m].hwm_kb / 1024);
        printf("  data.mdb allocated: minute %d %.1f MB, minute %d %.1f MB: %.1f MB/h over "
               "minutes %d-%d, %.1f MB/h over the run\n",
               w, (double)rows[w].disk_alloc / 1048576, m, (double)rows[m].disk_alloc / 1048576,
               m > w ? (double)(rows[m].disk_alloc - rows[w].disk_alloc) / 1048576 * 60 / (m - w)
                     : 0.0,
               w, m, (double)rows[m].disk_alloc / 1048576 * 60 / m);
        printf("  pages in use: minute %d %.1f MB, minute %d %.1f MB: %.1f MB/h over minutes "
               "%d-%d; %.0f bytes per acknowledged profile at the end\n",
               w, rows[w].used / 1048576, m, rows[m].used / 1048576,
               m > w ? (rows[m].used - rows[w].used) / 1048576 * 60 / (m - w) : 0.0, w, m,
               atomic_load(&acked_total) ? rows[m].used / (double)atomic_load(&acked_total) : 0.0);
        if (aged && ret_s > 0 && ret_s / 60 + 2 < m) {
            /* From the first minute with data past retention (deleted by the pass after). */
            int k = (int)(ret_s / 60) + 2, top = k;
            for (int i = k; i <= m; i++) {
                top = rows[i].disk_alloc > rows[top].disk_alloc ? i : top;
            }
            printf("  once retention deletes (minutes %d-%d): data.mdb allocated %.1f -> %.1f MB "
                   "(%.1f MB/h; largest %.1f MB at minute %d), pages in use %.1f -> %.1f MB (%.1f "
                   "MB/h)\n",
                   k, m, (double)rows[k].disk_alloc / 1048576, (double)rows[m].disk_alloc / 1048576,
                   (double)(rows[m].disk_alloc - rows[k].disk_alloc) / 1048576 * 60 / (m - k),
                   (double)rows[top].disk_alloc / 1048576, top, rows[k].used / 1048576,
                   rows[m].used / 1048576, (rows[m].used - rows[k].used) / 1048576 * 60 / (m - k));
        }
    }
    if (getenv("SOAK_KEEP") == NULL) {
        bench_remove_dir(dir);
    } else {
        printf("store kept in %s\n", dir);
    }
    free(rows);
    free((void *)win_sum);
    for (int k = 0; k < 3; k++) {
        free(body[k]);
    }
    return died ? 1 : 0;
}
