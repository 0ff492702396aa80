/*
 * The batch: what one request becomes, and what flows through a pipeline.
 *
 * A batch owns one arena; every string, table row and sample decoded from the
 * request lives in it and is freed with the last fc_batch_unref(). The
 * dictionary follows OTLP's ProfilesDictionary: interned tables where index 0
 * is the zero value and means "unset". A profile is one series: its labels,
 * its sample type(s), period, time, duration and samples.
 *
 * Ownership: fc_batch_new() returns one reference. Functions borrow their
 * batch argument; a component that keeps a batch past the call takes its own
 * reference with fc_batch_ref(). A batch is immutable once it leaves the
 * processors (exporters read it concurrently).
 *
 * Builder functions allocate from the arena and fail with FC_ETOOBIG when the
 * arena's budget is spent; a decoder that sees an error drops the batch.
 */
#ifndef FC_BATCH_H
#define FC_BATCH_H

#include "core/arena.h"
#include "core/err.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A list of u32 indices stored in the dictionary's index pool. */
struct fc_span {
    uint32_t off;
    uint32_t n;
};

enum fc_mapping_flags {
    FC_MAPPING_HAS_FUNCTIONS = 1 << 0,
    FC_MAPPING_HAS_FILENAMES = 1 << 1,
    FC_MAPPING_HAS_LINE_NUMBERS = 1 << 2,
    FC_MAPPING_HAS_INLINE_FRAMES = 1 << 3,
};

struct fc_mapping {
    uint64_t memory_start;
    uint64_t memory_limit;
    uint64_t file_offset;
    uint32_t filename; /* string index */
    uint32_t build_id; /* string index */
    uint32_t flags;    /* enum fc_mapping_flags */
    struct fc_span attrs;
};

struct fc_function {
    uint32_t name;        /* string index */
    uint32_t system_name; /* string index */
    uint32_t filename;    /* string index */
    int64_t start_line;
};

/* One frame of a location; several when functions were inlined (last = caller). */
struct fc_line {
    uint32_t function; /* function index */
    int64_t line;
    int64_t column;
};

struct fc_location {
    uint32_t mapping; /* mapping index, 0 = unknown */
    uint64_t address;
    uint32_t lines_off; /* into dict.lines */
    uint32_t n_lines;
    bool is_folded;
    struct fc_span attrs;
};

enum fc_attr_kind {
    FC_ATTR_EMPTY = 0,
    FC_ATTR_STR,
    FC_ATTR_INT,
    FC_ATTR_BOOL,
    FC_ATTR_DOUBLE,
    FC_ATTR_BYTES,
    FC_ATTR_ARRAY,  /* blob = the encoded OTLP ArrayValue, kept as is */
    FC_ATTR_KVLIST, /* blob = the encoded OTLP KeyValueList, kept as is */
};

enum fc_attr_flags {
    FC_ATTR_KEY_STRINDEX = 1 << 0,   /* OTLP sent key_strindex, not key */
    FC_ATTR_VALUE_STRINDEX = 1 << 1, /* OTLP sent string_value_strindex */
};

/* An attribute (OTLP KeyValueAndUnit) or a pprof label (str, or num + unit). */
struct fc_attr {
    uint32_t key;  /* string index */
    uint32_t unit; /* string index, 0 = none */
    uint8_t kind;  /* enum fc_attr_kind */
    uint8_t flags; /* enum fc_attr_flags */
    union {
        uint32_t str; /* string index */
        int64_t i;
        bool b;
        double d;
        struct {
            const uint8_t *data; /* in the arena */
            uint32_t len;
        } blob;
    } v;
};

struct fc_link {
    uint8_t trace_id[16];
    uint8_t span_id[8];
};

struct fc_stack {
    struct fc_span locations; /* location indices, leaf first */
};

