/*
 * Unary calls on gRPC core: a registered call per attempt, all six ops in
 * one batch, and the calling thread plucks its completion from its own
 * queue. The deadline bounds the whole call (connecting included).
 */
#include "exporters/helper/grpc_client.h"

#include "core/mem.h"
#include "core/timeutil.h"
#include "core/version.h"

#include <ctype.h>
#include <errno.h>
#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ANSWER (4u << 20) /* OTLP's response size limit */
#define STACK_MD 8            /* metadata entries of a call kept on the stack */

struct fc_grpc_channel {
    grpc_channel *channel;
    void *method; /* grpc_channel_register_call */
    /* metadata sent with every call: user headers with lower-case keys */
    grpc_metadata *md;
    size_t n_md;
    bool md_has_tenant;
};

struct fc_grpc_conn {
    struct fc_grpc_channel *ch;
    grpc_completion_queue *cq;
};

static bool set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

/* A whole PEM file, NUL-terminated; NULL with err filled when it cannot be read. */
static char *read_pem(const char *key, const char *path, struct fc_error *err)
{
    FILE *f = fopen(path, "rb");
    struct fc_buf b;
    char chunk[4096];
    size_t n;

    if (f == NULL) {
        fc_errorf(err, FC_ECONFIG, "tls.%s: cannot read %s: %s", key, path, strerror(errno));
        return NULL;
    }
    fc_buf_init(&b, 16u << 20);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (fc_buf_append(&b, chunk, n) != 0) {
            break;
        }
    }
    fclose(f);
    fc_buf_append(&b, "", 1);
    return (char *)fc_buf_detach(&b, &n);
}

/*
 * Channel credentials. Verifying peers use gRPC's SSL credentials; with
 * insecure_skip_verify the TLS credentials API skips the chain and the name
 * checks (gRPC's SSL credentials always verify).
 */
static grpc_channel_credentials *credentials(const struct fc_grpc_channel_config *cfg,
                                             struct fc_error *err)
{
    const struct fc_tls_client_config *tls = cfg->tls;
    char *ca = NULL, *cert = NULL, *key = NULL;
    grpc_channel_credentials *creds = NULL;

    if (!cfg->use_tls) {
        return grpc_insecure_credentials_create();
    }
    if (set(tls->ca_file) && (ca = read_pem("ca_file", tls->ca_file, err)) == NULL) {
        goto out;
    }
    if (set(tls->cert_file) && ((cert = read_pem("cert_file", tls->cert_file, err)) == NULL ||
                                (key = read_pem("key_file", tls->key_file, err)) == NULL)) {
        goto out;
    }
    if (!tls->insecure_skip_verify) {
        grpc_ssl_pem_key_cert_pair pair = {key, cert};
        creds = grpc_ssl_credentials_create_ex(ca, cert ? &pair : NULL, NULL, NULL);
    } else {
        grpc_tls_credentials_options *o = grpc_tls_credentials_options_create();
        grpc_tls_identity_pairs *pairs = NULL;
        grpc_tls_certificate_provider *p;
        grpc_tls_certificate_verifier *v = grpc_tls_certificate_verifier_no_op_create();
        if (cert != NULL) {
            pairs = grpc_tls_identity_pairs_create();
            grpc_tls_identity_pairs_add_pair(pairs, key, cert);
        }
        if (ca != NULL || pairs != NULL) {
            p = grpc_tls_certificate_provider_static_data_create(ca, pairs);
            grpc_tls_credentials_options_set_certificate_provider(o, p);
            if (ca != NULL) {
                grpc_tls_credentials_options_watch_root_certs(o);
            }
            if (pairs != NULL) {
                grpc_tls_credentials_options_watch_identity_key_cert_pairs(o);
            }
            grpc_tls_certificate_provider_release(p);
        }
        grpc_tls_credentials_options_set_verify_server_cert(o, 0);
        grpc_tls_credentials_options_set_certificate_verifier(o, v);
        grpc_tls_credentials_options_set_check_call_host(o, 0);
        grpc_tls_certificate_verifier_release(v);
        creds = grpc_tls_credentials_create(o); /* takes o */
    }
    if (creds == NULL) {
        fc_errorf(err, FC_ECONFIG, "tls: gRPC refused the certificates (see its log)");
    }
out:
    free(ca);
    free(cert);
    free(key);
    return creds;
}

