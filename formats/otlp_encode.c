#include "formats/otlp.h"

#include "core/buf.h"
#include "core/mem.h"
#include "formats/otlp_pb.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "google/rpc/status.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* protobuf-c allocates from the batch arena: no free_unpacked, one release. */
static void *arena_alloc(void *data, size_t size)
{
    return fc_arena_alloc(data, size);
}

static void arena_free(void *data, void *p)
{
    (void)data;
    (void)p;
}

/* ---- encoding ----------------------------------------------------------------------------- */

/*
 * The encoder re-interns what the profiles use into a scratch batch, whose
 * dictionary then becomes the request's: no orphans, index 0 the zero row,
 * and one interning implementation for the whole program.
 */
struct encoder {
    const struct fc_batch *src;
    struct fc_batch *dst;
    uint32_t *str, *fn, *map, *loc, *stack, *attr, *link; /* src -> dst index + 1 */
    int rc;
};

#define MEMO(e, table, i, expr)                                                                    \
    do {                                                                                           \
        uint32_t id_;                                                                              \
        if ((i) == 0) {                                                                            \
            return 0;                                                                              \
        }                                                                                          \
        if ((e)->table[i] != 0) {                                                                  \
            return (e)->table[i] - 1;                                                              \
        }                                                                                          \
        if ((e)->rc == FC_OK) {                                                                    \
            (e)->rc = (expr);                                                                      \
        }                                                                                          \
        if ((e)->rc != FC_OK) {                                                                    \
            return 0;                                                                              \
        }                                                                                          \
        (e)->table[i] = id_ + 1;                                                                   \
        return id_;                                                                                \
    } while (0)

static uint32_t enc_str(struct encoder *e, uint32_t s)
{
    MEMO(e, str, s, fc_dict_string(e->dst, e->src->dict.strings[s], e->src->dict.str_len[s], &id_));
}

static uint32_t enc_cstr(struct encoder *e, const char *s)
{
    uint32_t id = 0;

    if (e->rc == FC_OK) {
        e->rc = fc_dict_cstring(e->dst, s, &id);
    }
    return id;
}

/*
 * A string value written inline (string_value, not string_value_strindex)
 * stays out of the request's string_table: the row keeps the source batch's
 * string index, marked with this encoder-private flag, and any_of() reads
 * the text from there. Interning it would leave an unused string_table entry.
 */
#define ENC_VALUE_SRC (1u << 7)

static uint32_t enc_attr_row(struct encoder *e, const struct fc_attr *a)
{
    struct fc_attr row = *a;
    uint32_t id = 0;

    row.key = enc_str(e, a->key);
    row.unit = enc_str(e, a->unit);
    if (a->kind == FC_ATTR_STR && (a->flags & FC_ATTR_VALUE_STRINDEX)) {
        row.v.str = enc_str(e, a->v.str);
    } else if (a->kind == FC_ATTR_STR) {
        row.flags |= ENC_VALUE_SRC;
    }
    if (e->rc == FC_OK) {
        e->rc = fc_dict_attr(e->dst, &row, &id);
    }
    return id;
}

static uint32_t enc_attr(struct encoder *e, uint32_t a)
{
    MEMO(e, attr, a, ((id_ = enc_attr_row(e, &e->src->dict.attrs[a])), e->rc));
}

/* A new attribute of the conventions: the key is text, a string value is the source batch's
 * string str, written inline. */
static uint32_t new_attr(struct encoder *e, const char *key, enum fc_attr_kind kind, uint32_t str,
                         int64_t i)
{
    struct fc_attr a = {0};
    uint32_t id = 0;

    a.key = enc_cstr(e, key);
    a.kind = (uint8_t)kind;
    if (kind == FC_ATTR_STR) {
        a.v.str = str;
        a.flags = ENC_VALUE_SRC;
    } else if (kind == FC_ATTR_BOOL) {
        a.v.b = i != 0;
    } else {
        a.v.i = i;
    }
    if (e->rc == FC_OK) {
        e->rc = fc_dict_attr(e->dst, &a, &id);
    }
    return id;
}

struct idlist {
    uint32_t v[64];
    uint32_t *heap;
    uint32_t n;
    uint32_t cap;
};

static void idl_push(struct idlist *l, uint32_t id)
{
    if (l->heap == NULL && l->n < 64) {
        l->v[l->n++] = id;
        return;
    }
    if (l->heap == NULL) {
        l->cap = 128;
        l->heap = fc_xmalloc(l->cap * sizeof(uint32_t));
        memcpy(l->heap, l->v, sizeof(l->v));
    } else if (l->n == l->cap) {
        l->cap *= 2;
        l->heap = fc_xrealloc(l->heap, l->cap * sizeof(uint32_t));
    }
    l->heap[l->n++] = id;
}

