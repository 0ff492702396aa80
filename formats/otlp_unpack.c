#include "formats/otlp_unpack.h"

#include "formats/otlp_pb.h"
#include "formats/pb.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdbool.h>
#include <string.h>

/* ---- the schema: each message's fields, indexed by field number --------------------------- */

/* What a field holds, as protobuf-c stores it. */
enum kind {
    K_NONE = 0, /* not a field of this message: kept as an unknown field */
    K_I32,      /* int32 (varint, low 32 bits) */
    K_U32,      /* uint32 (varint, low 32 bits) */
    K_I64,      /* int64, uint64 (varint) */
    K_F64,      /* fixed64, double (8 bytes) */
    K_BOOL,     /* protobuf_c_boolean, any wire type */
    K_STR,      /* char *, NUL-terminated copy */
    K_BYTES,    /* ProtobufCBinaryData, a copy (NULL when empty) */
    K_MSG,      /* a nested message */
};

enum type {
    T_REQUEST,
    T_DICT,
    T_RESOURCE_PROFILES,
    T_SCOPE_PROFILES,
    T_PROFILE,
    T_SAMPLE,
    T_MAPPING,
    T_LOCATION,
    T_LINE,
    T_FUNCTION,
    T_LINK,
    T_STACK,
    T_VALUE_TYPE,
    T_KVU,
    T_ANY,
    T_ARRAY,
    T_KVLIST,
    T_KV,
    T_SCOPE,
    T_RESOURCE,
    T_COUNT
};

struct field {
    uint8_t kind;     /* enum kind */
    uint8_t repeated; /* n_ at qoffset, the array at offset */
    uint8_t oneof;    /* the case at qoffset (AnyValue.value) */
    uint8_t sub;      /* enum type, for K_MSG */
    uint16_t offset;  /* of the member */
    uint16_t qoffset; /* of its count or oneof case */
};

#define MAX_FIELDS 11 /* Profile's highest field number */

struct type_info {
    const ProtobufCMessageDescriptor *desc;
    uint32_t n;    /* highest field number */
    bool repeated; /* has repeated fields: a first pass counts them */
    struct field f[MAX_FIELDS + 1];
};

#define ONE(S, m, k)                                                                               \
    {                                                                                              \
        k, 0, 0, 0, offsetof(S, m), 0                                                              \
    }
#define MSG(S, m, t)                                                                               \
    {                                                                                              \
        K_MSG, 0, 0, t, offsetof(S, m), 0                                                          \
    }