static void arg_int(grpc_arg *a, const char *key, int64_t v)
{
    a->type = GRPC_ARG_INTEGER;
    a->key = (char *)key;
    a->value.integer = v > INT32_MAX ? INT32_MAX : (int)v;
}

static void arg_str(grpc_arg *a, const char *key, const char *v)
{
    a->type = GRPC_ARG_STRING;
    a->key = (char *)key;
    a->value.string = (char *)v;
}

static char *lower_dup(const char *key)
{
    char *lower = fc_xstrdup(key);

    for (char *p = lower; *p != '\0'; p++) {
        *p = (char)tolower((unsigned char)*p);
    }
    return lower;
}

/* What gRPC core sends: a legal key (not a pseudo or grpc- header), a printable value. */
static bool header_legal(const char *lower, const char *value)
{
    size_t n = strlen(lower);
    bool bin = n > 4 && strcmp(lower + n - 4, "-bin") == 0;

    return grpc_header_key_is_legal(grpc_slice_from_static_string(lower)) && lower[0] != ':' &&
           strncmp(lower, "grpc-", 5) != 0 &&
           (bin || grpc_header_nonbin_value_is_legal(grpc_slice_from_static_string(value)));
}

int fc_grpc_headers_check(const struct fc_str_map *headers, struct fc_error *err)
{
    for (size_t i = 0; headers != NULL && i < headers->n; i++) {
        char *lower = lower_dup(headers->keys[i]);
        bool ok = header_legal(lower, headers->values[i]);
        free(lower);
        if (!ok) {
            return fc_errorf(err, FC_ECONFIG, "headers.%s: not a header gRPC can send",
                             headers->keys[i]);
        }
    }
    return FC_OK;
}

/* Adds a header, its key in lower case as gRPC requires (checked by fc_grpc_headers_check). */
static void add_metadata(struct fc_grpc_channel *ch, const char *key, const char *value)
{
    char *lower = lower_dup(key);
    grpc_metadata *m;

    if (strcmp(lower, "x-scope-orgid") == 0) {
        ch->md_has_tenant = true;
    }
    ch->md = fc_xrealloc(ch->md, (ch->n_md + 1) * sizeof(*ch->md));
    m = &ch->md[ch->n_md++];
    memset(m, 0, sizeof(*m));
    m->key = grpc_slice_from_copied_string(lower);
    m->value = grpc_slice_from_copied_string(value);
    free(lower);
}

void fc_grpc_client_global_init(void)
{
    setenv("GRPC_CLIENT_CHANNEL_BACKUP_POLL_INTERVAL_MS", "100", 0);
}

int fc_grpc_channel_new(const struct fc_grpc_channel_config *cfg, const char *method,
                        struct fc_grpc_channel **out, struct fc_error *err)
{
    struct fc_grpc_channel *ch;
    grpc_channel_credentials *creds;
    grpc_arg args[10];
    grpc_channel_args channel_args = {0, args};
    size_t n = 0;

