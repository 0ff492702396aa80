/*
 * OTLP/gRPC with gRPC core: the method
 * /opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export
 * registered on a completion queue polled by a few threads. Each call slot
 * cycles: requested -> received -> (admitted: decoded and run through the
 * pipelines | refused at once with RESOURCE_EXHAUSTED when max_in_flight
 * calls are being handled) -> answered -> requested again. There are more
 * slots than max_in_flight, so refusals keep flowing while every admitted
 * slot is busy.
 *
 * No thread hand-off per call (each is a futex wake and two context
 * switches): an admitted call runs on the polling thread that received it,
 * provided another polling thread is free to keep receiving (one is started
 * when none is: at most threads + one per slot, so refusals never wait for a
 * busy pipeline). The answer usually completes inside grpc_call_start_batch;
 * gRPC's thread-local completion cache hands that completion back to the
 * same thread, which finishes the slot and requests the next call without
 * waking a poller. The workpool still counts admissions, and runs a call
 * only when no polling thread could be started.
 *
 * gRPC core handles HTTP/2, the size limit on the wire and misbehaving
 * connections. Message decompression is ours (per-message decompression is
 * off in gRPC core), so max_decompressed_size bounds it as on HTTP: a gzip
 * bomb is refused after inflating at most that much.
 *
 * TLS (protocols.grpc.tls) is gRPC core's SSL server credentials with a
 * certificate-config fetcher: gRPC asks it at each new connection, and it
 * answers with the files' new contents once core/tls_server.c has seen them
 * change (reload_interval). client_ca_file requires and verifies client
 * certificates. gRPC 1.51 has no minimum-version knob: it serves 1.2 and 1.3.
 */
#include "receivers/otlp/otlp.h"

#include "core/auth.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/timeutil.h"
#include "core/tls_server.h"
#include "core/workpool.h"
#include "formats/gzip.h"

#include <grpc/byte_buffer.h>
#include <grpc/compression.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/slice.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT_METHOD "/opentelemetry.proto.collector.profiles.v1development.ProfilesService/Export"
#define N_REFUSAL_SLOTS 16 /* beyond max_in_flight: calls that are refused at once */
#define N_UNKNOWN_SLOTS 2  /* answer UNIMPLEMENTED to other methods */

enum slot_state { SLOT_IDLE, SLOT_WAITING, SLOT_HANDLING, SLOT_ANSWERING };

struct slot {
    struct fc_work work; /* first: a worker gets back to its slot from it */
    struct otlp_grpc *g;
    bool admitted;       /* holds a workpool slot until answered */
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
    pthread_t *threads;            /* under lock: polling threads, started ones first */
    size_t n_threads, max_threads; /* under lock */
    bool no_more_threads;          /* under lock: stopping */
    _Atomic long free_pollers;     /* polling threads not handling a call */
    struct fc_workpool *pool;
    _Atomic int64_t *refused_too_large;
    struct slot *slots;
    size_t n_slots, n_export_slots;
    _Atomic int stopping;
    int shutdown_tag;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool shutdown_done;
    struct fc_tls_server *tls;       /* NULL: plaintext */
    _Atomic uint64_t tls_generation; /* what gRPC was last given */
    _Atomic int64_t *auth_refused[FC_AUTH_OUTCOMES];
};

/* gRPC's certificate-config fetcher: new certificates once the files changed. */
static grpc_ssl_certificate_config_reload_status
fetch_certificates(void *user, grpc_ssl_server_certificate_config **config)
{
    struct otlp_grpc *g = user;
    struct fc_tls_pem pem;
    grpc_ssl_pem_key_cert_pair pair;
    uint64_t gen = fc_tls_server_refresh(g->tls);

    if (gen == atomic_load(&g->tls_generation)) {
        return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_UNCHANGED;
    }
    gen = fc_tls_server_pem(g->tls, &pem);
    pair.private_key = pem.key;
    pair.cert_chain = pem.cert;
    /* gRPC copies the strings. gRPC 1.51 asserts that a fetched config has root certificates
     * even when it requests none from clients: the chain itself stands in, unused. */
    *config = grpc_ssl_server_certificate_config_create(pem.client_ca ? pem.client_ca : pem.cert,
                                                        &pair, 1);
    fc_tls_pem_free(&pem);
    atomic_store(&g->tls_generation, gen);
    return GRPC_SSL_CERTIFICATE_CONFIG_RELOAD_NEW;
}

