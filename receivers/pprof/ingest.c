/*
 * POST /ingest, exactly as Pyroscope accepts it: the `name` label set,
 * from/until, sampleRate, spyName, and the body format chosen by `format`,
 * then the Content-Type, then multipart, else folded text.
 */
#include "receivers/pprof/pprof.h"

#include "core/mem.h"
#include "core/timeutil.h"
#include "formats/folded.h"
#include "formats/json.h"
#include "formats/multipart.h"
#include "formats/pyroscope.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <xxhash.h>

enum body_format { FORMAT_FOLDED, FORMAT_LINES, FORMAT_PPROF, FORMAT_MULTIPART };

struct ingest {
    struct pprof_receiver *r;
    const struct fc_http_request *req;
    struct fc_http_response *resp;
    struct fc_pyro_name name;
    int64_t from_ns;
    int64_t until_ns;
    int64_t sample_rate;
    const char *spy;
    struct fc_pyro_type_config configs[32];
    size_t n_configs;
};

static int bad_request(struct ingest *in, int status, struct fc_error *err)
{
    pprof_error(in->r, in->resp, status, err);
    return -1;
}

static int parse_params(struct ingest *in, struct fc_error *err)
{
    const char *name = fc_http_query(in->req, "name");
    const char *from = fc_http_query(in->req, "from");
    const char *until = fc_http_query(in->req, "until");
    const char *rate = fc_http_query(in->req, "sampleRate");
    int64_t now = fc_now_ns();

    if (name == NULL) {
        return fc_errorf(err, FC_EPROTO, "name: the name parameter is required (app{k=v,...})");
    }
    if (fc_pyro_parse_name(name, &in->name, err) != FC_OK) {
        return FC_EPROTO;
    }
    in->from_ns = now;
    in->until_ns = now;
    if (from != NULL && fc_pyro_parse_time(from, now, &in->from_ns, err) != FC_OK) {
        return fc_error_wrap(err, "from");
    }
    if (until != NULL && fc_pyro_parse_time(until, now, &in->until_ns, err) != FC_OK) {
        return fc_error_wrap(err, "until");
    }
    in->sample_rate = 100;
    if (rate != NULL) {
        char *end;
        long long v = strtoll(rate, &end, 10);
        /* Pyroscope falls back to 100 Hz on a bad or negative sampleRate. */
        if (*rate != '\0' && *end == '\0' && v > 0) {
            in->sample_rate = v;
        }
    }
    in->spy = fc_http_query(in->req, "spyName");
    return FC_OK;
}

static int decide_format(struct ingest *in, enum body_format *fmt, struct fc_error *err)
{
    const char *format = fc_http_query(in->req, "format");
    const char *ct = fc_http_header(in->req, "Content-Type");

    if (format != NULL) {
        if (strcmp(format, "pprof") == 0) {
            *fmt = FORMAT_PPROF;
        } else if (strcmp(format, "lines") == 0) {
            *fmt = FORMAT_LINES;
        } else if (strcmp(format, "folded") == 0 || strcmp(format, "groups") == 0) {
            *fmt = FORMAT_FOLDED;
        } else if (strcmp(format, "trie") == 0 || strcmp(format, "tree") == 0 ||
                   strcmp(format, "jfr") == 0 || strcmp(format, "speedscope") == 0) {
            return fc_errorf(err, FC_ENOTSUP,
                             "format %s is not supported by flamecol (use pprof, folded or lines)",
                             format);
        } else {
            return fc_errorf(err, FC_EPROTO,
                             "unknown format \"%.32s\" (use pprof, folded, groups or lines)",
                             format);
        }
        return FC_OK;
    }
    if (ct != NULL && (strstr(ct, "+trie") != NULL || strstr(ct, "+tree") != NULL)) {
        return fc_errorf(err, FC_ENOTSUP,
                         "Content-Type %.64s (trie/tree) is not supported by "
                         "flamecol; send pprof or folded",
                         ct);
    }
    if (ct != NULL && strncasecmp(ct, "multipart/form-data", 19) == 0) {
        *fmt = FORMAT_MULTIPART;
    } else if (ct != NULL && strncasecmp(ct, "application/octet-stream", 24) == 0) {
        *fmt = FORMAT_PPROF; /* the raw pprof body the Node.js SDK 0.6 sends */
    } else {
        *fmt = FORMAT_FOLDED;
    }
    return FC_OK;
}

