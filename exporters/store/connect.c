/*
 * Pyroscope's Connect API, POST /querier.v1.QuerierService/<Method>, in
 * application/proto and application/json (Content-Encoding gzip too), so
 * Grafana's Pyroscope data source and other Connect clients can query the
 * store: ProfileTypes, LabelNames, LabelValues, Series,
 * SelectMergeStacktraces, SelectMergeProfile and SelectSeries. Times are
 * Unix milliseconds. Errors are Connect's JSON {code, message}.
 */
#include "exporters/store/store.h"

#include "core/buf.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "formats/flamebearer.h"
#include "formats/gzip.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "google/v1/profile.pb-c.h"
#include "querier/v1/querier.pb-c.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PREFIX "/querier.v1.QuerierService/"

/*
 * Client times are Unix milliseconds; those beyond +-4e12 (year 2096) are
 * refused, so that ms -> ns, differences and rounding to a step (itself at
 * most MAX_MS) all fit in int64.
 */
#define MAX_MS 4000000000000LL
/* Points per series of SelectSeries, as Prometheus caps a range query. */
#define MAX_POINTS 11000

struct call {
    struct store_exporter *x;
    struct fc_arena *arena; /* request and response messages */
    const char *tenant;
    bool json;
    struct fc_http_response *resp;
    struct fc_error err;
    const char *msg; /* when set (arena): the error's message, longer than err.msg holds */
};

/* Whether start and end (ms) are in range; else c->err names the field. */
static bool times_ok(struct call *c, int64_t start_ms, int64_t end_ms)
{
    if (start_ms < -MAX_MS || start_ms > MAX_MS) {
        fc_errorf(&c->err, FC_EPROTO, "start: %lld ms is out of range", (long long)start_ms);
        return false;
    }
    if (end_ms < -MAX_MS || end_ms > MAX_MS) {
        fc_errorf(&c->err, FC_EPROTO, "end: %lld ms is out of range", (long long)end_ms);
        return false;
    }
    return true;
}

static void *arena_alloc(void *data, size_t size)
{
    return fc_arena_alloc(data, size);
}

static void arena_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

static void connect_error(struct fc_http_response *resp, int status, const char *code,
                          const char *msg)
{
    resp->status = status;
    resp->content_type = "application/json";
    fc_buf_reset(&resp->body);
    fc_buf_printf(&resp->body, "{\"code\":\"%s\",\"message\":\"", code);
    fc_buf_json_escape(&resp->body, msg, strlen(msg));
    fc_buf_puts(&resp->body, "\"}");
}

static void *read_request(struct call *c, const ProtobufCMessageDescriptor *d, const uint8_t *body,
                          size_t len)
{
    void *m = NULL;

    if (c->json) {
        if (fc_pbjson_read(c->arena, d, len ? (const char *)body : "{}", len ? len : 2, &m,
                           &c->err) != FC_OK) {
            return NULL;
        }
        return m;
    }
    {
        ProtobufCAllocator alloc = {arena_alloc, arena_free, c->arena};
        /* protobuf-c recurses per nested message: bound it before unpacking. */
        if (fc_pb_check_depth(d, body, len, FC_PB_DEFAULT_MAX_DEPTH, &c->err) != FC_OK) {
            return NULL;
        }
        m = protobuf_c_message_unpack(d, &alloc, len, body);
        if (m == NULL) {
            fc_errorf(&c->err, FC_EPROTO, "%s: malformed protobuf", d->short_name);
        }
        return m;
    }
}

static void answer(struct call *c, const ProtobufCMessage *m)
{
    c->resp->status = 200;
    c->resp->content_type = c->json ? "application/json" : "application/proto";
    if (c->json) {
        fc_pbjson_write(m, &c->resp->body);
    } else {
        size_t n = protobuf_c_message_get_packed_size(m);
        if (fc_buf_reserve(&c->resp->body, n) == FC_OK) {
            protobuf_c_message_pack(m, c->resp->body.data);
            c->resp->body.len = n;
        }
    }
}

static void *anew(struct call *c, size_t n)
{
    void *p = fc_arena_calloc(c->arena, n ? n : 1, 1);
    if (p == NULL) {
        abort(); /* the call's arena has no budget */
    }
    return p;
}

/* Part i of a profile type id name:sample_type:sample_unit:period_type:period_unit. */
static char *id_part(struct call *c, const char *id, int i)
{
    const char *p = id;
    size_t n;

    for (int k = 0; k < i && p != NULL; k++) {
        p = strchr(p, ':');
        p = p ? p + 1 : NULL;
    }
    if (p == NULL) {
        return (char *)"";
    }
    n = strchr(p, ':') ? (size_t)(strchr(p, ':') - p) : strlen(p);
    return fc_arena_strndup(c->arena, p, n);
}