    if (fc_grpc_headers_check(cfg->headers, err) != FC_OK) {
        return err->code;
    }
    grpc_init();
    creds = credentials(cfg, err);
    if (creds == NULL) {
        grpc_shutdown();
        return err->code;
    }
    ch = fc_xcalloc(1, sizeof(*ch));
    arg_str(&args[n++], GRPC_ARG_PRIMARY_USER_AGENT_STRING, "flamecol/" FC_VERSION);
    /* The sender retries (and counts); gRPC's own retries would hide attempts. */
    arg_int(&args[n++], GRPC_ARG_ENABLE_RETRIES, 0);
    /*
     * Calls fail fast while the channel waits to reconnect; gRPC's own
     * backoff grows to 120 s, which would hold delivery that long after a
     * peer comes back. The sender's retries pace the attempts instead.
     */
    arg_int(&args[n++], GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    arg_int(&args[n++], GRPC_COMPRESSION_CHANNEL_DEFAULT_ALGORITHM,
            cfg->gzip ? GRPC_COMPRESS_GZIP : GRPC_COMPRESS_NONE);
    if (cfg->keepalive_time_ns > 0) {
        arg_int(&args[n++], GRPC_ARG_KEEPALIVE_TIME_MS, cfg->keepalive_time_ns / FC_NS_PER_MS);
        arg_int(&args[n++], GRPC_ARG_KEEPALIVE_TIMEOUT_MS,
                cfg->keepalive_timeout_ns / FC_NS_PER_MS);
        arg_int(&args[n++], GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS,
                cfg->keepalive_permit_without_stream ? 1 : 0);
    }
    if (cfg->use_tls && set(cfg->tls->server_name_override)) {
        /* The name asked for (SNI) and checked in the certificate. */
        arg_str(&args[n++], GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, cfg->tls->server_name_override);
    }
    channel_args.num_args = n;
    ch->channel = grpc_channel_create(cfg->target, creds, &channel_args);
    grpc_channel_credentials_release(creds);
    ch->method = grpc_channel_register_call(ch->channel, method, NULL, NULL);
    for (size_t i = 0; cfg->headers != NULL && i < cfg->headers->n; i++) {
        add_metadata(ch, cfg->headers->keys[i], cfg->headers->values[i]);
    }
    *out = ch;
    return FC_OK;
}

void fc_grpc_channel_free(struct fc_grpc_channel *ch)
{
    if (ch == NULL) {
        return;
    }
    for (size_t i = 0; i < ch->n_md; i++) {
        grpc_slice_unref(ch->md[i].key);
        grpc_slice_unref(ch->md[i].value);
    }
    free(ch->md);
    grpc_channel_destroy(ch->channel);
    free(ch);
    grpc_shutdown();
}

struct fc_grpc_conn *fc_grpc_conn_new(struct fc_grpc_channel *ch)
{
    struct fc_grpc_conn *c = fc_xcalloc(1, sizeof(*c));

