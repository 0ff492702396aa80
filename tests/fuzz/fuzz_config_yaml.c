/* Config loader + graph builder on arbitrary YAML. */
#include "config/load.h"
#include "core/metrics.h"
#include "core/service.h"

#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_node *root;

    fc_diag_init(&d);
    root = fc_config_load_string(a, "fuzz.yaml", (const char *)data, size, &d);
    if (root != NULL) {
        fc_service_free(fc_service_build(root, &d));
    }
    fc_diag_release(&d);
    fc_arena_free(a);
    fc_metrics_reset();
    return 0;
}