static const uint32_t *idl_data(const struct idlist *l)
{
    return l->heap ? l->heap : l->v;
}

static bool has_key(const struct fc_batch *b, struct fc_span attrs, const char *key)
{
    return fc_attrs_find(b, attrs, key) != NULL;
}

static struct fc_span finish_span(struct encoder *e, struct idlist *l)
{
    struct fc_span s = {0, 0};

    if (e->rc == FC_OK) {
        e->rc = fc_dict_span(e->dst, idl_data(l), l->n, &s);
    }
    free(l->heap);
    return s;
}

static uint32_t enc_function(struct encoder *e, uint32_t f)
{
    const struct fc_function *s = &e->src->dict.functions[f];
    struct fc_function row;

    row.name = enc_str(e, s->name);
    row.system_name = enc_str(e, s->system_name);
    row.filename = enc_str(e, s->filename);
    row.start_line = s->start_line;
    MEMO(e, fn, f, fc_dict_function(e->dst, &row, &id_));
}

static uint32_t enc_mapping(struct encoder *e, uint32_t m)
{
    const struct fc_batch *b = e->src;
    const struct fc_mapping *s = &b->dict.mappings[m];
    struct fc_mapping row = {0};
    struct idlist l = {0};
    static const struct {
        uint32_t flag;
        const char *key;
    } flags[] = {{FC_MAPPING_HAS_FUNCTIONS, FC_OTLP_HAS_FUNCTIONS_KEY},
                 {FC_MAPPING_HAS_FILENAMES, FC_OTLP_HAS_FILENAMES_KEY},
                 {FC_MAPPING_HAS_LINE_NUMBERS, FC_OTLP_HAS_LINE_NUMBERS_KEY},
                 {FC_MAPPING_HAS_INLINE_FRAMES, FC_OTLP_HAS_INLINE_FRAMES_KEY}};

    if (m == 0 || e->map[m] != 0) {
        return m == 0 ? 0 : e->map[m] - 1;
    }
    for (uint32_t i = 0; i < s->attrs.n; i++) {
        idl_push(&l, enc_attr(e, fc_span_idx(b, s->attrs)[i]));
    }
    /* pprof-only fields, as the Collector's translator writes them. */
    if (s->build_id != 0 && !has_key(b, s->attrs, FC_OTLP_BUILD_ID_KEY)) {
        idl_push(&l, new_attr(e, FC_OTLP_BUILD_ID_KEY, FC_ATTR_STR, s->build_id, 0));
    }
    for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
        if ((s->flags & flags[i].flag) && !has_key(b, s->attrs, flags[i].key)) {
            idl_push(&l, new_attr(e, flags[i].key, FC_ATTR_BOOL, 0, 1));
        }
    }
    row.memory_start = s->memory_start;
    row.memory_limit = s->memory_limit;
    row.file_offset = s->file_offset;
    row.filename = enc_str(e, s->filename);
    row.attrs = finish_span(e, &l);
    MEMO(e, map, m, fc_dict_mapping(e->dst, &row, &id_));
}

static uint32_t enc_location(struct encoder *e, uint32_t loc)
{
    const struct fc_batch *b = e->src;
    const struct fc_location *s = &b->dict.locations[loc];
    struct fc_location row = {0};
    struct fc_line *lines;
    struct idlist l = {0};
    uint32_t id = 0;

    if (loc == 0 || e->loc[loc] != 0) {
        return loc == 0 ? 0 : e->loc[loc] - 1;
    }
    lines = fc_xcalloc(s->n_lines + 1, sizeof(*lines));
    for (uint32_t i = 0; i < s->n_lines; i++) {
        const struct fc_line *ln = &b->dict.lines[s->lines_off + i];
        lines[i].function = ln->function ? enc_function(e, ln->function) : 0;
        lines[i].line = ln->line;
        lines[i].column = ln->column;
    }
    for (uint32_t i = 0; i < s->attrs.n; i++) {
        idl_push(&l, enc_attr(e, fc_span_idx(b, s->attrs)[i]));
    }
    if (s->is_folded && !has_key(b, s->attrs, FC_OTLP_IS_FOLDED_KEY)) {
        idl_push(&l, new_attr(e, FC_OTLP_IS_FOLDED_KEY, FC_ATTR_BOOL, 0, 1));
    }
    row.mapping = enc_mapping(e, s->mapping);
    row.address = s->address;
    row.attrs = finish_span(e, &l);
    if (e->rc == FC_OK) {
        e->rc = fc_dict_location(e->dst, &row, lines, s->n_lines, &id);
    }
    free(lines);
    if (e->rc == FC_OK) {
        e->loc[loc] = id + 1;
    }
    return id;
}