/* Length and code point of the UTF-8 sequence at u, or 0 when it is not one (Go's RuneError). */
static size_t utf8_rune(const unsigned char *u, uint32_t *r)
{
    size_t need = u[0] >= 0xF0 ? 3 : u[0] >= 0xE0 ? 2 : u[0] >= 0xC2 ? 1 : 0;

    if (need == 0 || u[0] > 0xF4) {
        return 0;
    }
    *r = u[0] & (0x3F >> need);
    for (size_t k = 1; k <= need; k++) {
        if ((u[k] & 0xC0) != 0x80) {
            return 0; /* also stops at the terminating NUL */
        }
        *r = *r << 6 | (u[k] & 0x3F);
    }
    if ((need == 2 && (*r < 0x800 || (*r >= 0xD800 && *r <= 0xDFFF))) ||
        (need == 3 && (*r < 0x10000 || *r > 0x10FFFF))) {
        return 0; /* overlong, surrogate, or past U+10FFFF */
    }
    return need + 1;
}

/* Appends s quoted as Go's %q (strconv.Quote): exact for ASCII, close for the rest. */
static void go_quote(struct fc_buf *out, const char *s)
{
    const unsigned char *u = (const unsigned char *)s;

    fc_buf_puts(out, "\"");
    while (*u != '\0') {
        uint32_t r = *u;
        size_t len = r < 0x80 ? 1 : utf8_rune(u, &r);
        const char *named = r == '\a'   ? "\\a"
                            : r == '\b' ? "\\b"
                            : r == '\f' ? "\\f"
                            : r == '\n' ? "\\n"
                            : r == '\r' ? "\\r"
                            : r == '\t' ? "\\t"
                            : r == '\v' ? "\\v"
                            : r == '"'  ? "\\\""
                            : r == '\\' ? "\\\\"
                                        : NULL;
        if (len == 0) {
            fc_buf_printf(out, "\\x%02x", *u);
            len = 1;
        } else if (named != NULL) {
            fc_buf_puts(out, named);
        } else if (r < 0x20 || r == 0x7F) {
            fc_buf_printf(out, "\\x%02x", (unsigned)r);
        } else if ((r >= 0x80 && r <= 0xA0) || r == 0xAD || (r >= 0x200B && r <= 0x200F) ||
                   r == 0x2028 || r == 0x2029 || r == 0xFEFF) {
            fc_buf_printf(out, "\\u%04x", (unsigned)r); /* not unicode.IsPrint */
        } else {
            fc_buf_append(out, u, len);
        }
        u += len;
    }
    fc_buf_puts(out, "\"");
}

bool store_profile_type_valid(const char *id)
{
    size_t parts = 1;

    for (const char *p = id; *p != '\0'; p++) {
        parts += *p == ':';
    }
    return parts == 5 || parts == 6;
}

/*
 * Pyroscope's model.ParseProfileTypeSelector: an id of 5 colon-separated
 * parts, or 6 (a trailing `delta` part the stored type does not carry).
 * Returns the 5-part id (arena); else NULL with Pyroscope's message.
 */
static char *parse_type_id(struct call *c, const char *id)
{
    struct fc_buf msg;
    size_t parts = 1;
    const char *sixth = NULL;

    for (const char *p = id; *p != '\0'; p++) {
        if (*p == ':' && ++parts == 6) {
            sixth = p;
        }
    }
    if (store_profile_type_valid(id)) {
        return fc_arena_strndup(c->arena, id, sixth ? (size_t)(sixth - id) : strlen(id));
    }
    fc_buf_init(&msg, 0);
    fc_buf_printf(&msg,
                  "profile-type selection must be of the form "
                  "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>(:delta), "
                  "got(%zu): ",
                  parts);
    go_quote(&msg, id);
    c->msg = fc_arena_strndup(c->arena, (const char *)msg.data, msg.len);
    fc_errorf(&c->err, FC_EPROTO, "%s", c->msg);
    fc_buf_release(&msg);
    return NULL;
}

/* Parses every selector string; on error c->err says which. */
static bool parse_selectors(struct call *c, char **texts, size_t n, struct fc_selector **out)
{
    *out = fc_xcalloc(n + 1, sizeof(**out));
    for (size_t i = 0; i < n; i++) {
        if (fc_selector_parse(texts[i], &(*out)[i], &c->err) != FC_OK) {
            for (size_t j = 0; j < i; j++) {
                fc_selector_release(&(*out)[j]);
            }
            free(*out);
            return false;
        }
    }
    return true;
}

static void free_selectors(struct fc_selector *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        fc_selector_release(&s[i]);
    }
    free(s);
}

struct label_ref {
    const char *name, *value;
    size_t name_len, value_len;
};

/* A canonical label set (name 0x01 value 0x02 ...) as pairs in the call's arena: all of them. */
static size_t split_labels(struct call *c, const char *canon, struct label_ref **out)
{
    size_t n = 0, cap = 0;

    for (const char *p = canon; *p; p++) {
        cap += *p == '\x02';
    }
    *out = anew(c, (cap ? cap : 1) * sizeof(**out));
    for (const char *p = canon; *p && n < cap;) {
        const char *sep = strchr(p, '\x01');
        const char *end = sep ? strchr(sep + 1, '\x02') : NULL;
        if (sep == NULL || end == NULL) {
            break;
        }
        (*out)[n].name = p;
        (*out)[n].name_len = (size_t)(sep - p);
        (*out)[n].value = sep + 1;
        (*out)[n].value_len = (size_t)(end - sep - 1);
        n++;
        p = end + 1;
    }
    return n;
}