static grpc_server_credentials *server_credentials(struct otlp_grpc *g,
                                                   const struct fc_tls_server_config *cfg,
                                                   struct fc_error *err)
{
    grpc_ssl_server_credentials_options *opts;

    if (!fc_tls_server_on(cfg)) {
        return grpc_insecure_server_credentials_create();
    }
    g->tls = fc_tls_server_new(cfg, err);
    if (g->tls == NULL) {
        return NULL;
    }
    opts = grpc_ssl_server_credentials_create_options_using_config_fetcher(
        cfg->client_ca_file[0] != '\0' ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                       : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        fetch_certificates, g);
    return grpc_ssl_server_credentials_create_with_options(opts);
}

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

static void finish(struct slot *s);

/*
 * A completion taken from gRPC's thread-local cache by send_answer, run by the
 * loop that called the handler (run_cached) rather than from inside it: the
 * handlers never recurse.
 */
static _Thread_local struct {
    void *tag;
    int ok;
    bool set;
} t_cached;

static void run_cached(struct otlp_grpc *g);

/* The x-scope-orgid metadata, checked as the HTTP header is; NULL when absent. */
static int tenant_of(const grpc_metadata_array *md, char *buf, size_t size, const char **tenant,
                     struct fc_error *err)
{
    *tenant = NULL;
    for (size_t i = 0; i < md->count; i++) {
        const grpc_slice k = md->metadata[i].key;
        if (GRPC_SLICE_LENGTH(k) == 13 &&
            strncmp((const char *)GRPC_SLICE_START_PTR(k), "x-scope-orgid", 13) == 0) {
            const char *v = (const char *)GRPC_SLICE_START_PTR(md->metadata[i].value);
            size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
            if (fc_tenant_check(v, n, err) != FC_OK) {
                return fc_error_wrap(err, "x-scope-orgid");
            }
            if (n >= size) {
                return fc_errorf(err, FC_EPROTO, "x-scope-orgid too long");
            }
            memcpy(buf, v, n);
            buf[n] = '\0';
            *tenant = buf;
        }
    }
    return FC_OK;
}

/*
 * The message as sent: its slices joined, then inflated when the client
 * compressed it (gzip only; gRPC core refuses other algorithms, see
 * GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET below). wire keeps
 * the compressed message when it is one whole gzip stream (empty otherwise).
 */
static int read_message(struct otlp_grpc *g, grpc_byte_buffer *bb, struct fc_buf *out,
                        struct fc_buf *wire, struct fc_error *err)
{
    const struct otlp_config *cfg = g->r->cfg;
    grpc_slice_buffer *sb;
    size_t trailing = 0;
    int rc = FC_OK;

    if (bb == NULL) {
        return FC_OK; /* an empty message */
    }
    sb = &bb->data.raw.slice_buffer;
    if (bb->data.raw.compression == GRPC_COMPRESS_NONE) {
        for (size_t i = 0; i < sb->count && rc == FC_OK; i++) {
            rc = fc_buf_append(out, GRPC_SLICE_START_PTR(sb->slices[i]),
                               GRPC_SLICE_LENGTH(sb->slices[i]));
        }
        return rc;
    }
    if (bb->data.raw.compression != GRPC_COMPRESS_GZIP) {
        return fc_errorf(err, FC_EPROTO, "message compression %d is not supported (use gzip)",
                         (int)bb->data.raw.compression);
    }
    for (size_t i = 0; i < sb->count && rc == FC_OK; i++) {
        rc = fc_buf_append(wire, GRPC_SLICE_START_PTR(sb->slices[i]),
                           GRPC_SLICE_LENGTH(sb->slices[i]));
    }
    rc = rc ? fc_errorf(err, rc, "out of memory")
            : fc_gunzip_ex(wire->data, wire->len, (size_t)cfg->max_decompressed_size, out,
                           &trailing, err);
    if (rc == FC_ETOOBIG) {
        fc_metric_add(g->refused_too_large, 1);
        fc_errorf(err, FC_ETOOBIG, "message inflates past max_decompressed_size (%lld bytes)",
                  (long long)cfg->max_decompressed_size);
    }
    if (trailing > 0) {
        wire->len = 0; /* not one clean gzip stream: never forwarded as is */
    }
    return rc;
}