static uint32_t enc_stack(struct encoder *e, uint32_t st)
{
    const struct fc_batch *b = e->src;
    const struct fc_stack *s = &b->dict.stacks[st];
    struct idlist l = {0};
    uint32_t id = 0;

    if (st == 0 || e->stack[st] != 0) {
        return st == 0 ? 0 : e->stack[st] - 1;
    }
    for (uint32_t i = 0; i < s->locations.n; i++) {
        idl_push(&l, enc_location(e, fc_span_idx(b, s->locations)[i]));
    }
    if (e->rc == FC_OK) {
        e->rc = fc_dict_stack(e->dst, idl_data(&l), l.n, &id);
    }
    free(l.heap);
    if (e->rc == FC_OK) {
        e->stack[st] = id + 1;
    }
    return id;
}

static uint32_t enc_link(struct encoder *e, uint32_t k)
{
    MEMO(e, link, k, fc_dict_link(e->dst, &e->src->dict.links[k], &id_));
}

/*
 * A sample's attributes and link. pprof labels span_id (16 hex) and
 * trace_id (32 hex) become a Link when the sample has none.
 */
static void enc_sample_attrs(struct encoder *e, const struct fc_sample *s, struct idlist *l,
                             uint32_t *link)
{
    const struct fc_batch *b = e->src;
    const uint32_t *attrs = fc_span_idx(b, s->attrs);
    struct fc_link k = {{0}, {0}};
    int span = -1, trace = -1;

    *link = s->link ? enc_link(e, s->link) : 0;
    if (s->link == 0) {
        for (uint32_t i = 0; i < s->attrs.n; i++) {
            const struct fc_attr *a = &b->dict.attrs[attrs[i]];
            const char *key = fc_str(b, a->key);
            if (a->kind != FC_ATTR_STR) {
                continue;
            }
            if (strcmp(key, "span_id") == 0 &&
                fc_hex_decode(fc_str(b, a->v.str), b->dict.str_len[a->v.str], k.span_id, 8)) {
                span = (int)i;
            } else if (strcmp(key, "trace_id") == 0 &&
                       fc_hex_decode(fc_str(b, a->v.str), b->dict.str_len[a->v.str], k.trace_id,
                                     16)) {
                trace = (int)i;
            }
        }
        if (span >= 0 && e->rc == FC_OK) {
            e->rc = fc_dict_link(e->dst, &k, link);
        } else {
            trace = -1; /* a trace id alone stays an attribute */
        }
    }
    for (uint32_t i = 0; i < s->attrs.n; i++) {
        if ((int)i != span && (int)i != trace) {
            idl_push(l, enc_attr(e, attrs[i]));
        }
    }
}

/* Message building: everything lives in the scratch batch's arena. */
#define NEW(e, type, init)                                                                         \
    ({                                                                                             \
        type *m_ = fc_arena_alloc((e)->dst->arena, sizeof(type));                                  \
        if (m_ != NULL) {                                                                          \
            init(m_);                                                                              \
        } else {                                                                                   \
            (e)->rc = FC_ETOOBIG;                                                                  \
        }                                                                                          \
        m_;                                                                                        \
    })

static void *new_array(struct encoder *e, size_t n, size_t size)
{
    void *p = fc_arena_calloc(e->dst->arena, n ? n : 1, size);

    if (p == NULL) {
        e->rc = FC_ETOOBIG;
    }
    return p;
}

static int32_t *span_ints(struct encoder *e, struct fc_span s, size_t *n)
{
    int32_t *out = new_array(e, s.n, sizeof(int32_t));

    if (out != NULL) {
        for (uint32_t i = 0; i < s.n; i++) {
            out[i] = (int32_t)fc_span_idx(e->dst, s)[i];
        }
    }
    *n = s.n;
    return out;
}

/*
 * An array or kvlist value kept as its protobuf bytes, unpacked again. The
 * bytes came from a request whose nesting was checked, but a batch can be
 * built by anyone: protobuf-c recurses, so the nesting is bounded here too.
 */
static ProtobufCMessage *unpack_blob(ProtobufCAllocator *alloc, const ProtobufCMessageDescriptor *d,
                                     const struct fc_attr *a)
{
    if (fc_pb_check_depth(d, a->v.blob.data, a->v.blob.len, FC_PB_MAX_DEPTH_CEILING, NULL) !=
        FC_OK) {
        return NULL;
    }
    return protobuf_c_message_unpack(d, alloc, a->v.blob.len, a->v.blob.data);
}