    c->ch = ch;
    c->cq = grpc_completion_queue_create_for_pluck(NULL);
    return c;
}

void fc_grpc_conn_free(struct fc_grpc_conn *c)
{
    if (c == NULL) {
        return;
    }
    grpc_completion_queue_shutdown(c->cq);
    while (
        grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
        GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(c->cq);
    free(c);
}

static void read_answer(grpc_byte_buffer *bb, struct fc_buf *answer)
{
    grpc_byte_buffer_reader r;
    grpc_slice s;

    if (bb == NULL || answer == NULL || !grpc_byte_buffer_reader_init(&r, bb)) {
        return;
    }
    while (grpc_byte_buffer_reader_next(&r, &s)) {
        if (answer->len + GRPC_SLICE_LENGTH(s) <= MAX_ANSWER) {
            fc_buf_append(answer, GRPC_SLICE_START_PTR(s), GRPC_SLICE_LENGTH(s));
        }
        grpc_slice_unref(s);
    }
    grpc_byte_buffer_reader_destroy(&r);
}

static void call_error(const char *what, int e, struct fc_send_result *res)
{
    memset(res, 0, sizeof(*res));
    res->outcome = FC_SEND_PERMANENT;
    snprintf(res->error_type, sizeof(res->error_type), "grpc_call");
    snprintf(res->message, sizeof(res->message), "%s (grpc_call_error %d)", what, e);
}

void fc_grpc_unary(struct fc_grpc_conn *c, const struct fc_grpc_request *rq,
                   struct fc_send_result *res, struct fc_buf *answer)
{
    struct fc_grpc_channel *ch = c->ch;
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_nanos(rq->timeout_ns > 0 ? rq->timeout_ns : 1, GPR_TIMESPAN));
    grpc_metadata md_stack[STACK_MD];
    grpc_metadata *md = ch->n_md + 1 <= STACK_MD ? md_stack : fc_xcalloc(ch->n_md + 1, sizeof(*md));
    size_t n_md = ch->n_md;
    grpc_metadata_array initial, trailing;
    grpc_byte_buffer *request, *response = NULL;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice(), body;
    const char *error_string = NULL;
    grpc_call *call;
    grpc_op ops[6];
    grpc_call_error e;
    grpc_event ev;

    if (answer != NULL) {
        fc_buf_reset(answer);
    }
    if (ch->n_md > 0) {
        memcpy(md, ch->md, ch->n_md * sizeof(*md));
    }
    memset(&md[ch->n_md], 0, sizeof(*md)); /* the tenant's slot */
    if (set(rq->tenant) && !ch->md_has_tenant) {
        md[n_md].key = grpc_slice_from_static_string("x-scope-orgid");
        /* Copied: gRPC may hold slices past the call's end (a cancelled write). */
        md[n_md].value = grpc_slice_from_copied_string(rq->tenant);
        n_md++;
    }
    body = grpc_slice_from_copied_buffer((const char *)rq->body, rq->body_len);
    /*
     * A buffer marked compressed is sent with the message's compressed flag
     * and skipped by gRPC's compression filter; the channel's default
     * algorithm (gzip) names it in grpc-encoding.
     */
    request = rq->gzipped ? grpc_raw_compressed_byte_buffer_create(&body, 1, GRPC_COMPRESS_GZIP)
                          : grpc_raw_byte_buffer_create(&body, 1);
    grpc_slice_unref(body); /* the byte buffer holds its own reference */
    grpc_metadata_array_init(&initial);
    grpc_metadata_array_init(&trailing);
    call = grpc_channel_create_registered_call(ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                               ch->method, deadline, NULL);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = n_md;
    ops[0].data.send_initial_metadata.metadata = md;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    ops[5].data.recv_status_on_client.error_string = &error_string;
    e = grpc_call_start_batch(call, ops, 6, c, NULL);
    if (e != GRPC_CALL_OK) {
        call_error(e == GRPC_CALL_ERROR_INVALID_METADATA ? "invalid metadata (headers)"
                                                         : "cannot start the call",
                   (int)e, res);
    } else {
        /* The deadline ends the call: the batch always completes. */
        ev = grpc_completion_queue_pluck(c->cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        (void)ev;
        if (status == GRPC_STATUS_OK) {
            fc_grpc_result(0, NULL, NULL, 0, res);
        } else {
            char *message = grpc_slice_to_c_string(details);
            const uint8_t *det = NULL;
            size_t det_len = 0;
            for (size_t i = 0; i < trailing.count; i++) {
                if (grpc_slice_str_cmp(trailing.metadata[i].key, "grpc-status-details-bin") == 0) {
                    det = GRPC_SLICE_START_PTR(trailing.metadata[i].value);
                    det_len = GRPC_SLICE_LENGTH(trailing.metadata[i].value);
                }
            }
            fc_grpc_result((int)status, message[0] ? message : error_string, det, det_len, res);
            gpr_free(message);
        }
        if (status == GRPC_STATUS_DEADLINE_EXCEEDED &&
            gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0) {
            snprintf(res->error_type, sizeof(res->error_type), "timeout");
        }
        if (status == GRPC_STATUS_OK) {
            read_answer(response, answer);
        }
    }
    if (response != NULL) {
        grpc_byte_buffer_destroy(response);
    }
    grpc_byte_buffer_destroy(request);
    grpc_slice_unref(details);
    gpr_free((void *)error_string);
    grpc_metadata_array_destroy(&initial);
    grpc_metadata_array_destroy(&trailing);
    grpc_call_unref(call);
    if (n_md > ch->n_md) {
        grpc_slice_unref(md[ch->n_md].value); /* the tenant's copy */
    }
    if (md != md_stack) {
        free(md);
    }
}
