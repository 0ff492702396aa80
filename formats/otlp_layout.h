/*
 * Earlier OTLP profiles layouts. The v1development profiles messages
 * changed their field numbers at almost every opentelemetry-proto release
 * before 1.10, and senders in the field still emit the older ones: decoded
 * with the current descriptors such a request fails, or - worse - decodes
 * to profiles without samples. When the current decoding shows the symptoms
 * (fc_otlp_layout_suspect), a bounded scan of the raw bytes recognizes the
 * fields of an older layout (fc_otlp_layout_scan); the request is then
 * refused naming it (fc_otlp_layout_error), or, for the v1.9 layout whose
 * only change is the numbering of Sample, translated in place
 * (fc_otlp_layout_translate). The table of layouts is in otlp_layout.c.
 */
#ifndef FC_FORMATS_OTLP_LAYOUT_H
#define FC_FORMATS_OTLP_LAYOUT_H

#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* In priority order: when fields of several show, the first one names the request. */
enum fc_otlp_layout {
    FC_OTLP_LAYOUT_NONE = 0,         /* nothing of an older layout */
    FC_OTLP_LAYOUT_PPROF,            /* a pprof Profile, not an OTLP request at all */
    FC_OTLP_LAYOUT_DATA_TABLES,      /* v1.6: the tables are fields of ProfilesData */
    FC_OTLP_LAYOUT_CONTAINER,        /* v1.3: ProfileContainer around a pprofextended Profile */
    FC_OTLP_LAYOUT_PROFILE_TABLES,   /* v1.4-v1.5: each Profile has its own tables */
    FC_OTLP_LAYOUT_LOCATION_INDICES, /* v1.6-v1.7: Profile.location_indices, time_nanos */
    FC_OTLP_LAYOUT_COMMENTS,         /* v1.8: Profile.comment_strindices shifts 7..12 */
    FC_OTLP_LAYOUT_SAMPLE_VALUES,    /* v1.9 (and v1.8's Sample): Sample.values at 2 */
};

struct fc_otlp_layout_info {
    enum fc_otlp_layout layout;
    const char *versions; /* "v1.4-v1.5" */
    const char *field;    /* the giveaway, in the old layout's names: "Profile.string_table" */
    uint32_t number;      /* its field number (0 for a JSON key) */
};

/*
 * True when an unpacked current-layout request (a protobuf-c
 * ExportProfilesServiceRequest) shows what an older layout leaves behind:
 * a profile without samples, a sample without values and timestamps, an
 * index outside its table, a profile_id that is not 16 bytes. Cheap: one
 * pass over the samples. A genuinely empty request is not suspect.
 */
bool fc_otlp_layout_suspect(const void *request);

/*
 * Looks for fields of an older layout in a protobuf request. No allocation,
 * no recursion: the walk follows the fixed path request > resource_profiles
 * > scope_profiles > profiles > samples (and the dictionary), each level a
 * loop over its bytes. Returns out->layout (NONE when nothing was found;
 * malformed bytes are never recognized).
 */
enum fc_otlp_layout fc_otlp_layout_scan(const uint8_t *data, size_t len,
                                        struct fc_otlp_layout_info *out);

/* The same for an OTLP JSON request: keys that only older layouts have. */
enum fc_otlp_layout fc_otlp_layout_scan_json(const char *text, size_t len,
                                             struct fc_otlp_layout_info *out);

/* Fills err with FC_EPROTO and the message naming the layout; returns FC_EPROTO. */
int fc_otlp_layout_error(const struct fc_otlp_layout_info *info, bool json, struct fc_error *err);

/*
 * Rewrites a request of the v1.9 layout (FC_OTLP_LAYOUT_SAMPLE_VALUES) into
 * the v1.10 one, in place: Sample fields 2 (values), 3 (attribute_indices)
 * and 4 (link_index) become 4, 2 and 3; nothing else differs. Every tag is
 * one byte before and after, so no length changes. FC_OK, or FC_EPROTO
 * (data unchanged or partly changed: the caller drops it) when the bytes are
 * not such a request.
 */
int fc_otlp_layout_translate(uint8_t *data, size_t len);

/* The response's note for a translated request (partial_success.error_message, nothing rejected).
 */
#define FC_OTLP_LAYOUT_TRANSLATED_NOTE                                                             \
    "translated from the OTLP profiles layout of opentelemetry-proto v1.9 (Sample.values, field "  \
    "2); send the v1.10 layout"

#endif