/* Starts sending the status (and the response message, when there is one). */
static void send_answer(struct slot *s, grpc_status_code code)
{
    grpc_op ops[4];
    grpc_call_error e;
    void *tag;
    int ok;

    memset(ops, 0, sizeof(ops));
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
    /* An answer usually completes inside grpc_call_start_batch: caught in this
     * thread's cache, its completion is not queued, so no poller is woken for it. */
    grpc_completion_queue_thread_local_cache_init(s->g->cq);
    e = grpc_call_start_batch(s->call, ops, s->response ? 4 : 3, s, NULL);
    if (grpc_completion_queue_thread_local_cache_flush(s->g->cq, &tag, &ok)) {
        t_cached.tag = tag;
        t_cached.ok = ok;
        t_cached.set = true;
    }
    if (e != GRPC_CALL_OK) {
        fc_log_error(s->g->r->self->id, "grpc: cannot answer a call");
        finish(s);
        if (!atomic_load(&s->g->stopping)) {
            request_call(s);
        }
    }
}

/* A refusal's status; retryable ones carry a google.rpc.Status with RetryInfo. */
static void send_error(struct slot *s, int rc, const char *msg, int64_t retry_after_ns)
{
    grpc_status_code code = (grpc_status_code)otlp_grpc_code(rc);

    s->response = NULL;
    s->n_trailing = 0;
    s->details = grpc_slice_from_copied_string(msg);
    if (fc_err_retryable(rc)) {
        struct fc_buf out;
        fc_buf_init(&out, 0);
        fc_otlp_status((int)code, msg, retry_after_ns, false, &out);
        s->trailing.key = grpc_slice_from_static_string("grpc-status-details-bin");
        s->trailing.value = grpc_slice_from_copied_buffer((const char *)out.data, out.len);
        s->n_trailing = 1;
        fc_buf_release(&out);
    }
    send_answer(s, code);
}

/* A metadata value as a NUL-terminated copy (free it), or NULL; the last one wins. */
static char *metadata_value(const grpc_metadata_array *md, const char *key)
{
    size_t klen = strlen(key);
    char *out = NULL;

    for (size_t i = 0; i < md->count; i++) {
        const grpc_slice k = md->metadata[i].key;
        if (GRPC_SLICE_LENGTH(k) == klen &&
            strncmp((const char *)GRPC_SLICE_START_PTR(k), key, klen) == 0) {
            size_t n = GRPC_SLICE_LENGTH(md->metadata[i].value);
            if (out != NULL) {
                explicit_bzero(out, strlen(out));
                free(out);
            }
            out = fc_xstrndup((const char *)GRPC_SLICE_START_PTR(md->metadata[i].value), n);
        }
    }
    return out;
}

/* The peer's IP from gRPC's "ipv4:1.2.3.4:port" / "ipv6:[::1]:port". */
static void peer_address(grpc_call *call, char *out, size_t size)
{
    char *peer = grpc_call_get_peer(call);
    const char *p = peer != NULL ? strchr(peer, ':') : NULL;
    const char *end;

    snprintf(out, size, "?");
    if (p != NULL) {
        p++;
        if (*p == '[') {
            p++;
            end = strchr(p, ']');
        } else {
            end = strrchr(p, ':');
        }
        if (end == NULL) {
            end = p + strlen(p);
        }
        snprintf(out, size, "%.*s", (int)(end - p), p);
    }
    gpr_free(peer);
}

