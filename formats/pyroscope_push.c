#include "formats/pyroscope_push.h"

#include "core/mem.h"
#include "core/sat.h"
#include "formats/gzip.h"
#include "formats/pb.h"
#include "formats/pprof.h"
#include "formats/pyroscope.h"

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* The exporters' gzip (formats/gzip.h): a forwarder's cost is mostly compressing. */
#define RAW_PROFILE_GZIP_LEVEL FC_GZIP_FASTEST

bool fc_pyro_push_label_kept(const char *name)
{
    return strncmp(name, "__", 2) != 0 || strcmp(name, "__name__") == 0 ||
           strcmp(name, "__delta__") == 0;
}

int fc_pyro_raw_profile(const struct fc_batch *b, const struct fc_profile *p, bool as_stored,
                        struct fc_buf *out, struct fc_error *err)
{
    struct fc_profile as_ns;
    struct fc_sample *samples = NULL;
    int64_t *nums = NULL;
    struct fc_buf plain;
    int rc;

    /*
     * A profile the OTLP decoder named process_cpu from samples:count with a
     * cpu:nanoseconds period goes as cpu:nanoseconds, values x period: what
     * Pyroscope's OTLP ingest would have stored (fc_pyro_stored_type). A
     * sample of timestamps only counts one per timestamp. The batch is
     * shared: the scaled samples and values are copies.
     */
    if (as_stored && p->cpu_samples_as_ns && p->period > 0 && p->n_sample_types == 1) {
        uint32_t n = p->n_nums;
        as_ns = *p;
        as_ns.sample_types = &as_ns.period_type;
        samples = fc_xmalloc((p->n_samples ? p->n_samples : 1) * sizeof(*samples));
        nums = fc_xmalloc(((size_t)p->n_nums + p->n_samples + 1) * sizeof(int64_t));
        memcpy(nums, p->nums, p->n_nums * sizeof(int64_t));
        for (uint32_t i = 0; i < p->n_samples; i++) {
            struct fc_sample *s = &samples[i];
            *s = p->samples[i];
            if (s->n_values == 0) {
                s->values_off = n++;
                s->n_values = 1;
                nums[s->values_off] = s->n_ts;
            }
            nums[s->values_off] = fc_sat_mul(nums[s->values_off], p->period);
        }
        as_ns.samples = samples;
        as_ns.nums = nums;
        as_ns.n_nums = n;
        p = &as_ns;
    }
    fc_buf_init(&plain, 0);
    rc = fc_pprof_encode(b, p, &plain, err);
    if (rc == FC_OK) {
        rc = fc_gzip(plain.data, plain.len, RAW_PROFILE_GZIP_LEVEL, out, err);
    }
    fc_buf_release(&plain);
    free(samples);
    free(nums);
    return rc;
}

/* 8-4-4-4-12 lowercase hex of 16 bytes. */
static void uuid_text(const uint8_t id[16], char out[37])
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;

    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) {
            out[o++] = '-';
        }
        out[o++] = hex[id[i] >> 4];
        out[o++] = hex[id[i] & 15];
    }
    out[o] = '\0';
}

static void profile_uuid(const struct fc_profile *p, char out[37])
{
    static const uint8_t zero[16];
    uint8_t id[16];

    if (memcmp(p->profile_id, zero, 16) != 0) {
        uuid_text(p->profile_id, out);
        return;
    }
    if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id)) {
        /* No entropy (never on Linux >= 3.17): unique enough for an ID. */
        struct timespec ts;
        static _Atomic uint64_t counter;
        uint64_t n = atomic_fetch_add(&counter, 1);
        clock_gettime(CLOCK_REALTIME, &ts);
        memcpy(id, &ts.tv_sec, 8);
        id[0] ^= (uint8_t)ts.tv_nsec;
        memcpy(id + 8, &n, 8);
    }
    id[6] = (uint8_t)((id[6] & 0x0f) | 0x40); /* version 4 */
    id[8] = (uint8_t)((id[8] & 0x3f) | 0x80); /* RFC 4122 variant */
    uuid_text(id, out);
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

