/*
 * The OTLP profiles layouts before opentelemetry-proto 1.10, as they look on
 * the wire (field number and wire type: L = length-delimited, V = varint,
 * 8 = fixed64). From opentelemetry-proto's profiles.proto at each release
 * and the senders' generated code (async-profiler, opentelemetry-java,
 * opentelemetry-python, the Collector's pdata).
 *
 *  v1.10-v1.11, the one decoded (proto/):
 *    Request     1 resource_profiles L, 2 dictionary L
 *    Dictionary  1 mapping L, 2 location L, 3 function L, 4 link L, 5 string L,
 *                6 attribute L (KeyValueAndUnit: 1 key_strindex V, 2 value L, 3 unit V),
 *                7 stack L
 *    Profile     1 sample_type L (one), 2 samples L, 3 time_unix_nano 8, 4 duration_nano V,
 *                5 period_type L, 6 period V, 7 profile_id L, 8 dropped_attributes_count V,
 *                9 original_payload_format L, 10 original_payload L, 11 attribute_indices L
 *    Sample      1 stack_index V, 2 attribute_indices L, 3 link_index V, 4 values L,
 *                5 timestamps_unix_nano L
 *  v1.9   as v1.10 but Sample 2 values L, 3 attribute_indices L, 4 link_index V (the
 *         renumbering of 1.10 that async-profiler's output still has).
 *  v1.8   Sample as v1.9. Profile 1-6 as v1.10, then 7 comment_strindices L, 8 profile_id L,
 *         9 dropped_attributes_count V, 10 original_payload_format L, 11 original_payload L,
 *         12 attribute_indices L.
 *  v1.7   Request 1 resource_profiles L, 2 dictionary L; Dictionary 1-5 as v1.10,
 *         6 attribute_table L (KeyValue: 1 key L, 2 value L), 7 attribute_units L
 *         (AttributeUnit: 1 V, 2 V). Profile 1 sample_type L (repeated), 2 sample L,
 *         3 location_indices L, 4 time_nanos V, 5 duration_nanos V, 6 period_type L,
 *         7 period V, 8 comment_strindices L, 9 default_sample_type_index V, 10 profile_id L,
 *         11 dropped_attributes_count V, 12 original_payload_format L, 13 original_payload L,
 *         14 attribute_indices L. Sample 1 locations_start_index V, 2 locations_length V,
 *         3 value L, 4 attribute_indices L, 5 link_index V, 6 timestamps_unix_nano L.
 *  v1.6   Profile and Sample as v1.7; the tables were fields of ProfilesData (2 mapping,
 *         3 location, 4 function, 5 link, 6 string, 7 attribute, 8 attribute_units L) and
 *         the request carried resource_profiles only.
 *  v1.4-v1.5  Request 1 resource_profiles only. Profile 1 sample_type L (repeated),
 *         2 sample L, 3 mapping_table L, 4 location_table L, 5 location_indices L,
 *         6 function_table L, 7 attribute_table L, 8 attribute_units L, 9 link_table L,
 *         10 string_table L (repeated), 11 time_nanos V, 12 duration_nanos V,
 *         13 period_type L, 14 period V, 15 comment_strindices L,
 *         16 default_sample_type_strindex V, 17 profile_id L, 19 dropped_attributes_count V,
 *         20 original_payload_format L, 21 original_payload L, 22 attribute_indices L.
 *         Sample as v1.7.
 *  v1.3   (v1experimental, and early v1development) ScopeProfiles 2 is a ProfileContainer:
 *         1 profile_id L (16 bytes), 2 start_time_unix_nano 8, 3 end_time_unix_nano 8,
 *         4 attributes L, 5 dropped_attributes_count V, 6 original_payload_format L,
 *         7 original_payload L, 8 profile L (a pprofextended Profile).
 *  pprof  a Profile sent to the OTLP endpoint: 1 sample_type L, 2 sample L, 3 mapping L,
 *         4 location L, 5 function L, 6 string_table L, 7 drop_frames V, 8 keep_frames V,
 *         9 time_nanos V, 10 duration_nanos V, 11 period_type L, 12 period V, 13 comment L,
 *         14 default_sample_type V.
 *
 * What gives each away is a field the current layout never carries that way
 * (a number it does not have, or a wire type its field cannot take):
 *  pprof           request fields 9-14, or 3-8 as varints
 *  v1.6 data       request fields 3-8 length-delimited
 *  v1.3 container  Profile 2 as fixed64; or 8 length-delimited, not 16 bytes, beside a
 *                  16-byte field 1 and no field 2
 *  v1.4-v1.5       Profile 4 length-delimited, 10 more than once, any of 15-22
 *  v1.6-v1.7       Profile 1 more than once, 3 or 6 length-delimited, 5 or 7 as varints,
 *                  13 or 14; Sample 6 or above; dictionary attribute_table entries with a
 *                  length-delimited 1 (KeyValue.key), attribute_units entries with a 2
 *  v1.8            Profile 8 length-delimited, 9 as a varint, 12
 *  v1.9            Sample 2 without 4 and 5 (values where attribute_indices are now), or
 *                  2 length-delimited with 4 as a varint (a link_index where values are
 *                  now), or 3 length-delimited (attribute_indices where link_index is now);
 *                  and no sample with 4 length-delimited (packed values, as v1.10 has them)
 * When several show, the first in this list names the request. The fuzz
 * target and the unit tests check that nothing our encoder writes is ever
 * taken for an older layout.
 */