/*
 * The authorization metadata against protocols.grpc.auth: 0 with *tenant the
 * credential's bound tenant (or NULL: the x-scope-orgid claim decides, as
 * without auth), or -1 when refused (answered, counted per reason).
 */
static int authorize(struct slot *s, const char **tenant)
{
    struct otlp_grpc *g = s->g;
    char *authz = metadata_value(&s->md, "authorization");
    char *org = metadata_value(&s->md, "x-scope-orgid");
    struct fc_auth_decision d;
    char client[64];
    grpc_status_code code;

    *tenant = NULL;
    peer_address(s->call, client, sizeof(client));
    fc_auth_check(g->r->grpc_auth, authz, client, FC_AUTH_WRITE, org, fc_now_mono_ns(), &d);
    if (authz != NULL) {
        explicit_bzero(authz, strlen(authz));
        free(authz);
    }
    free(org);
    if (d.outcome == FC_AUTH_OK) {
        *tenant = d.bound ? d.tenant : NULL; /* owned by the authenticator */
        return 0;
    }
    fc_metric_add(g->auth_refused[d.outcome], 1); /* as on HTTP: not the receiver's refusal */
    fc_log_debug(g->r->self->id, "grpc: refused a call (%s): %s", fc_auth_outcome_name(d.outcome),
                 d.message);
    code = d.outcome == FC_AUTH_THROTTLED ? GRPC_STATUS_RESOURCE_EXHAUSTED
           : d.outcome == FC_AUTH_MISSING || d.outcome == FC_AUTH_BAD
               ? GRPC_STATUS_UNAUTHENTICATED
               : GRPC_STATUS_PERMISSION_DENIED;
    s->response = NULL;
    s->n_trailing = 0;
    s->details = grpc_slice_from_copied_string(d.message);
    send_answer(s, code);
    return -1;
}

/* Decodes, runs the pipelines, and starts sending the answer. */
static void handle_export(struct slot *s)
{
    struct otlp_receiver *r = s->g->r;
    struct fc_otlp_result res;
    struct fc_error err = {0};
    struct fc_buf body, gz;
    struct otlp_request rq = {0};
    char tenant_buf[160];
    int rc;

    if (r->grpc_auth != NULL && authorize(s, &rq.tenant) != 0) {
        return;
    }
    fc_buf_init(&body, 0);
    fc_buf_init(&gz, 0);
    rc = rq.tenant != NULL ? FC_OK
                           : tenant_of(&s->md, tenant_buf, sizeof(tenant_buf), &rq.tenant, &err);
    rc = rc ? rc : read_message(s->g, s->payload, &body, &gz, &err);
    if (rc != FC_OK) {
        otlp_count_refused(r);
    } else {
        rq.body = body.data ? body.data : (const uint8_t *)"";
        rq.len = body.len;
        rq.gzip = gz.len > 0 ? gz.data : NULL;
        rq.gzip_len = gz.len;
        rc = otlp_export(r, &rq, &res, &err);
    }
    fc_buf_release(&body);
    fc_buf_release(&gz);
    if (rc != FC_OK) {
        send_error(s, rc, err.msg, r->cfg->retry_after);
        return;
    }
    {
        struct fc_buf out;
        grpc_slice msg;
        fc_buf_init(&out, 0);
        fc_otlp_response(res.rejected_profiles, res.message, false, &out);
        msg = grpc_slice_from_copied_buffer((const char *)out.data, out.len);
        s->response = grpc_raw_byte_buffer_create(&msg, 1);
        grpc_slice_unref(msg);
        fc_buf_release(&out);
    }
    s->n_trailing = 0;
    s->details = grpc_empty_slice();
    send_answer(s, GRPC_STATUS_OK);
}