static int by_cstr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Names (want_value == NULL) or values of one name, over the series of the
 * matchers with data in [start_ms, end_ms) (end_ms == 0: any time). Without
 * matchers or range they come straight from the label index.
 */
static void names_or_values(struct call *c, char **matchers, size_t n_matchers,
                            const char *want_value, int64_t start_ms, int64_t end_ms, char ***out,
                            size_t *n_out)
{
    struct fc_selector *sels;
    char **series;
    size_t n;
    size_t cap = 0;

    *out = NULL;
    *n_out = 0;
    if (!times_ok(c, start_ms, end_ms)) {
        return;
    }
    if (n_matchers == 0 && end_ms == 0) {
        if (want_value == NULL) {
            fc_store_label_names(c->x->store, c->tenant, out, n_out, &c->err);
        } else {
            fc_store_label_values(c->x->store, c->tenant, want_value, out, n_out, &c->err);
        }
        return;
    }
    if (end_ms != 0 && start_ms > end_ms) {
        fc_errorf(&c->err, FC_EPROTO, "start is after end");
        return;
    }
    if (!parse_selectors(c, matchers, n_matchers, &sels)) {
        return;
    }
    if (fc_store_series_labels(c->x->store, c->tenant, sels, n_matchers, start_ms * 1000000LL,
                               end_ms * 1000000LL, &series, &n, &c->err) != FC_OK) {
        free_selectors(sels, n_matchers);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        struct label_ref *l;
        size_t k = split_labels(c, series[i], &l);
        for (size_t j = 0; j < k; j++) {
            char *s;
            bool dup = false;
            if (want_value != NULL && (l[j].name_len != strlen(want_value) ||
                                       memcmp(l[j].name, want_value, l[j].name_len) != 0)) {
                continue;
            }
            s = want_value ? fc_xstrndup(l[j].value, l[j].value_len)
                           : fc_xstrndup(l[j].name, l[j].name_len);
            for (size_t m = 0; m < *n_out && !dup; m++) {
                dup = strcmp((*out)[m], s) == 0;
            }
            if (dup) {
                free(s);
                continue;
            }
            if (*n_out == cap) {
                cap = cap ? cap * 2 : 32;
                *out = fc_xrealloc(*out, cap * sizeof(char *));
            }
            (*out)[(*n_out)++] = s;
        }
    }
    if (*n_out > 1) {
        qsort(*out, *n_out, sizeof(char *), by_cstr);
    }
    fc_store_strings_free(series, n);
    free_selectors(sels, n_matchers);
}

static void profile_types(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__ProfileTypesResponse resp = QUERIER__V1__PROFILE_TYPES_RESPONSE__INIT;
    char **ids;
    size_t n;

    Querier__V1__ProfileTypesRequest *req =
        read_request(c, &querier__v1__profile_types_request__descriptor, body, len);

    if (req == NULL) {
        return;
    }
    names_or_values(c, NULL, 0, "__profile_type__", req->start, req->end, &ids, &n);
    if (c->err.code != FC_OK) {
        return;
    }
    resp.profile_types = anew(c, n * sizeof(Types__V1__ProfileType *));
    for (size_t i = 0; i < n; i++) {
        Types__V1__ProfileType *t = anew(c, sizeof(*t));
        types__v1__profile_type__init(t);
        t->id = fc_arena_strdup(c->arena, ids[i]);
        t->name = id_part(c, ids[i], 0);
        t->sample_type = id_part(c, ids[i], 1);
        t->sample_unit = id_part(c, ids[i], 2);
        t->period_type = id_part(c, ids[i], 3);
        t->period_unit = id_part(c, ids[i], 4);
        resp.profile_types[resp.n_profile_types++] = t;
    }
    fc_store_strings_free(ids, n);
    answer(c, &resp.base);
}

static char **arena_strings(struct call *c, char **v, size_t n)
{
    char **out = anew(c, n * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        out[i] = fc_arena_strdup(c->arena, v[i]);
    }
    return out;
}

/* Answers names_or_values(...) in a response whose strings are (*names, *n_names). */
static void answer_strings(struct call *c, char **matchers, size_t n_matchers, const char *name,
                           int64_t start_ms, int64_t end_ms, char ***names, size_t *n_names,
                           ProtobufCMessage *resp)
{
    char **v;
    size_t n;

    names_or_values(c, matchers, n_matchers, name, start_ms, end_ms, &v, &n);
    if (c->err.code != FC_OK) {
        return;
    }
    *names = arena_strings(c, v, n);
    *n_names = n;
    fc_store_strings_free(v, n);
    answer(c, resp);
}

static void label_names(struct call *c, const uint8_t *body, size_t len)
{
    Types__V1__LabelNamesRequest *req =
        read_request(c, &types__v1__label_names_request__descriptor, body, len);
    Types__V1__LabelNamesResponse resp = TYPES__V1__LABEL_NAMES_RESPONSE__INIT;

    if (req != NULL) {
        answer_strings(c, req->matchers, req->n_matchers, NULL, req->start, req->end, &resp.names,
                       &resp.n_names, &resp.base);
    }
}