#include "formats/otlp_layout.h"

#include "formats/pb.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#include <stdio.h>
#include <string.h>

typedef Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest
    PbRequest;
typedef Opentelemetry__Proto__Profiles__V1development__Profile PbProfile;
typedef Opentelemetry__Proto__Profiles__V1development__Sample PbSample;

/* ---- the symptoms in a current-layout decoding ------------------------------------------- */

static bool out_of(const int32_t *idx, size_t n, size_t table)
{
    for (size_t i = 0; i < n; i++) {
        if (idx[i] < 0 || (idx[i] != 0 && (size_t)idx[i] >= table)) {
            return true;
        }
    }
    return false;
}

static bool profile_suspect(const PbProfile *p, size_t n_attr, size_t n_stack, size_t n_link)
{
    if (p->n_samples == 0 || (p->profile_id.len != 0 && p->profile_id.len != 16) ||
        out_of(p->attribute_indices, p->n_attribute_indices, n_attr)) {
        return true;
    }
    for (size_t i = 0; i < p->n_samples; i++) {
        const PbSample *s = p->samples[i];
        if ((s->n_values == 0 && s->n_timestamps_unix_nano == 0) ||
            out_of(&s->stack_index, 1, n_stack) || out_of(&s->link_index, 1, n_link) ||
            out_of(s->attribute_indices, s->n_attribute_indices, n_attr)) {
            return true;
        }
    }
    return false;
}

bool fc_otlp_layout_suspect(const void *request)
{
    const PbRequest *req = request;
    size_t n_attr = req->dictionary ? req->dictionary->n_attribute_table : 0;
    size_t n_stack = req->dictionary ? req->dictionary->n_stack_table : 0;
    size_t n_link = req->dictionary ? req->dictionary->n_link_table : 0;

    for (size_t r = 0; r < req->n_resource_profiles; r++) {
        for (size_t s = 0; s < req->resource_profiles[r]->n_scope_profiles; s++) {
            const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
                req->resource_profiles[r]->scope_profiles[s];
            for (size_t i = 0; i < sp->n_profiles; i++) {
                if (profile_suspect(sp->profiles[i], n_attr, n_stack, n_link)) {
                    return true;
                }
            }
        }
    }
    return false;
}

/* ---- the wire scan ------------------------------------------------------------------------ */

#define MAX_FIELD 32

/* What one message holds: how often each field came, and in which wire types. */
struct shape {
    uint32_t n[MAX_FIELD + 1];       /* [0]: fields numbered above MAX_FIELD */
    uint8_t wires[MAX_FIELD + 1];    /* bit 1 << wire type */
    size_t first_len[MAX_FIELD + 1]; /* length of the first length-delimited occurrence */
};

