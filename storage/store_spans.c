/*
 * The span index: per (span, series, 10 s window) one tree, written with
 * the profile (store_write.c: through the log and the open windows, as
 * entries of FC_STORE_SPAN_LEVEL, into DB_SPAN at the flush) and merged for
 * span and trace queries (store_read.c), open entries included. A span
 * entry is le64 total followed by a zstd tree. The trace -> span index is
 * put in the write's transaction (an index entry: putting it twice is
 * harmless), its value the span's latest 10 s window, for retention.
 */
#include "storage/store.h"
#include "storage/store_int.h"

#include "core/buf.h"
#include "core/mem.h"
#include "core/sat.h"
#include "core/span.h"

#include <lmdb.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NODE_HEADER 8

static void span_bytes(uint64_t span, uint8_t out[8])
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(span >> (56 - 8 * i));
    }
}

static uint64_t span_id(const uint8_t span[8])
{
    return be64(span);
}

int fc_store_merge_span_value(struct writer *w, uint64_t span, uint32_t series, int64_t window,
                              const struct fc_tree *add)
{
    MDB_val kv, v;
    struct fc_tree t;
    struct fc_buf enc;
    int64_t total;
    struct key k;
    uint8_t sb[8];
    int rc;

    span_bytes(span, sb);
    key_tenant(&k, w->tenant);
    key_bytes(&k, sb, 8);
    key_be32(&k, series);
    key_be64(&k, (uint64_t)window);
    kv = val(k.b, k.n);
    fc_tree_init(&t);
    fc_buf_init(&enc, 0);
    if (mdb_get(w->txn, w->s->db[DB_SPAN], &kv, &v) == 0 &&
        (v.mv_size < NODE_HEADER ||
         fc_tree_decode_merge(&t, (const uint8_t *)v.mv_data + NODE_HEADER, v.mv_size - NODE_HEADER,
                              w->err) != FC_OK)) {
        /* A tree we cannot read is replaced rather than poisoning every later write. */
        fc_tree_release(&t);
        fc_tree_init(&t);
    }
    fc_tree_merge(&t, add);
    total = fc_tree_total(&t);
    fc_buf_append(&enc, &total, NODE_HEADER);
    rc = fc_tree_encode(&t, &enc);
    if (rc == FC_OK) {
        v = val(enc.data, enc.len);
        rc = mdb_put(w->txn, w->s->db[DB_SPAN], &kv, &v, 0);
        rc = rc ? fc_store_lmdb_error(w->err, rc, "span") : FC_OK;
    }
    fc_tree_release(&t);
    fc_buf_release(&enc);
    return rc;
}

/* The span (and trace) of a sample: its OTLP Link, else pprof labels span_id/trace_id. */
static bool sample_span(const struct fc_batch *b, const struct fc_sample *s, uint8_t span[8],
                        uint8_t trace[16])
{
    return fc_sample_span(b, s, span, trace); /* the one reader of span ids (core/span.h) */
}

struct span_tree {
    uint8_t span[8];
    uint8_t trace[16];
    struct fc_tree tree;
};

/*
 * The trace -> span entry k, its value the latest 10 s window written for
 * it (le64), so that retention deletes it with the span's windows
 * (retention.c trace_doomed); not written again when it holds that already.
 */
static int trace_put(struct writer *w, struct key *k, int64_t window)
{
    MDB_val kv = val(k->b, k->n), v;
    int64_t had;

    if (mdb_get(w->txn, w->s->db[DB_TRACE], &kv, &v) == 0 && v.mv_size == 8) {
        memcpy(&had, v.mv_data, 8);
        if (had >= window) {
            return FC_OK;
        }
    }
    return fc_store_put_empty(w, DB_TRACE, k, &window, 8);
}

/* Indexes a group's samples by span: one tree per (span, series, 10 s window). */
int fc_store_write_spans(struct writer *w, struct frames *f, const struct fc_batch *b,
                         const struct fc_profile *p, const struct group *g, uint32_t t,
                         int64_t scale, uint32_t series, int64_t window)
{
    struct span_tree *spans = NULL;
    size_t n = 0, cap = 0;
    int rc = FC_OK;

    for (size_t i = 0; rc == FC_OK && i < g->n; i++) {
        const struct fc_sample *s = &p->samples[g->samples[i]];
        int64_t v = fc_sample_value(p, s, t);
        uint8_t span[8], trace[16];
        const uint32_t *path;
        uint32_t depth;
        size_t j;
        if (v <= 0 || !sample_span(b, s, span, trace)) {
            continue;
        }
        for (j = 0; j < n && memcmp(spans[j].span, span, 8) != 0; j++) {
        }
        if (j == n) {
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                spans = fc_xrealloc(spans, cap * sizeof(*spans));
            }
            memcpy(spans[n].span, span, 8);
            memcpy(spans[n].trace, trace, 16);
            fc_tree_init(&spans[n].tree);
            n++;
        }
        if ((rc = fc_store_sample_path(w, f, b, s, &path, &depth)) == FC_OK) {
            fc_tree_insert(&spans[j].tree, path, depth, fc_sat_mul(v, scale));
        }
    }
    for (size_t j = 0; j < n; j++) {
        struct key k;
        static const uint8_t no_trace[16];
        if (rc == FC_OK) {
            rc = fc_store_add_span(w, w->windows, span_id(spans[j].span), series, window,
                                   &spans[j].tree);
        }
        if (rc == FC_OK && memcmp(spans[j].trace, no_trace, 16) != 0) {
            key_tenant(&k, w->tenant);
            key_bytes(&k, spans[j].trace, 16);
            key_bytes(&k, spans[j].span, 8);
            rc = trace_put(w, &k, window);
        }
        fc_tree_release(&spans[j].tree);
    }
    free(spans);
    return rc;
}