int fc_pyro_push_encode(const struct fc_batch *b, uint32_t first, uint32_t n, struct fc_buf *out,
                        struct fc_error *err)
{
    struct fc_buf labels, pair, raw;
    int rc = FC_OK;

    fc_buf_init(&labels, 0);
    fc_buf_init(&pair, 0);
    fc_buf_init(&raw, 0);
    for (uint32_t i = first; i < first + n && i < b->n_profiles && rc == FC_OK; i++) {
        const struct fc_profile *p = &b->profiles[i];
        char id[37];
        size_t sample_len, series_len;
        fc_buf_reset(&labels);
        for (uint32_t j = 0; j < p->n_labels; j++) {
            uint32_t name = p->labels[j].name, value = p->labels[j].value;
            if (!fc_pyro_push_label_kept(fc_str(b, name))) {
                continue;
            }
            fc_buf_reset(&pair);
            fc_pb_put_bytes(&pair, 1, fc_str(b, name), b->dict.str_len[name]);
            fc_pb_put_bytes(&pair, 2, fc_str(b, value), b->dict.str_len[value]);
            fc_pb_put_bytes(&labels, 1, pair.data, pair.len);
        }
        fc_buf_reset(&raw);
        rc = fc_pyro_raw_profile(b, p, true, &raw, err);
        if (rc != FC_OK) {
            fc_error_wrap(err, "profile %u", i);
            break;
        }
        profile_uuid(p, id);
        /* RawSample{raw_profile=1, ID=2}, written in place: the pprof is copied once. */
        sample_len = 1 + varint_len(raw.len) + raw.len + 1 + 1 + 36;
        series_len = labels.len + 1 + varint_len(sample_len) + sample_len;
        fc_pb_put_tag(out, 1, FC_PB_LEN);
        fc_pb_put_varint(out, series_len);
        fc_buf_append(out, labels.data, labels.len);
        fc_pb_put_tag(out, 2, FC_PB_LEN);
        fc_pb_put_varint(out, sample_len);
        fc_pb_put_bytes(out, 1, raw.data, raw.len);
        fc_pb_put_bytes(out, 2, id, 36);
    }
    fc_buf_release(&labels);
    fc_buf_release(&pair);
    fc_buf_release(&raw);
    return rc;
}

/* Percent-encodes every byte but RFC 3986's unreserved ones. */
static void query_escape(struct fc_buf *out, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') ||
            *c == '-' || *c == '.' || *c == '_' || *c == '~') {
            fc_buf_append(out, c, 1);
        } else {
            char e[3] = {'%', hex[*c >> 4], hex[*c & 15]};
            fc_buf_append(out, e, 3);
        }
    }
}

/* The series labels that go inside name's {...}. */
static bool ingest_name_label(const char *name)
{
    if (strcmp(name, "service_name") == 0 || strcmp(name, "pyroscope_spy") == 0) {
        return false; /* they travel as the application name and spyName */
    }
    return strncmp(name, "__", 2) != 0 || strcmp(name, "__session_id__") == 0;
}

/*
 * True when the server parses `name` (fc_pyro_parse_name, the one
 * implementation of the syntax) back into exactly app and the n given
 * labels, in order. perr receives the parser's complaint, if any.
 */
static bool survives(const char *name, const char *app, const char *const *keys,
                     const char *const *values, const uint32_t *value_lens, size_t n,
                     struct fc_pyro_name *parsed, struct fc_error *perr)
{
    if (fc_pyro_parse_name(name, parsed, perr) != FC_OK || strcmp(parsed->app, app) != 0 ||
        parsed->n_labels != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(parsed->labels[i].key, keys[i]) != 0 ||
            strcmp(parsed->labels[i].value, values[i]) != 0 || strlen(values[i]) != value_lens[i]) {
            return false;
        }
    }
    return true;
}