/* On a worker: the call, then its answer's completion when it came at once. */
static void export_work(struct fc_work *w)
{
    struct slot *s = (struct slot *)w;
    struct otlp_grpc *g = s->g;

    handle_export(s);
    run_cached(g);
}

static void *poll_thread(void *arg);

/*
 * Takes this thread off polling while it handles a call, when another thread
 * is left free to poll (started now if none is): calls keep being received,
 * and refused beyond max_in_flight, however long the admitted ones take.
 * False when no thread could be started: the call goes to the workpool.
 */
static bool reserve_poller(struct otlp_grpc *g)
{
    bool ok = false;

    if (atomic_fetch_sub(&g->free_pollers, 1) > 1) {
        return true;
    }
    pthread_mutex_lock(&g->lock);
    if (!g->no_more_threads && g->n_threads < g->max_threads) {
        atomic_fetch_add(&g->free_pollers, 1); /* before it runs: it may take a call at once */
        ok = pthread_create(&g->threads[g->n_threads], NULL, poll_thread, g) == 0;
        if (ok) {
            g->n_threads++;
        } else {
            atomic_fetch_sub(&g->free_pollers, 1);
        }
    }
    pthread_mutex_unlock(&g->lock);
    if (!ok) {
        atomic_fetch_add(&g->free_pollers, 1);
    }
    return ok;
}

/* On a polling thread: a call arrived on slot s. */
static void on_call(struct slot *s)
{
    struct otlp_grpc *g = s->g;
    char msg[160];

    if (s->unknown_method) {
        s->response = NULL;
        s->n_trailing = 0;
        s->details = grpc_slice_from_static_string("flamecol serves only " EXPORT_METHOD);
        send_answer(s, GRPC_STATUS_UNIMPLEMENTED);
        return;
    }
    if (!fc_workpool_admit(g->pool)) {
        snprintf(msg, sizeof(msg),
                 "%lld calls are being handled (protocols.grpc.max_in_flight); retry later",
                 (long long)g->r->cfg->protocols.grpc.max_in_flight);
        otlp_count_refused(g->r);
        send_error(s, FC_EAGAIN, msg, FC_OVERLOAD_RETRY_AFTER_NS);
        return;
    }
    s->admitted = true;
    s->state = SLOT_HANDLING;
    if (reserve_poller(g)) {
        handle_export(s); /* its answer's completion, if cached, runs after (run_cached) */
        atomic_fetch_add(&g->free_pollers, 1);
        if (atomic_load(&g->stopping)) {
            pthread_mutex_lock(&g->lock); /* otlp_grpc_stop may wait for this call */
            pthread_cond_broadcast(&g->cond);
            pthread_mutex_unlock(&g->lock);
        }
        return;
    }
    s->work.fn = export_work;
    fc_workpool_run(g->pool, &s->work);
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
    if (s->admitted) {
        s->admitted = false;
        fc_workpool_release(s->g->pool);
    }
    s->state = SLOT_IDLE;
}

/* One completion from the queue (or from this thread's cache). */
static void on_event(struct otlp_grpc *g, void *tag, int ok)
{
    struct slot *s = tag;

    if (tag == &g->shutdown_tag) {
        pthread_mutex_lock(&g->lock);
        g->shutdown_done = true;
        pthread_cond_broadcast(&g->cond);
        pthread_mutex_unlock(&g->lock);
        return;
    }
    if (s->state == SLOT_WAITING) {
        if (!ok) {
            /* The server is shutting down: this slot never got a call. */
            grpc_metadata_array_destroy(&s->md);
            if (s->unknown_method) {
                grpc_call_details_destroy(&s->call_details);
            }
            s->state = SLOT_IDLE;
            return;
        }
        on_call(s);
    } else if (s->state == SLOT_ANSWERING) {
        finish(s);
        if (!atomic_load(&g->stopping)) {
            request_call(s);
        }
    }
}

/* Runs the completions a handler left in t_cached, one after another. */
static void run_cached(struct otlp_grpc *g)
{
    while (t_cached.set) {
        t_cached.set = false;
        on_event(g, t_cached.tag, t_cached.ok);
    }
}