/* Series labels every profile of the push gets from `name` and spyName. */
static int name_labels(struct ingest *in, struct fc_batch *b, struct fc_profile *p,
                       const char *service)
{
    bool has_service = false;
    int rc = FC_OK;

    for (size_t i = 0; i < in->name.n_labels && rc == FC_OK; i++) {
        const char *k = in->name.labels[i].key;
        if (strncmp(k, "__", 2) == 0 && strcmp(k, "__session_id__") != 0) {
            continue; /* reserved names are Pyroscope's own */
        }
        has_service = has_service || strcmp(k, "service_name") == 0;
        rc = fc_profile_set_label(b, p, k, in->name.labels[i].value);
    }
    if (rc == FC_OK) {
        if (!has_service) {
            rc = fc_profile_set_label(b, p, "service_name", service);
        } else if (fc_profile_label(b, p, "app_name") == NULL) {
            rc = fc_profile_set_label(b, p, "app_name", service);
        }
    }
    if (rc == FC_OK && in->spy != NULL && in->spy[0] != '\0') {
        rc = fc_profile_set_label(b, p, "pyroscope_spy", in->spy);
    }
    return rc;
}

/* The app name without a known type suffix (".cpu", ".alloc_space", ...). */
static void service_name(const char *app, char *out, size_t size, const char **suffix)
{
    const char *dot = strrchr(app, '.');

    *suffix = NULL;
    snprintf(out, size, "%s", app);
    if (dot != NULL && fc_pyro_suffix_type(dot + 1) != NULL) {
        *suffix = dot + 1;
        out[dot - app < (long)size ? dot - app : (long)size - 1] = '\0';
    }
}

static int parse_type_config(struct ingest *in, struct fc_batch *b,
                             const struct fc_multipart_part *part, struct fc_error *err)
{
    struct fc_json *root;
    int rc = fc_json_parse(b->arena, (const char *)part->data, part->len, &root, err);

    if (rc != FC_OK) {
        return fc_error_wrap(err, "sample_type_config");
    }
    if (root->type != FC_JSON_OBJECT) {
        return fc_errorf(err, FC_EPROTO, "sample_type_config: expected a JSON object");
    }
    for (size_t i = 0; i < root->n && in->n_configs < 32; i++) {
        struct fc_pyro_type_config *c = &in->configs[in->n_configs++];
        const struct fc_json *v = root->items[i];
        const struct fc_json *f;
        fc_pyro_default_type_config(root->keys[i], c);
        if (v->type != FC_JSON_OBJECT) {
            return fc_errorf(err, FC_EPROTO, "sample_type_config.%s: expected an object",
                             root->keys[i]);
        }
        if ((f = fc_json_get(v, "units")) != NULL && f->type == FC_JSON_STRING) {
            snprintf(c->units, sizeof(c->units), "%s", f->str);
        }
        if ((f = fc_json_get(v, "aggregation")) != NULL && f->type == FC_JSON_STRING) {
            snprintf(c->aggregation, sizeof(c->aggregation), "%s", f->str);
        }
        if ((f = fc_json_get(v, "display-name")) != NULL && f->type == FC_JSON_STRING) {
            snprintf(c->display_name, sizeof(c->display_name), "%s", f->str);
        }
        if ((f = fc_json_get(v, "sampled")) != NULL && f->type == FC_JSON_BOOL) {
            c->sampled = f->b;
        }
        if ((f = fc_json_get(v, "cumulative")) != NULL && f->type == FC_JSON_BOOL) {
            c->cumulative = f->b;
        }
    }
    return FC_OK;
}

static bool cumulative(const struct ingest *in, const char *type)
{
    struct fc_pyro_type_config dflt;

    for (size_t i = 0; i < in->n_configs; i++) {
        if (strcmp(in->configs[i].type, type) == 0) {
            return in->configs[i].cumulative;
        }
    }
    return fc_pyro_default_type_config(type, &dflt) && dflt.cumulative;
}

struct sample_key {
    uint64_t hash; /* of stack and label indices */
    uint32_t index;
};

static int key_cmp(const void *a, const void *b)
{
    const struct sample_key *x = a, *y = b;

    return x->hash < y->hash ? -1 : x->hash > y->hash;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

    return x < y ? -1 : x > y;
}

/*
 * The sample labels of every sample of a profile, each sample's sorted: a
 * pprof sample's labels are a set, so {a, b} in the profile pairs with
 * {b, a} in prev_profile.
 */
struct label_sets {
    uint32_t *idx;
    size_t *off; /* sample i's labels: idx[off[i]] .. idx[off[i + 1]] */
};

