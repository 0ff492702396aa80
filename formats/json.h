/*
 * A small JSON reader into an arena-owned tree (for sample_type_config,
 * Connect JSON requests and OTLP JSON). Nesting is capped; errors give the
 * byte offset. Strings are unescaped (\uXXXX and surrogate pairs to UTF-8).
 */
#ifndef FC_FORMATS_JSON_H
#define FC_FORMATS_JSON_H

#include "core/arena.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum fc_json_type {
    FC_JSON_NULL,
    FC_JSON_BOOL,
    FC_JSON_NUMBER,
    FC_JSON_STRING,
    FC_JSON_ARRAY,
    FC_JSON_OBJECT
};

struct fc_json {
    enum fc_json_type type;
    bool b;
    const char *str; /* STRING: unescaped; NUMBER: its text. NUL-terminated */
    size_t len;
    struct fc_json **items; /* ARRAY elements, OBJECT values */
    const char **keys;      /* OBJECT keys */
    size_t n;
};

/* Containers nested deeper than this are refused ("json: nested deeper than 128 levels"). */
#define FC_JSON_MAX_DEPTH 128
/* The most fc_json_parse_depth() allows: the parser recurses once per level. */
#define FC_JSON_MAX_DEPTH_CEILING 2000

/* text may be NULL when len is 0 (an empty document is an error, "unexpected end of input"). */
int fc_json_parse(struct fc_arena *a, const char *text, size_t len, struct fc_json **out,
                  struct fc_error *err);
/*
 * The same with another nesting bound: the root value is depth 0, each
 * array or object adds one. too_deep (NULL = "nested deeper than N levels")
 * is what the error calls a document nested deeper.
 */
int fc_json_parse_depth(struct fc_arena *a, const char *text, size_t len, unsigned max_depth,
                        const char *too_deep, struct fc_json **out, struct fc_error *err);
/* The member named key of an object, or NULL. */
const struct fc_json *fc_json_get(const struct fc_json *obj, const char *key);
/* A JSON number or a string holding one (protojson writes int64 as strings). */
int fc_json_int64(const struct fc_json *v, int64_t *out);
int fc_json_uint64(const struct fc_json *v, uint64_t *out);
/* Standard or URL-safe base64, padding optional. Output in the arena. */
int fc_base64_decode(struct fc_arena *a, const char *s, size_t len, uint8_t **out, size_t *out_len);

#endif