static void label_values(struct call *c, const uint8_t *body, size_t len)
{
    Types__V1__LabelValuesRequest *req =
        read_request(c, &types__v1__label_values_request__descriptor, body, len);
    Types__V1__LabelValuesResponse resp = TYPES__V1__LABEL_VALUES_RESPONSE__INIT;

    if (req == NULL) {
        return;
    }
    if (req->name == NULL || req->name[0] == '\0') {
        fc_errorf(&c->err, FC_EPROTO, "name is required");
        return;
    }
    answer_strings(c, req->matchers, req->n_matchers, req->name, req->start, req->end, &resp.names,
                   &resp.n_names, &resp.base);
}

struct labels_row {
    const char *key; /* the answered label set, canonical (name 0x01 value 0x02 ...) */
    size_t index;
};

static int by_key_then_index(const void *a, const void *b)
{
    const struct labels_row *x = a, *y = b;
    int d = strcmp(x->key, y->key);
    return d != 0 ? d : x->index < y->index ? -1 : x->index > y->index;
}

/*
 * Series: the label sets of the matching series with data in the range.
 * With label_names, as Pyroscope's series-labels query: each set cut to those
 * names and every distinct set once (in first-seen order), and none at all
 * when no matching series has any of the names.
 */
static void series(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__SeriesRequest *req =
        read_request(c, &querier__v1__series_request__descriptor, body, len);
    Querier__V1__SeriesResponse resp = QUERIER__V1__SERIES_RESPONSE__INIT;
    struct fc_selector *sels;
    struct labels_row *rows;
    Types__V1__Labels **sets;
    bool *dup, any_named = false;
    char **v;
    size_t n;

    if (req == NULL || !times_ok(c, req->start, req->end) ||
        !parse_selectors(c, req->matchers, req->n_matchers, &sels)) {
        return;
    }
    if (fc_store_series_labels(c->x->store, c->tenant, sels, req->n_matchers,
                               req->start * 1000000LL, req->end * 1000000LL, &v, &n,
                               &c->err) != FC_OK) {
        free_selectors(sels, req->n_matchers);
        return;
    }
    rows = anew(c, n * sizeof(*rows));
    sets = anew(c, n * sizeof(*sets));
    dup = anew(c, n * sizeof(*dup));
    for (size_t i = 0; i < n; i++) {
        struct label_ref *l;
        size_t k = split_labels(c, v[i], &l);
        struct fc_buf key;
        Types__V1__Labels *ls = anew(c, sizeof(*ls));
        types__v1__labels__init(ls);
        ls->labels = anew(c, k * sizeof(Types__V1__LabelPair *));
        fc_buf_init(&key, 0);
        for (size_t j = 0; j < k; j++) {
            Types__V1__LabelPair *lp;
            bool wanted = req->n_label_names == 0;
            for (size_t w = 0; !wanted && w < req->n_label_names; w++) {
                wanted = strlen(req->label_names[w]) == l[j].name_len &&
                         memcmp(req->label_names[w], l[j].name, l[j].name_len) == 0;
            }
            if (!wanted) {
                continue;
            }
            lp = anew(c, sizeof(*lp));
            types__v1__label_pair__init(lp);
            lp->name = fc_arena_strndup(c->arena, l[j].name, l[j].name_len);
            lp->value = fc_arena_strndup(c->arena, l[j].value, l[j].value_len);
            ls->labels[ls->n_labels++] = lp;
            fc_buf_append(&key, l[j].name, l[j].name_len + 1 + l[j].value_len + 1);
        }
        any_named = any_named || ls->n_labels > 0;
        rows[i].key = fc_arena_strndup(c->arena, key.len ? (const char *)key.data : "", key.len);
        rows[i].index = i;
        sets[i] = ls;
        fc_buf_release(&key);
    }
    if (req->n_label_names > 0 && n > 1) {
        qsort(rows, n, sizeof(*rows), by_key_then_index);
        for (size_t i = 1; i < n; i++) {
            dup[rows[i].index] = strcmp(rows[i].key, rows[i - 1].key) == 0;
        }
    }
    resp.labels_set = anew(c, n * sizeof(Types__V1__Labels *));
    for (size_t i = 0; i < n && (any_named || req->n_label_names == 0); i++) {
        if (!dup[i]) {
            resp.labels_set[resp.n_labels_set++] = sets[i];
        }
    }
    fc_store_strings_free(v, n);
    free_selectors(sels, req->n_matchers);
    answer(c, &resp.base);
}

/* profile_typeID (as Pyroscope parses it) + label_selector -> one selector with that type. */
static bool query_of(struct call *c, const char *type_id, const char *label_selector,
                     int64_t start_ms, int64_t end_ms, struct fc_selector *sel,
                     struct fc_store_query *q)
{
    const char *type5;

