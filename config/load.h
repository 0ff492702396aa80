/*
 * Loading: YAML files -> one merged node tree.
 *
 * Each file is parsed with libyaml; scalars get ${env:NAME},
 * ${env:NAME:-default} and ${NAME} expanded ($${...} is a literal ${...});
 * several files deep-merge in order as the OpenTelemetry Collector does
 * (maps merge key by key, lists and scalars replace).
 */
#ifndef FC_CONFIG_LOAD_H
#define FC_CONFIG_LOAD_H

#include "config/diag.h"
#include "config/node.h"
#include "core/arena.h"

#include <stddef.h>

/* Returns the root map, or NULL with errors in diag. Nodes live in arena. */
struct fc_node *fc_config_load_files(struct fc_arena *a, const char *const *paths, size_t n,
                                     struct fc_diag *diag);
/* name is used in error positions ("<default>", a test name). */
struct fc_node *fc_config_load_string(struct fc_arena *a, const char *name, const char *text,
                                      size_t len, struct fc_diag *diag);
/* Deep merge src into dst (maps merge, the rest replaces); returns the result. */
struct fc_node *fc_config_merge(struct fc_arena *a, struct fc_node *dst, struct fc_node *src);

/*
 * Writes the tree back as YAML (for print-config), the non-empty values of
 * keys named token, bearer_token, password or Authorization (any case) as
 * "[REDACTED]".
 */
struct fc_buf;
void fc_config_dump(const struct fc_node *n, struct fc_buf *out);

#endif