static int shape_of(const uint8_t *data, size_t len, struct shape *s)
{
    struct fc_pb r;
    struct fc_pb_field f;

    memset(s, 0, sizeof(*s));
    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        uint32_t k;
        if (fc_pb_next(&r, &f) != 0) {
            return -1;
        }
        k = f.number <= MAX_FIELD ? f.number : 0;
        if (f.wire == FC_PB_LEN && (s->wires[k] & (1u << FC_PB_LEN)) == 0) {
            s->first_len[k] = f.len;
        }
        s->n[k]++;
        s->wires[k] |= (uint8_t)(1u << f.wire);
    }
    return 0;
}

static bool has(const struct shape *s, uint32_t n, enum fc_pb_wire w)
{
    return (s->wires[n] & (1u << w)) != 0;
}

struct scan {
    struct fc_otlp_layout_info best;
    uint32_t v19_samples;     /* samples only the v1.9 numbering explains */
    uint32_t current_samples; /* samples with packed values at 4, as v1.10 has them */
    const char *v19_field;
    uint32_t v19_number;
};

static const char *const versions[] = {
    [FC_OTLP_LAYOUT_NONE] = "",
    [FC_OTLP_LAYOUT_PPROF] = "pprof",
    [FC_OTLP_LAYOUT_DATA_TABLES] = "v1.6",
    [FC_OTLP_LAYOUT_CONTAINER] = "v1.3",
    [FC_OTLP_LAYOUT_PROFILE_TABLES] = "v1.4-v1.5",
    [FC_OTLP_LAYOUT_LOCATION_INDICES] = "v1.6-v1.7",
    [FC_OTLP_LAYOUT_COMMENTS] = "v1.8",
    [FC_OTLP_LAYOUT_SAMPLE_VALUES] = "v1.9",
};

static void note(struct scan *s, enum fc_otlp_layout l, const char *field, uint32_t number)
{
    if (s->best.layout == FC_OTLP_LAYOUT_NONE || l < s->best.layout) {
        s->best.layout = l;
        s->best.versions = versions[l];
        s->best.field = field;
        s->best.number = number;
    }
}

typedef void (*visit_fn)(struct scan *s, const uint8_t *data, size_t len);

/* Calls fn on every length-delimited field `number` of the message in data. */
static void each(struct scan *s, const uint8_t *data, size_t len, uint32_t number, visit_fn fn)
{
    struct fc_pb r;
    struct fc_pb_field f;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return;
        }
        if (f.number == number && f.wire == FC_PB_LEN) {
            fn(s, f.data, f.len);
        }
    }
}

static void sample(struct scan *s, const uint8_t *data, size_t len)
{
    struct shape m;

    if (shape_of(data, len, &m) != 0) {
        return;
    }
    for (uint32_t k = 6; k <= MAX_FIELD; k++) {
        if (m.n[k] != 0) {
            note(s, FC_OTLP_LAYOUT_LOCATION_INDICES,
                 k == 6 ? "Sample.timestamps_unix_nano" : "Sample field", k);
            break;
        }
    }
    if (has(&m, 4, FC_PB_LEN)) {
        s->current_samples++; /* packed values: v1.10's field 4 */
    } else if (has(&m, 3, FC_PB_LEN) || (m.n[2] != 0 && m.n[4] == 0 && m.n[5] == 0) ||
               (has(&m, 2, FC_PB_LEN) && has(&m, 4, FC_PB_VARINT) && m.n[5] == 0)) {
        /* attribute_indices at 3 (packed), or values at 2 with at most a link_index at 4 */
        s->v19_samples++;
        if (s->v19_number != 2) {
            s->v19_field = m.n[2] != 0 ? "Sample.values" : "Sample.attribute_indices";
            s->v19_number = m.n[2] != 0 ? 2 : 3;
        }
    }
}