static PbAnyValue *any_of(struct encoder *e, const struct fc_attr *a, bool dst_strings)
{
    ProtobufCAllocator alloc = {arena_alloc, arena_free, e->dst->arena};
    /* dst_strings: a row of the request's dictionary, whose inline values are source strings. */
    const struct fc_batch *sb = dst_strings && !(a->flags & ENC_VALUE_SRC) ? e->dst : e->src;
    PbAnyValue *v = NEW(e, PbAnyValue, opentelemetry__proto__common__v1__any_value__init);

    if (v == NULL) {
        return NULL;
    }
    switch (a->kind) {
    case FC_ATTR_STR:
        if (a->flags & FC_ATTR_VALUE_STRINDEX) {
            v->value_case = ANY(STRING_VALUE_STRINDEX);
            v->string_value_strindex = (int32_t)(dst_strings ? a->v.str : enc_str(e, a->v.str));
        } else {
            v->value_case = ANY(STRING_VALUE);
            v->string_value = (char *)fc_str(sb, a->v.str);
        }
        break;
    case FC_ATTR_INT:
        v->value_case = ANY(INT_VALUE);
        v->int_value = a->v.i;
        break;
    case FC_ATTR_BOOL:
        v->value_case = ANY(BOOL_VALUE);
        v->bool_value = a->v.b;
        break;
    case FC_ATTR_DOUBLE:
        v->value_case = ANY(DOUBLE_VALUE);
        v->double_value = a->v.d;
        break;
    case FC_ATTR_BYTES:
        v->value_case = ANY(BYTES_VALUE);
        v->bytes_value.data = (uint8_t *)a->v.blob.data;
        v->bytes_value.len = a->v.blob.len;
        break;
    case FC_ATTR_ARRAY:
        v->value_case = ANY(ARRAY_VALUE);
        v->array_value = (Opentelemetry__Proto__Common__V1__ArrayValue *)unpack_blob(
            &alloc, &opentelemetry__proto__common__v1__array_value__descriptor, a);
        if (v->array_value == NULL) {
            v->value_case = ANY(_NOT_SET);
        }
        break;
    case FC_ATTR_KVLIST:
        v->value_case = ANY(KVLIST_VALUE);
        v->kvlist_value = (Opentelemetry__Proto__Common__V1__KeyValueList *)unpack_blob(
            &alloc, &opentelemetry__proto__common__v1__key_value_list__descriptor, a);
        if (v->kvlist_value == NULL) {
            v->value_case = ANY(_NOT_SET);
        }
        break;
    default:
        break;
    }
    return v;
}

/* Resource or scope attributes (KeyValue), from batch attributes. */
static PbKeyValue **key_values_of(struct encoder *e, struct fc_span attrs, size_t *n)
{
    const struct fc_batch *b = e->src;
    PbKeyValue **kvs = new_array(e, attrs.n, sizeof(PbKeyValue *));

    *n = 0;
    for (uint32_t i = 0; kvs != NULL && i < attrs.n && e->rc == FC_OK; i++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, attrs)[i]];
        PbKeyValue *kv = NEW(e, PbKeyValue, opentelemetry__proto__common__v1__key_value__init);
        if (kv == NULL) {
            break;
        }
        if (a->flags & FC_ATTR_KEY_STRINDEX) {
            kv->key_strindex = (int32_t)enc_str(e, a->key);
        } else {
            kv->key = (char *)fc_str(b, a->key);
        }
        kv->value = any_of(e, a, false);
        kvs[(*n)++] = kv;
    }
    return kvs;
}

/* Series labels as resource attributes, for profiles that did not come from OTLP. */
static PbKeyValue **labels_as_attrs(struct encoder *e, const struct fc_profile *p, size_t *n)
{
    const struct fc_batch *b = e->src;
    PbKeyValue **kvs = new_array(e, p->n_labels, sizeof(PbKeyValue *));

    *n = 0;
    for (uint32_t i = 0; kvs != NULL && i < p->n_labels && e->rc == FC_OK; i++) {
        const char *name = fc_str(b, p->labels[i].name);
        PbKeyValue *kv = NEW(e, PbKeyValue, opentelemetry__proto__common__v1__key_value__init);
        PbAnyValue *v = NEW(e, PbAnyValue, opentelemetry__proto__common__v1__any_value__init);
        if (kv == NULL || v == NULL) {
            break;
        }
        kv->key = (char *)(strcmp(name, "service_name") == 0 ? "service.name" : name);
        v->value_case = ANY(STRING_VALUE);
        v->string_value = (char *)fc_str(b, p->labels[i].value);
        kv->value = v;
        kvs[(*n)++] = kv;
    }
    return kvs;
}

