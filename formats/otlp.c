#include "formats/otlp.h"

#include "core/buf.h"
#include "core/mem.h"
#include "formats/otlp_layout.h"
#include "formats/otlp_pb.h"
#include "formats/otlp_unpack.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "google/rpc/status.pb-c.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ANY(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

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

/* ---- decoding ----------------------------------------------------------------------------- */

struct decoder {
    struct fc_batch *b;
    const PbDict *d;
    struct fc_error *err;
    uint32_t *str, *attr, *fn, *map, *loc, *link, *stack; /* OTLP index -> batch index */
    uint32_t *idx;                                        /* scratch index list */
    size_t cap_idx;
};

static int bad(struct decoder *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct decoder *x, const char *fmt, ...)
{
    va_list ap;

    x->err->code = FC_EPROTO;
    va_start(ap, fmt);
    vsnprintf(x->err->msg, sizeof(x->err->msg), fmt, ap);
    va_end(ap);
    return FC_EPROTO;
}

static int too_big(struct decoder *x)
{
    return fc_errorf(x->err, FC_ETOOBIG, "otlp: request exceeds the memory limit of %zu bytes",
                     x->b->arena->budget);
}

static int check(struct decoder *x, int rc)
{
    return rc == FC_ETOOBIG ? too_big(x) : rc;
}

static int ref(struct decoder *x, int32_t i, size_t n, const char *what, size_t item,
               const char *field)
{
    /* 0 means unset, valid even when the sender left the table out. */
    if (i != 0 && (i < 0 || (size_t)i >= n)) {
        return bad(x, "%s[%zu].%s: index %d is outside the table (%zu entries)", what, item, field,
                   i, n);
    }
    return FC_OK;
}

static uint32_t *scratch(struct decoder *x, size_t n)
{
    if (n > x->cap_idx) {
        x->cap_idx = n;
        x->idx = fc_xrealloc(x->idx, n * sizeof(uint32_t));
    }
    return x->idx;
}

/* An AnyValue as an attribute value; blob kinds keep their protobuf bytes. */
static int any_value(struct decoder *x, const PbAnyValue *v, struct fc_attr *a, const char *what,
                     size_t item)
{
    size_t n;
    uint8_t *buf;

    if (v == NULL) {
        a->kind = FC_ATTR_EMPTY;
        return FC_OK;
    }
    switch (v->value_case) {
    case ANY(STRING_VALUE):
        a->kind = FC_ATTR_STR;
        return check(x, fc_dict_cstring(x->b, v->string_value, &a->v.str));
    case ANY(STRING_VALUE_STRINDEX):
        if (ref(x, v->string_value_strindex, x->d->n_string_table, what, item,
                "value.string_value_strindex")) {
            return FC_EPROTO;
        }
        a->kind = FC_ATTR_STR;
        a->flags |= FC_ATTR_VALUE_STRINDEX;
        a->v.str = x->str[v->string_value_strindex];
        return FC_OK;
    case ANY(BOOL_VALUE):
        a->kind = FC_ATTR_BOOL;
        a->v.b = v->bool_value != 0;
        return FC_OK;
    case ANY(INT_VALUE):
        a->kind = FC_ATTR_INT;
        a->v.i = v->int_value;
        return FC_OK;
    case ANY(DOUBLE_VALUE):
        a->kind = FC_ATTR_DOUBLE;
        a->v.d = v->double_value;
        return FC_OK;
    case ANY(BYTES_VALUE):
        a->kind = FC_ATTR_BYTES;
        a->v.blob.data = v->bytes_value.data;
        a->v.blob.len = (uint32_t)v->bytes_value.len;
        return FC_OK;
    case ANY(ARRAY_VALUE):
    case ANY(KVLIST_VALUE): {
        const ProtobufCMessage *m = v->value_case == ANY(ARRAY_VALUE)
                                        ? (const ProtobufCMessage *)v->array_value
                                        : (const ProtobufCMessage *)v->kvlist_value;
        a->kind = v->value_case == ANY(ARRAY_VALUE) ? FC_ATTR_ARRAY : FC_ATTR_KVLIST;
        n = protobuf_c_message_get_packed_size(m);
        buf = fc_arena_alloc(x->b->arena, n ? n : 1);
        if (buf == NULL) {
            return too_big(x);
        }
        protobuf_c_message_pack(m, buf);
        a->v.blob.data = buf;
        a->v.blob.len = (uint32_t)n;
        return FC_OK;
    }
    default:
        a->kind = FC_ATTR_EMPTY;
        return FC_OK;
    }
}

