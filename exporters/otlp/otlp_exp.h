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

/* One item holding body (copied), with b's tenant and samples and that many OTLP profiles. */
struct fc_send_item *fc_otlp_exp_item(const struct fc_batch *b, const uint8_t *body, size_t len,
                                      uint32_t profiles);

/*
 * The ExportProfilesServiceRequest (protobuf) for b: the bytes it came as
 * when it still has them (b->wire; *body then points into b), else b
 * encoded into scratch. *profiles: the OTLP profiles in it.
 */
int fc_otlp_exp_protobuf(const struct fc_batch *b, struct fc_buf *scratch, const uint8_t **body,
                         size_t *len, uint32_t *profiles, struct fc_error *err);

/*
 * One item holding b as a protobuf request, gzipped (level 1) when gzip is
 * set: the client's own gzip stream when b->wire kept one, else ours.
 */
int fc_otlp_exp_protobuf_item(const struct fc_batch *b, bool gzip, struct fc_send_item **out,
                              struct fc_error *err);

/*
 * An accepted request's answer (an ExportProfilesServiceResponse in
 * protobuf or JSON): partial success sets res->rejected_profiles and the
 * peer's message; a message without rejections is a warning, logged.
 */
void fc_otlp_exp_partial(const struct fc_buf *answer, bool json, const char *component,
                         struct fc_log_limit *warn, struct fc_send_result *res);

#endif
