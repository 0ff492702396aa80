/*
 * One function of a merged selection (GET /api/v1/function): its self and
 * total, per source line (file:line), and its callers and callees, from the
 * full-detail tree of a fc_store_result.
 */
#ifndef FC_EXPORTERS_STORE_FUNCTION_H
#define FC_EXPORTERS_STORE_FUNCTION_H

#include "core/buf.h"
#include "storage/store.h"

#include <stdbool.h>

/*
 * Appends the JSON answer for the function whose display name (by function:
 * its name, or 0x<address> without one) is `name`; false (nothing
 * appended) when no frame of the selection has it.
 *
 * Every figure counts a sample once however often the thing recurs in its
 * stack, as pprof does: total (samples with the function anywhere), a line's
 * total, a caller's or callee's edge.
 */
bool store_function_json(const struct fc_store_result *r, const char *name, const char *type_id,
                         const char *unit, struct fc_buf *out);

#endif
