/*
 * POST /push.v1.PusherService/Push (Connect unary, application/proto or
 * application/json): series labels plus raw pprof samples, as Pyroscope's
 * PushRequest defines them (series=1: labels=1 {name=1,value=2},
 * samples=2 {raw_profile=1, ID=2}).
 */
#include "receivers/pprof/pprof.h"

#include "formats/gzip.h"
#include "formats/json.h"
#include "formats/pb.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* Labels of the series being decoded; they point into the request or the arena. */
struct series_labels {
    const char *names[64];
    size_t name_lens[64];
    const char *values[64];
    size_t value_lens[64];
    size_t n;
};

/* Lengths are checked with every other label's, by the receiver's caps (pprof_deliver). */
static int apply_labels(struct fc_batch *b, struct fc_profile *p, const struct series_labels *l,
                        struct fc_error *err)
{
    int rc = FC_OK;

    for (size_t i = 0; i < l->n && rc == FC_OK; i++) {
        const char *name, *value;
        if (l->name_lens[i] == 0) {
            return fc_errorf(err, FC_EPROTO, "series label %zu: empty name", i);
        }
        name = fc_arena_strndup(b->arena, l->names[i], l->name_lens[i]);
        value = fc_arena_strndup(b->arena, l->values[i], l->value_lens[i]);
        rc = name && value ? fc_profile_set_label(b, p, name, value) : FC_ETOOBIG;
    }
    if (rc == FC_OK && fc_profile_label(b, p, "service_name") == NULL) {
        rc = fc_profile_set_label(b, p, "service_name", "unknown_service");
    }
    return rc == FC_OK ? FC_OK : fc_errorf(err, FC_ETOOBIG, "profile exceeds the memory limit");
}

static int add_sample(struct pprof_receiver *r, struct fc_batch *b, const struct series_labels *l,
                      const uint8_t *raw, size_t len, size_t series, struct fc_error *err)
{
    struct fc_profile *p = NULL;
    int rc = fc_pprof_decode(b, raw, len, &r->limits, &p, err);

    if (rc != FC_OK) {
        return fc_error_wrap(err, "series %zu", series);
    }
    return apply_labels(b, p, l, err);
}

static int decode_proto(struct pprof_receiver *r, struct fc_batch *b, const uint8_t *data,
                        size_t len, struct fc_error *err)
{
    struct fc_pb req, ser, sub;
    struct fc_pb_field f, g, h;
    size_t series = 0;

    fc_pb_init(&req, data, len);
    while (!fc_pb_done(&req)) {
        struct series_labels labels = {0};
        if (fc_pb_next(&req, &f) != 0) {
            return fc_errorf(err, FC_EPROTO, "PushRequest: malformed protobuf");
        }
        if (f.number != 1) {
            continue;
        }
        if (f.wire != FC_PB_LEN) {
            return fc_errorf(err, FC_EPROTO, "PushRequest.series: wrong wire type");
        }
        /* Labels first: they may follow the samples on the wire. */
        fc_pb_init(&ser, f.data, f.len);
        while (!fc_pb_done(&ser)) {
            if (fc_pb_next(&ser, &g) != 0) {
                return fc_errorf(err, FC_EPROTO, "series %zu: malformed protobuf", series);
            }
            if (g.number != 1 || g.wire != FC_PB_LEN) {
                continue;
            }
            if (labels.n >= 64) {
                return fc_errorf(err, FC_EPROTO, "series %zu: more than 64 labels", series);
            }
            labels.names[labels.n] = "";
            labels.values[labels.n] = "";
            labels.name_lens[labels.n] = labels.value_lens[labels.n] = 0;
            fc_pb_init(&sub, g.data, g.len);
            while (!fc_pb_done(&sub)) {
                if (fc_pb_next(&sub, &h) != 0 || h.wire != FC_PB_LEN) {
                    return fc_errorf(err, FC_EPROTO, "series %zu: malformed LabelPair", series);
                }
                if (h.number == 1) {
                    labels.names[labels.n] = (const char *)h.data;
                    labels.name_lens[labels.n] = h.len;
                } else if (h.number == 2) {
                    labels.values[labels.n] = (const char *)h.data;
                    labels.value_lens[labels.n] = h.len;
                }
            }
            labels.n++;
        }
        fc_pb_init(&ser, f.data, f.len);
        while (!fc_pb_done(&ser)) {
            const uint8_t *raw = NULL;
            size_t raw_len = 0;
            int rc;
            if (fc_pb_next(&ser, &g) != 0) {
                return fc_errorf(err, FC_EPROTO, "series %zu: malformed protobuf", series);
            }
            if (g.number != 2 || g.wire != FC_PB_LEN) {
                continue;
            }
            fc_pb_init(&sub, g.data, g.len);
            while (!fc_pb_done(&sub)) {
                if (fc_pb_next(&sub, &h) != 0) {
                    return fc_errorf(err, FC_EPROTO, "series %zu: malformed RawSample", series);
                }
                if (h.number == 1 && h.wire == FC_PB_LEN) {
                    raw = h.data;
                    raw_len = h.len;
                }
            }
            rc = add_sample(r, b, &labels, raw, raw_len, series, err);
            if (rc != FC_OK) {
                return rc;
            }
        }
        series++;
    }
    return FC_OK;
}

static const struct fc_json *get2(const struct fc_json *o, const char *a, const char *b)
{
    const struct fc_json *v = fc_json_get(o, a);
    return v ? v : fc_json_get(o, b);
}