static void label_sets_init(struct label_sets *ls, const struct fc_batch *b,
                            const struct fc_profile *p)
{
    size_t total = 0;

    for (uint32_t i = 0; i < p->n_samples; i++) {
        total += p->samples[i].attrs.n;
    }
    ls->idx = fc_xcalloc(total + 1, sizeof(uint32_t));
    ls->off = fc_xcalloc((size_t)p->n_samples + 1, sizeof(size_t));
    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_span a = p->samples[i].attrs;
        ls->off[i + 1] = ls->off[i] + a.n;
        if (a.n > 0) {
            memcpy(ls->idx + ls->off[i], fc_span_idx(b, a), a.n * sizeof(uint32_t));
            qsort(ls->idx + ls->off[i], a.n, sizeof(uint32_t), u32_cmp);
        }
    }
}

static void label_sets_release(struct label_sets *ls)
{
    free(ls->idx);
    free(ls->off);
}

static uint64_t sample_hash(const struct fc_sample *s, const struct label_sets *ls, uint32_t i)
{
    uint64_t h = XXH3_64bits(&s->stack, sizeof(s->stack));

    return XXH3_64bits_withSeed(ls->idx + ls->off[i],
                                (ls->off[i + 1] - ls->off[i]) * sizeof(uint32_t), h);
}

/* Same stack and same label set: sample xi of xs and sample yi of ys. */
static bool same_identity(const struct fc_sample *x, const struct label_sets *xs, uint32_t xi,
                          const struct fc_sample *y, const struct label_sets *ys, uint32_t yi)
{
    size_t n = xs->off[xi + 1] - xs->off[xi];

    return x->stack == y->stack && n == ys->off[yi + 1] - ys->off[yi] &&
           (n == 0 ||
            memcmp(xs->idx + xs->off[xi], ys->idx + ys->off[yi], n * sizeof(uint32_t)) == 0);
}

/*
 * The index of the first prev sample (in key order) with the same stack and
 * label set as sample i of p, or UINT32_MAX: every sample of one identity
 * finds the same one.
 */
static uint32_t find_prev(const struct fc_profile *prev, const struct label_sets *prev_ls,
                          const struct sample_key *keys, const struct fc_profile *p,
                          const struct label_sets *p_ls, uint32_t i)
{
    const struct fc_sample *s = &p->samples[i];
    uint64_t h = sample_hash(s, p_ls, i);
    size_t lo = 0, hi = prev->n_samples;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (keys[mid].hash < h) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    for (; lo < prev->n_samples && keys[lo].hash == h; lo++) {
        const struct fc_sample *ps = &prev->samples[keys[lo].index];
        if (same_identity(ps, prev_ls, keys[lo].index, s, p_ls, i)) {
            return keys[lo].index;
        }
    }
    return UINT32_MAX;
}

/*
 * profile - prev for cumulative sample types (v0 Pyroscope's delta of two
 * consecutive cumulative profiles) per stack and label set, as pprof's
 * -diff_base computes it: the sum of the profile's samples of one identity
 * minus the sum of prev's, in whatever order either lists them. What prev
 * has of an identity is taken from the profile's samples of it in turn, none
 * below 0 (a counter reset). Both were decoded into one batch, so stacks and
 * labels compare by index.
 */
static int subtract_prev(struct ingest *in, struct fc_batch *b, struct fc_profile *p,
                         const struct fc_profile *prev, struct fc_error *err)
{
    uint32_t nt = p->n_sample_types;
    struct sample_key *keys;
    struct label_sets p_ls, prev_ls;
    int64_t *left; /* per prev identity (its first sample) and type: prev's sum not yet taken */
    bool *cum;

    if (prev->n_sample_types != nt) {
        return fc_errorf(err, FC_EPROTO, "prev_profile has %u sample types, profile has %u",
                         prev->n_sample_types, nt);
    }
    cum = fc_xcalloc(nt + 1, sizeof(bool));
    for (uint32_t t = 0; t < nt; t++) {
        cum[t] = cumulative(in, fc_str(b, p->sample_types[t].type));
    }
    label_sets_init(&p_ls, b, p);
    label_sets_init(&prev_ls, b, prev);
    keys = fc_xcalloc(prev->n_samples + 1, sizeof(*keys));
    for (uint32_t i = 0; i < prev->n_samples; i++) {
        keys[i].hash = sample_hash(&prev->samples[i], &prev_ls, i);
        keys[i].index = i;
    }
    qsort(keys, prev->n_samples, sizeof(*keys), key_cmp);
    left = fc_xcalloc((size_t)prev->n_samples * nt + 1, sizeof(int64_t));
    for (uint32_t i = 0; i < prev->n_samples; i++) {
        const struct fc_sample *ps = &prev->samples[i];
        uint32_t first = find_prev(prev, &prev_ls, keys, prev, &prev_ls, i);
        for (uint32_t t = 0; t < nt && t < ps->n_values; t++) {
            int64_t *l = &left[(size_t)first * nt + t];
            if (__builtin_add_overflow(*l, prev->nums[ps->values_off + t], l)) {
                *l = prev->nums[ps->values_off + t] > 0 ? INT64_MAX : INT64_MIN;
            }
        }
    }
    for (uint32_t i = 0; i < p->n_samples; i++) {
        struct fc_sample *s = &p->samples[i];
        uint32_t first = find_prev(prev, &prev_ls, keys, p, &p_ls, i);
        if (first == UINT32_MAX) {
            continue;
        }
        for (uint32_t t = 0; t < nt && t < s->n_values; t++) {
            int64_t *v = &p->nums[s->values_off + t];
            int64_t *l = &left[(size_t)first * nt + t];
            int64_t take;
            if (!cum[t] || *l <= 0) {
                continue;
            }
            take = *v < *l ? (*v > 0 ? *v : 0) : *l;
            *v -= take;
            *l -= take;
        }
    }
    free(left);
    free(keys);
    label_sets_release(&p_ls);
    label_sets_release(&prev_ls);
    free(cum);
    return FC_OK;
}

