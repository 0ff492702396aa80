/*
 * Source files for the web UI's Function details: `query.ui.source_roots`
 * maps path prefixes as they appear in profiles to local directories, and
 * GET /api/v1/source?file=<path as in the profile> answers the mapped file's
 * text. Only regular files that resolve (realpath) inside a configured root
 * are served, up to query.ui.max_source_size bytes; nothing is listed.
 * GET /api/v1/source-roots answers the prefixes only (not the directories),
 * so that the UI asks only for files that are mapped.
 */
#ifndef FC_EXPORTERS_STORE_SOURCE_H
#define FC_EXPORTERS_STORE_SOURCE_H

#include "config/schema.h"
#include "core/err.h"

#include <stddef.h>

struct fc_http_server;
struct store_exporter;

/* The fields of `query.ui` (offsets within the query block's ui member). */
extern const struct fc_field store_ui_fields[];

/*
 * The local path of a profile's file under roots (longest matching prefix;
 * a prefix matches at a '/' boundary or when it ends with '/'), into out.
 * Returns the index of the root used, or -1 when no prefix matches or out
 * is too small. Nothing is resolved here.
 */
int store_source_map(const struct fc_str_map *roots, const char *file, char *out, size_t size);

/*
 * Reads the file `file` of a profile through roots into body: 0, or an HTTP
 * status (400, 403, 404, 413 past max bytes, 500) with msg set. 403 when the
 * file resolves outside its root (`..`, a symlink out of it).
 */
int store_source_read(const struct fc_str_map *roots, const char *file, size_t max,
                      struct fc_buf *body, char *msg, size_t msize);

/* Registers GET /api/v1/source and GET /api/v1/source-roots ({"prefixes": [...]}) on srv. */
int store_source_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err);

#endif