void fc_store_merge_span(struct reader *r, const uint8_t span[8], const struct idset *ids,
                         int64_t from_s, int64_t until_s, struct fc_tree *out, uint32_t *merged)
{
    struct key k;
    MDB_cursor *c;
    MDB_val kv, v;

    key_tenant(&k, r->tenant);
    key_bytes(&k, span, 8);
    if (mdb_cursor_open(r->txn, r->s->db[DB_SPAN], &c) != 0) {
        return;
    }
    kv = val(k.b, k.n);
    for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
         g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
        const uint8_t *p = kv.mv_data;
        uint32_t series;
        int64_t window;
        struct fc_tree one;
        struct fc_error ignored = {0};
        if (kv.mv_size != k.n + 12 || memcmp(p, k.b, k.n) != 0) {
            break;
        }
        series = be32(p + k.n);
        window = (int64_t)be64(p + k.n + 4);
        if (window < from_s || window >= until_s ||
            bsearch(&series, ids->v, ids->n, sizeof(uint32_t), cmp_u32) == NULL ||
            v.mv_size < NODE_HEADER) {
            continue;
        }
        fc_tree_init(&one);
        if (fc_tree_decode_merge(&one, (const uint8_t *)v.mv_data + NODE_HEADER,
                                 v.mv_size - NODE_HEADER, &ignored) == FC_OK) {
            fc_tree_merge(out, &one);
            (*merged)++;
        } else {
            atomic_fetch_add(&r->s->corrupt, 1);
        }
        fc_tree_release(&one);
    }
    mdb_cursor_close(c);
    /* And what is open: written, not flushed yet (LMDB holds none of it). */
    for (const struct open_window *ow = fc_store_open_first_span(r->s, r->tenant, span_id(span));
         ow != NULL; ow = fc_store_open_next(r->s, ow)) {
        if (ow->start < from_s || ow->start >= until_s) {
            continue;
        }
        for (uint32_t i = 0; i < ow->parts.n; i++) {
            if (bsearch(&ow->parts.v[i].series, ids->v, ids->n, sizeof(uint32_t), cmp_u32) !=
                NULL) {
                fc_tree_merge(out, &ow->parts.v[i].tree);
                (*merged)++;
            }
        }
    }
}

/* The span ids of the query: given ones, plus every span recorded for its traces. */
void fc_store_query_spans(struct reader *r, const struct fc_store_query *q, uint8_t (**out)[8],
                          size_t *n)
{
    size_t cap = q->n_span_ids + 16;

    *out = fc_xcalloc(cap, 8);
    *n = 0;
    for (size_t i = 0; i < q->n_span_ids; i++) {
        for (int b = 0; b < 8; b++) {
            (*out)[*n][b] = (uint8_t)(q->span_ids[i] >> (56 - 8 * b));
        }
        (*n)++;
    }
    for (size_t t = 0; t < q->n_trace_ids; t++) {
        struct key k;
        MDB_cursor *c;
        MDB_val kv, v;
        key_tenant(&k, r->tenant);
        key_bytes(&k, q->trace_ids[t], 16);
        if (mdb_cursor_open(r->txn, r->s->db[DB_TRACE], &c) != 0) {
            continue;
        }
        kv = val(k.b, k.n);
        for (int g = mdb_cursor_get(c, &kv, &v, MDB_SET_RANGE); g == 0;
             g = mdb_cursor_get(c, &kv, &v, MDB_NEXT)) {
            if (kv.mv_size != k.n + 8 || memcmp(kv.mv_data, k.b, k.n) != 0) {
                break;
            }
            if (*n == cap) {
                cap *= 2;
                *out = fc_xrealloc(*out, cap * 8);
            }
            memcpy((*out)[(*n)++], (const uint8_t *)kv.mv_data + k.n, 8);
        }
        mdb_cursor_close(c);
    }
}