static void profile(struct scan *s, const uint8_t *data, size_t len)
{
    static const char *const v15[] = {
        [15] = "Profile.comment_strindices",
        [16] = "Profile.default_sample_type_strindex",
        [17] = "Profile.profile_id",
        [18] = "Profile field",
        [19] = "Profile.dropped_attributes_count",
        [20] = "Profile.original_payload_format",
        [21] = "Profile.original_payload",
        [22] = "Profile.attribute_indices",
    };
    struct shape p;

    if (shape_of(data, len, &p) != 0) {
        return;
    }
    /* v1.3: a ProfileContainer where the Profile is. */
    if (has(&p, 2, FC_PB_I64)) {
        note(s, FC_OTLP_LAYOUT_CONTAINER, "ProfileContainer.start_time_unix_nano", 2);
    } else if (has(&p, 8, FC_PB_LEN) && p.first_len[8] != 16 && has(&p, 1, FC_PB_LEN) &&
               p.first_len[1] == 16 && p.n[2] == 0) {
        note(s, FC_OTLP_LAYOUT_CONTAINER, "ProfileContainer.profile", 8);
    }
    /* v1.4-v1.5: the Profile holds its own tables. */
    if (p.n[10] >= 2 && has(&p, 10, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_PROFILE_TABLES, "Profile.string_table", 10);
    } else if (has(&p, 4, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_PROFILE_TABLES, "Profile.location_table", 4);
    } else {
        for (uint32_t k = 15; k <= 22; k++) {
            if (p.n[k] != 0) {
                note(s, FC_OTLP_LAYOUT_PROFILE_TABLES, v15[k], k);
                break;
            }
        }
    }
    /* v1.6-v1.7 */
    if (has(&p, 3, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "Profile.location_indices", 3);
    } else if (p.n[1] >= 2) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "Profile.sample_type, repeated", 1);
    } else if (has(&p, 6, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "Profile.period_type", 6);
    } else if (has(&p, 5, FC_PB_VARINT)) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "Profile.duration_nanos", 5);
    } else if (has(&p, 7, FC_PB_VARINT)) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "Profile.period", 7);
    } else if (p.n[14] != 0 || p.n[13] != 0) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES,
             p.n[14] != 0 ? "Profile.attribute_indices" : "Profile.original_payload",
             p.n[14] != 0 ? 14 : 13);
    }
    /* v1.8 */
    if (has(&p, 8, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_COMMENTS, "Profile.profile_id", 8);
    } else if (has(&p, 9, FC_PB_VARINT)) {
        note(s, FC_OTLP_LAYOUT_COMMENTS, "Profile.dropped_attributes_count", 9);
    } else if (p.n[12] != 0) {
        note(s, FC_OTLP_LAYOUT_COMMENTS, "Profile.attribute_indices", 12);
    }
    if (!has(&p, 2, FC_PB_I64)) {
        each(s, data, len, 2, sample);
    }
}

static void scope(struct scan *s, const uint8_t *data, size_t len)
{
    each(s, data, len, 2, profile);
}

static void resource(struct scan *s, const uint8_t *data, size_t len)
{
    each(s, data, len, 2, scope);
}

static void attribute(struct scan *s, const uint8_t *data, size_t len)
{
    struct shape a;

    if (shape_of(data, len, &a) == 0 && has(&a, 1, FC_PB_LEN)) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "ProfilesDictionary.attribute_table (KeyValue)",
             6);
    }
}

static void attribute_unit(struct scan *s, const uint8_t *data, size_t len)
{
    struct shape a;

    if (shape_of(data, len, &a) == 0 && a.n[2] != 0) {
        note(s, FC_OTLP_LAYOUT_LOCATION_INDICES, "ProfilesDictionary.attribute_units", 7);
    }
}

static void dictionary(struct scan *s, const uint8_t *data, size_t len)
{
    each(s, data, len, 6, attribute);
    each(s, data, len, 7, attribute_unit);
}

