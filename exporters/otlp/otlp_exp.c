#include "exporters/otlp/otlp_exp.h"

#include "core/timeutil.h"
#include "formats/otlp_answer.h"

#include <stdio.h>
#include <string.h>

#define WARN_INTERVAL_NS (10 * FC_NS_PER_SEC)

uint32_t fc_otlp_exp_profiles(const struct fc_batch *b)
{
    uint32_t n = 0;

    for (uint32_t i = 0; i < b->n_profiles; i++) {
        n += b->profiles[i].n_sample_types ? b->profiles[i].n_sample_types : 1;
    }
    return n;
}

struct fc_send_item *fc_otlp_exp_item(const struct fc_batch *b, const uint8_t *body, size_t len)
{
    struct fc_send_item *it = fc_send_item_new(b->tenant, "", len);

    if (len > 0) {
        memcpy(it->body, body, len);
    }
    it->samples = fc_batch_sample_count(b);
    it->profiles = fc_otlp_exp_profiles(b);
    return it;
}

void fc_otlp_exp_partial(const struct fc_buf *answer, bool json, const char *component,
                         struct fc_log_limit *warn, struct fc_send_result *res)
{
    struct fc_partial_success ps;
    struct fc_error err = {0};
    int rc;

    if (res->outcome != FC_SEND_OK || answer->len == 0) {
        return;
    }
    rc = json ? fc_otlp_partial_decode_json((const char *)answer->data, answer->len, &ps, &err)
              : fc_otlp_partial_decode(answer->data, answer->len, &ps, &err);
    if (rc != FC_OK) {
        /* Accepted all the same: the status said so; the body only qualifies it. */
        fc_log_limited(warn, WARN_INTERVAL_NS, FC_LOG_WARN, component,
                       "the peer accepted a request but its answer is not an "
                       "ExportProfilesServiceResponse: %s",
                       err.msg);
        return;
    }
    if (!ps.present) {
        return;
    }
    if (ps.rejected_profiles > 0) {
        res->rejected_profiles =
            ps.rejected_profiles > UINT32_MAX ? UINT32_MAX : (uint32_t)ps.rejected_profiles;
        snprintf(res->error_type, sizeof(res->error_type), "partial_success");
        snprintf(res->message, sizeof(res->message), "%s", ps.message);
    } else if (ps.message[0] != '\0') {
        fc_log_limited(warn, WARN_INTERVAL_NS, FC_LOG_WARN, component,
                       "the peer accepted a request with a warning: %s", ps.message);
    }
}