static PbValueType *value_type(struct encoder *e, const struct fc_value_type *vt)
{
    PbValueType *m =
        NEW(e, PbValueType, opentelemetry__proto__profiles__v1development__value_type__init);

    if (m != NULL) {
        m->type_strindex = (int32_t)enc_str(e, vt->type);
        m->unit_strindex = (int32_t)enc_str(e, vt->unit);
    }
    return m;
}

/* Profile-level attributes, with the pprof-only scalars as conventions. */
static struct fc_span profile_attrs(struct encoder *e, const struct fc_profile *p)
{
    const struct fc_batch *b = e->src;
    struct idlist l = {0};

    for (uint32_t i = 0; i < p->attrs.n; i++) {
        idl_push(&l, enc_attr(e, fc_span_idx(b, p->attrs)[i]));
    }
    if (p->drop_frames && !has_key(b, p->attrs, FC_OTLP_DROP_FRAMES_KEY)) {
        idl_push(&l, new_attr(e, FC_OTLP_DROP_FRAMES_KEY, FC_ATTR_STR, p->drop_frames, 0));
    }
    if (p->keep_frames && !has_key(b, p->attrs, FC_OTLP_KEEP_FRAMES_KEY)) {
        idl_push(&l, new_attr(e, FC_OTLP_KEEP_FRAMES_KEY, FC_ATTR_STR, p->keep_frames, 0));
    }
    if (p->default_sample_type && !has_key(b, p->attrs, FC_OTLP_DEFAULT_TYPE_KEY)) {
        idl_push(&l, new_attr(e, FC_OTLP_DEFAULT_TYPE_KEY, FC_ATTR_STR, p->default_sample_type, 0));
    }
    for (uint32_t i = 0; i < p->comments.n; i++) {
        char key[64];
        snprintf(key, sizeof(key), "%s.%u", FC_OTLP_COMMENT_KEY, i);
        idl_push(&l, new_attr(e, key, FC_ATTR_STR, fc_span_idx(b, p->comments)[i], 0));
    }
    return finish_span(e, &l);
}

/* One OTLP profile: sample type t of batch profile p. */
static PbProfile *enc_profile(struct encoder *e, const struct fc_profile *p, uint32_t t)
{
    PbProfile *m = NEW(e, PbProfile, opentelemetry__proto__profiles__v1development__profile__init);
    bool split = p->n_sample_types > 1;

    if (m == NULL) {
        return NULL;
    }
    m->sample_type = p->n_sample_types ? value_type(e, &p->sample_types[t]) : NULL;
    if (p->period_type.type || p->period_type.unit) {
        m->period_type = value_type(e, &p->period_type);
    }
    m->period = p->period;
    m->time_unix_nano = (uint64_t)p->time_ns;
    m->duration_nano = (uint64_t)p->duration_ns;
    for (int i = 0; i < 16; i++) {
        if (p->profile_id[i]) {
            m->profile_id.data = (uint8_t *)p->profile_id;
            m->profile_id.len = 16;
            break;
        }
    }
    m->dropped_attributes_count = p->dropped_attributes_count;
    if (p->original_payload_format) {
        m->original_payload_format = (char *)fc_str(e->src, p->original_payload_format);
    }
    m->original_payload.data = (uint8_t *)p->original_payload;
    m->original_payload.len = p->original_payload_len;
    m->attribute_indices = span_ints(e, profile_attrs(e, p), &m->n_attribute_indices);
    m->samples = new_array(e, p->n_samples, sizeof(PbSample *));
    for (uint32_t i = 0; m->samples != NULL && i < p->n_samples && e->rc == FC_OK; i++) {
        const struct fc_sample *s = &p->samples[i];
        PbSample *ms =
            NEW(e, PbSample, opentelemetry__proto__profiles__v1development__sample__init);
        struct idlist l = {0};
        uint32_t link = 0;
        if (ms == NULL) {
            break;
        }
        ms->stack_index = (int32_t)enc_stack(e, s->stack);
        enc_sample_attrs(e, s, &l, &link);
        ms->link_index = (int32_t)link;
        ms->attribute_indices = span_ints(e, finish_span(e, &l), &ms->n_attribute_indices);
        if (split) {
            /* A multi-value pprof sample: one value per OTLP profile. */
            ms->values = new_array(e, 1, sizeof(int64_t));
            if (ms->values != NULL) {
                ms->values[0] = fc_sample_value(p, s, t);
                ms->n_values = 1;
            }
        } else {
            ms->values = (int64_t *)(p->nums + s->values_off);
            ms->n_values = s->n_values;
            ms->timestamps_unix_nano = (uint64_t *)(p->nums + s->ts_off);
            ms->n_timestamps_unix_nano = s->n_ts;
        }
        m->samples[m->n_samples++] = ms;
    }
    return m;
}