    memset(q, 0, sizeof(*q));
    if (!times_ok(c, start_ms, end_ms)) {
        return false;
    }
    if ((type5 = parse_type_id(c, type_id != NULL ? type_id : "")) == NULL) {
        return false;
    }
    if (fc_selector_parse(label_selector && label_selector[0] ? label_selector : "{}", sel,
                          &c->err) != FC_OK) {
        return false;
    }
    free(sel->profile_type);
    sel->profile_type = fc_xstrdup(type5);
    if (start_ms > end_ms) {
        fc_selector_release(sel);
        fc_errorf(&c->err, FC_EPROTO, "start is after end");
        return false;
    }
    if (c->x->cfg->query.max_query_length > 0 &&
        end_ms - start_ms > c->x->cfg->query.max_query_length / 1000000LL) {
        fc_selector_release(sel);
        fc_errorf(&c->err, FC_EPROTO, "the range is longer than query.max_query_length");
        return false;
    }
    q->tenant = c->tenant;
    q->selector = sel;
    q->from_ns = start_ms * 1000000LL;
    q->until_ns = end_ms * 1000000LL;
    q->level0_only = false;
    return true;
}

static bool merge(struct call *c, struct fc_store_query *q, struct fc_store_result *res)
{
    struct fc_store_stats stats;
    char merged[32];

    if (fc_store_select_merge(c->x->store, q, res, &stats, &c->err) != FC_OK) {
        return false;
    }
    fc_metric_add(c->x->nodes_merged, stats.nodes_merged);
    fc_metric_add(c->x->queries, 1);
    snprintf(merged, sizeof(merged), "%u", stats.nodes_merged);
    fc_http_response_header(c->resp, "X-Flamecol-Nodes-Merged", merged);
    return true;
}

/*
 * The `tree` format: pre-order uvarint(len(name)) name uvarint(self)
 * uvarint(children). Iterative: a tree may be any depth.
 */
static void tree_bytes(const struct fc_store_result *r, struct fc_buf *out)
{
    struct fc_u64s w = {0};

    fc_u64s_push(&w, 0);
    while (w.n > 0) {
        uint32_t node = (uint32_t)w.v[--w.n];
        const struct fc_tree_node *n = &r->tree.nodes[node];
        const char *name = node ? r->names[node] : "";
        size_t first = w.n;
        for (uint32_t k = n->first; k != 0; k = r->tree.nodes[k].next) {
            fc_u64s_push(&w, k);
        }
        for (size_t a = first, b = w.n; a + 1 < b; a++, b--) {
            uint64_t x = w.v[a]; /* reversed: the first child is popped first */
            w.v[a] = w.v[b - 1];
            w.v[b - 1] = x;
        }
        fc_pb_put_varint(out, strlen(name));
        fc_buf_puts(out, name);
        fc_pb_put_varint(out, (uint64_t)n->self);
        fc_pb_put_varint(out, w.n - first);
    }
    free(w.v);
}

/* span_selector (16 hex) and trace_id_selector (32 hex) into the query; arena-owned. */
static bool span_query(struct call *c, char **spans, size_t n_spans, char **traces, size_t n_traces,
                       struct fc_store_query *q)
{
    uint64_t *ids = anew(c, n_spans * sizeof(uint64_t));
    uint8_t(*tids)[16] = anew(c, n_traces * 16);

    for (size_t i = 0; i < n_spans; i++) {
        uint8_t b[8];
        if (!fc_hex_decode(spans[i], strlen(spans[i]), b, 8)) {
            fc_errorf(&c->err, FC_EPROTO, "span_selector[%zu]: a span id is 16 hex digits", i);
            return false;
        }
        ids[i] = 0;
        for (int k = 0; k < 8; k++) {
            ids[i] = ids[i] << 8 | b[k];
        }
    }
    for (size_t i = 0; i < n_traces; i++) {
        if (!fc_hex_decode(traces[i], strlen(traces[i]), tids[i], 16)) {
            fc_errorf(&c->err, FC_EPROTO, "trace_id_selector[%zu]: a trace id is 32 hex digits", i);
            return false;
        }
    }
    q->span_ids = ids;
    q->n_span_ids = n_spans;
    q->trace_ids = (const uint8_t(*)[16])tids;
    q->n_trace_ids = n_traces;
    return true;
}

