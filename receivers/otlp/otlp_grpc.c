/*
 * OTLP/gRPC with gRPC core: the method
 * /opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
 * registered on a completion queue polled by a few threads. Each pending
 * call slot cycles: requested -> received (decode, run the pipelines) ->
 * answered -> requested again. gRPC core handles HTTP/2, message
 * decompression (gzip), size limits and misbehaving connections.
 */
#include "receivers/otlp/otlp.h"

#include "core/log.h"
#include "core/mem.h"
#include "core/timeutil.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT_METHOD "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define MAX_THREADS 16
#define N_SLOTS 32
#define N_UNKNOWN_SLOTS 2 /* answer UNIMPLEMENTED to other methods */

enum slot_state { SLOT_IDLE, SLOT_WAITING, SLOT_ANSWERING };

struct slot {
    struct otlp_grpc *g;
    bool unknown_method; /* requested with grpc_server_request_call */
    grpc_call_details call_details;
    enum slot_state state;
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    grpc_byte_buffer *response;
    grpc_slice details;
    grpc_metadata trailing;
    size_t n_trailing;
    int cancelled;
};

struct otlp_grpc {
    struct otlp_receiver *r;
    grpc_server *server;
    grpc_completion_queue *cq;
    void *method;
    pthread_t threads[MAX_THREADS];
    int n_threads;
    struct slot slots[N_SLOTS + N_UNKNOWN_SLOTS];
    _Atomic int stopping;
    int shutdown_tag;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool shutdown_done;
};

static void request_call(struct slot *s)
{
    grpc_call_error e;

    grpc_metadata_array_init(&s->md);
    s->payload = NULL;
    s->call = NULL;
    s->state = SLOT_WAITING;
    if (s->unknown_method) {
        grpc_call_details_init(&s->call_details);
        e = grpc_server_request_call(s->g->server, &s->call, &s->call_details, &s->md, s->g->cq,
                                     s->g->cq, s);
    } else {
        e = grpc_server_request_registered_call(s->g->server, s->g->method, &s->call, &s->deadline,
                                                &s->md, &s->payload, s->g->cq, s->g->cq, s);
    }
    if (e != GRPC_CALL_OK) {
        grpc_metadata_array_destroy(&s->md);
        s->state = SLOT_IDLE;
    }
}

static const char *tenant_of(const grpc_metadata_array *md, char *buf, size_t size)
{
    for (size_t i = 0; i < md->count; i++) {
        const grpc_slice k = md->metadata[i].key;
        if (GRPC_SLICE_LENGTH(k) == 13 &&
            strncmp((const char *)GRPC_SLICE_START_PTR(k), "x-scope-orgid", 13) == 0) {
            size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
            if (n == 0 || n >= size) {
                return NULL;
            }
            memcpy(buf, GRPC_SLICE_START_PTR(md->metadata[i].value), n);
            buf[n] = '\0';
            return buf;
        }
    }
    return NULL;
}

