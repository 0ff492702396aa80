/*
 * What the otlp (gRPC) and otlphttp exporters share: turning a batch into
 * one send item, and reading partial success from a peer's answer.
 */
#ifndef FC_EXPORTERS_OTLP_OTLP_EXP_H
#define FC_EXPORTERS_OTLP_OTLP_EXP_H

#include "core/batch.h"
#include "core/buf.h"
#include "core/log.h"
#include "exporters/helper/sender.h"

#include <stdbool.h>

/* The OTLP profiles fc_otlp_encode writes for b: one per sample type of each profile. */
uint32_t fc_otlp_exp_profiles(const struct fc_batch *b);

/* One item holding body (copied), with b's tenant, samples and profile count. */
struct fc_send_item *fc_otlp_exp_item(const struct fc_batch *b, const uint8_t *body, size_t len);

/*
 * An accepted request's answer (an ExportProfilesServiceResponse in
 * protobuf or JSON): partial success sets res->rejected_profiles and the
 * peer's message; a message without rejections is a warning, logged.
 */
void fc_otlp_exp_partial(const struct fc_buf *answer, bool json, const char *component,
                         struct fc_log_limit *warn, struct fc_send_result *res);

#endif
