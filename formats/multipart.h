/*
 * multipart/form-data over a body held in memory (what Pyroscope SDKs send
 * to /ingest). Parts point into the body; nothing is copied.
 */
#ifndef FC_FORMATS_MULTIPART_H
#define FC_FORMATS_MULTIPART_H

#include "core/err.h"

#include <stddef.h>
#include <stdint.h>

#define FC_MULTIPART_MAX_PARTS 16

struct fc_multipart_part {
    char name[128];         /* form field name */
    char filename[128];     /* "" when none */
    char content_type[128]; /* "" when none */
    const uint8_t *data;
    size_t len;
};

/*
 * content_type: the request's header (the boundary comes from it). Fills up
 * to FC_MULTIPART_MAX_PARTS parts. FC_EPROTO names what is malformed.
 */
int fc_multipart_parse(const char *content_type, const uint8_t *body, size_t len,
                       struct fc_multipart_part *parts, size_t *n_parts, struct fc_error *err);

/* The part named `name`, or NULL. */
const struct fc_multipart_part *fc_multipart_find(const struct fc_multipart_part *parts, size_t n,
                                                  const char *name);

#endif