/* The flame graph (or tree bytes) of a query; shared by the stacktraces and span calls. */
static void stacktraces(struct call *c, struct fc_store_query *q, int64_t max_nodes_req, int format)
{
    Querier__V1__SelectMergeStacktracesResponse resp =
        QUERIER__V1__SELECT_MERGE_STACKTRACES_RESPONSE__INIT;
    Querier__V1__FlameGraph fg_msg = QUERIER__V1__FLAME_GRAPH__INIT;
    struct fc_store_result res;
    struct fc_flamegraph fg;
    struct fc_buf tree;
    int64_t max_nodes = max_nodes_req > 0 ? max_nodes_req : c->x->cfg->query.max_nodes;

    if (max_nodes > 1048576) {
        fc_errorf(&c->err, FC_EPROTO, "max_nodes is above 1048576");
        return;
    }
    if (!merge(c, q, &res)) {
        return;
    }
    fc_buf_init(&tree, 0);
    if (format == QUERIER__V1__PROFILE_FORMAT__PROFILE_FORMAT_TREE) {
        if (res.tree.n > 1) {
            tree_bytes(&res, &tree);
        }
        resp.tree.data = tree.data;
        resp.tree.len = tree.len;
        answer(c, &resp.base);
    } else {
        fc_flamegraph_build(&res.tree, res.names, (uint32_t)max_nodes, &fg);
        fg_msg.names = (char **)fg.names;
        fg_msg.n_names = fg.n_names;
        fg_msg.levels = anew(c, fg.n_levels * sizeof(Querier__V1__Level *));
        for (size_t d = 0; d < fg.n_levels; d++) {
            Querier__V1__Level *l = anew(c, sizeof(*l));
            querier__v1__level__init(l);
            l->values = fg.levels[d];
            l->n_values = fg.level_len[d];
            fg_msg.levels[fg_msg.n_levels++] = l;
        }
        fg_msg.total = fg.total;
        fg_msg.max_self = fg.max_self;
        resp.flamegraph = &fg_msg;
        answer(c, &resp.base);
        fc_flamegraph_release(&fg);
    }
    fc_buf_release(&tree);
    fc_store_result_release(&res);
}

static void select_merge_stacktraces(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__SelectMergeStacktracesRequest *req =
        read_request(c, &querier__v1__select_merge_stacktraces_request__descriptor, body, len);
    struct fc_selector sel;
    struct fc_store_query q;

    if (req == NULL ||
        !query_of(c, req->profile_typeid, req->label_selector, req->start, req->end, &sel, &q)) {
        return;
    }
    if (span_query(c, req->span_selector, req->n_span_selector, req->trace_id_selector,
                   req->n_trace_id_selector, &q)) {
        stacktraces(c, &q, req->max_nodes, req->format);
    }
    fc_selector_release(&sel);
}

static void select_merge_span_profile(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__SelectMergeSpanProfileRequest *req =
        read_request(c, &querier__v1__select_merge_span_profile_request__descriptor, body, len);
    struct fc_selector sel;
    struct fc_store_query q;

    if (req == NULL ||
        !query_of(c, req->profile_typeid, req->label_selector, req->start, req->end, &sel, &q)) {
        return;
    }
    if (req->n_span_selector == 0) {
        fc_errorf(&c->err, FC_EPROTO, "span_selector is required");
    } else if (span_query(c, req->span_selector, req->n_span_selector, NULL, 0, &q)) {
        stacktraces(c, &q, req->max_nodes, req->format);
    }
    fc_selector_release(&sel);
}

static void diff(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__DiffRequest *req =
        read_request(c, &querier__v1__diff_request__descriptor, body, len);
    Querier__V1__DiffResponse resp = QUERIER__V1__DIFF_RESPONSE__INIT;
    Querier__V1__FlameGraphDiff fg_msg = QUERIER__V1__FLAME_GRAPH_DIFF__INIT;
    struct fc_selector ls, rs;
    struct fc_store_query lq, rq;
    struct fc_store_result lr, rr;
    struct fc_flamegraph_diff d;
    int64_t max_nodes;

    if (req == NULL) {
        return;
    }
    if (req->left == NULL || req->right == NULL) {
        fc_errorf(&c->err, FC_EPROTO, "left and right are required");
        return;
    }
    if (!query_of(c, req->left->profile_typeid, req->left->label_selector, req->left->start,
                  req->left->end, &ls, &lq)) {
        return;
    }
    if (!query_of(c, req->right->profile_typeid, req->right->label_selector, req->right->start,
                  req->right->end, &rs, &rq)) {
        fc_selector_release(&ls);
        return;
    }
    if (strcmp(ls.profile_type, rs.profile_type) != 0) {
        fc_errorf(&c->err, FC_EPROTO, "profile types must match");
    } else if (merge(c, &lq, &lr)) {
        if (merge(c, &rq, &rr)) {
            max_nodes =
                req->left->max_nodes > 0 ? req->left->max_nodes : c->x->cfg->query.max_nodes;
            fc_flamegraph_diff_build(&lr.tree, lr.names, &rr.tree, rr.names,
                                     (uint32_t)(max_nodes > 1048576 ? 1048576 : max_nodes), &d);
            fg_msg.names = (char **)d.fg.names;
            fg_msg.n_names = d.fg.n_names;
            fg_msg.levels = anew(c, d.fg.n_levels * sizeof(Querier__V1__Level *));
            for (size_t l = 0; l < d.fg.n_levels; l++) {
                Querier__V1__Level *lv = anew(c, sizeof(*lv));
                querier__v1__level__init(lv);
                lv->values = d.fg.levels[l];
                lv->n_values = d.fg.level_len[l];
                fg_msg.levels[fg_msg.n_levels++] = lv;
            }
            fg_msg.total = d.fg.total;
            fg_msg.max_self = d.fg.max_self;
            fg_msg.leftticks = d.left_ticks;
            fg_msg.rightticks = d.right_ticks;
            resp.flamegraph = &fg_msg;
            answer(c, &resp.base);
            fc_flamegraph_release(&d.fg);
            fc_store_result_release(&rr);
        }
        fc_store_result_release(&lr);
    }
    fc_selector_release(&ls);
    fc_selector_release(&rs);
}

