#include "formats/otlp.h"

#include "core/mem.h"
#include "formats/otlp_layout.h"
#include "formats/otlp_pb.h"
#include "formats/otlp_unpack.h"
#include "formats/pb.h"
#include "formats/pbjson.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
