#include "exporters/otlp/otlp_exp.h"

#include "core/timeutil.h"
#include "formats/gzip.h"
#include "formats/otlp.h"
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

static const char *const compression_names[] = {"", "+gzip", "+zstd"};

void fc_otlp_form_text(const struct fc_otlp_form *f, char out[FC_OTLP_FORM_TEXT])
{
    snprintf(out, FC_OTLP_FORM_TEXT, "%s%s", f->json ? "json" : "proto",
             compression_names[f->compression]);
}

bool fc_otlp_form_parse(const char *text, const struct fc_otlp_form *dflt, struct fc_otlp_form *out)
{
    size_t n;

    if (text[0] == '\0') {
        *out = *dflt;
        return true;
    }
    if (strncmp(text, "json", 4) == 0) {
        out->json = true;
        n = 4;
    } else if (strncmp(text, "proto", 5) == 0) {
        out->json = false;
        n = 5;
    } else {
        return false;
    }
    for (int c = FC_OTLP_COMP_NONE; c <= FC_OTLP_COMP_ZSTD; c++) {
        if (strcmp(text + n, compression_names[c]) == 0) {
            out->compression = (enum fc_otlp_compression)c;
            return true;
        }
    }
    return false;
}

struct fc_send_item *fc_otlp_exp_item(const struct fc_batch *b, const uint8_t *body, size_t len,
                                      uint32_t profiles, const struct fc_otlp_form *form)
{
    char target[FC_OTLP_FORM_TEXT];
    struct fc_send_item *it;

    fc_otlp_form_text(form, target);
    /* The default tenant travels as none: the next hop's credential decides (core/batch.h). */
    it = fc_send_item_new(fc_tenant_is_default(b->tenant) ? "" : b->tenant, target, len);

    if (len > 0) {
        memcpy(it->body, body, len);
    }
    it->samples = fc_batch_sample_count(b);
    it->profiles = profiles;
    return it;
}

int fc_otlp_exp_protobuf(const struct fc_batch *b, struct fc_buf *scratch, const uint8_t **body,
                         size_t *len, uint32_t *profiles, struct fc_error *err)
{
    int rc;

    if (b->wire.body != NULL) {
        *body = b->wire.body;
        *len = b->wire.len;
        *profiles = b->wire.profiles;
        return FC_OK;
    }
    rc = fc_otlp_encode(b, scratch, err);
    *body = scratch->data;
    *len = scratch->len;
    *profiles = fc_otlp_exp_profiles(b);
    return rc;
}

int fc_otlp_exp_protobuf_item(const struct fc_batch *b, bool gzip, struct fc_send_item **out,
                              struct fc_error *err)
{
    struct fc_buf raw, packed;
    const uint8_t *body = NULL;
    size_t len = 0;
    uint32_t profiles = 0;
    int rc;

    struct fc_otlp_form form = {false, gzip ? FC_OTLP_COMP_GZIP : FC_OTLP_COMP_NONE};

    *out = NULL;
    if (gzip && b->wire.gzip != NULL) {
        *out = fc_otlp_exp_item(b, b->wire.gzip, b->wire.gzip_len, b->wire.profiles, &form);
        return FC_OK;
    }
    fc_buf_init(&raw, 0);
    fc_buf_init(&packed, 0);
    rc = fc_otlp_exp_protobuf(b, &raw, &body, &len, &profiles, err);
    if (rc == FC_OK && gzip) {
        rc = fc_gzip(body, len, FC_GZIP_FASTEST, &packed, err);
        body = packed.data;
        len = packed.len;
    }
    if (rc == FC_OK) {
        *out = fc_otlp_exp_item(b, body, len, profiles, &form);
    }
    fc_buf_release(&raw);
    fc_buf_release(&packed);
    return rc;
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