static PbDict *enc_dictionary(struct encoder *e)
{
    const struct fc_dict *d = &e->dst->dict;
    PbDict *m =
        NEW(e, PbDict, opentelemetry__proto__profiles__v1development__profiles_dictionary__init);

    if (m == NULL) {
        return NULL;
    }
    m->string_table = new_array(e, d->n_strings, sizeof(char *));
    m->mapping_table = new_array(e, d->n_mappings, sizeof(PbMapping *));
    m->location_table = new_array(e, d->n_locations, sizeof(PbLocation *));
    m->function_table = new_array(e, d->n_functions, sizeof(PbFunction *));
    m->link_table = new_array(e, d->n_links, sizeof(PbLink *));
    m->attribute_table = new_array(e, d->n_attrs, sizeof(PbKeyValueAndUnit *));
    m->stack_table = new_array(e, d->n_stacks, sizeof(PbStack *));
    if (e->rc != FC_OK) {
        return NULL;
    }
    for (uint32_t i = 0; i < d->n_strings; i++) {
        m->string_table[m->n_string_table++] = (char *)d->strings[i];
    }
    for (uint32_t i = 0; i < d->n_mappings && e->rc == FC_OK; i++) {
        PbMapping *x =
            NEW(e, PbMapping, opentelemetry__proto__profiles__v1development__mapping__init);
        if (x == NULL) {
            break;
        }
        x->memory_start = d->mappings[i].memory_start;
        x->memory_limit = d->mappings[i].memory_limit;
        x->file_offset = d->mappings[i].file_offset;
        x->filename_strindex = (int32_t)d->mappings[i].filename;
        x->attribute_indices = span_ints(e, d->mappings[i].attrs, &x->n_attribute_indices);
        m->mapping_table[m->n_mapping_table++] = x;
    }
    for (uint32_t i = 0; i < d->n_locations && e->rc == FC_OK; i++) {
        const struct fc_location *l = &d->locations[i];
        PbLocation *x =
            NEW(e, PbLocation, opentelemetry__proto__profiles__v1development__location__init);
        if (x == NULL) {
            break;
        }
        x->mapping_index = (int32_t)l->mapping;
        x->address = l->address;
        x->lines = new_array(e, l->n_lines, sizeof(PbLine *));
        for (uint32_t j = 0; x->lines != NULL && j < l->n_lines && e->rc == FC_OK; j++) {
            PbLine *ln = NEW(e, PbLine, opentelemetry__proto__profiles__v1development__line__init);
            if (ln == NULL) {
                break;
            }
            ln->function_index = (int32_t)d->lines[l->lines_off + j].function;
            ln->line = d->lines[l->lines_off + j].line;
            ln->column = d->lines[l->lines_off + j].column;
            x->lines[x->n_lines++] = ln;
        }
        x->attribute_indices = span_ints(e, l->attrs, &x->n_attribute_indices);
        m->location_table[m->n_location_table++] = x;
    }
    for (uint32_t i = 0; i < d->n_functions && e->rc == FC_OK; i++) {
        PbFunction *x =
            NEW(e, PbFunction, opentelemetry__proto__profiles__v1development__function__init);
        if (x == NULL) {
            break;
        }
        x->name_strindex = (int32_t)d->functions[i].name;
        x->system_name_strindex = (int32_t)d->functions[i].system_name;
        x->filename_strindex = (int32_t)d->functions[i].filename;
        x->start_line = d->functions[i].start_line;
        m->function_table[m->n_function_table++] = x;
    }
    for (uint32_t i = 0; i < d->n_links && e->rc == FC_OK; i++) {
        PbLink *x = NEW(e, PbLink, opentelemetry__proto__profiles__v1development__link__init);
        if (x == NULL) {
            break;
        }
        /* Entry 0 is 16 + 8 zero bytes, as the spec recommends. */
        x->trace_id.data = (uint8_t *)d->links[i].trace_id;
        x->trace_id.len = 16;
        x->span_id.data = (uint8_t *)d->links[i].span_id;
        x->span_id.len = 8;
        m->link_table[m->n_link_table++] = x;
    }
    for (uint32_t i = 0; i < d->n_attrs && e->rc == FC_OK; i++) {
        const struct fc_attr *a = &d->attrs[i];
        PbKeyValueAndUnit *x =
            NEW(e, PbKeyValueAndUnit,
                opentelemetry__proto__profiles__v1development__key_value_and_unit__init);
        if (x == NULL) {
            break;
        }
        x->key_strindex = (int32_t)a->key;
        x->unit_strindex = (int32_t)a->unit;
        x->value = i == 0 ? NULL : any_of(e, a, true);
        m->attribute_table[m->n_attribute_table++] = x;
    }
    for (uint32_t i = 0; i < d->n_stacks && e->rc == FC_OK; i++) {
        PbStack *x = NEW(e, PbStack, opentelemetry__proto__profiles__v1development__stack__init);
        if (x == NULL) {
            break;
        }
        x->location_indices = span_ints(e, d->stacks[i].locations, &x->n_location_indices);
        m->stack_table[m->n_stack_table++] = x;
    }
    return m;
}