/* Resource and scope attributes (KeyValue: a literal key or key_strindex). */
static int key_values(struct decoder *x, PbKeyValue **kvs, size_t n, struct fc_span *out,
                      const char *what)
{
    uint32_t *ids = fc_xcalloc(n + 1, sizeof(uint32_t));
    int rc = FC_OK;

    for (size_t i = 0; i < n && rc == FC_OK; i++) {
        struct fc_attr a = {0};
        if (kvs[i]->key_strindex != 0) {
            if (ref(x, kvs[i]->key_strindex, x->d->n_string_table, what, i, "key_strindex")) {
                rc = FC_EPROTO;
                break;
            }
            a.key = x->str[kvs[i]->key_strindex];
            a.flags |= FC_ATTR_KEY_STRINDEX;
        } else {
            rc = check(x, fc_dict_cstring(x->b, kvs[i]->key, &a.key));
        }
        rc = rc ? rc : any_value(x, kvs[i]->value, &a, what, i);
        rc = rc ? rc : check(x, fc_dict_attr(x->b, &a, &ids[i]));
    }
    if (rc == FC_OK) {
        rc = check(x, fc_dict_span(x->b, ids, (uint32_t)n, out));
    }
    free(ids);
    return rc;
}

static int index_list(struct decoder *x, const int32_t *in, size_t n, size_t table_n,
                      const uint32_t *map, struct fc_span *out, const char *what, size_t item,
                      const char *field)
{
    uint32_t *ids = scratch(x, n + 1);

    for (size_t i = 0; i < n; i++) {
        if (ref(x, in[i], table_n, what, item, field)) {
            return FC_EPROTO;
        }
        ids[i] = map[in[i]];
    }
    return check(x, fc_dict_span(x->b, ids, (uint32_t)n, out));
}

static int zero_row_check(struct decoder *x)
{
    const PbDict *d = x->d;

    if (d->n_string_table > 0 && d->string_table[0][0] != '\0') {
        return bad(x, "dictionary.string_table[0] must be \"\"");
    }
    if (d->n_mapping_table > 0) {
        const PbMapping *m = d->mapping_table[0];
        if (m->memory_start || m->memory_limit || m->file_offset || m->filename_strindex ||
            m->n_attribute_indices) {
            return bad(x, "dictionary.mapping_table[0] must be the zero value");
        }
    }
    if (d->n_location_table > 0) {
        const PbLocation *l = d->location_table[0];
        if (l->mapping_index || l->address || l->n_lines || l->n_attribute_indices) {
            return bad(x, "dictionary.location_table[0] must be the zero value");
        }
    }
    if (d->n_function_table > 0) {
        const PbFunction *f = d->function_table[0];
        if (f->name_strindex || f->system_name_strindex || f->filename_strindex || f->start_line) {
            return bad(x, "dictionary.function_table[0] must be the zero value");
        }
    }
    if (d->n_link_table > 0) {
        const PbLink *k = d->link_table[0];
        for (size_t i = 0; i < k->trace_id.len; i++) {
            if (k->trace_id.data[i]) {
                return bad(x, "dictionary.link_table[0] must be the zero value");
            }
        }
        for (size_t i = 0; i < k->span_id.len; i++) {
            if (k->span_id.data[i]) {
                return bad(x, "dictionary.link_table[0] must be the zero value");
            }
        }
    }
    if (d->n_attribute_table > 0) {
        const PbKeyValueAndUnit *a = d->attribute_table[0];
        if (a->key_strindex || a->unit_strindex ||
            (a->value != NULL && a->value->value_case != ANY(_NOT_SET))) {
            return bad(x, "dictionary.attribute_table[0] must be the zero value");
        }
    }
    if (d->n_stack_table > 0 && d->stack_table[0]->n_location_indices) {
        return bad(x, "dictionary.stack_table[0] must be the zero value");
    }
    return FC_OK;
}