enum fc_otlp_layout fc_otlp_layout_scan(const uint8_t *data, size_t len,
                                        struct fc_otlp_layout_info *out)
{
    static const char *const pprof[] = {
        [3] = "Profile.mapping",      [4] = "Profile.location",
        [5] = "Profile.function",     [6] = "Profile.string_table",
        [7] = "Profile.drop_frames",  [8] = "Profile.keep_frames",
        [9] = "Profile.time_nanos",   [10] = "Profile.duration_nanos",
        [11] = "Profile.period_type", [12] = "Profile.period",
        [13] = "Profile.comment",     [14] = "Profile.default_sample_type",
    };
    static const char *const data_tables[] = {
        [3] = "ProfilesData.location_table",  [4] = "ProfilesData.function_table",
        [5] = "ProfilesData.link_table",      [6] = "ProfilesData.string_table",
        [7] = "ProfilesData.attribute_table", [8] = "ProfilesData.attribute_units",
    };
    static const uint32_t table_order[] = {6, 3, 4, 5, 7, 8}; /* the string table first */
    struct scan s;
    struct shape q;

    memset(&s, 0, sizeof(s));
    memset(out, 0, sizeof(*out));
    out->versions = "";
    if (shape_of(data, len, &q) != 0) {
        return FC_OTLP_LAYOUT_NONE; /* not protobuf: nothing to name */
    }
    for (uint32_t k = 9; k <= 14; k++) {
        if (q.n[k] != 0) {
            note(&s, FC_OTLP_LAYOUT_PPROF, pprof[k], k);
            break;
        }
    }
    for (uint32_t k = 3; k <= 8; k++) {
        if (has(&q, k, FC_PB_VARINT)) {
            note(&s, FC_OTLP_LAYOUT_PPROF, pprof[k], k);
            break;
        }
    }
    /* Fields 3-8 as tables: v1.6's ProfilesData, unless another tells a pprof Profile. */
    for (size_t i = 0; i < sizeof(table_order) / sizeof(table_order[0]); i++) {
        if (has(&q, table_order[i], FC_PB_LEN)) {
            note(&s, FC_OTLP_LAYOUT_DATA_TABLES, data_tables[table_order[i]], table_order[i]);
            break;
        }
    }
    each(&s, data, len, 1, resource);
    each(&s, data, len, 2, dictionary);
    if (s.v19_samples > 0 && s.current_samples == 0) {
        note(&s, FC_OTLP_LAYOUT_SAMPLE_VALUES, s.v19_field, s.v19_number);
    }
    *out = s.best;
    if (out->versions == NULL) {
        out->versions = "";
    }
    return out->layout;
}

/* ---- JSON --------------------------------------------------------------------------------- */

/* Keys of older layouts that no message of the current one has (both JSON spellings). */
static const struct {
    const char *key;
    enum fc_otlp_layout layout;
    const char *versions;
} json_keys[] = {
    {"startTimeUnixNano", FC_OTLP_LAYOUT_CONTAINER, "v1.3"},
    {"start_time_unix_nano", FC_OTLP_LAYOUT_CONTAINER, "v1.3"},
    {"profile", FC_OTLP_LAYOUT_CONTAINER, "v1.3"},
    {"locationsStartIndex", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"locations_start_index", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"timeNanos", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"time_nanos", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"attributeUnits", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"attribute_units", FC_OTLP_LAYOUT_LOCATION_INDICES, "v1.4-v1.7"},
    {"commentStrindices", FC_OTLP_LAYOUT_COMMENTS, "v1.4-v1.8"},
    {"comment_strindices", FC_OTLP_LAYOUT_COMMENTS, "v1.4-v1.8"},
    {"sample", FC_OTLP_LAYOUT_COMMENTS, "v1.4-v1.8"},
};

/* Where `"key"` followed by blanks and ':' starts a member name (not inside a string). */
static bool json_has_key(const char *text, size_t len, const char *key)
{
    size_t k = strlen(key);
    bool in_string = false;

    for (size_t i = 0; i < len; i++) {
        if (in_string) {
            if (text[i] == '\\') {
                i++;
            } else if (text[i] == '"') {
                in_string = false;
            }
            continue;
        }
        if (text[i] != '"') {
            continue;
        }
        if (len - i - 1 >= k + 1 && memcmp(text + i + 1, key, k) == 0 && text[i + 1 + k] == '"') {
            size_t j = i + 2 + k;
            while (j < len &&
                   (text[j] == ' ' || text[j] == '\t' || text[j] == '\n' || text[j] == '\r')) {
                j++;
            }
            if (j < len && text[j] == ':') {
                return true;
            }
        }
        in_string = true;
    }
    return false;
}