/* Interning table: open addressing of (hash, id) pairs, in the arena. */
struct fc_intern {
    uint64_t *slots; /* (hash << 32) | (id + 1); 0 = empty */
    uint32_t cap;    /* power of two */
    uint32_t n;
};

#define FC_DICT_TABLE(type, name)                                                                  \
    type *name;                                                                                    \
    uint32_t n_##name;                                                                             \
    uint32_t cap_##name

struct fc_dict {
    /* Strings are NUL-terminated and may contain NULs; str_len is exact. */
    FC_DICT_TABLE(const char *, strings);
    uint32_t *str_len;
    FC_DICT_TABLE(struct fc_mapping, mappings);
    FC_DICT_TABLE(struct fc_function, functions);
    FC_DICT_TABLE(struct fc_location, locations);
    FC_DICT_TABLE(struct fc_line, lines); /* pool, not interned */
    FC_DICT_TABLE(struct fc_stack, stacks);
    FC_DICT_TABLE(struct fc_attr, attrs);
    FC_DICT_TABLE(struct fc_link, links);
    FC_DICT_TABLE(uint32_t, idx); /* pool behind every fc_span */
    struct fc_intern i_strings, i_mappings, i_functions, i_locations, i_stacks, i_attrs, i_links;
};

/* A series label (name=value), as string indices. */
struct fc_label {
    uint32_t name;
    uint32_t value;
};

struct fc_value_type {
    uint32_t type; /* string index: "cpu", "alloc_space" */
    uint32_t unit; /* string index: "nanoseconds", "bytes" */
};

struct fc_sample {
    uint32_t stack;       /* stack index */
    uint32_t link;        /* link index, 0 = none */
    struct fc_span attrs; /* sample labels / attributes (span_id lives here) */
    uint32_t values_off;  /* into profile.nums */
    uint32_t n_values;
    uint32_t ts_off; /* into profile.nums: timestamps, unix ns */
    uint32_t n_ts;
};

/* Where an OTLP profile came from; pprof profiles use origin 0 (none). */
struct fc_origin {
    struct fc_span resource_attrs;
    uint32_t resource_dropped;
    uint32_t resource_schema_url; /* string index */
    uint32_t scope_name;          /* string index */
    uint32_t scope_version;       /* string index */
    struct fc_span scope_attrs;
    uint32_t scope_dropped;
    uint32_t scope_schema_url; /* string index */
};

struct fc_profile {
    struct fc_label *labels; /* series labels, sorted by name, names unique */
    uint32_t n_labels;
    uint32_t cap_labels;
    struct fc_value_type *sample_types;
    uint32_t n_sample_types;
    struct fc_value_type period_type;
    int64_t period;
    int64_t time_ns;     /* start, unix ns */
    int64_t duration_ns; /* 0 = unknown */
    uint32_t origin;     /* batch origins index, 0 = none */
    /*
     * Set by the OTLP decoder when it named the profile itself (no __name__
     * attribute) from samples:count with a cpu:nanoseconds period: Pyroscope's
     * OTLP ingest stores such a profile as cpu:nanoseconds, values x period
     * (fc_pyro_stored_type). A profile that carries its __name__ (pprof, or
     * OTLP that a pprof source became) is stored under its own sample types.
     */
    bool cpu_samples_as_ns;

    struct fc_sample *samples;
    uint32_t n_samples;
    uint32_t cap_samples;
    int64_t *nums; /* values and timestamps of every sample */
    uint32_t n_nums;
    uint32_t cap_nums;

    /* pprof fields kept for a lossless round trip. */
    uint32_t drop_frames;         /* string index */
    uint32_t keep_frames;         /* string index */
    uint32_t default_sample_type; /* string index */
    struct fc_span comments;      /* string indices */

    /* OTLP fields kept for a lossless round trip. */
    uint8_t profile_id[16];
    uint32_t dropped_attributes_count;
    uint32_t original_payload_format; /* string index */
    const uint8_t *original_payload;  /* in the arena */
    uint32_t original_payload_len;
    struct fc_span attrs;
};