static int ingest_pprof(struct ingest *in, struct fc_batch *b, const uint8_t *data, size_t len,
                        const uint8_t *prev_data, size_t prev_len, struct fc_error *err)
{
    struct fc_profile *p = NULL;
    char service[256];
    char name[64];
    const char *suffix;
    int rc = fc_pprof_decode(b, data, len, &in->r->limits, &p, err);

    if (rc != FC_OK) {
        return rc;
    }
    if (prev_data != NULL) {
        struct fc_profile *prev = NULL;
        rc = fc_pprof_decode(b, prev_data, prev_len, &in->r->limits, &prev, err);
        if (rc != FC_OK) {
            return fc_error_wrap(err, "prev_profile");
        }
        p = &b->profiles[0]; /* the array may have moved */
        rc = subtract_prev(in, b, p, prev, err);
        b->n_profiles--; /* prev only served the subtraction */
        if (rc != FC_OK) {
            return rc;
        }
    }
    service_name(in->name.app, service, sizeof(service), &suffix);
    rc = name_labels(in, b, p, service);
    fc_pyro_profile_name(b, p, in->configs, in->n_configs, name, sizeof(name));
    rc = rc ? rc : fc_profile_set_label(b, p, "__name__", name);
    if (rc != FC_OK) {
        return fc_errorf(err, FC_ETOOBIG, "profile exceeds the memory limit");
    }
    /* A pprof without a usable time (0 or 1970) takes the push's `from`. */
    if (p->time_ns < 365LL * 86400 * 1000000000LL) {
        p->time_ns = in->from_ns;
    }
    if (p->duration_ns == 0 && in->until_ns > in->from_ns) {
        p->duration_ns = in->until_ns - in->from_ns;
    }
    /* No period in the pprof: the sampleRate parameter gives one. */
    if (p->period == 0 && strcmp(name, "process_cpu") == 0 && in->sample_rate > 0) {
        p->period = 1000000000LL / in->sample_rate;
    }
    return pprof_profile_id_to_span_id(b);
}

