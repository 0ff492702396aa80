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

/*
 * How an item's body is encoded. It travels in the item's target
 * ("proto+gzip", "json", ...), so a persistent queue's records are sent as
 * they were encoded even when `encoding` or `compression` changed while
 * they waited on disk. Records of earlier versions have an empty target:
 * they are taken to be encoded as configured now.
 */
enum fc_otlp_compression { FC_OTLP_COMP_NONE, FC_OTLP_COMP_GZIP, FC_OTLP_COMP_ZSTD };
struct fc_otlp_form {
    bool json;
    enum fc_otlp_compression compression;
};
#define FC_OTLP_FORM_TEXT 16
void fc_otlp_form_text(const struct fc_otlp_form *f, char out[FC_OTLP_FORM_TEXT]);
/* false: text is no form (a damaged record); "" gives *dflt. */
bool fc_otlp_form_parse(const char *text, const struct fc_otlp_form *dflt,
                        struct fc_otlp_form *out);

/*
 * One item holding body (copied), encoded as form says, with b's tenant
 * and samples and that many OTLP profiles.
 */
struct fc_send_item *fc_otlp_exp_item(const struct fc_batch *b, const uint8_t *body, size_t len,
                                      uint32_t profiles, const struct fc_otlp_form *form);

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