static void *poll_thread(void *arg)
{
    struct otlp_grpc *g = arg;

    for (;;) {
        grpc_event ev = grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            return NULL;
        }
        if (ev.type == GRPC_OP_COMPLETE) {
            on_event(g, ev.tag, ev.success);
            run_cached(g);
        }
    }
}

int otlp_grpc_start(struct otlp_receiver *r, struct fc_error *err)
{
    struct otlp_grpc *g = fc_xcalloc(1, sizeof(*g));
    grpc_arg args[5];
    grpc_channel_args channel_args = {5, args};
    grpc_server_credentials *creds;
    struct fc_error probe_err = {0};
    char *addr;
    int port, probe;

    /* gRPC core would report only "cannot bind": ask the OS first, for the reason. */
    probe = fc_listen_socket(r->cfg->protocols.grpc.endpoint, &probe_err);
    if (probe < 0) {
        free(g);
        return fc_errorf(err, probe_err.code, "protocols.grpc: %s", probe_err.msg);
    }
    close(probe);
    fc_tls_warn_plaintext(r->self->id, r->cfg->protocols.grpc.endpoint,
                          fc_tls_server_on(&r->cfg->protocols.grpc.tls), r->grpc_auth != NULL);
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
    /* Never share the port with another process (as the HTTP listeners). */
    args[2].type = GRPC_ARG_INTEGER;
    args[2].key = (char *)GRPC_ARG_ALLOW_REUSEPORT;
    args[2].value.integer = 0;
    /* Decompression is ours, bounded by max_decompressed_size (read_message). */
    args[3].type = GRPC_ARG_INTEGER;
    args[3].key = (char *)GRPC_ARG_ENABLE_PER_MESSAGE_DECOMPRESSION;
    args[3].value.integer = 0;
    args[4].type = GRPC_ARG_INTEGER;
    args[4].key = (char *)GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET;
    args[4].value.integer = (1 << GRPC_COMPRESS_NONE) | (1 << GRPC_COMPRESS_GZIP);
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
    creds = server_credentials(g, &r->cfg->protocols.grpc.tls, err);
    port = creds != NULL ? grpc_server_add_http2_port(g->server, addr, creds) : 0;
    if (creds != NULL) {
        grpc_server_credentials_release(creds);
    }
    if (port == 0) {
        if (creds != NULL) {
            fc_errorf(err, FC_EIO,
                      "protocols.grpc: cannot listen on %s (address in use or not "
                      "available on this host%s)",
                      addr, g->tls != NULL ? ", or tls certificates gRPC refused" : "");
        } else {
            fc_error_wrap(err, "protocols.grpc");
        }
        free(addr);
        grpc_server_destroy(g->server);
        grpc_completion_queue_shutdown(g->cq);
        while (grpc_completion_queue_next(g->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(g->cq);
        pthread_mutex_destroy(&g->lock);
        pthread_cond_destroy(&g->cond);
        fc_tls_server_free(g->tls);
        free(g);
        grpc_shutdown();
        return err->code;
    }
    grpc_server_start(g->server);
    g->pool = fc_workpool_new("grpc", r->cfg->protocols.grpc.endpoint,
                              (unsigned)r->cfg->protocols.grpc.max_in_flight);
    g->refused_too_large =
        fc_server_refused_counter("grpc", r->cfg->protocols.grpc.endpoint, "too_large");
    if (r->grpc_auth != NULL) {
        fc_auth_refusal_counters(r->cfg->protocols.grpc.endpoint, g->auth_refused);
    }
    g->n_export_slots = (size_t)r->cfg->protocols.grpc.max_in_flight + N_REFUSAL_SLOTS;
    g->n_slots = g->n_export_slots + N_UNKNOWN_SLOTS;
    g->slots = fc_xcalloc(g->n_slots, sizeof(*g->slots));
    for (size_t i = 0; i < g->n_slots; i++) {
        g->slots[i].g = g;
        g->slots[i].unknown_method = i >= g->n_export_slots;
        g->slots[i].details = grpc_empty_slice();
        request_call(&g->slots[i]);
    }
    /* One polling thread per admitted call at most, beside those always polling. */
    g->max_threads =
        (size_t)(r->cfg->protocols.grpc.threads + r->cfg->protocols.grpc.max_in_flight);
    g->threads = fc_xcalloc(g->max_threads, sizeof(*g->threads));
    pthread_mutex_lock(&g->lock);
    for (int64_t i = 0; i < r->cfg->protocols.grpc.threads; i++) {
        if (pthread_create(&g->threads[g->n_threads], NULL, poll_thread, g) == 0) {
            g->n_threads++;
            atomic_fetch_add(&g->free_pollers, 1);
        }
    }
    pthread_mutex_unlock(&g->lock);
    fc_log_info(r->self->id, "grpc listening on %s%s", addr,
                g->tls == NULL ? ""
                : r->cfg->protocols.grpc.tls.client_ca_file[0] != '\0'
                    ? " (TLS with client certificates)"
                    : " (TLS)");
    free(addr);
    r->grpc = g;
    return FC_OK;
}

void otlp_grpc_stop(struct otlp_receiver *r)
{
    struct otlp_grpc *g = r != NULL ? r->grpc : NULL;
    struct timespec until;
    bool cancelled = false;

    if (g == NULL) {
        return;
    }
    r->grpc = NULL;
    atomic_store(&g->stopping, 1);
    /*
     * Stop accepting; calls in flight finish (their pipelines run) for up to
     * 10 s. gRPC's shutdown also waits for every client connection to go,
     * which an idle client takes its time over (5 s with grpc-python): once
     * none of our calls is in flight, cancelling disconnects them at once.
     */
    grpc_server_shutdown_and_notify(g->server, g->cq, &g->shutdown_tag);
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 10;
    pthread_mutex_lock(&g->lock);
    while (!g->shutdown_done) {
        struct timespec step;
        clock_gettime(CLOCK_REALTIME, &step);
        if (step.tv_sec > until.tv_sec ||
            (step.tv_sec == until.tv_sec && step.tv_nsec >= until.tv_nsec)) {
            break;
        }
        if (!cancelled && fc_workpool_in_flight(g->pool) == 0) {
            pthread_mutex_unlock(&g->lock);
            grpc_server_cancel_all_calls(g->server);
            pthread_mutex_lock(&g->lock);
            cancelled = true;
        }
        step.tv_nsec += 20 * 1000 * 1000; /* in-flight calls are not signalled: look again soon */
        if (step.tv_nsec >= 1000000000L) {
            step.tv_sec++;
            step.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&g->cond, &g->lock, &step);
    }
    pthread_mutex_unlock(&g->lock);
    if (!g->shutdown_done) {
        grpc_server_cancel_all_calls(g->server);
    }
    /* Calls still being handled (on workers or polling threads) post their answers to
     * the queue: they finish before it shuts down. */
    fc_workpool_stop(g->pool);
    pthread_mutex_lock(&g->lock);
    g->no_more_threads = true;
    while (atomic_load(&g->free_pollers) < (long)g->n_threads) {
        pthread_cond_wait(&g->cond, &g->lock);
    }
    pthread_mutex_unlock(&g->lock);
    grpc_completion_queue_shutdown(g->cq);
    for (size_t i = 0; i < g->n_threads; i++) {
        pthread_join(g->threads[i], NULL);
    }
    grpc_server_destroy(g->server);
    grpc_completion_queue_destroy(g->cq);
    fc_workpool_free(g->pool);  /* the polling threads' last finish() released their slots */
    fc_tls_server_free(g->tls); /* no connection can start any more: the fetcher is done */
    pthread_mutex_destroy(&g->lock);
    pthread_cond_destroy(&g->cond);
    free(g->slots);
    free(g->threads);
    free(g);
    grpc_shutdown();
}
