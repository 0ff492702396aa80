/*
 * What a peer answers an exporter: google.rpc.Status (protobuf, JSON) with
 * RetryInfo, partial success (protobuf, JSON), Retry-After, and the HTTP /
 * gRPC classification built on them. The first byte picks the decoder, the
 * rest is the input. A decoded Status re-encoded by formats/otlp_encode.c must
 * decode to the same code and delay.
 */
#include "exporters/helper/client.h"
#include "formats/otlp.h"
#include "formats/otlp_answer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_text(const char *s, size_t cap)
{
    if (strnlen(s, cap) >= cap) {
        abort();
    }
}

static void check_result(const struct fc_send_result *res)
{
    check_text(res->message, sizeof(res->message));
    check_text(res->error_type, sizeof(res->error_type));
    if (res->retry_after_ns < 0 || (res->outcome != FC_SEND_RETRY && res->retry_after_ns != 0)) {
        abort();
    }
}

static void status_round_trip(const struct fc_rpc_status *st)
{
    struct fc_buf out;
    struct fc_rpc_status again;
    struct fc_error err = {0};

    fc_buf_init(&out, 0);
    if (fc_otlp_status(st->code, st->message, st->has_retry_info ? st->retry_delay_ns : 0, false,
                       &out) != FC_OK) {
        abort();
    }
    if (fc_rpc_status_decode(out.data, out.len, &again, &err) != FC_OK || again.code != st->code ||
        strcmp(again.message, st->message) != 0 ||
        (st->retry_delay_ns > 0 && again.retry_delay_ns != st->retry_delay_ns)) {
        abort();
    }
    fc_buf_release(&out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fc_rpc_status st;
    struct fc_partial_success ps;
    struct fc_send_result res;
    struct fc_error err = {0};
    const uint8_t *in;
    size_t n;

    if (size == 0) {
        return 0;
    }
    in = data + 1;
    n = size - 1;
    switch (data[0] % 6) {
    case 0:
        if (fc_rpc_status_decode(in, n, &st, &err) == FC_OK) {
            check_text(st.message, sizeof(st.message));
            if (st.retry_delay_ns < 0) {
                abort();
            }
            status_round_trip(&st);
        }
        break;
    case 1:
        if (fc_rpc_status_decode_json((const char *)in, n, &st, &err) == FC_OK) {
            check_text(st.message, sizeof(st.message));
            if (st.retry_delay_ns < 0) {
                abort();
            }
        }
        break;
    case 2:
        if (fc_otlp_partial_decode(in, n, &ps, &err) == FC_OK) {
            check_text(ps.message, sizeof(ps.message));
        }
        break;
    case 3:
        if (fc_otlp_partial_decode_json((const char *)in, n, &ps, &err) == FC_OK) {
            check_text(ps.message, sizeof(ps.message));
        }
        break;
    case 4: {
        /* Retry-After text, and an HTTP answer carrying it (status from the first bytes). */
        char *text = malloc(n + 1);
        long status = n >= 2 ? 100 + (in[0] | in[1] << 8) % 500 : 503;
        memcpy(text, in, n);
        text[n] = '\0';
        if (fc_parse_retry_after(text, 1795406400) < -1) {
            abort();
        }
        fc_http_result(status, text, NULL, 0, false, &res);
        check_result(&res);
        free(text);
        break;
    }
    default:
        /* A gRPC status with these bytes as grpc-status-details-bin, an HTTP body too. */
        fc_grpc_result(n > 0 ? in[0] % 20 : 14, NULL, in, n, &res);
        check_result(&res);
        fc_http_result(n > 0 ? 400 + in[0] % 200 : 500, NULL, in, n, n > 0 && (in[0] & 1), &res);
        check_result(&res);
        break;
    }
    return 0;
}