static int decode_json(struct pprof_receiver *r, struct fc_batch *b, const uint8_t *data,
                       size_t len, struct fc_error *err)
{
    struct fc_json *root;
    const struct fc_json *series;
    unsigned depth = (unsigned)r->cfg->limits.max_message_depth;
    char too_deep[96];
    int rc;

    /* Each message level is at most two JSON levels (an object and an array). */
    snprintf(too_deep, sizeof(too_deep), "nested deeper than max_message_depth (%u) allows", depth);
    rc = fc_json_parse_depth(b->arena, (const char *)data, len, 2 * depth, too_deep, &root, err);

    if (rc != FC_OK) {
        return fc_error_wrap(err, "PushRequest");
    }
    series = fc_json_get(root, "series");
    if (series == NULL || series->type == FC_JSON_NULL) {
        return FC_OK;
    }
    if (series->type != FC_JSON_ARRAY) {
        return fc_errorf(err, FC_EPROTO, "PushRequest.series: expected an array");
    }
    for (size_t i = 0; i < series->n; i++) {
        const struct fc_json *s = series->items[i];
        const struct fc_json *labels = fc_json_get(s, "labels");
        const struct fc_json *samples = fc_json_get(s, "samples");
        struct series_labels l = {0};
        for (size_t j = 0; labels != NULL && labels->type == FC_JSON_ARRAY && j < labels->n; j++) {
            const struct fc_json *name = fc_json_get(labels->items[j], "name");
            const struct fc_json *value = fc_json_get(labels->items[j], "value");
            if (name == NULL || name->type != FC_JSON_STRING || l.n >= 64 ||
                (value != NULL && value->type != FC_JSON_STRING)) {
                return fc_errorf(err, FC_EPROTO, "series %zu: label %zu needs string name/value", i,
                                 j);
            }
            l.names[l.n] = name->str;
            l.name_lens[l.n] = name->len;
            l.values[l.n] = value ? value->str : "";
            l.value_lens[l.n] = value ? value->len : 0;
            l.n++;
        }
        for (size_t j = 0; samples != NULL && samples->type == FC_JSON_ARRAY && j < samples->n;
             j++) {
            const struct fc_json *raw = get2(samples->items[j], "rawProfile", "raw_profile");
            uint8_t *bytes = NULL;
            size_t n = 0;
            if (raw == NULL || raw->type != FC_JSON_STRING ||
                fc_base64_decode(b->arena, raw->str, raw->len, &bytes, &n) != FC_OK) {
                return fc_errorf(err, FC_EPROTO, "series %zu sample %zu: rawProfile must be base64",
                                 i, j);
            }
            if ((rc = add_sample(r, b, &l, bytes, n, i, err)) != FC_OK) {
                return rc;
            }
        }
    }
    return FC_OK;
}

void pprof_handle_push(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct pprof_receiver *r = ctx;
    const char *ct = fc_http_header(req, "Content-Type");
    const char *ce = fc_http_header(req, "Content-Encoding");
    struct fc_error err = {0};
    struct fc_buf plain;
    struct fc_batch *b = NULL;
    const uint8_t *data = req->body;
    size_t len = req->body_len;
    bool json;
    const char *tenant;
    int rc;

    fc_buf_init(&plain, 0);
    if (pprof_check_request(r, req, resp, &tenant) != 0) {
        goto out;
    }
    if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0) {
        json = true;
    } else if (ct != NULL && (strncasecmp(ct, "application/proto", 17) == 0 ||
                              strncasecmp(ct, "application/x-protobuf", 22) == 0)) {
        json = false;
    } else {
        fc_errorf(&err, FC_EPROTO, "Content-Type must be application/proto or application/json");
        pprof_error(r, resp, 415, &err);
        goto out;
    }
    if (ce != NULL && strcasecmp(ce, "gzip") == 0) {
        rc = fc_gunzip(data, len, r->limits.max_decompressed, &plain, &err);
        if (rc != FC_OK) {
            pprof_error(r, resp, rc == FC_ETOOBIG ? 413 : 400, &err);
            goto out;
        }
        data = plain.data;
        len = plain.len;
    } else if (ce != NULL && strcasecmp(ce, "identity") != 0) {
        fc_errorf(&err, FC_ENOTSUP, "Content-Encoding %.32s is not supported (gzip is)", ce);
        pprof_error(r, resp, 415, &err);
        goto out;
    }
    if (len == 0 && json) {
        /* An empty proto body is an empty PushRequest: "no profiles received" below. */
        fc_errorf(&err, FC_EPROTO, "empty body");
        pprof_error(r, resp, 400, &err);
        goto out;
    }
    b = pprof_new_batch(r, tenant);
    if (b == NULL) {
        fc_errorf(&err, FC_EUNAVAIL, "out of memory");
        pprof_error(r, resp, 503, &err);
        goto out;
    }
    rc = json ? decode_json(r, b, data, len, &err) : decode_proto(r, b, data, len, &err);
    if (rc == FC_OK && b->n_profiles == 0) {
        rc = fc_errorf(&err, FC_EPROTO, "no profiles received");
    }
    if (rc == FC_OK) {
        rc = pprof_profile_id_to_span_id(b);
        if (rc != FC_OK) {
            fc_errorf(&err, rc, "profile exceeds the memory limit");
        }
    }
    if (rc != FC_OK) {
        /* Connect: bad data is invalid_argument (400); limits resource_exhausted. */
        pprof_error(r, resp, rc == FC_EPROTO ? 400 : 0, &err);
        goto out;
    }
    pprof_deliver(r, b, resp);
    if (resp->status == 200) {
        resp->content_type = json ? "application/json" : "application/proto";
        if (json) {
            fc_buf_puts(&resp->body, "{}");
        }
    }
out:
    fc_batch_unref(b);
    fc_buf_release(&plain);
}