static void select_merge_profile(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__SelectMergeProfileRequest *req =
        read_request(c, &querier__v1__select_merge_profile_request__descriptor, body, len);
    struct fc_selector sel;
    struct fc_store_query q;
    struct fc_store_result res;
    struct fc_buf raw;

    if (req == NULL ||
        !query_of(c, req->profile_typeid, req->label_selector, req->start, req->end, &sel, &q)) {
        return;
    }
    if (!merge(c, &q, &res)) {
        fc_selector_release(&sel);
        return;
    }
    fc_buf_init(&raw, 0);
    if (store_tree_to_pprof(&res, sel.profile_type, &raw, &c->err) == FC_OK) {
        if (c->json) {
            /* The same bytes are a google.v1.Profile message: re-read them for JSON. */
            ProtobufCAllocator alloc = {arena_alloc, arena_free, c->arena};
            Google__V1__Profile *p = google__v1__profile__unpack(&alloc, raw.len, raw.data);
            if (p != NULL) {
                answer(c, &p->base);
            }
        } else {
            c->resp->status = 200;
            c->resp->content_type = "application/proto";
            fc_buf_append(&c->resp->body, raw.data, raw.len);
        }
    }
    fc_buf_release(&raw);
    fc_store_result_release(&res);
    fc_selector_release(&sel);
}

struct ranked {
    struct fc_store_timeseries *ts;
    int64_t total;
};

static int by_ranked(const void *a, const void *b)
{
    int64_t x = ((const struct ranked *)a)->total, y = ((const struct ranked *)b)->total;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* x rounded down to a multiple of step (> 0), also when x is negative. */
static int64_t floor_to(int64_t x, int64_t step)
{
    int64_t q = x / step;
    return (x % step != 0 && x < 0 ? q - 1 : q) * step;
}

int store_series_step(double step, int64_t start_ms, int64_t end_ms, int64_t *step_ms,
                      size_t *points, struct fc_error *err)
{
    double want_ms;

    if (step == 0) {
        step = 15;
    }
    if (!isfinite(step) || step < 0) {
        return fc_errorf(err, FC_EPROTO, "step: must be a positive number of seconds");
    }
    if (start_ms < -MAX_MS || start_ms > MAX_MS || end_ms < start_ms || end_ms > MAX_MS) {
        return fc_errorf(err, FC_EPROTO, "start/end: out of range");
    }
    want_ms = step * 1000.0;
    if ((double)(end_ms - start_ms) / want_ms + 1.0 > MAX_POINTS) {
        return fc_errorf(err, FC_EPROTO,
                         "step: exceeded maximum resolution of 11,000 points per timeseries. Try "
                         "decreasing the query resolution (?step=XX)");
    }
    if (want_ms > (double)MAX_MS) {
        want_ms = (double)MAX_MS; /* one point either way */
    }
    /* Steps are whole multiples of the store's 10 s windows. */
    *step_ms = ((int64_t)ceil(want_ms) + 9999) / 10000 * 10000;
    *points = (size_t)((end_ms - floor_to(start_ms, *step_ms)) / *step_ms) + 1;
    return FC_OK;
}

static void select_series(struct call *c, const uint8_t *body, size_t len)
{
    Querier__V1__SelectSeriesRequest *req =
        read_request(c, &querier__v1__select_series_request__descriptor, body, len);
    Querier__V1__SelectSeriesResponse resp = QUERIER__V1__SELECT_SERIES_RESPONSE__INIT;
    struct fc_selector sel;
    struct fc_store_query q;
    struct fc_store_timeseries *ts;
    struct ranked *rank;
    size_t n, n_all, buckets;
    int64_t step_ms;

    if (req == NULL ||
        !query_of(c, req->profile_typeid, req->label_selector, req->start, req->end, &sel, &q)) {
        return;
    }
    if (req->step < 0.001) { /* Pyroscope's check (NaN passes it, refused just below) */
        fc_errorf(&c->err, FC_EPROTO, "step must be >= 1ms");
        fc_selector_release(&sel);
        return;
    }
    if (store_series_step(req->step, req->start, req->end, &step_ms, &buckets, &c->err) != FC_OK) {
        fc_selector_release(&sel);
        return;
    }
    q.from_ns = floor_to(req->start, step_ms) * 1000000LL;
    if (fc_store_select_series(c->x->store, &q, step_ms * 1000000LL, buckets,
                               (const char *const *)req->group_by, req->n_group_by, &ts, &n,
                               &c->err) != FC_OK) {
        fc_selector_release(&sel);
        return;
    }
    rank = fc_xcalloc(n + 1, sizeof(*rank));
    n_all = n;
    n = 0;
    for (size_t i = 0; i < n_all; i++) {
        bool points = false;
        rank[n].ts = &ts[i];
        rank[n].total = 0;
        for (size_t b = 0; b < buckets; b++) {
            rank[n].total = fc_sat_add(rank[n].total, ts[i].buckets[b]);
            points = points || ts[i].buckets[b] != 0;
        }
        n += points; /* as Pyroscope: a series without a point in the range is none */
    }
    qsort(rank, n, sizeof(*rank), by_ranked);
    if (req->limit > 0 && (size_t)req->limit < n) {
        n = (size_t)req->limit; /* the top N series by total */
    }
    resp.series = anew(c, n * sizeof(Types__V1__Series *));
    for (size_t i = 0; i < n; i++) {
        struct label_ref *l;
        size_t k = split_labels(c, rank[i].ts->labels, &l);
        Types__V1__Series *s = anew(c, sizeof(*s));
        types__v1__series__init(s);
        s->labels = anew(c, k * sizeof(Types__V1__LabelPair *));
        for (size_t j = 0; j < k; j++) {
            Types__V1__LabelPair *lp = anew(c, sizeof(*lp));
            types__v1__label_pair__init(lp);
            lp->name = fc_arena_strndup(c->arena, l[j].name, l[j].name_len);
            lp->value = fc_arena_strndup(c->arena, l[j].value, l[j].value_len);
            s->labels[s->n_labels++] = lp;
        }
        s->points = anew(c, buckets * sizeof(Types__V1__Point *));
        for (size_t b = 0; b < buckets; b++) {
            Types__V1__Point *p;
            if (rank[i].ts->buckets[b] == 0) {
                continue; /* as Pyroscope: no point where there is no data */
            }
            p = anew(c, sizeof(*p));
            types__v1__point__init(p);
            p->value = (double)rank[i].ts->buckets[b];
            p->timestamp = q.from_ns / 1000000LL + (int64_t)b * step_ms;
            s->points[s->n_points++] = p;
        }
        resp.series[resp.n_series++] = s;
    }
    free(rank);
    fc_store_timeseries_free(ts, n_all);
    fc_selector_release(&sel);
    answer(c, &resp.base);
}

typedef void (*method_fn)(struct call *c, const uint8_t *body, size_t len);

/*
 * The QuerierService methods served, one route (PREFIX "*") for all: each is
 * logged at debug at start so that tests can enumerate them as they do routes.
 */
static const struct {
    const char *name;
    method_fn fn;
} methods[] = {
    {"ProfileTypes", profile_types},
    {"LabelNames", label_names},
    {"LabelValues", label_values},
    {"Series", series},
    {"SelectMergeStacktraces", select_merge_stacktraces},
    {"SelectMergeProfile", select_merge_profile},
    {"SelectSeries", select_series},
    {"Diff", diff},
    {"SelectMergeSpanProfile", select_merge_span_profile},
};

static method_fn find_method(const char *name)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if (strcmp(methods[i].name, name) == 0) {
            return methods[i].fn;
        }
    }
    return NULL;
}