static int ingest_folded(struct ingest *in, struct fc_batch *b, bool lines, struct fc_error *err)
{
    char service[256];
    const char *suffix;
    const struct fc_pyro_suffix_type *t;
    struct fc_profile *p = fc_batch_add_profile(b);
    struct fc_value_type vt;
    int64_t period = 0;
    int rc;

    if (p == NULL) {
        return fc_errorf(err, FC_ETOOBIG, "profile exceeds the memory limit");
    }
    service_name(in->name.app, service, sizeof(service), &suffix);
    if (suffix == NULL && strchr(in->name.app, '.') != NULL) {
        const char *dot = strrchr(in->name.app, '.');
        /* Pyroscope: for folded pushes the last '.' names the type. */
        return fc_errorf(err, FC_EPROTO, "unknown profile type: %s", dot + 1);
    }
    t = fc_pyro_suffix_type(suffix ? suffix : "cpu");
    rc = fc_dict_cstring(b, t->type ? t->type : suffix, &vt.type);
    rc = rc ? rc : fc_dict_cstring(b, t->unit, &vt.unit);
    if ((strcmp(t->name, "process_cpu") == 0 || strcmp(t->name, "wall") == 0) &&
        in->sample_rate > 0) {
        /* Sampled counts become time: value * (1e9 / sampleRate) ns. */
        period = 1000000000LL / in->sample_rate;
        rc = rc ? rc : fc_dict_cstring(b, strcmp(t->name, "wall") == 0 ? "wall" : "cpu", &vt.type);
        rc = rc ? rc : fc_dict_cstring(b, "nanoseconds", &vt.unit);
        rc = rc ? rc : fc_dict_cstring(b, "cpu", &p->period_type.type);
        rc = rc ? rc : fc_dict_cstring(b, "nanoseconds", &p->period_type.unit);
    } else {
        p->period_type = vt;
    }
    rc = rc ? rc : fc_profile_set_sample_types(b, p, &vt, 1);
    if (rc != FC_OK) {
        return fc_errorf(err, FC_ETOOBIG, "profile exceeds the memory limit");
    }
    p->period = period;
    /* Deep stacks are cut (and counted) with every other format's, in pprof_deliver. */
    rc = fc_folded_decode(b, p, (const char *)in->req->body, in->req->body_len, lines, 0, err);
    if (rc != FC_OK) {
        return rc;
    }
    if (period > 0) {
        for (uint32_t i = 0; i < p->n_samples; i++) {
            p->nums[p->samples[i].values_off] *= period;
        }
    }
    p->time_ns = in->from_ns;
    p->duration_ns = in->until_ns > in->from_ns ? in->until_ns - in->from_ns : 0;
    rc = name_labels(in, b, p, service);
    rc = rc ? rc : fc_profile_set_label(b, p, "__name__", t->name);
    return rc == FC_OK ? FC_OK : fc_errorf(err, FC_ETOOBIG, "profile exceeds the memory limit");
}

void pprof_handle_ingest(void *ctx, const struct fc_http_request *req,
                         struct fc_http_response *resp)
{
    struct ingest *in = fc_xcalloc(1, sizeof(*in));
    struct fc_error err = {0};
    struct fc_batch *b = NULL;
    enum body_format fmt = FORMAT_FOLDED;
    const char *tenant;
    int rc;

    in->r = ctx;
    in->req = req;
    in->resp = resp;
    if (pprof_check_request(in->r, req, resp, &tenant) != 0) {
        goto out;
    }
    if (parse_params(in, &err) != FC_OK || decide_format(in, &fmt, &err) != FC_OK) {
        bad_request(in, err.code == FC_ENOTSUP ? 400 : 0, &err);
        goto out;
    }
    b = pprof_new_batch(in->r, tenant);
    if (b == NULL) {
        fc_errorf(&err, FC_EUNAVAIL, "out of memory");
        bad_request(in, 503, &err);
        goto out;
    }
    if (req->body_len == 0) {
        fc_errorf(&err, FC_EPROTO, "empty request body");
        bad_request(in, 400, &err);
        goto out;
    }
    switch (fmt) {
    case FORMAT_PPROF:
        rc = ingest_pprof(in, b, req->body, req->body_len, NULL, 0, &err);
        break;
    case FORMAT_MULTIPART: {
        struct fc_multipart_part parts[FC_MULTIPART_MAX_PARTS];
        size_t n = 0;
        const struct fc_multipart_part *profile, *prev, *types;
        rc = fc_multipart_parse(fc_http_header(req, "Content-Type"), req->body, req->body_len,
                                parts, &n, &err);
        if (rc != FC_OK) {
            bad_request(in, 400, &err);
            goto out;
        }
        profile = fc_multipart_find(parts, n, "profile");
        prev = fc_multipart_find(parts, n, "prev_profile");
        types = fc_multipart_find(parts, n, "sample_type_config");
        if (profile == NULL) {
            fc_errorf(&err, FC_EPROTO, "multipart body has no 'profile' part");
            bad_request(in, 400, &err);
            goto out;
        }
        if (types != NULL && (rc = parse_type_config(in, b, types, &err)) != FC_OK) {
            bad_request(in, 400, &err);
            goto out;
        }
        rc = ingest_pprof(in, b, profile->data, profile->len, prev ? prev->data : NULL,
                          prev ? prev->len : 0, &err);
        break;
    }
    case FORMAT_LINES:
    case FORMAT_FOLDED:
        rc = ingest_folded(in, b, fmt == FORMAT_LINES, &err);
        if (rc == FC_EPROTO) {
            bad_request(in, 400, &err);
            goto out;
        }
        break;
    default:
        rc = fc_errorf(&err, FC_EINVAL, "unreachable format");
    }
    if (rc != FC_OK) {
        /* A profile that does not decode is 422, as in Pyroscope; limits are 413. */
        bad_request(in, rc == FC_EPROTO ? 422 : 0, &err);
        goto out;
    }
    pprof_deliver(in->r, b, resp);
out:
    fc_batch_unref(b);
    free(in);
}