static bool same_resource(const struct fc_batch *b, const struct fc_origin *x,
                          const struct fc_origin *y)
{
    return x->resource_attrs.n == y->resource_attrs.n &&
           (x->resource_attrs.n == 0 ||
            memcmp(fc_span_idx(b, x->resource_attrs), fc_span_idx(b, y->resource_attrs),
                   x->resource_attrs.n * sizeof(uint32_t)) == 0) &&
           x->resource_dropped == y->resource_dropped &&
           x->resource_schema_url == y->resource_schema_url;
}

/*
 * Builds the request message of b in a scratch batch; `emit` turns it into
 * bytes (protobuf or JSON) before the scratch batch goes away.
 */
static int encode_with(const struct fc_batch *b, struct fc_buf *out,
                       int (*emit)(const ProtobufCMessage *m, struct fc_buf *out),
                       struct fc_error *err)
{
    struct encoder e = {0};
    PbRequest req;
    PbResourceProfiles *rp = NULL;
    PbScopeProfiles *sp = NULL;
    uint32_t last_origin = UINT32_MAX;
    size_t n;
    size_t total = 0; /* OTLP profiles: one per sample type */
    int rc;

    opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__init(
        &req);
    e.src = b;
    e.dst = fc_batch_new(0);
    if (e.dst == NULL) {
        return fc_errorf(err, FC_ETOOBIG, "otlp: out of memory");
    }
    e.str = fc_xcalloc(b->dict.n_strings + 1, sizeof(uint32_t));
    e.fn = fc_xcalloc(b->dict.n_functions + 1, sizeof(uint32_t));
    e.map = fc_xcalloc(b->dict.n_mappings + 1, sizeof(uint32_t));
    e.loc = fc_xcalloc(b->dict.n_locations + 1, sizeof(uint32_t));
    e.stack = fc_xcalloc(b->dict.n_stacks + 1, sizeof(uint32_t));
    e.attr = fc_xcalloc(b->dict.n_attrs + 1, sizeof(uint32_t));
    e.link = fc_xcalloc(b->dict.n_links + 1, sizeof(uint32_t));
    for (uint32_t i = 0; i < b->n_profiles; i++) {
        total += b->profiles[i].n_sample_types ? b->profiles[i].n_sample_types : 1;
    }
    /* At most one resource and one scope per profile. */
    req.resource_profiles = new_array(&e, b->n_profiles, sizeof(PbResourceProfiles *));
    for (uint32_t i = 0; i < b->n_profiles && e.rc == FC_OK; i++) {
        const struct fc_profile *p = &b->profiles[i];
        const struct fc_origin *o = &b->origins[p->origin];
        bool new_resource = p->origin == 0 || last_origin == UINT32_MAX ||
                            !same_resource(b, &b->origins[last_origin], o);
        if (p->origin == 0 || p->origin != last_origin) {
            if (new_resource) {
                rp = NEW(&e, PbResourceProfiles,
                         opentelemetry__proto__profiles__v1development__resource_profiles__init);
                if (rp == NULL) {
                    break;
                }
                rp->resource =
                    NEW(&e, PbResource, opentelemetry__proto__resource__v1__resource__init);
                rp->scope_profiles = new_array(&e, b->n_profiles, sizeof(PbScopeProfiles *));
                if (e.rc != FC_OK) {
                    break;
                }
                if (p->origin == 0) {
                    rp->resource->attributes = labels_as_attrs(&e, p, &n);
                } else {
                    rp->resource->attributes = key_values_of(&e, o->resource_attrs, &n);
                    rp->resource->dropped_attributes_count = o->resource_dropped;
                    rp->schema_url = (char *)fc_str(b, o->resource_schema_url);
                }
                rp->resource->n_attributes = n;
                req.resource_profiles[req.n_resource_profiles++] = rp;
            }
            sp = NEW(&e, PbScopeProfiles,
                     opentelemetry__proto__profiles__v1development__scope_profiles__init);
            if (sp == NULL) {
                break;
            }
            sp->profiles = new_array(&e, total, sizeof(PbProfile *));
            if (p->origin != 0 &&
                (o->scope_name || o->scope_version || o->scope_attrs.n || o->scope_dropped)) {
                sp->scope =
                    NEW(&e, PbScope, opentelemetry__proto__common__v1__instrumentation_scope__init);
                if (sp->scope != NULL) {
                    sp->scope->name = (char *)fc_str(b, o->scope_name);
                    sp->scope->version = (char *)fc_str(b, o->scope_version);
                    sp->scope->attributes = key_values_of(&e, o->scope_attrs, &n);
                    sp->scope->n_attributes = n;
                    sp->scope->dropped_attributes_count = o->scope_dropped;
                }
            }
            if (p->origin != 0) {
                sp->schema_url = (char *)fc_str(b, o->scope_schema_url);
            }
            rp->scope_profiles[rp->n_scope_profiles++] = sp;
            last_origin = p->origin;
        }
        for (uint32_t t = 0; t < (p->n_sample_types ? p->n_sample_types : 1) && e.rc == FC_OK;
             t++) {
            PbProfile *pp = enc_profile(&e, p, t);
            if (pp != NULL && sp->profiles != NULL) {
                sp->profiles[sp->n_profiles++] = pp;
            }
        }
    }
    if (e.rc == FC_OK) {
        req.dictionary = enc_dictionary(&e);
    }
    rc = e.rc;
    if (rc == FC_OK) {
        rc = emit(&req.base, out);
    }
    free(e.str);
    free(e.fn);
    free(e.map);
    free(e.loc);
    free(e.stack);
    free(e.attr);
    free(e.link);
    fc_batch_unref(e.dst);
    if (rc != FC_OK) {
        return fc_errorf(err, rc, "otlp: encoding failed (%s)", fc_strerror(rc));
    }
    return FC_OK;
}