static int decode_dictionary(struct decoder *x)
{
    static const PbDict empty =
        OPENTELEMETRY__PROTO__PROFILES__V1DEVELOPMENT__PROFILES_DICTIONARY__INIT;
    const PbDict *d = x->d ? x->d : &empty;
    int rc;

    /* Every map has a slot 0 (unset -> the batch's zero row), tables or not. */
    x->d = d;
    x->str = fc_xcalloc(d->n_string_table + 1, sizeof(uint32_t));
    x->attr = fc_xcalloc(d->n_attribute_table + 1, sizeof(uint32_t));
    x->fn = fc_xcalloc(d->n_function_table + 1, sizeof(uint32_t));
    x->map = fc_xcalloc(d->n_mapping_table + 1, sizeof(uint32_t));
    x->loc = fc_xcalloc(d->n_location_table + 1, sizeof(uint32_t));
    x->link = fc_xcalloc(d->n_link_table + 1, sizeof(uint32_t));
    x->stack = fc_xcalloc(d->n_stack_table + 1, sizeof(uint32_t));
    if ((rc = zero_row_check(x)) != FC_OK) {
        return rc;
    }
    for (size_t i = 0; i < d->n_string_table; i++) {
        if ((rc = check(x, fc_dict_cstring(x->b, d->string_table[i], &x->str[i]))) != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_attribute_table; i++) {
        const PbKeyValueAndUnit *kv = d->attribute_table[i];
        struct fc_attr a = {0};
        if (ref(x, kv->key_strindex, d->n_string_table, "dictionary.attribute_table", i,
                "key_strindex") ||
            ref(x, kv->unit_strindex, d->n_string_table, "dictionary.attribute_table", i,
                "unit_strindex")) {
            return FC_EPROTO;
        }
        a.key = x->str[kv->key_strindex];
        a.unit = x->str[kv->unit_strindex];
        if ((rc = any_value(x, kv->value, &a, "dictionary.attribute_table", i)) != FC_OK ||
            (rc = check(x, fc_dict_attr(x->b, &a, &x->attr[i]))) != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_function_table; i++) {
        const PbFunction *f = d->function_table[i];
        struct fc_function row = {0};
        if (ref(x, f->name_strindex, d->n_string_table, "dictionary.function_table", i,
                "name_strindex") ||
            ref(x, f->system_name_strindex, d->n_string_table, "dictionary.function_table", i,
                "system_name_strindex") ||
            ref(x, f->filename_strindex, d->n_string_table, "dictionary.function_table", i,
                "filename_strindex")) {
            return FC_EPROTO;
        }
        row.name = x->str[f->name_strindex];
        row.system_name = x->str[f->system_name_strindex];
        row.filename = x->str[f->filename_strindex];
        row.start_line = f->start_line;
        if ((rc = check(x, fc_dict_function(x->b, &row, &x->fn[i]))) != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_mapping_table; i++) {
        const PbMapping *m = d->mapping_table[i];
        struct fc_mapping row = {0};
        if (ref(x, m->filename_strindex, d->n_string_table, "dictionary.mapping_table", i,
                "filename_strindex")) {
            return FC_EPROTO;
        }
        row.memory_start = m->memory_start;
        row.memory_limit = m->memory_limit;
        row.file_offset = m->file_offset;
        row.filename = x->str[m->filename_strindex];
        if ((rc = index_list(x, m->attribute_indices, m->n_attribute_indices, d->n_attribute_table,
                             x->attr, &row.attrs, "dictionary.mapping_table", i,
                             "attribute_indices")) != FC_OK ||
            (rc = check(x, fc_dict_mapping(x->b, &row, &x->map[i]))) != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_location_table; i++) {
        const PbLocation *l = d->location_table[i];
        struct fc_location row = {0};
        struct fc_line *lines = fc_xcalloc(l->n_lines + 1, sizeof(*lines));
        if (ref(x, l->mapping_index, d->n_mapping_table, "dictionary.location_table", i,
                "mapping_index")) {
            free(lines);
            return FC_EPROTO;
        }
        row.mapping = x->map[l->mapping_index];
        row.address = l->address;
        for (size_t j = 0; j < l->n_lines; j++) {
            if (ref(x, l->lines[j]->function_index, d->n_function_table,
                    "dictionary.location_table", i, "lines.function_index")) {
                free(lines);
                return FC_EPROTO;
            }
            lines[j].function = x->fn[l->lines[j]->function_index];
            lines[j].line = l->lines[j]->line;
            lines[j].column = l->lines[j]->column;
        }
        rc = index_list(x, l->attribute_indices, l->n_attribute_indices, d->n_attribute_table,
                        x->attr, &row.attrs, "dictionary.location_table", i, "attribute_indices");
        rc = rc ? rc
                : check(x, fc_dict_location(x->b, &row, lines, (uint32_t)l->n_lines, &x->loc[i]));
        free(lines);
        if (rc != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_link_table; i++) {
        const PbLink *k = d->link_table[i];
        struct fc_link row = {{0}, {0}};
        if ((k->trace_id.len != 0 && k->trace_id.len != 16) ||
            (k->span_id.len != 0 && k->span_id.len != 8)) {
            return bad(x,
                       "dictionary.link_table[%zu]: trace_id must be 16 bytes and span_id 8 "
                       "(got %zu and %zu)",
                       i, k->trace_id.len, k->span_id.len);
        }
        if (k->trace_id.len) {
            memcpy(row.trace_id, k->trace_id.data, 16);
        }
        if (k->span_id.len) {
            memcpy(row.span_id, k->span_id.data, 8);
        }
        if ((rc = check(x, fc_dict_link(x->b, &row, &x->link[i]))) != FC_OK) {
            return rc;
        }
    }
    for (size_t i = 0; i < d->n_stack_table; i++) {
        const PbStack *s = d->stack_table[i];
        uint32_t *ids = scratch(x, s->n_location_indices + 1);
        for (size_t j = 0; j < s->n_location_indices; j++) {
            if (ref(x, s->location_indices[j], d->n_location_table, "dictionary.stack_table", i,
                    "location_indices")) {
                return FC_EPROTO;
            }
            ids[j] = x->loc[s->location_indices[j]];
        }
        if ((rc = check(x, fc_dict_stack(x->b, ids, (uint32_t)s->n_location_indices,
                                         &x->stack[i]))) != FC_OK) {
            return rc;
        }
    }
    return FC_OK;
}

/* Label text of an attribute value; false for kinds that have none. */
static bool attr_text(const struct fc_batch *b, const struct fc_attr *a, char *out, size_t size)
{
    switch (a->kind) {
    case FC_ATTR_STR:
        snprintf(out, size, "%s", fc_str(b, a->v.str));
        return true;
    case FC_ATTR_INT:
        snprintf(out, size, "%" PRId64, a->v.i);
        return true;
    case FC_ATTR_BOOL:
        snprintf(out, size, "%s", a->v.b ? "true" : "false");
        return true;
    case FC_ATTR_DOUBLE:
        snprintf(out, size, "%g", a->v.d);
        return true;
    default:
        return false;
    }
}

static int labels_from_attrs(struct fc_batch *b, struct fc_profile *p, struct fc_span attrs)
{
    char value[2048];

    for (uint32_t i = 0; i < attrs.n; i++) {
        const struct fc_attr *a = &b->dict.attrs[fc_span_idx(b, attrs)[i]];
        const char *key = fc_str(b, a->key);
        const char *text = value;
        int rc;
        if (a->kind == FC_ATTR_STR) {
            /* As it is: the receivers' max_label_value_length judges it, nothing cuts it. */
            text = fc_str(b, a->v.str);
        } else if (!attr_text(b, a, value, sizeof(value))) {
            continue;
        }
        if (key[0] == '\0') {
            continue;
        }
        if (strcmp(key, "service.name") == 0) {
            key = "service_name";
        }
        if ((rc = fc_profile_set_label(b, p, key, text)) != FC_OK) {
            return rc;
        }
    }
    return FC_OK;
}

/*
 * Pyroscope's OTLP ingest names a profile that carries no __name__ from its
 * "type:unit:period_type:period_unit" (the period part empty when the period
 * is 0): samples:count:cpu:nanoseconds is process_cpu, stored as
 * cpu:nanoseconds with values x period (*cpu_samples_as_ns);
 * off_cpu:nanoseconds without a period is off_cpu; any other profile is
 * named after its period type (a Go cpu:nanoseconds profile is
 * cpu:cpu:nanoseconds:cpu:nanoseconds, Node's cpu with a wall period is
 * wall:cpu:nanoseconds:wall:nanoseconds). So the two OTLP profiles a Go CPU
 * pprof becomes land in two profile types, never both in one. Without a
 * period Pyroscope's name would be empty; the sample type names it here.
 */
static const char *derived_name(const struct fc_batch *b, const struct fc_profile *p,
                                bool *cpu_samples_as_ns)
{
    const char *type = fc_str(b, p->sample_types[0].type);
    const char *unit = fc_str(b, p->sample_types[0].unit);
    const char *ptype = p->period != 0 ? fc_str(b, p->period_type.type) : "";
    const char *punit = p->period != 0 ? fc_str(b, p->period_type.unit) : "";

    *cpu_samples_as_ns = false;
    if (strcmp(type, "samples") == 0 && strcmp(unit, "count") == 0 && strcmp(ptype, "cpu") == 0 &&
        strcmp(punit, "nanoseconds") == 0) {
        *cpu_samples_as_ns = true;
        return "process_cpu";
    }
    if (strcmp(type, "off_cpu") == 0 && strcmp(unit, "nanoseconds") == 0 && ptype[0] == '\0' &&
        punit[0] == '\0') {
        return "off_cpu";
    }
    return ptype[0] ? ptype : type[0] ? type : "unknown";
}

static int decode_profile(struct decoder *x, const PbProfile *pp, uint32_t origin, size_t where)
{
    const PbDict *d = x->d;
    size_t n_str = d->n_string_table;
    size_t n_stack = d->n_stack_table;
    size_t n_link = d->n_link_table;
    size_t n_attr = d->n_attribute_table;
    struct fc_profile *p;
    struct fc_value_type vt = {0, 0};
    uint32_t index = x->b->n_profiles;
    int rc;

    p = fc_batch_add_profile(x->b);
    if (p == NULL) {
        return too_big(x);
    }
    p->origin = origin;
    if (pp->sample_type != NULL) {
        if (ref(x, pp->sample_type->type_strindex, n_str, "profile", where, "sample_type") ||
            ref(x, pp->sample_type->unit_strindex, n_str, "profile", where, "sample_type")) {
            return FC_EPROTO;
        }
        vt.type = x->str[pp->sample_type->type_strindex];
        vt.unit = x->str[pp->sample_type->unit_strindex];
    }
    if (pp->period_type != NULL) {
        if (ref(x, pp->period_type->type_strindex, n_str, "profile", where, "period_type") ||
            ref(x, pp->period_type->unit_strindex, n_str, "profile", where, "period_type")) {
            return FC_EPROTO;
        }
        p->period_type.type = x->str[pp->period_type->type_strindex];
        p->period_type.unit = x->str[pp->period_type->unit_strindex];
    }
    if ((rc = check(x, fc_profile_set_sample_types(x->b, p, &vt, 1))) != FC_OK) {
        return rc;
    }
    p->period = pp->period;
    p->time_ns = (int64_t)pp->time_unix_nano;
    p->duration_ns = (int64_t)pp->duration_nano;
    p->dropped_attributes_count = pp->dropped_attributes_count;
    if (pp->profile_id.len != 0 && pp->profile_id.len != 16) {
        return bad(x, "profile %zu: profile_id must be 16 bytes, got %zu", where,
                   pp->profile_id.len);
    }
    if (pp->profile_id.len == 16) {
        memcpy(p->profile_id, pp->profile_id.data, 16);
    }
    if ((rc = check(x, fc_dict_cstring(x->b, pp->original_payload_format,
                                       &p->original_payload_format))) != FC_OK) {
        return rc;
    }
    if (pp->original_payload.len > 0) {
        p->original_payload = pp->original_payload.data; /* already in the batch arena */
        p->original_payload_len = (uint32_t)pp->original_payload.len;
    }
    if ((rc = index_list(x, pp->attribute_indices, pp->n_attribute_indices, n_attr, x->attr,
                         &p->attrs, "profile", where, "attribute_indices")) != FC_OK) {
        return rc;
    }
    for (size_t i = 0; i < pp->n_samples; i++) {
        const PbSample *s = pp->samples[i];
        struct fc_sample row = {0};
        if (ref(x, s->stack_index, n_stack, "sample", i, "stack_index") ||
            ref(x, s->link_index, n_link, "sample", i, "link_index")) {
            return fc_error_wrap(x->err, "profile %zu", where);
        }
        if (s->n_values == 0 && s->n_timestamps_unix_nano == 0) {
            return bad(x, "profile %zu sample %zu has neither values nor timestamps", where, i);
        }
        if (s->n_values != 0 && s->n_timestamps_unix_nano != 0 &&
            s->n_values != s->n_timestamps_unix_nano) {
            return bad(x, "profile %zu sample %zu has %zu values but %zu timestamps", where, i,
                       s->n_values, s->n_timestamps_unix_nano);
        }
        row.stack = x->stack[s->stack_index];
        row.link = x->link[s->link_index];
        if ((rc = index_list(x, s->attribute_indices, s->n_attribute_indices, n_attr, x->attr,
                             &row.attrs, "sample", i, "attribute_indices")) != FC_OK) {
            return rc == FC_EPROTO ? fc_error_wrap(x->err, "profile %zu", where) : rc;
        }
        rc = fc_profile_add_sample(x->b, &x->b->profiles[index], &row, s->values,
                                   (uint32_t)s->n_values, (const int64_t *)s->timestamps_unix_nano,
                                   (uint32_t)s->n_timestamps_unix_nano);
        if (rc != FC_OK) {
            return too_big(x);
        }
    }
    p = &x->b->profiles[index];
    {
        const struct fc_origin *o = &x->b->origins[origin];
        rc = labels_from_attrs(x->b, p, o->resource_attrs);
        rc = rc ? rc : labels_from_attrs(x->b, p, o->scope_attrs);
        if (rc == FC_OK && fc_profile_label(x->b, p, "service_name") == NULL) {
            /* The semantic conventions' default, as Pyroscope's OTLP ingest uses it. */
            const char *exe = fc_profile_label(x->b, p, "process.executable.name");
            char name[256];
            snprintf(name, sizeof(name), "unknown_service%s%s", exe && exe[0] ? ":" : "",
                     exe ? exe : "");
            rc = fc_profile_set_label(x->b, p, "service_name", name);
        }
        if (rc == FC_OK && fc_profile_label(x->b, p, "__name__") == NULL) {
            bool as_ns;
            const char *name = derived_name(x->b, p, &as_ns);
            rc = fc_profile_set_label(x->b, p, "__name__", name);
            p->cpu_samples_as_ns = as_ns;
        }
    }
    return rc == FC_OK ? FC_OK : too_big(x);
}

int fc_otlp_decode(struct fc_batch *b, const uint8_t *data, size_t len, struct fc_otlp_result *res,
                   struct fc_error *err)
{
    return fc_otlp_decode_depth(b, data, len, FC_PB_DEFAULT_MAX_DEPTH, res, err);
}

/*
 * A request the current layout does not explain (it did not unpack, or it
 * shows what an older layout leaves behind): an older layout is refused,
 * naming it, or translated when that is exact (v1.9). *done stays false
 * when nothing older was found.
 */
static int older_layout(struct fc_batch *b, const uint8_t *data, size_t len, unsigned max_depth,
                        bool may_translate, struct fc_otlp_result *res, struct fc_error *err,
                        bool *done)
{
    struct fc_otlp_layout_info info;
    uint8_t *copy;
    PbRequest *req = NULL;
    int rc;

    *done = false;
    if (fc_otlp_layout_scan(data, len, &info) == FC_OTLP_LAYOUT_NONE) {
        return FC_OK;
    }
    *done = true;
    if (info.layout != FC_OTLP_LAYOUT_SAMPLE_VALUES || !may_translate) {
        return fc_otlp_layout_error(&info, false, err);
    }
    if ((copy = fc_arena_alloc(b->arena, len)) != NULL) {
        memcpy(copy, data, len);
        /* The renumbered Sample fields are scalars: the nesting is the one already checked. */
        if (fc_otlp_layout_translate(copy, len) == FC_OK) {
            req = fc_otlp_unpack(b->arena, copy, len, max_depth);
        }
    }
    if (req == NULL) {
        if (fc_arena_over_budget(b->arena)) {
            return fc_errorf(err, FC_ETOOBIG, "otlp: request exceeds the memory limit of %zu bytes",
                             b->arena->budget);
        }
        return fc_otlp_layout_error(&info, false, err);
    }
    rc = fc_otlp_decode_message(b, req, res, err);
    if (rc == FC_OK) {
        res->translated = true;
        if (res->rejected_profiles == 0) {
            snprintf(res->message, sizeof(res->message), "%s", FC_OTLP_LAYOUT_TRANSLATED_NOTE);
        }
    }
    return rc;
}

int fc_otlp_decode_depth(struct fc_batch *b, const uint8_t *data, size_t len, unsigned max_depth,
                         struct fc_otlp_result *res, struct fc_error *err)
{
    PbRequest *req;
    bool done;
    int rc;

    memset(res, 0, sizeof(*res));
    /* One pass, nesting bounded (formats/otlp_unpack.h); the why of a refusal is asked after. */
    req = fc_otlp_unpack(b->arena, data, len, max_depth);
    if (req == NULL &&
        fc_pb_check_depth(
            &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
            data, len, max_depth, err) != FC_OK) {
        /* Too deep, or not this layout at the wire level: an older layout is named, not read. */
        rc = older_layout(b, data, len, max_depth, false, res, err, &done);
        return done ? rc : fc_error_wrap(err, "otlp");
    }
    if (req == NULL) {
        if (fc_arena_over_budget(b->arena)) {
            return fc_errorf(err, FC_ETOOBIG, "otlp: request exceeds the memory limit of %zu bytes",
                             b->arena->budget);
        }
        rc = older_layout(b, data, len, max_depth, true, res, err, &done);
        if (!done) {
            rc = fc_errorf(err, FC_EPROTO,
                           "otlp: not a valid ExportProfilesServiceRequest (malformed protobuf)");
        }
        return rc;
    }
    if (fc_otlp_layout_suspect(req)) {
        rc = older_layout(b, data, len, max_depth, true, res, err, &done);
        if (done) {
            return rc;
        }
    }
    return fc_otlp_decode_message(b, req, res, err);
}

int fc_otlp_decode_message(struct fc_batch *b, const void *message, struct fc_otlp_result *res,
                           struct fc_error *err)
{
    const PbRequest *req = message;
    struct decoder x = {0};
    int rc;
    size_t where = 0;

    memset(res, 0, sizeof(*res));
    x.b = b;
    x.d = req->dictionary;
    x.err = err;
    rc = decode_dictionary(&x);
    for (size_t r = 0; rc == FC_OK && r < req->n_resource_profiles; r++) {
        const PbResourceProfiles *rp = req->resource_profiles[r];
        struct fc_origin o = {0};
        if (rp->resource != NULL) {
            rc = key_values(&x, rp->resource->attributes, rp->resource->n_attributes,
                            &o.resource_attrs, "resource.attributes");
            o.resource_dropped = rp->resource->dropped_attributes_count;
        }
        rc = rc ? rc : check(&x, fc_dict_cstring(b, rp->schema_url, &o.resource_schema_url));
        for (size_t s = 0; rc == FC_OK && s < rp->n_scope_profiles; s++) {
            const PbScopeProfiles *sp = rp->scope_profiles[s];
            uint32_t origin;
            if (sp->scope != NULL) {
                rc = check(&x, fc_dict_cstring(b, sp->scope->name, &o.scope_name));
                rc = rc ? rc : check(&x, fc_dict_cstring(b, sp->scope->version, &o.scope_version));
                rc = rc ? rc
                        : key_values(&x, sp->scope->attributes, sp->scope->n_attributes,
                                     &o.scope_attrs, "scope.attributes");
                o.scope_dropped = sp->scope->dropped_attributes_count;
            } else {
                o.scope_name = o.scope_version = 0;
                o.scope_attrs.n = 0;
                o.scope_dropped = 0;
            }
            rc = rc ? rc : check(&x, fc_dict_cstring(b, sp->schema_url, &o.scope_schema_url));
            rc = rc ? rc : check(&x, fc_batch_add_origin(b, &o, &origin));
            for (size_t i = 0; rc == FC_OK && i < sp->n_profiles; i++, where++) {
                uint32_t before = b->n_profiles;
                struct fc_error one = {0};
                x.err = &one;
                rc = decode_profile(&x, sp->profiles[i], origin, where);
                x.err = err;
                if (rc == FC_EPROTO) {
                    /* One bad profile: rejected alone, the request goes on. */
                    b->n_profiles = before;
                    if (res->rejected_profiles++ == 0) {
                        snprintf(res->message, sizeof(res->message), "%s", one.msg);
                    }
                    rc = FC_OK;
                } else if (rc != FC_OK) {
                    *err = one;
                } else {
                    res->profiles++;
                }
            }
        }
    }
    free(x.str);
    free(x.attr);
    free(x.fn);
    free(x.map);
    free(x.loc);
    free(x.link);
    free(x.stack);
    free(x.idx);
    if (rc != FC_OK && err->msg[0] != '\0' && strncmp(err->msg, "otlp: ", 6) != 0) {
        fc_error_wrap(err, "otlp");
    }
    return rc;
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

int fc_otlp_decode_json(struct fc_batch *b, const char *text, size_t len,
                        struct fc_otlp_result *res, struct fc_error *err)
{
    return fc_otlp_decode_json_depth(b, text, len, FC_PB_DEFAULT_MAX_DEPTH, res, err);
}

int fc_otlp_decode_json_depth(struct fc_batch *b, const char *text, size_t len, unsigned max_depth,
                              struct fc_otlp_result *res, struct fc_error *err)
{
    void *req = NULL;
    int rc;

    memset(res, 0, sizeof(*res));
    rc = fc_pbjson_read_depth(
        b->arena,
        &opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
        text, len, max_depth, &req, err);
    if (rc != FC_OK) {
        struct fc_otlp_layout_info info;
        if (rc == FC_EPROTO && fc_otlp_layout_scan_json(text, len, &info) != FC_OTLP_LAYOUT_NONE) {
            /* An older layout's shapes (a repeated sample_type): named, with what failed. */
            char why[sizeof(err->msg) / 2];
            size_t n;
            snprintf(why, sizeof(why), "%s", err->msg);
            fc_otlp_layout_error(&info, true, err);
            n = strlen(err->msg);
            snprintf(err->msg + n, sizeof(err->msg) - n, " (%s)", why);
            return FC_EPROTO;
        }
        return fc_error_wrap(err, "otlp json");
    }
    if (fc_otlp_layout_suspect(req)) {
        struct fc_otlp_layout_info info;
        if (fc_otlp_layout_scan_json(text, len, &info) != FC_OTLP_LAYOUT_NONE) {
            return fc_otlp_layout_error(&info, true, err);
        }
    }
    return fc_otlp_decode_message(b, req, res, err);
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