#define REP(S, m, k)                                                                               \
    {                                                                                              \
        k, 1, 0, 0, offsetof(S, m), offsetof(S, n_##m)                                             \
    }
#define REPMSG(S, m, t)                                                                            \
    {                                                                                              \
        K_MSG, 1, 0, t, offsetof(S, m), offsetof(S, n_##m)                                         \
    }
#define ONEOF(m, k, t)                                                                             \
    {                                                                                              \
        k, 0, 1, t, offsetof(PbAnyValue, m), offsetof(PbAnyValue, value_case)                      \
    }

static const struct type_info types[T_COUNT] = {
    [T_REQUEST] =
        {&opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__descriptor,
         2,
         true,
         {[1] = REPMSG(PbRequest, resource_profiles, T_RESOURCE_PROFILES),
          [2] = MSG(PbRequest, dictionary, T_DICT)}},
    [T_DICT] = {&opentelemetry__proto__profiles__v1development__profiles_dictionary__descriptor,
                7,
                true,
                {[1] = REPMSG(PbDict, mapping_table, T_MAPPING),
                 [2] = REPMSG(PbDict, location_table, T_LOCATION),
                 [3] = REPMSG(PbDict, function_table, T_FUNCTION),
                 [4] = REPMSG(PbDict, link_table, T_LINK),
                 [5] = REP(PbDict, string_table, K_STR),
                 [6] = REPMSG(PbDict, attribute_table, T_KVU),
                 [7] = REPMSG(PbDict, stack_table, T_STACK)}},
    [T_RESOURCE_PROFILES] =
        {&opentelemetry__proto__profiles__v1development__resource_profiles__descriptor,
         3,
         true,
         {[1] = MSG(PbResourceProfiles, resource, T_RESOURCE),
          [2] = REPMSG(PbResourceProfiles, scope_profiles, T_SCOPE_PROFILES),
          [3] = ONE(PbResourceProfiles, schema_url, K_STR)}},
    [T_SCOPE_PROFILES] =
        {&opentelemetry__proto__profiles__v1development__scope_profiles__descriptor,
         3,
         true,
         {[1] = MSG(PbScopeProfiles, scope, T_SCOPE),
          [2] = REPMSG(PbScopeProfiles, profiles, T_PROFILE),
          [3] = ONE(PbScopeProfiles, schema_url, K_STR)}},
    [T_PROFILE] = {&opentelemetry__proto__profiles__v1development__profile__descriptor,
                   11,
                   true,
                   {[1] = MSG(PbProfile, sample_type, T_VALUE_TYPE),
                    [2] = REPMSG(PbProfile, samples, T_SAMPLE),
                    [3] = ONE(PbProfile, time_unix_nano, K_F64),
                    [4] = ONE(PbProfile, duration_nano, K_I64),
                    [5] = MSG(PbProfile, period_type, T_VALUE_TYPE),
                    [6] = ONE(PbProfile, period, K_I64),
                    [7] = ONE(PbProfile, profile_id, K_BYTES),
                    [8] = ONE(PbProfile, dropped_attributes_count, K_U32),
                    [9] = ONE(PbProfile, original_payload_format, K_STR),
                    [10] = ONE(PbProfile, original_payload, K_BYTES),
                    [11] = REP(PbProfile, attribute_indices, K_I32)}},
    [T_SAMPLE] = {&opentelemetry__proto__profiles__v1development__sample__descriptor,
                  5,
                  true,
                  {[1] = ONE(PbSample, stack_index, K_I32),
                   [2] = REP(PbSample, attribute_indices, K_I32),
                   [3] = ONE(PbSample, link_index, K_I32),
                   [4] = REP(PbSample, values, K_I64),
                   [5] = REP(PbSample, timestamps_unix_nano, K_F64)}},
    [T_MAPPING] = {&opentelemetry__proto__profiles__v1development__mapping__descriptor,
                   5,
                   true,
                   {[1] = ONE(PbMapping, memory_start, K_I64),
                    [2] = ONE(PbMapping, memory_limit, K_I64),
                    [3] = ONE(PbMapping, file_offset, K_I64),
                    [4] = ONE(PbMapping, filename_strindex, K_I32),
                    [5] = REP(PbMapping, attribute_indices, K_I32)}},
    [T_LOCATION] = {&opentelemetry__proto__profiles__v1development__location__descriptor,
                    4,
                    true,
                    {[1] = ONE(PbLocation, mapping_index, K_I32),
                     [2] = ONE(PbLocation, address, K_I64),
                     [3] = REPMSG(PbLocation, lines, T_LINE),
                     [4] = REP(PbLocation, attribute_indices, K_I32)}},
    [T_LINE] = {&opentelemetry__proto__profiles__v1development__line__descriptor,
                3,
                false,
                {[1] = ONE(PbLine, function_index, K_I32),
                 [2] = ONE(PbLine, line, K_I64),
                 [3] = ONE(PbLine, column, K_I64)}},
    [T_FUNCTION] = {&opentelemetry__proto__profiles__v1development__function__descriptor,
                    4,
                    false,
                    {[1] = ONE(PbFunction, name_strindex, K_I32),
                     [2] = ONE(PbFunction, system_name_strindex, K_I32),
                     [3] = ONE(PbFunction, filename_strindex, K_I32),
                     [4] = ONE(PbFunction, start_line, K_I64)}},
    [T_LINK] = {&opentelemetry__proto__profiles__v1development__link__descriptor,
                2,
                false,
                {[1] = ONE(PbLink, trace_id, K_BYTES), [2] = ONE(PbLink, span_id, K_BYTES)}},
    [T_STACK] = {&opentelemetry__proto__profiles__v1development__stack__descriptor,
                 1,
                 true,
                 {[1] = REP(PbStack, location_indices, K_I32)}},
    [T_VALUE_TYPE] = {&opentelemetry__proto__profiles__v1development__value_type__descriptor,
                      2,
                      false,
                      {[1] = ONE(PbValueType, type_strindex, K_I32),
                       [2] = ONE(PbValueType, unit_strindex, K_I32)}},
    [T_KVU] = {&opentelemetry__proto__profiles__v1development__key_value_and_unit__descriptor,
               3,
               false,
               {[1] = ONE(PbKeyValueAndUnit, key_strindex, K_I32),
                [2] = MSG(PbKeyValueAndUnit, value, T_ANY),
                [3] = ONE(PbKeyValueAndUnit, unit_strindex, K_I32)}},
    [T_ANY] = {&opentelemetry__proto__common__v1__any_value__descriptor,
               8,
               false,
               {[1] = ONEOF(string_value, K_STR, 0),
                [2] = ONEOF(bool_value, K_BOOL, 0),
                [3] = ONEOF(int_value, K_I64, 0),
                [4] = ONEOF(double_value, K_F64, 0),
                [5] = ONEOF(array_value, K_MSG, T_ARRAY),
                [6] = ONEOF(kvlist_value, K_MSG, T_KVLIST),
                [7] = ONEOF(bytes_value, K_BYTES, 0),
                [8] = ONEOF(string_value_strindex, K_I32, 0)}},
    [T_ARRAY] = {&opentelemetry__proto__common__v1__array_value__descriptor,
                 1,
                 true,
                 {[1] = REPMSG(PbArrayValue, values, T_ANY)}},
    [T_KVLIST] = {&opentelemetry__proto__common__v1__key_value_list__descriptor,
                  1,
                  true,
                  {[1] = REPMSG(PbKeyValueList, values, T_KV)}},
    [T_KV] = {&opentelemetry__proto__common__v1__key_value__descriptor,
              3,
              false,
              {[1] = ONE(PbKeyValue, key, K_STR),
               [2] = MSG(PbKeyValue, value, T_ANY),
               [3] = ONE(PbKeyValue, key_strindex, K_I32)}},
    [T_SCOPE] = {&opentelemetry__proto__common__v1__instrumentation_scope__descriptor,
                 4,
                 true,
                 {[1] = ONE(PbScope, name, K_STR),
                  [2] = ONE(PbScope, version, K_STR),
                  [3] = REPMSG(PbScope, attributes, T_KV),
                  [4] = ONE(PbScope, dropped_attributes_count, K_U32)}},
    [T_RESOURCE] = {&opentelemetry__proto__resource__v1__resource__descriptor,
                    2,
                    true,
                    {[1] = REPMSG(PbResource, attributes, T_KV),
                     [2] = ONE(PbResource, dropped_attributes_count, K_U32)}},
};

static size_t elt_size(enum kind k)
{
    switch (k) {
    case K_I32:
    case K_U32:
        return sizeof(int32_t);
    case K_BOOL:
        return sizeof(protobuf_c_boolean);
    case K_I64:
    case K_F64:
        return sizeof(uint64_t);
    case K_BYTES:
        return sizeof(ProtobufCBinaryData);
    default:
        return sizeof(void *); /* K_STR, K_MSG */
    }
}

#define FIELD(m, off, T) ((T *)((char *)(m) + (off)))

/* ---- the wire ---------------------------------------------------------------------------- */

/* One field as it is on the wire. */
struct wire {
    uint32_t number;
    unsigned type;      /* wire type */
    const uint8_t *raw; /* the value's bytes, a length prefix included */
    size_t raw_len;
    const uint8_t *data; /* FC_PB_LEN: the payload */
    size_t len;
    uint64_t value; /* FC_PB_VARINT, FC_PB_I64, FC_PB_I32 */
};

/* A varint of at most max bytes; its length, or 0 when it does not end within them. */
static inline size_t varint_len(const uint8_t *p, size_t rem, size_t max)
{
    size_t n = rem < max ? rem : max;

    if (n > 0 && p[0] < 0x80) {
        return 1; /* most tags, lengths and indices */
    }
    for (size_t i = 0; i < n; i++) {
        if ((p[i] & 0x80) == 0) {
            return i + 1;
        }
    }
    return 0;
}

static inline uint64_t varint_value(const uint8_t *p, size_t n)
{
    uint64_t v = 0;

    if (n == 1) {
        return p[0];
    }
    for (size_t i = 0; i < n; i++) {
        v |= (uint64_t)(p[i] & 0x7f)
             << (7 * i); /* byte 10's excess bits fall off, as in protobuf-c */
    }
    return v;
}

/*
 * The next field, or -1 when malformed. Tags and length prefixes take at most
 * 5 bytes (protobuf-c), field numbers 1..2^29-1 and lengths within the data
 * (fc_pb_check_depth); groups and wire types 6, 7 are refused by both.
 */
static inline int next(const uint8_t **pp, const uint8_t *end, struct wire *w)
{
    const uint8_t *p = *pp;
    size_t rem = (size_t)(end - p);
    size_t n = varint_len(p, rem, 5);
    uint64_t tag, len;

    if (n == 0) {
        return -1;
    }
    tag = varint_value(p, n);
    if ((tag >> 3) == 0 || (tag >> 3) > 0x1fffffff) {
        return -1;
    }
    w->number = (uint32_t)(tag >> 3);
    w->type = (unsigned)(tag & 7);
    p += n;
    rem -= n;
    w->raw = p;
    w->data = NULL;
    w->len = 0;
    switch (w->type) {
    case FC_PB_VARINT:
        w->raw_len = varint_len(p, rem, 10);
        if (w->raw_len == 0) {
            return -1;
        }
        w->value = varint_value(p, w->raw_len);
        break;
    case FC_PB_I64:
        if (rem < 8) {
            return -1;
        }
        w->raw_len = 8;
        memcpy(&w->value, p, 8); /* little-endian hosts only, as fc_pb_next */
        break;
    case FC_PB_I32: {
        uint32_t v;
        if (rem < 4) {
            return -1;
        }
        w->raw_len = 4;
        memcpy(&v, p, 4);
        w->value = v;
        break;
    }
    case FC_PB_LEN:
        n = varint_len(p, rem, 5);
        if (n == 0) {
            return -1;
        }
        len = varint_value(p, n);
        if (len > rem - n) {
            return -1;
        }
        w->data = p + n;
        w->len = (size_t)len;
        w->raw_len = n + (size_t)len;
        break;
    default:
        return -1;
    }
    *pp = p + w->raw_len;
    return 0;
}

/* Varints in a packed field, or -1 when one does not end or takes more than 10 bytes. */
static int64_t packed_varints(const uint8_t *p, size_t len)
{
    int64_t count = 0;
    size_t run = 0;

    for (size_t i = 0; i < len; i++) {
        if (p[i] & 0x80) {
            if (++run >= 10) {
                return -1;
            }
        } else {
            run = 0;
            count++;
        }
    }
    return run == 0 ? count : -1;
}

/* ---- unpacking --------------------------------------------------------------------------- */

struct ctx {
    struct fc_arena *a;
    unsigned max_depth;
};

static void *unpack(struct ctx *c, enum type t, const uint8_t *data, size_t len, unsigned depth,
                    void *into);

/* Is wire type w one protobuf-c takes for field f? Sets *count: the values it carries. */
static bool fits(const struct field *f, const struct wire *w, size_t *count)
{
    int64_t n;

    *count = 1;
    switch ((enum kind)f->kind) {
    case K_I32:
    case K_U32:
    case K_I64:
        if (w->type == FC_PB_LEN && f->repeated) {
            n = packed_varints(w->data, w->len);
            *count = (size_t)n;
            return n >= 0;
        }
        return w->type == FC_PB_VARINT;
    case K_F64:
        if (w->type == FC_PB_LEN && f->repeated) {
            *count = w->len / 8;
            return w->len % 8 == 0;
        }
        return w->type == FC_PB_I64;
    case K_BOOL:
        return true;
    case K_STR:
    case K_BYTES:
    case K_MSG:
        return w->type == FC_PB_LEN;
    default:
        return false;
    }
}

/* Stores a scalar of kind k read from w at p (the raw value bytes). */
static void put_scalar(enum kind k, const struct wire *w, void *p)
{

    switch (k) {
    case K_I32:
    case K_U32:
        *(uint32_t *)p = (uint32_t)w->value;
        break;
    case K_I64:
    case K_F64:
        *(uint64_t *)p = w->value;
        break;
    default: { /* K_BOOL: true when any byte of the value has a low bit, as protobuf-c */
        protobuf_c_boolean b = 0;
        for (size_t i = 0; i < w->raw_len && !b; i++) {
            b = (w->raw[i] & 0x7f) != 0;
        }
        *(protobuf_c_boolean *)p = b;
        break;
    }
    }
}

/* Appends the values of a packed field (count known) to array at *n. */
static void put_packed(enum kind k, const struct wire *w, char *array, size_t *n)
{
    const uint8_t *p = w->data;
    const uint8_t *end = w->data + w->len;

    if (w->len == 0) {
        return; /* array may be NULL: every packed value of the field may be empty */
    }
    if (k == K_F64) {
        memcpy(array + *n * 8, p, w->len);
        *n += w->len / 8;
        return;
    }
    while (p < end) {
        size_t s = varint_len(p, (size_t)(end - p), 10);
        uint64_t v = varint_value(p, s);
        if (k == K_I64) {
            ((uint64_t *)array)[(*n)++] = v;
        } else {
            ((uint32_t *)array)[(*n)++] = (uint32_t)v;
        }
        p += s;
    }
}

/* A string's bytes: from the block scan sized, else their own allocation. */
static char *string_room(struct ctx *c, char **strings, size_t len)
{
    char *s = *strings;

    if (s == NULL) {
        return fc_arena_alloc(c->a, len + 1);
    }
    *strings += len + 1;
    return s;
}

static int merge(struct ctx *c, enum type t, ProtobufCMessage *earlier, ProtobufCMessage *latter,
                 unsigned depth);

/* A string, bytes or message value of w into *p; -1 when over budget or malformed. */
static int put_len(struct ctx *c, const struct field *f, const struct wire *w, void *p,
                   char **strings, unsigned depth, void *into)
{
    switch ((enum kind)f->kind) {
    case K_STR: {
        char *str = string_room(c, strings, w->len);
        if (str == NULL) {
            return -1;
        }
        memcpy(str, w->data, w->len);
        str[w->len] = '\0';
        *(char **)p = str;
        return 0;
    }
    case K_BYTES: {
        ProtobufCBinaryData *bd = p;
        bd->len = w->len;
        bd->data = NULL;
        if (w->len > 0) {
            if ((bd->data = fc_arena_alloc(c->a, w->len)) == NULL) {
                return -1;
            }
            memcpy(bd->data, w->data, w->len);
        }
        return 0;
    }
    default: { /* K_MSG */
        ProtobufCMessage *m = unpack(c, f->sub, w->data, w->len, depth + 1, into);
        ProtobufCMessage **slot = p;
        if (m == NULL) {
            return -1;
        }
        /* A singular message given again merges into the new one (not a oneof: cleared first). */
        if (!f->repeated && *slot != NULL && merge(c, f->sub, *slot, m, depth + 1) != 0) {
            return -1;
        }
        *slot = m;
        return 0;
    }
    }
}

/* Copies an unknown field as protobuf-c keeps it: tag, wire type, the value's raw bytes. */
static int put_unknown(struct ctx *c, const struct wire *w, ProtobufCMessageUnknownField *u)
{
    u->tag = w->number;
    u->wire_type = (ProtobufCWireType)w->type;
    u->len = w->raw_len;
    if ((u->data = fc_arena_alloc(c->a, w->raw_len)) == NULL) {
        return -1;
    }
    memcpy(u->data, w->raw, w->raw_len);
    return 0;
}

/* What the first pass finds: counts to size the arrays, all in one place. */
struct tally {
    size_t n[MAX_FIELDS + 1]; /* values of each repeated field */
    size_t unknown;
    size_t string_bytes; /* every string's bytes and NUL */
};

/* First pass: checks every field and counts. 0, or -1 when protobuf-c (or the depth bound) refuses.
 */
static int scan(const struct ctx *c, const struct type_info *ti, const uint8_t *p,
                const uint8_t *end, unsigned depth, struct tally *tl)
{
    struct wire w;
    size_t count;

    while (p < end) {
        const struct field *f;
        if (next(&p, end, &w) != 0) {
            return -1;
        }
        f = w.number <= ti->n ? &ti->f[w.number] : NULL;
        if (f == NULL || f->kind == K_NONE) {
            tl->unknown++;
            continue;
        }
        if (!fits(f, &w, &count)) {
            return -1;
        }
        if (f->kind == K_MSG && depth >= c->max_depth) {
            return -1; /* fc_pb_check_depth: message nested deeper than max_message_depth */
        }
        if (f->repeated) {
            tl->n[w.number] += count;
        }
        if (f->kind == K_STR) {
            tl->string_bytes += w.len + 1;
        }
    }
    return 0;
}

/* Arrays for the repeated fields; repeated messages get their structs in one block. */
static int alloc_arrays(struct ctx *c, const struct type_info *ti, ProtobufCMessage *m,
                        const struct tally *tl, char **blocks)
{
    for (uint32_t i = 1; i <= ti->n; i++) {
        const struct field *f = &ti->f[i];
        void *arr;
        blocks[i] = NULL;
        if (!f->repeated || tl->n[i] == 0) {
            continue;
        }
        if ((arr = fc_arena_alloc(c->a, tl->n[i] * elt_size(f->kind))) == NULL) {
            return -1;
        }
        *FIELD(m, f->offset, void *) = arr;
        if (f->kind == K_MSG &&
            (blocks[i] = fc_arena_alloc(c->a, tl->n[i] * types[f->sub].desc->sizeof_message)) ==
                NULL) {
            return -1;
        }
    }
    return 0;
}

/*
 * Without a first pass (a message without repeated fields), the checks of
 * scan are made here; unknown fields grow an array (amortized: doubling).
 */
static int unscanned(const struct ctx *c, const struct field *f, const struct wire *w,
                     unsigned depth)
{
    size_t count;

    return fits(f, w, &count) && (f->kind != K_MSG || depth < c->max_depth) ? 0 : -1;
}

static int grow_unknown(struct ctx *c, ProtobufCMessage *m, size_t *cap)
{
    size_t n = *cap ? *cap * 2 : 4;
    void *arr;

    if (m->n_unknown_fields < *cap) {
        return 0;
    }
    arr = fc_arena_realloc(c->a, m->unknown_fields, *cap * sizeof(*m->unknown_fields),
                           n * sizeof(*m->unknown_fields));
    if (arr == NULL) {
        return -1;
    }
    m->unknown_fields = arr;
    *cap = n;
    return 0;
}

/* Second pass: the values, into m (checked by scan when the type has one). */
static int fill(struct ctx *c, const struct type_info *ti, ProtobufCMessage *m, const uint8_t *p,
                const uint8_t *end, unsigned depth, char **blocks, char *strings,
                size_t unknown_cap)
{
    struct wire w;

    while (p < end) {
        const struct field *f;
        void *slot;
        if (next(&p, end, &w) != 0) {
            return -1;
        }
        f = w.number <= ti->n ? &ti->f[w.number] : NULL;
        if (f == NULL || f->kind == K_NONE) {
            if (grow_unknown(c, m, &unknown_cap) != 0 ||
                put_unknown(c, &w, &m->unknown_fields[m->n_unknown_fields++]) != 0) {
                return -1;
            }
            continue;
        }
        if (!ti->repeated && unscanned(c, f, &w, depth) != 0) {
            return -1;
        }
        if (f->repeated) {
            size_t *n = FIELD(m, f->qoffset, size_t);
            char *arr = *FIELD(m, f->offset, char *);
            void *into = NULL;
            if (w.type == FC_PB_LEN && f->kind != K_STR && f->kind != K_MSG) {
                put_packed(f->kind, &w, arr, n);
                continue;
            }
            slot = arr + *n * elt_size(f->kind);
            if (f->kind == K_MSG) {
                into = blocks[w.number] + *n * types[f->sub].desc->sizeof_message;
            }
            if (f->kind == K_STR || f->kind == K_MSG) {
                if (put_len(c, f, &w, slot, &strings, depth, into) != 0) {
                    return -1;
                }
            } else {
                put_scalar(f->kind, &w, slot);
            }
            (*n)++;
            continue;
        }
        slot = FIELD(m, f->offset, void);
        if (f->oneof) {
            /* Another member of the oneof replaces the one before, never merged. */
            memset(slot, 0, sizeof(((PbAnyValue *)0)->bytes_value));
        }
        if (w.type == FC_PB_LEN && f->kind != K_BOOL) {
            if (put_len(c, f, &w, slot, &strings, depth, NULL) != 0) {
                return -1;
            }
        } else {
            put_scalar(f->kind, &w, slot);
        }
        if (f->oneof) {
            *FIELD(m, f->qoffset, uint32_t) = w.number;
        }
    }
    return 0;
}

/*
 * Message t from data, into the struct at `into` (NULL: a new one). Recurses
 * for nested messages: scan (or fill) refuses any deeper than max_depth first.
 */
static void *unpack(struct ctx *c, enum type t, const uint8_t *data, size_t len, unsigned depth,
                    void *into)
{
    const struct type_info *ti = &types[t];
    const uint8_t *end = data + len;
    struct tally tl;
    char *blocks[MAX_FIELDS + 1];
    char *strings = NULL;
    ProtobufCMessage *m;

    tl.unknown = 0;
    tl.string_bytes = 0;
    if (ti->repeated) {
        memset(tl.n, 0, (ti->n + 1) * sizeof(tl.n[0]));
        if (scan(c, ti, data, end, depth, &tl) != 0) {
            return NULL;
        }
    }
    m = into != NULL ? into : fc_arena_alloc(c->a, ti->desc->sizeof_message);
    if (m == NULL) {
        return NULL;
    }
    ti->desc->message_init(m);
    if (tl.unknown > 0 && (m->unknown_fields = fc_arena_alloc(
                               c->a, tl.unknown * sizeof(*m->unknown_fields))) == NULL) {
        return NULL;
    }
    if (tl.string_bytes > 0 && (strings = fc_arena_alloc(c->a, tl.string_bytes)) == NULL) {
        return NULL;
    }
    if ((ti->repeated && alloc_arrays(c, ti, m, &tl, blocks) != 0) ||
        fill(c, ti, m, data, end, depth, blocks, strings, tl.unknown) != 0) {
        return NULL;
    }
    return m;
}

/* ---- merging a singular message given twice (protobuf-c's merge_messages) ----------------- */

static int concat(struct ctx *c, const struct field *f, ProtobufCMessage *earlier,
                  ProtobufCMessage *latter)
{
    size_t *ne = FIELD(earlier, f->qoffset, size_t), *nl = FIELD(latter, f->qoffset, size_t);
    char **ae = FIELD(earlier, f->offset, char *), **al = FIELD(latter, f->offset, char *);
    size_t sz = elt_size(f->kind);
    char *arr;

    if (*ne == 0) {
        return 0;
    }
    if (*nl == 0) {
        *nl = *ne;
        *al = *ae;
        return 0;
    }
    if ((arr = fc_arena_alloc(c->a, (*ne + *nl) * sz)) == NULL) {
        return -1;
    }
    memcpy(arr, *ae, *ne * sz);
    memcpy(arr + *ne * sz, *al, *nl * sz);
    *al = arr;
    *nl += *ne;
    return 0;
}

/*
 * What the earlier message gives the latter: repeated fields come first,
 * strings, bytes and messages the latter lacks are taken, scalars are the
 * latter's; a oneof the latter has not set takes the earlier's member,
 * unless that is a string or empty bytes (protobuf-c compares them to the
 * default, which an unset oneof member is not). Unknown fields: the latter's.
 * Recursion: only through singular messages that are not a oneof, which no
 * message nests in itself; depth bounds it all the same.
 */
static int merge(struct ctx *c, enum type t, ProtobufCMessage *earlier, ProtobufCMessage *latter,
                 unsigned depth)
{
    const struct type_info *ti = &types[t];

    if (depth > c->max_depth) {
        return -1;
    }
    for (uint32_t i = 1; i <= ti->n; i++) {
        const struct field *f = &ti->f[i];
        void *e = FIELD(earlier, f->offset, void), *l = FIELD(latter, f->offset, void);
        if (f->repeated) {
            if (concat(c, f, earlier, latter) != 0) {
                return -1;
            }
        } else if (f->oneof) {
            uint32_t ec = *FIELD(earlier, f->qoffset, uint32_t);
            uint32_t *lc = FIELD(latter, f->qoffset, uint32_t);
            const struct field *ef = ec <= ti->n ? &ti->f[ec] : NULL;
            /*
             * Both unset: protobuf-c looks field 0 up, gets index -1 and reads
             * the descriptor before its table (undefined behaviour; the
             * build here refuses the request). Refused.
             */
            if (*lc == 0 && ec == 0) {
                return -1;
            }
            if (*lc != 0 || ef == NULL || ef->kind == K_NONE || ef->kind == K_STR ||
                (ef->kind == K_BYTES && ((ProtobufCBinaryData *)e)->data == NULL)) {
                continue;
            }
            memcpy(l, e, elt_size(ef->kind));
            *lc = ec;
        } else if (f->kind == K_MSG) {
            ProtobufCMessage **em = e, **lm = l;
            if (*em != NULL && *lm != NULL) {
                if (merge(c, f->sub, *em, *lm, depth + 1) != 0) {
                    return -1;
                }
            } else if (*em != NULL) {
                *lm = *em;
            }
        } else if (f->kind == K_STR) {
            char **es = e, **ls = l;
            if (*es != protobuf_c_empty_string && *ls == protobuf_c_empty_string) {
                *ls = *es;
            }
        } else if (f->kind == K_BYTES) {
            ProtobufCBinaryData *eb = e, *lb = l;
            if (eb->data != NULL && lb->data == NULL) {
                *lb = *eb;
            }
        }
    }
    return 0;
}

void *fc_otlp_unpack(struct fc_arena *a, const uint8_t *data, size_t len, unsigned max_depth)
{
    static const uint8_t empty[1];
    struct ctx c = {a, max_depth};

    if (max_depth == 0 || max_depth > FC_PB_MAX_DEPTH_CEILING) {
        c.max_depth = FC_PB_MAX_DEPTH_CEILING;
    }
    if (data == NULL) {
        data = empty; /* NULL + 0 is undefined behaviour */
        len = 0;
    }
    return unpack(&c, T_REQUEST, data, len, 1, NULL);
}