static int fc_otlp_pack(const ProtobufCMessage *m, struct fc_buf *out)
{
    size_t size = protobuf_c_message_get_packed_size(m);
    int rc = fc_buf_reserve(out, size);

    if (rc == FC_OK) {
        protobuf_c_message_pack(m, out->data + out->len);
        out->len += size;
    }
    return rc;
}

int fc_otlp_encode(const struct fc_batch *b, struct fc_buf *out, struct fc_error *err)
{
    return encode_with(b, out, fc_otlp_pack, err);
}

int fc_otlp_encode_json(const struct fc_batch *b, struct fc_buf *out, struct fc_error *err)
{
    return encode_with(b, out, fc_pbjson_write, err);
}

/* ---- responses ---------------------------------------------------------------------------- */

int fc_otlp_response(uint32_t rejected, const char *message, bool json, struct fc_buf *out)
{
    PbResponse resp =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_SERVICE_RESPONSE__INIT;
    PbPartial partial =
        OPENTELEMETRY__PROTO__COLLECTOR__PROFILES__V1DEVELOPMENT__EXPORT_PROFILES_PARTIAL_SUCCESS__INIT;

    /* partial_success stays unset on full success, as the spec asks. */
    if (rejected > 0 || (message != NULL && message[0] != '\0')) {
        partial.rejected_profiles = rejected;
        partial.error_message = (char *)(message ? message : "");
        resp.partial_success = &partial;
    }
    return json ? fc_pbjson_write(&resp.base, out) : fc_otlp_pack(&resp.base, out);
}

int fc_otlp_status(int grpc_code, const char *message, int64_t retry_after_ns, bool json,
                   struct fc_buf *out)
{
    Google__Rpc__Status status = GOOGLE__RPC__STATUS__INIT;
    Google__Rpc__RetryInfo retry = GOOGLE__RPC__RETRY_INFO__INIT;
    Google__Rpc__Duration delay = GOOGLE__RPC__DURATION__INIT;
    Google__Rpc__Any detail = GOOGLE__RPC__ANY__INIT;
    Google__Rpc__Any *details[1] = {&detail};
    uint8_t packed[64];

    status.code = grpc_code;
    status.message = (char *)message;
    if (retry_after_ns > 0) {
        /* Throttling carries google.rpc.RetryInfo, so clients know when to come back. */
        delay.seconds = retry_after_ns / 1000000000LL;
        delay.nanos = (int32_t)(retry_after_ns % 1000000000LL);
        retry.retry_delay = &delay;
        detail.type_url = (char *)"type.googleapis.com/google.rpc.RetryInfo";
        detail.value.len = protobuf_c_message_pack(&retry.base, packed);
        detail.value.data = packed;
        status.details = details;
        status.n_details = 1;
    }
    return json ? fc_pbjson_write(&status.base, out) : fc_otlp_pack(&status.base, out);
}