/*
 * The encoded OTLP ExportProfilesServiceRequest a batch was decoded from,
 * kept while the batch is still exactly that request: the otlp exporters
 * send these bytes instead of encoding the batch again, and the client's
 * gzip as it came when they compress with gzip too. The OTLP receiver sets
 * it only when it changed nothing (no profile rejected, no stack cut); the
 * service drops it before a processor that may change the batch
 * (fc_processor_type.preserves_batch), and fc_batch_clone does not copy it.
 * Whoever changes a batch's profiles or dictionary otherwise must call
 * fc_batch_drop_wire.
 */
struct fc_wire {
    const uint8_t *body; /* in the arena; NULL = none */
    size_t len;
    const uint8_t *gzip; /* the same request gzipped, in the arena; NULL = none */
    size_t gzip_len;
    uint32_t profiles; /* OTLP profiles in the request */
};

struct fc_batch {
    _Atomic int refs;
    struct fc_arena *arena;
    const char *tenant; /* in the arena; FC_DEFAULT_TENANT unless the request named one */
    struct fc_dict dict;
    struct fc_origin *origins; /* [0] = none */
    uint32_t n_origins;
    uint32_t cap_origins;
    struct fc_profile *profiles;
    uint32_t n_profiles;
    uint32_t cap_profiles;
    struct fc_wire wire;
};

/* budget: bytes the batch may take (0 = unlimited); see core/arena.h. */
struct fc_batch *fc_batch_new(size_t budget);
struct fc_batch *fc_batch_ref(struct fc_batch *b);
void fc_batch_unref(struct fc_batch *b);
/* A deep copy with its own arena, for a pipeline that must change a batch it shares. */
int fc_batch_clone(const struct fc_batch *src, struct fc_batch **out, struct fc_error *err);
/*
 * Appends src's profiles to dst (same tenant, else FC_EINVAL): src's
 * dictionary rows, origins and index spans are interned again into dst's, so
 * dst keeps ONE string table, one function table, ... and equal rows of both
 * are stored once. Samples, values and timestamps are copied as they are:
 * totals are exact. Borrows src. Drops dst's wire (dst is no longer the
 * request it came as). On failure (FC_ETOOBIG: dst's budget) dst has the
 * profiles it had before; dictionary rows already added stay, unused.
 */
int fc_batch_merge(struct fc_batch *dst, const struct fc_batch *src, struct fc_error *err);
/*
 * The same for n of src's profiles: those whose indices are in which (NULL =
 * the first n). Every row of src's dictionary is added to dst, used or not.
 */
int fc_batch_merge_profiles(struct fc_batch *dst, const struct fc_batch *src, const uint32_t *which,
                            uint32_t n, struct fc_error *err);
int fc_batch_set_tenant(struct fc_batch *b, const char *tenant);
/*
 * Copies the request bytes into the arena as b->wire (gzip may be NULL).
 * Over the batch's budget the batch simply has no wire: not an error.
 */
void fc_batch_set_wire(struct fc_batch *b, const uint8_t *body, size_t len, const uint8_t *gzip,
                       size_t gzip_len, uint32_t profiles);
void fc_batch_drop_wire(struct fc_batch *b);
/*
 * Checks a tenant id from outside (X-Scope-OrgID header or gRPC metadata):
 * 1-150 characters of A-Z a-z 0-9 ! - _ . * ' ( ), not "." or "..", as
 * Cortex and Pyroscope accept. Every transport calls this one check.
 */
int fc_tenant_check(const char *id, size_t len, struct fc_error *err);
/*
 * The tenant of a request that names none (no X-Scope-OrgID, no credential
 * bound to a tenant). An exporter forwards a batch of this tenant WITHOUT
 * X-Scope-OrgID, so the next hop's credential decides: claimed and defaulted
 * "anonymous" are not told apart because the next hop treats both alike
 * (no header = anonymous) except when its credential is bound to a tenant,
 * where a header "anonymous" would only get 403 and the data dropped.
 */