/* Decodes, runs the pipelines, and starts sending the answer. */
static void answer(struct slot *s)
{
    struct otlp_receiver *r = s->g->r;
    grpc_slice body = grpc_empty_slice();
    grpc_op ops[4];
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_buf out;
    char tenant[160];
    grpc_status_code code = GRPC_STATUS_OK;
    int rc;

    memset(ops, 0, sizeof(ops));
    fc_buf_init(&out, 0);
    if (s->unknown_method) {
        s->details = grpc_slice_from_static_string("flamecol serves only " EXPORT_METHOD);
        s->n_trailing = 0;
        s->response = NULL;
        ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[1].data.recv_close_on_server.cancelled = &s->cancelled;
        ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        ops[2].data.send_status_from_server.status = GRPC_STATUS_UNIMPLEMENTED;
        ops[2].data.send_status_from_server.status_details = &s->details;
        s->state = SLOT_ANSWERING;
        if (grpc_call_start_batch(s->call, ops, 3, s, NULL) != GRPC_CALL_OK) {
            s->state = SLOT_IDLE;
        }
        return;
    }
    if (s->payload != NULL) {
        grpc_byte_buffer_reader reader;
        if (grpc_byte_buffer_reader_init(&reader, s->payload)) {
            body = grpc_byte_buffer_reader_readall(&reader);
            grpc_byte_buffer_reader_destroy(&reader);
        }
    }
    if (GRPC_SLICE_LENGTH(body) > (size_t)r->cfg->max_decompressed_size) {
        rc = fc_errorf(&err, FC_ETOOBIG, "message of %zu bytes exceeds max_decompressed_size",
                       (size_t)GRPC_SLICE_LENGTH(body));
        otlp_count_refused(r);
    } else {
        rc = otlp_export(r, GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), false,
                         tenant_of(&s->md, tenant, sizeof(tenant)), &res, &err);
    }
    grpc_slice_unref(body);
    s->n_trailing = 0;
    s->response = NULL;
    if (rc == FC_OK) {
        grpc_slice msg;
        fc_otlp_response(res.rejected_profiles, res.message, false, &out);
        msg = grpc_slice_from_copied_buffer((const char *)out.data, out.len);
        s->response = grpc_raw_byte_buffer_create(&msg, 1);
        grpc_slice_unref(msg);
        s->details = grpc_empty_slice();
    } else {
        code = (grpc_status_code)otlp_grpc_code(rc);
        s->details = grpc_slice_from_copied_string(err.msg);
        if (fc_err_retryable(rc)) {
            /* Throttling: a google.rpc.Status with RetryInfo in grpc-status-details-bin. */
            fc_otlp_status((int)code, err.msg, r->cfg->retry_after, false, &out);
            s->trailing.key = grpc_slice_from_static_string("grpc-status-details-bin");
            s->trailing.value = grpc_slice_from_copied_buffer((const char *)out.data, out.len);
            s->n_trailing = 1;
        }
    }
    fc_buf_release(&out);
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = 0;
    ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[1].data.recv_close_on_server.cancelled = &s->cancelled;
    ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[2].data.send_status_from_server.status = code;
    ops[2].data.send_status_from_server.status_details = &s->details;
    ops[2].data.send_status_from_server.trailing_metadata_count = s->n_trailing;
    ops[2].data.send_status_from_server.trailing_metadata = s->n_trailing ? &s->trailing : NULL;
    if (s->response != NULL) {
        ops[3].op = GRPC_OP_SEND_MESSAGE;
        ops[3].data.send_message.send_message = s->response;
    }
    s->state = SLOT_ANSWERING;
    if (grpc_call_start_batch(s->call, ops, s->response ? 4 : 3, s, NULL) != GRPC_CALL_OK) {
        fc_log_error(r->self->id, "grpc: cannot answer a call");
        s->state = SLOT_IDLE;
    }
}

static void finish(struct slot *s)
{
    if (s->payload != NULL) {
        grpc_byte_buffer_destroy(s->payload);
        s->payload = NULL;
    }
    if (s->response != NULL) {
        grpc_byte_buffer_destroy(s->response);
        s->response = NULL;
    }
    if (s->n_trailing) {
        grpc_slice_unref(s->trailing.value);
        s->n_trailing = 0;
    }
    grpc_slice_unref(s->details);
    s->details = grpc_empty_slice();
    grpc_metadata_array_destroy(&s->md);
    if (s->unknown_method) {
        grpc_call_details_destroy(&s->call_details);
    }
    if (s->call != NULL) {
        grpc_call_unref(s->call);
        s->call = NULL;
    }
    s->state = SLOT_IDLE;
}

static void *poll_thread(void *arg)
{
    struct otlp_grpc *g = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        struct slot *s;
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            return NULL;
        }
        if (ev.type != GRPC_OP_COMPLETE) {
            continue;
        }
        if (ev.tag == &g->shutdown_tag) {
            pthread_mutex_lock(&g->lock);
            g->shutdown_done = true;
            pthread_cond_broadcast(&g->cond);
            pthread_mutex_unlock(&g->lock);
            continue;
        }
        s = ev.tag;
        if (s->state == SLOT_WAITING) {
            if (!ev.success) {
                /* The server is shutting down: this slot never got a call. */
                grpc_metadata_array_destroy(&s->md);
                if (s->unknown_method) {
                    grpc_call_details_destroy(&s->call_details);
                }
                s->state = SLOT_IDLE;
                continue;
            }
            answer(s);
        } else if (s->state == SLOT_ANSWERING) {
            finish(s);
            if (!atomic_load(&g->stopping)) {
                request_call(s);
            }
        }
    }
}