enum fc_otlp_layout fc_otlp_layout_scan_json(const char *text, size_t len,
                                             struct fc_otlp_layout_info *out)
{
    memset(out, 0, sizeof(*out));
    out->versions = "";
    for (size_t i = 0; i < sizeof(json_keys) / sizeof(json_keys[0]); i++) {
        if (json_has_key(text, len, json_keys[i].key)) {
            out->layout = json_keys[i].layout;
            out->versions = json_keys[i].versions;
            out->field = json_keys[i].key;
            return out->layout;
        }
    }
    return FC_OTLP_LAYOUT_NONE;
}

int fc_otlp_layout_error(const struct fc_otlp_layout_info *info, bool json, struct fc_error *err)
{
    if (info->layout == FC_OTLP_LAYOUT_PPROF) {
        return fc_errorf(err, FC_EPROTO,
                         "otlp: this is a pprof Profile (%s, field %u), not an OTLP "
                         "ExportProfilesServiceRequest: push pprof to the pprof receiver "
                         "(/ingest, /push.v1.PusherService/Push) or convert it to OTLP",
                         info->field, info->number);
    }
    if (json) {
        return fc_errorf(err, FC_EPROTO,
                         "otlp json: OTLP profiles layout of opentelemetry-proto %s (key \"%s\"): "
                         "not supported; send the v1.10 layout (v1development as of "
                         "opentelemetry-proto 1.10)",
                         info->versions, info->field);
    }
    return fc_errorf(err, FC_EPROTO,
                     "otlp: OTLP profiles layout of opentelemetry-proto %s (%s, field %u): not "
                     "supported; send the v1.10 layout (v1development as of opentelemetry-proto "
                     "1.10)",
                     info->versions, info->field, info->number);
}

/* ---- v1.9 -> v1.10 ----------------------------------------------------------------------- */

typedef int (*rewrite_fn)(uint8_t *data, size_t len);

/* Calls fn on the payload of every length-delimited field `number`; stops at the first error. */
static int each_mut(uint8_t *data, size_t len, uint32_t number, rewrite_fn fn)
{
    struct fc_pb r;
    struct fc_pb_field f;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        if (fc_pb_next(&r, &f) != 0) {
            return FC_EPROTO;
        }
        if (f.number == number && f.wire == FC_PB_LEN) {
            /* f.data points into data: the same bytes, writable. */
            int rc = fn(data + (f.data - data), f.len);
            if (rc != FC_OK) {
                return rc;
            }
        }
    }
    return FC_OK;
}

static int sample_mut(uint8_t *data, size_t len)
{
    static const uint8_t renumber[] = {[2] = 4, [3] = 2, [4] = 3};
    struct fc_pb r;
    struct fc_pb_field f;

    fc_pb_init(&r, data, len);
    while (!fc_pb_done(&r)) {
        uint8_t *tag = data + (r.p - data);
        if (fc_pb_next(&r, &f) != 0) {
            return FC_EPROTO;
        }
        if (f.number >= 2 && f.number <= 4) {
            if ((tag[0] & 0x80) != 0) {
                return FC_EPROTO; /* a tag over more than one byte: not a sender's encoding */
            }
            tag[0] = (uint8_t)(renumber[f.number] << 3 | (tag[0] & 7));
        }
    }
    return FC_OK;
}

static int profile_mut(uint8_t *data, size_t len)
{
    return each_mut(data, len, 2, sample_mut);
}

static int scope_mut(uint8_t *data, size_t len)
{
    return each_mut(data, len, 2, profile_mut);
}

static int resource_mut(uint8_t *data, size_t len)
{
    return each_mut(data, len, 2, scope_mut);
}

int fc_otlp_layout_translate(uint8_t *data, size_t len)
{
    return each_mut(data, len, 1, resource_mut);
}