#define FC_DEFAULT_TENANT "anonymous"
bool fc_tenant_is_default(const char *tenant);

/* Interning: each returns the index of an equal row, adding one if needed. */
int fc_dict_string(struct fc_batch *b, const char *s, size_t len, uint32_t *out);
int fc_dict_cstring(struct fc_batch *b, const char *s, uint32_t *out);
int fc_dict_function(struct fc_batch *b, const struct fc_function *f, uint32_t *out);
int fc_dict_mapping(struct fc_batch *b, const struct fc_mapping *m, uint32_t *out);
/* lines are copied into the line pool; loc->lines_off/n_lines are set here. */
int fc_dict_location(struct fc_batch *b, const struct fc_location *loc, const struct fc_line *lines,
                     uint32_t n_lines, uint32_t *out);
int fc_dict_stack(struct fc_batch *b, const uint32_t *locations, uint32_t n, uint32_t *out);
int fc_dict_attr(struct fc_batch *b, const struct fc_attr *a, uint32_t *out);
int fc_dict_link(struct fc_batch *b, const struct fc_link *l, uint32_t *out);
/* Copies an index list into the pool. */
int fc_dict_span(struct fc_batch *b, const uint32_t *idx, uint32_t n, struct fc_span *out);

static inline const char *fc_str(const struct fc_batch *b, uint32_t i)
{
    return b->dict.strings[i];
}

static inline const uint32_t *fc_span_idx(const struct fc_batch *b, struct fc_span s)
{
    return b->dict.idx + s.off;
}

/* Two index lists with the same indices in the same order. */
static inline bool fc_span_eq(const struct fc_batch *b, struct fc_span x, struct fc_span y)
{
    return x.n == y.n && (x.n == 0 || memcmp(b->dict.idx + x.off, b->dict.idx + y.off,
                                             x.n * sizeof(uint32_t)) == 0);
}

/* The first attribute of the list with that key, or NULL. */
const struct fc_attr *fc_attrs_find(const struct fc_batch *b, struct fc_span attrs,
                                    const char *key);

int fc_batch_add_origin(struct fc_batch *b, const struct fc_origin *o, uint32_t *out);
/* Returns a zeroed profile appended to the batch (NULL when over budget). */
struct fc_profile *fc_batch_add_profile(struct fc_batch *b);
/* Sets a series label, replacing an existing one of that name; keeps labels sorted. */
int fc_profile_set_label(struct fc_batch *b, struct fc_profile *p, const char *name,
                         const char *value);
const char *fc_profile_label(const struct fc_batch *b, const struct fc_profile *p,
                             const char *name);
int fc_profile_remove_label(struct fc_batch *b, struct fc_profile *p, const char *name);
int fc_profile_set_sample_types(struct fc_batch *b, struct fc_profile *p,
                                const struct fc_value_type *types, uint32_t n);
/* Appends a sample; values and timestamps are copied (either may be NULL/0). */
int fc_profile_add_sample(struct fc_batch *b, struct fc_profile *p, const struct fc_sample *s,
                          const int64_t *values, uint32_t n_values, const int64_t *ts,
                          uint32_t n_ts);

static inline const int64_t *fc_sample_values(const struct fc_profile *p, const struct fc_sample *s)
{
    return p->nums + s->values_off;
}

/*
 * The value of sample s for sample type t, with OTLP's rule that a sample
 * carrying only timestamps counts one per timestamp.
 */
int64_t fc_sample_value(const struct fc_profile *p, const struct fc_sample *s, uint32_t t);

/* Total of every sample for sample type t. */
int64_t fc_profile_total(const struct fc_profile *p, uint32_t t);
uint64_t fc_batch_sample_count(const struct fc_batch *b);

#endif
