/*
 * The store's write and merge paths on decoded batches: the input is
 * decoded as pprof, written (twice: the second merges into what is stored)
 * into a real LMDB store in a temporary directory, and queried back. For
 * every stored profile type, the answer's total must equal the positive
 * sample values times the type's scale, summed here independently in 128
 * bits and clamped to INT64_MAX (the store saturates its sums).
 */
#include "formats/pprof.h"
#include "formats/pyroscope.h"
#include "storage/store.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define TIME_S 1700000000LL

static struct fc_store *store;
static char dir[64];
static unsigned long runs;

static void remove_dir(void)
{
    char path[128];

    fc_store_close(store);
    snprintf(path, sizeof(path), "%s/data.mdb", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/lock.mdb", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/flamecol.lock", dir);
    unlink(path);
    rmdir(dir);
}

static struct fc_store *the_store(void)
{
    struct fc_store_options o = {0};
    struct fc_error err = {0};

    if (store != NULL) {
        return store;
    }
    snprintf(dir, sizeof(dir), "/tmp/fc-fuzz-store-XXXXXX");
    if (mkdtemp(dir) == NULL) {
        abort();
    }
    o.path = dir;
    o.sync = FC_SYNC_NONE;
    if (fc_store_open(&o, &store, &err) != FC_OK) {
        fprintf(stderr, "%s\n", err.msg);
        abort();
    }
    atexit(remove_dir);
    return store;
}

static int64_t clamp(__int128 v)
{
    return v > INT64_MAX ? INT64_MAX : v < INT64_MIN ? INT64_MIN : (int64_t)v;
}

/* What the store must answer for type id `id` after `copies` writes of profile p. */
static int64_t expected(const struct fc_batch *b, const struct fc_profile *p, const char *id,
                        int copies)
{
    __int128 sum = 0;

    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        struct fc_buf tid;
        int64_t scale;
        fc_buf_init(&tid, 0);
        fc_pyro_stored_type(b, p, t, &tid, &scale);
        if (strcmp((const char *)tid.data, id) == 0) {
            for (uint32_t i = 0; i < p->n_samples; i++) {
                int64_t v = fc_sample_value(p, &p->samples[i], t);
                if (v > 0) {
                    sum += (__int128)clamp((__int128)v * scale); /* each sample's own value */
                }
            }
        }
        fc_buf_release(&tid);
    }
    return clamp(sum * copies);
}

static int64_t answer(struct fc_store *s, const char *tenant, const char *id)
{
    struct fc_selector sel;
    struct fc_store_query q = {0};
    struct fc_store_result res;
    struct fc_store_stats stats;
    struct fc_error err = {0};
    int64_t total;

    if (fc_selector_parse("{}", &sel, &err) != FC_OK) {
        abort();
    }
    free(sel.profile_type);
    sel.profile_type = strdup(id);
    q.tenant = tenant;
    q.selector = &sel;
    q.from_ns = (TIME_S - 86400) * 1000000000LL;
    q.until_ns = (TIME_S + 86400) * 1000000000LL;
    if (fc_store_select_merge(s, &q, &res, &stats, &err) != FC_OK) {
        fprintf(stderr, "query: %s\n", err.msg);
        abort();
    }
    total = fc_tree_total(&res.tree);
    fc_store_result_release(&res);
    fc_selector_release(&sel);
    return total;
}

/* Writes b `copies` times in all, then checks every type's total. */
static void write_and_check(struct fc_store *s, struct fc_batch *b, const struct fc_profile *p,
                            const char *tenant, int copies)
{
    struct fc_error err = {0};

    if (fc_store_write(s, &b, 1, &err) != FC_OK) {
        fprintf(stderr, "write: %s\n", err.msg);
        abort();
    }
    for (uint32_t t = 0; t < p->n_sample_types; t++) {
        struct fc_buf tid;
        int64_t scale, want, got;
        fc_buf_init(&tid, 0);
        fc_pyro_stored_type(b, p, t, &tid, &scale);
        want = expected(b, p, (const char *)tid.data, copies);
        got = answer(s, tenant, (const char *)tid.data);
        if (got != want) {
            fprintf(stderr, "type %s: total %lld, samples sum to %lld\n", (const char *)tid.data,
                    (long long)got, (long long)want);
            abort();
        }
        fc_buf_release(&tid);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_pprof_limits lim = {.max_decompressed = 4 << 20};
    struct fc_batch *b = fc_batch_new(32 << 20);
    struct fc_profile *p = NULL;
    struct fc_error err = {0};
    struct fc_store *s = the_store();
    char tenant[32];
    uint64_t deleted;

    /* A tenant per input: totals never mix. */
    snprintf(tenant, sizeof(tenant), "t%lu", ++runs);
    if (fc_pprof_decode(b, data, size, &lim, &p, &err) == FC_OK && p != NULL &&
        b->n_profiles == 1) {
        fc_profile_set_label(b, p, "service_name", "fuzz");
        fc_profile_set_label(b, p, "__name__", "fuzz");
        fc_batch_set_tenant(b, tenant);
        p->time_ns = TIME_S * 1000000000LL;
        write_and_check(s, b, p, tenant, 1);
        write_and_check(s, b, p, tenant, 2); /* merged into the stored windows */
        /* Keep the database small over a long run. */
        if (fc_store_delete_before(s, TIME_S + 100000000LL, 0, &deleted, &err) != FC_OK) {
            fprintf(stderr, "retention: %s\n", err.msg);
            abort();
        }
    }
    fc_batch_unref(b);
    return 0;
}