static void on_connect(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    const char *method = req->path + strlen(PREFIX);
    const char *ct = fc_http_header(req, "Content-Type");
    const char *ce = fc_http_header(req, "Content-Encoding");
    struct call c = {0};
    struct fc_buf plain;
    method_fn handler;
    const uint8_t *body = req->body;
    size_t len = req->body_len;

    c.x = x;
    c.resp = resp;
    if (ct != NULL && strncasecmp(ct, "application/json", 16) == 0) {
        c.json = true;
    } else if (ct == NULL || strncasecmp(ct, "application/proto", 17) != 0) {
        connect_error(resp, 415, "invalid_argument",
                      "Content-Type must be application/proto or application/json");
        return;
    }
    if (fc_http_tenant(req, &c.tenant, &c.err) != FC_OK) {
        connect_error(resp, 400, "invalid_argument", c.err.msg);
        return;
    }
    fc_buf_init(&plain, 0);
    if (ce != NULL && strcasecmp(ce, "gzip") == 0) {
        if (fc_gunzip(body, len, 16u << 20, &plain, &c.err) != FC_OK) {
            connect_error(resp, 400, "invalid_argument", c.err.msg);
            fc_buf_release(&plain);
            return;
        }
        body = plain.data;
        len = plain.len;
    }
    c.arena = fc_arena_new(0);
    handler = find_method(method);
    if (handler != NULL) {
        handler(&c, body, len);
    } else {
        fc_errorf(&c.err, FC_ENOTSUP, "%s is not implemented in flamecol", method);
    }
    if (c.err.code != FC_OK) {
        connect_error(resp,
                      c.err.code == FC_ENOTSUP  ? 501
                      : c.err.code == FC_EPROTO ? 400
                                                : 500,
                      c.err.code == FC_ENOTSUP  ? "unimplemented"
                      : c.err.code == FC_EPROTO ? "invalid_argument"
                                                : "internal",
                      c.msg != NULL ? c.msg : c.err.msg);
    }
    fc_arena_free(c.arena);
    fc_buf_release(&plain);
}

int store_connect_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err)
{
    for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        fc_log_debug("store", "connect method POST %s%s owner=%s", PREFIX, methods[i].name,
                     x->self->id);
    }
    return fc_http_route(srv, "POST", PREFIX "*", 16u << 20, on_connect, x, x->self->id, err);
}