/* Names the first label (or the application name) that does not survive on its own. */
static int unrepresentable(const char *app, const char *const *keys, const char *const *values,
                           const uint32_t *value_lens, size_t n, struct fc_pyro_name *parsed,
                           const struct fc_error *whole, struct fc_error *err)
{
    struct fc_error perr = {0};
    struct fc_buf one;
    int rc = FC_OK;

    fc_buf_init(&one, 0);
    fc_buf_puts(&one, app);
    if (!survives((const char *)one.data, app, NULL, NULL, NULL, 0, parsed, &perr)) {
        rc = fc_errorf(err, FC_EPROTO,
                       "service_name=\"%.200s\" cannot travel as /ingest's application name "
                       "(A-Z a-z 0-9 _ . - /); protocol push carries it",
                       app);
    }
    for (size_t i = 0; i < n && rc == FC_OK; i++) {
        memset(&perr, 0, sizeof(perr));
        fc_buf_reset(&one);
        fc_buf_printf(&one, "a{%s=%s}", keys[i], values[i]);
        if (!survives((const char *)one.data, "a", keys + i, values + i, value_lens + i, 1, parsed,
                      &perr)) {
            rc = fc_errorf(err, FC_EPROTO,
                           "label %.100s=\"%.200s\" cannot travel in /ingest's name (keys of A-Z "
                           "a-z 0-9 _ ., values without ',' '}' or surrounding spaces); protocol "
                           "push carries it",
                           keys[i], values[i]);
        }
    }
    if (rc == FC_OK) {
        rc = fc_errorf(err, FC_EPROTO,
                       "the series labels cannot travel in /ingest's name (%s); protocol push "
                       "carries them",
                       whole->msg[0] ? whole->msg : "they do not parse back");
    }
    fc_buf_release(&one);
    return rc;
}

/* The name that goes on the wire, checked by parsing it back as the server does. */
static int ingest_name(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *name,
                       struct fc_error *err)
{
    const char *app = fc_profile_label(b, p, "service_name");
    const char **keys = fc_xcalloc(p->n_labels + 1, sizeof(char *));
    const char **values = fc_xcalloc(p->n_labels + 1, sizeof(char *));
    uint32_t *value_lens = fc_xcalloc(p->n_labels + 1, sizeof(uint32_t));
    struct fc_pyro_name *parsed = fc_xmalloc(sizeof(*parsed));
    struct fc_error perr = {0};
    size_t n = 0;
    int rc = FC_OK;

    if (app == NULL || app[0] == '\0') {
        app = "unknown_service"; /* what Pyroscope's distributor names it */
    }
    fc_buf_puts(name, app);
    fc_buf_puts(name, "{");
    for (uint32_t j = 0; j < p->n_labels; j++) {
        const char *key = fc_str(b, p->labels[j].name);
        if (ingest_name_label(key)) {
            keys[n] = key;
            values[n] = fc_str(b, p->labels[j].value);
            value_lens[n] = b->dict.str_len[p->labels[j].value];
            fc_buf_printf(name, "%s%s=%s", n ? "," : "", key, values[n]);
            n++;
        }
    }
    fc_buf_puts(name, "}");
    if (!survives((const char *)name->data, app, keys, values, value_lens, n, parsed, &perr)) {
        rc = unrepresentable(app, keys, values, value_lens, n, parsed, &perr, err);
    }
    free(keys);
    free(values);
    free(value_lens);
    free(parsed);
    return rc;
}

int fc_pyro_ingest_target(const struct fc_batch *b, const struct fc_profile *p, struct fc_buf *out,
                          struct fc_error *err)
{
    const char *spy = fc_profile_label(b, p, "pyroscope_spy");
    struct fc_buf name;
    int rc;

    fc_buf_init(&name, 0);
    rc = ingest_name(b, p, &name, err);
    if (rc == FC_OK) {
        fc_buf_puts(out, "/ingest?name=");
        query_escape(out, (const char *)name.data);
        if (p->time_ns > 0) {
            int64_t until;
            if (p->duration_ns <= 0 || __builtin_add_overflow(p->time_ns, p->duration_ns, &until)) {
                until = p->time_ns;
            }
            fc_buf_printf(out, "&from=%" PRId64 "&until=%" PRId64,
                          (int64_t)(p->time_ns / 1000000000), (int64_t)(until / 1000000000));
        }
        fc_buf_puts(out, "&format=pprof");
        if (spy != NULL && spy[0] != '\0') {
            fc_buf_puts(out, "&spyName=");
            query_escape(out, spy);
        }
    }
    fc_buf_release(&name);
    return rc;
}