int otlp_grpc_start(struct otlp_receiver *r, struct fc_error *err)
{
    struct otlp_grpc *g = fc_xcalloc(1, sizeof(*g));
    grpc_arg args[2];
    grpc_channel_args channel_args = {2, args};
    grpc_server_credentials *creds;
    char *addr;
    int port;

    grpc_init();
    g->r = r;
    pthread_mutex_init(&g->lock, NULL);
    pthread_cond_init(&g->cond, NULL);
    args[0].type = GRPC_ARG_INTEGER;
    args[0].key = (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
    args[0].value.integer = (int)(r->cfg->protocols.grpc.max_recv_msg_size > INT32_MAX
                                      ? INT32_MAX
                                      : r->cfg->protocols.grpc.max_recv_msg_size);
    /* A client that connects and never finishes the handshake is dropped. */
    args[1].type = GRPC_ARG_INTEGER;
    args[1].key = (char *)GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS;
    args[1].value.integer = 30000;
    g->cq = grpc_completion_queue_create_for_next(NULL);
    g->server = grpc_server_create(&channel_args, NULL);
    g->method = grpc_server_register_method(g->server, EXPORT_METHOD, NULL,
                                            GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER, 0);
    grpc_server_register_completion_queue(g->server, g->cq, NULL);
    addr = fc_xstrdup(r->cfg->protocols.grpc.endpoint);
    if (addr[0] == ':') {
        char *full = fc_xasprintf("0.0.0.0%s", addr);
        free(addr);
        addr = full;
    }
    creds = grpc_insecure_server_credentials_create();
    port = grpc_server_add_http2_port(g->server, addr, creds);
    grpc_server_credentials_release(creds);
    if (port == 0) {
        fc_errorf(err, FC_EIO,
                  "protocols.grpc: cannot listen on %s (address in use or not "
                  "available on this host)",
                  addr);
        free(addr);
        grpc_server_destroy(g->server);
        grpc_completion_queue_shutdown(g->cq);
        while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(g->cq);
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
        free(g);
        grpc_shutdown();
        return err->code;
    }
    grpc_server_start(g->server);
    for (int i = 0; i < N_SLOTS + N_UNKNOWN_SLOTS; i++) {
        g->slots[i].g = g;
        g->slots[i].unknown_method = i >= N_SLOTS;
        g->slots[i].details = grpc_empty_slice();
        request_call(&g->slots[i]);
    }
    for (int64_t i = 0; i < r->cfg->protocols.grpc.threads && i < MAX_THREADS; i++) {
        pthread_create(&g->threads[g->n_threads++], NULL, poll_thread, g);
    }
    fc_log_info(r->self->id, "grpc listening on %s", addr);
    free(addr);
    r->grpc = g;
    return FC_OK;
}

void otlp_grpc_stop(struct otlp_receiver *r)
{
    struct otlp_grpc *g = r != NULL ? r->grpc : NULL;
    struct timespec until;

    if (g == NULL) {
        return;
    }
    r->grpc = NULL;
    atomic_store(&g->stopping, 1);
    /* Stop accepting; calls in flight finish (their pipelines run) for up to 10 s. */
    grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->lock);
    while (!g->shutdown_done) {
        if (pthread_cond_timedwait(&g->cond, &g->lock, &until) != 0) {
            break;
        }
    }
    pthread_mutex_unlock(&g->lock);
    if (!g->shutdown_done) {
        grpc_server_cancel_all_calls(g->server);
    }
    grpc_completion_queue_shutdown(g->cq);
    for (int i = 0; i < g->n_threads; i++) {
        pthread_join(g->threads[i], NULL);
    }
    grpc_server_destroy(g->server);
    grpc_completion_queue_destroy(g->cq);
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g);
    grpc_shutdown();
}
