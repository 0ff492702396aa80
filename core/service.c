#include "core/service.h"
#include "core/service_config.h"

#include "config/schema.h"
#include "core/auth.h"
#include "core/extensions.h"
#include "core/http_server.h"
#include "core/log.h"
#include "core/mem.h"
#include "core/metrics.h"
#include "core/registry.h"
#include "core/timeutil.h"
#include "core/tls_server.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pipeline {
    const char *name; /* "profiles", "profiles/apps" */
    struct fc_processor **procs;
    size_t n_procs;
    struct fc_exporter **exps;
    size_t n_exps;
};

struct fc_pipeline_fanout {
    struct pipeline **pipes;
    size_t n;
};

struct fc_service {
    struct fc_arena *arena; /* config structs and ids */
    struct service_config cfg;
    struct fc_receiver **receivers;
    size_t n_receivers;
    struct fc_processor **processors;
    size_t n_processors;
    struct fc_exporter **exporters;
    size_t n_exporters;
    struct pipeline *pipelines;
    size_t n_pipelines;
    struct fc_http_registry *http;
    struct fc_extensions *extensions;
    struct fc_host host;
    _Atomic int ready;
    /* How far start got, so shutdown undoes exactly that. */
    size_t started_exporters;
    size_t started_processors;
    size_t started_receivers;
    bool stopped;
};

/* ---- counters ----------------------------------------------------------------------------- */

static void receiver_metrics(struct fc_receiver *r)
{
    char labels[256];

    snprintf(labels, sizeof(labels), "receiver=\"%s\"", r->id);
    r->metrics.ok_samples = fc_metrics_counter("flamecol_receiver_accepted_profile_samples_total",
                                               labels, "Samples accepted by every pipeline.");
    r->metrics.failed_samples =
        fc_metrics_counter("flamecol_receiver_refused_profile_samples_total", labels,
                           "Samples refused (bad input, limits or back-pressure).");
    r->metrics.ok_batches = fc_metrics_counter("flamecol_receiver_accepted_requests_total", labels,
                                               "Requests accepted.");
    r->metrics.failed_batches =
        fc_metrics_counter("flamecol_receiver_refused_requests_total", labels, "Requests refused.");
}

static void exporter_metrics(struct fc_exporter *e)
{
    char labels[256];

    snprintf(labels, sizeof(labels), "exporter=\"%s\"", e->id);
    if (e->type->counts_sent) {
        return; /* its sending machinery registers what it counts (exporters/helper/sender.h) */
    }
    e->metrics.ok_samples = fc_metrics_counter("flamecol_exporter_sent_profile_samples_total",
                                               labels, "Samples an exporter accepted.");
    e->metrics.failed_samples =
        fc_metrics_counter("flamecol_exporter_send_failed_profile_samples_total", labels,
                           "Samples an exporter refused or failed to send.");
    e->metrics.ok_batches = fc_metrics_counter("flamecol_exporter_sent_requests_total", labels,
                                               "Batches an exporter accepted.");
    e->metrics.failed_batches = fc_metrics_counter("flamecol_exporter_send_failed_requests_total",
                                                   labels, "Batches an exporter refused.");
    e->queue_size =
        fc_metrics_gauge("flamecol_exporter_queue_size", labels, "Batches waiting in the queue.");
}

static void processor_metrics(struct fc_processor *p)
{
    char labels[256];

    snprintf(labels, sizeof(labels), "processor=\"%s\",pipeline=\"%s\"", p->id, p->pipeline);
    p->dropped_samples = fc_metrics_counter("flamecol_processor_dropped_profile_samples_total",
                                            labels, "Samples a processor dropped on purpose.");
}

/* ---- the data path ------------------------------------------------------------------------ */

/* Runs p's processors from index `from`, then its exporters, on b (takes its reference). */
static int run_from(struct pipeline *p, size_t from, struct fc_batch *b, struct fc_error *err)
{
    int rc = FC_OK;

    for (size_t i = from; i < p->n_procs && b != NULL; i++) {
        struct fc_processor *proc = p->procs[i];
        uint64_t before = fc_batch_sample_count(b);
        if (!proc->type->preserves_batch) {
            fc_batch_drop_wire(b); /* b is this chain's own (cloned when shared) */
        }
        rc = proc->type->process(proc, &b, err);
        if (rc != FC_OK) {
            fc_error_wrap(err, "%s", proc->id);
            fc_batch_unref(b);
            return rc;
        }
        if (!proc->type->counts_dropped) {
            fc_metric_add(proc->dropped_samples,
                          (int64_t)(before - (b != NULL ? fc_batch_sample_count(b) : 0)));
        }
    }
    if (b == NULL) {
        return FC_OK; /* dropped on purpose by a processor (counted there), or sent by it */
    }
    {
        int64_t samples = (int64_t)fc_batch_sample_count(b);
        for (size_t i = 0; i < p->n_exps; i++) {
            struct fc_exporter *e = p->exps[i];
            struct fc_error one = {0};
            int erc = e->type->export(e, b, &one);
            if (e->type->counts_sent) {
                /* counted by the exporter when its peer answers */
            } else if (erc == FC_OK) {
                fc_metric_add(e->metrics.ok_samples, samples);
                fc_metric_add(e->metrics.ok_batches, 1);
            } else {
                fc_metric_add(e->metrics.failed_samples, samples);
                fc_metric_add(e->metrics.failed_batches, 1);
            }
            if (erc != FC_OK) {
                if (fc_err_worse(rc, erc) != rc) {
                    rc = erc;
                    fc_errorf(err, erc, "%s: %s", e->id, one.msg);
                }
            }
        }
    }
    fc_batch_unref(b);
    return rc;
}

static int run_pipeline(struct pipeline *p, struct fc_batch *batch, bool shared,
                        struct fc_error *err)
{
    struct fc_batch *b = NULL;
    int rc;

    if (p->n_procs > 0 && shared) {
        /* Another pipeline sees this batch too: processors get their own copy. */
        rc = fc_batch_clone(batch, &b, err);
        if (rc != FC_OK) {
            return rc;
        }
    } else {
        b = fc_batch_ref(batch);
    }
    return run_from(p, 0, b, err);
}

int fc_processor_next(struct fc_processor *self, struct fc_batch *batch, struct fc_error *err)
{
    return run_from(self->pipe, self->index + 1, batch, err);
}

int fc_receiver_consume(struct fc_receiver *r, struct fc_batch *batch, struct fc_error *err)
{
    struct fc_pipeline_fanout *f = r->next;
    int64_t samples = (int64_t)fc_batch_sample_count(batch);
    int rc = FC_OK;

    for (size_t i = 0; f != NULL && i < f->n; i++) {
        struct fc_error one = {0};
        int prc = run_pipeline(f->pipes[i], batch, f->n > 1, &one);
        if (prc != FC_OK && fc_err_worse(rc, prc) != rc) {
            rc = prc;
            fc_errorf(err, prc, "%s", one.msg);
        }
    }
    if (rc == FC_OK) {
        fc_metric_add(r->metrics.ok_samples, samples);
        fc_metric_add(r->metrics.ok_batches, 1);
    } else {
        fc_metric_add(r->metrics.failed_samples, samples);
        fc_metric_add(r->metrics.failed_batches, 1);
    }
    return rc;
}

/* ---- building ----------------------------------------------------------------------------- */

struct build {
    struct fc_service *svc;
    struct fc_diag *diag;
    const struct fc_node *sections[3]; /* receivers, processors, exporters */
    bool *used[3];                     /* per definition of each section: in some pipeline */
};

/* "type" or "type/name"; the type must be a word. */
static int split_id(const char *id, char *type, size_t size)
{
    const char *slash = strchr(id, '/');
    size_t n = slash ? (size_t)(slash - id) : strlen(id);

    if (n == 0 || n >= size || (slash != NULL && slash[1] == '\0')) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (!(isalnum((unsigned char)id[i]) || id[i] == '_')) {
            return -1;
        }
    }
    memcpy(type, id, n);
    type[n] = '\0';
    return 0;
}

static void list_types(enum fc_kind kind, char *out, size_t size)
{
    size_t n_all;
    const struct fc_registry_entry *all = fc_registry_all(&n_all);
    size_t n = 0;

    out[0] = '\0';
    for (size_t i = 0; i < n_all; i++) {
        if (all[i].kind == kind && n + 1 < size) {
            int w = snprintf(out + n, size - n, "%s%s", n ? ", " : "", all[i].info->name);
            n += w > 0 ? (size_t)w : 0;
        }
    }
    if (n == 0) {
        snprintf(out, size, "none yet");
    }
}

/* Checks every component definition in one section; binds none yet. */
static void check_section(struct build *b, enum fc_kind kind)
{
    const struct fc_node *sec = b->sections[kind];

    if (sec == NULL || sec->kind == FC_NODE_NULL) {
        return;
    }
    if (sec->kind != FC_NODE_MAP) {
        fc_diag_error(b->diag, sec, "%s: expected a map of component ids, got a %s",
                      fc_kind_section(kind), fc_node_kind_name(sec->kind));
        return;
    }
    for (size_t i = 0; i < sec->n_pairs; i++) {
        const struct fc_node *k = sec->pairs[i].key;
        char type[128];
        char known[512];
        if (split_id(k->str, type, sizeof(type)) != 0) {
            fc_diag_error(b->diag, k, "%s: invalid component id '%s' (expected type[/name])",
                          fc_kind_section(kind), k->str);
            continue;
        }
        if (fc_registry_find(kind, type) == NULL) {
            list_types(kind, known, sizeof(known));
            fc_diag_error(b->diag, k, "%s: unknown %s type '%s' (known: %s)", fc_kind_section(kind),
                          fc_kind_name(kind), type, known);
        }
    }
}

static const struct fc_node_pair *find_def(struct build *b, enum fc_kind kind, const char *id)
{
    const struct fc_node *sec = b->sections[kind];

    for (size_t i = 0; sec != NULL && sec->kind == FC_NODE_MAP && i < sec->n_pairs; i++) {
        if (strcmp(sec->pairs[i].key->str, id) == 0) {
            return &sec->pairs[i];
        }
    }
    return NULL;
}

/* Binds an instance's config; returns the config struct or NULL. */
static void *bind_config(struct build *b, enum fc_kind kind, const struct fc_node_pair *def,
                         const struct fc_type_info *info)
{
    void *cfg = fc_arena_calloc(b->svc->arena, 1, info->config_size ? info->config_size : 1);
    char path[256];

    snprintf(path, sizeof(path), "%s.%s", fc_kind_section(kind), def->key->str);
    if (fc_schema_bind(b->svc->arena, info->fields, def->value, cfg, path, b->diag) != 0) {
        return NULL;
    }
    return cfg;
}

static void report_create(struct build *b, enum fc_kind kind, const struct fc_node_pair *def,
                          const struct fc_error *err)
{
    fc_diag_error(b->diag, def->value && def->value->kind != FC_NODE_NULL ? def->value : def->key,
                  "%s.%s: %s", fc_kind_section(kind), def->key->str, err->msg);
}

static struct fc_receiver *get_receiver(struct build *b, const struct fc_node_pair *def)
{
    struct fc_service *svc = b->svc;
    const char *id = def->key->str;
    char type[128];
    const struct fc_registry_entry *e;
    struct fc_receiver *r;
    struct fc_error err = {0};

    for (size_t i = 0; i < svc->n_receivers; i++) {
        if (strcmp(svc->receivers[i]->id, id) == 0) {
            return svc->receivers[i];
        }
    }
    if (split_id(id, type, sizeof(type)) != 0 ||
        (e = fc_registry_find(FC_KIND_RECEIVER, type)) == NULL) {
        return NULL;
    }
    r = fc_xcalloc(1, sizeof(*r));
    r->type = fc_receiver_type_of(e);
    r->id = id;
    r->next = fc_xcalloc(1, sizeof(*r->next));
    svc->receivers = fc_xrealloc(svc->receivers, (svc->n_receivers + 1) * sizeof(r));
    svc->receivers[svc->n_receivers++] = r;
    r->config = bind_config(b, FC_KIND_RECEIVER, def, e->info);
    if (r->config != NULL && r->type->create(r, &err) != FC_OK) {
        report_create(b, FC_KIND_RECEIVER, def, &err);
    }
    receiver_metrics(r);
    return r;
}

static struct fc_exporter *get_exporter(struct build *b, const struct fc_node_pair *def)
{
    struct fc_service *svc = b->svc;
    const char *id = def->key->str;
    char type[128];
    const struct fc_registry_entry *e;
    struct fc_exporter *x;
    struct fc_error err = {0};

    for (size_t i = 0; i < svc->n_exporters; i++) {
        if (strcmp(svc->exporters[i]->id, id) == 0) {
            return svc->exporters[i];
        }
    }
    if (split_id(id, type, sizeof(type)) != 0 ||
        (e = fc_registry_find(FC_KIND_EXPORTER, type)) == NULL) {
        return NULL;
    }
    x = fc_xcalloc(1, sizeof(*x));
    x->type = fc_exporter_type_of(e);
    x->id = id;
    svc->exporters = fc_xrealloc(svc->exporters, (svc->n_exporters + 1) * sizeof(x));
    svc->exporters[svc->n_exporters++] = x;
    x->config = bind_config(b, FC_KIND_EXPORTER, def, e->info);
    if (x->config != NULL && x->type->create(x, &err) != FC_OK) {
        report_create(b, FC_KIND_EXPORTER, def, &err);
    }
    exporter_metrics(x);
    return x;
}

static struct fc_processor *new_processor(struct build *b, const struct fc_node_pair *def,
                                          const char *pipeline)
{
    struct fc_service *svc = b->svc;
    char type[128];
    const struct fc_registry_entry *e;
    struct fc_processor *p;
    struct fc_error err = {0};

    if (split_id(def->key->str, type, sizeof(type)) != 0 ||
        (e = fc_registry_find(FC_KIND_PROCESSOR, type)) == NULL) {
        return NULL;
    }
    p = fc_xcalloc(1, sizeof(*p));
    p->type = fc_processor_type_of(e);
    p->id = def->key->str;
    p->pipeline = pipeline;
    svc->processors = fc_xrealloc(svc->processors, (svc->n_processors + 1) * sizeof(p));
    svc->processors[svc->n_processors++] = p;
    p->config = bind_config(b, FC_KIND_PROCESSOR, def, e->info);
    if (p->config != NULL && p->type->create(p, &err) != FC_OK) {
        report_create(b, FC_KIND_PROCESSOR, def, &err);
    }
    processor_metrics(p);
    return p;
}

/* Reads a pipeline's list of ids; each must be defined in its section. */
static void pipeline_list(struct build *b, struct pipeline *p, const struct fc_node *pnode,
                          enum fc_kind kind)
{
    const char *key = fc_kind_section(kind);
    const struct fc_node *list = fc_node_get(pnode, key);

    if (list == NULL || list->kind == FC_NODE_NULL ||
        (list->kind == FC_NODE_SEQ && list->n_items == 0)) {
        if (kind != FC_KIND_PROCESSOR) {
            fc_diag_error(b->diag, list ? list : pnode,
                          "service.pipelines.%s: a pipeline needs at least one %s", p->name,
                          fc_kind_name(kind));
        }
        return;
    }
    if (list->kind != FC_NODE_SEQ) {
        fc_diag_error(b->diag, list, "service.pipelines.%s.%s: expected a list of ids, got a %s",
                      p->name, key, fc_node_kind_name(list->kind));
        return;
    }
    for (size_t i = 0; i < list->n_items; i++) {
        const struct fc_node *item = list->items[i];
        const struct fc_node_pair *def;
        if (item->kind != FC_NODE_SCALAR) {
            fc_diag_error(b->diag, item, "service.pipelines.%s.%s[%zu]: expected an id", p->name,
                          key, i);
            continue;
        }
        for (size_t j = 0; j < i; j++) {
            if (list->items[j]->kind == FC_NODE_SCALAR &&
                strcmp(list->items[j]->str, item->str) == 0) {
                fc_diag_error(b->diag, item,
                              "service.pipelines.%s.%s: '%s' is listed twice (first at line %u)",
                              p->name, key, item->str, list->items[j]->line);
                goto next;
            }
        }
        def = find_def(b, kind, item->str);
        if (def == NULL) {
            fc_diag_error(b->diag, item,
                          "service.pipelines.%s: %s '%s' is not defined in %s:", p->name,
                          fc_kind_name(kind), item->str, key);
            continue;
        }
        b->used[kind][def - b->sections[kind]->pairs] = true;
        if (kind == FC_KIND_RECEIVER) {
            struct fc_receiver *r = get_receiver(b, def);
            if (r != NULL) {
                struct fc_pipeline_fanout *f = r->next;
                f->pipes = fc_xrealloc(f->pipes, (f->n + 1) * sizeof(*f->pipes));
                f->pipes[f->n++] = p;
            }
        } else if (kind == FC_KIND_PROCESSOR) {
            struct fc_processor *proc = new_processor(b, def, p->name);
            if (proc != NULL && i > 0 && strcmp(proc->type->info.name, "memory_limiter") == 0) {
                /* As the Collector advises: it can only refuse what earlier processors let by. */
                fc_diag_warn(b->diag, item,
                             "service.pipelines.%s.processors: %s should be the first processor "
                             "of the pipeline",
                             p->name, item->str);
            }
            if (proc != NULL) {
                proc->pipe = p;
                proc->index = p->n_procs;
                p->procs = fc_xrealloc(p->procs, (p->n_procs + 1) * sizeof(proc));
                p->procs[p->n_procs++] = proc;
            }
        } else {
            struct fc_exporter *x = get_exporter(b, def);
            if (x != NULL) {
                p->exps = fc_xrealloc(p->exps, (p->n_exps + 1) * sizeof(x));
                p->exps[p->n_exps++] = x;
            }
        }
    next:;
    }
}

static void check_pipeline_keys(struct build *b, const struct fc_node *pnode, const char *name)
{
    for (size_t i = 0; i < pnode->n_pairs; i++) {
        const char *k = pnode->pairs[i].key->str;
        if (strcmp(k, "receivers") != 0 && strcmp(k, "processors") != 0 &&
            strcmp(k, "exporters") != 0) {
            fc_diag_error(b->diag, pnode->pairs[i].key,
                          "service.pipelines.%s: unknown key '%s' (valid keys: receivers, "
                          "processors, exporters)",
                          name, k);
        }
    }
}

static void build_pipelines(struct build *b, const struct fc_node *pipes)
{
    struct fc_service *svc = b->svc;

    if (pipes == NULL || pipes->kind == FC_NODE_NULL ||
        (pipes->kind == FC_NODE_MAP && pipes->n_pairs == 0)) {
        fc_diag_error(b->diag, pipes,
                      "service.pipelines: no pipeline defined (add "
                      "service.pipelines.profiles)");
    } else if (pipes->kind != FC_NODE_MAP) {
        fc_diag_error(b->diag, pipes, "service.pipelines: expected a map, got a %s",
                      fc_node_kind_name(pipes->kind));
    } else {
        svc->pipelines = fc_xcalloc(pipes->n_pairs, sizeof(*svc->pipelines));
        for (size_t i = 0; i < pipes->n_pairs; i++) {
            const struct fc_node *k = pipes->pairs[i].key;
            const struct fc_node *v = pipes->pairs[i].value;
            char signal[128];
            struct pipeline *p;
            if (split_id(k->str, signal, sizeof(signal)) != 0 || strcmp(signal, "profiles") != 0) {
                fc_diag_error(b->diag, k,
                              "service.pipelines: '%s': flamecol runs profiles pipelines only "
                              "(profiles or profiles/<name>)",
                              k->str);
                continue;
            }
            if (v->kind != FC_NODE_MAP) {
                fc_diag_error(b->diag, v->kind == FC_NODE_NULL ? k : v,
                              "service.pipelines.%s: expected a map with receivers and exporters",
                              k->str);
                continue;
            }
            p = &svc->pipelines[svc->n_pipelines++];
            p->name = k->str;
            check_pipeline_keys(b, v, p->name);
            pipeline_list(b, p, v, FC_KIND_EXPORTER);
            pipeline_list(b, p, v, FC_KIND_PROCESSOR);
            pipeline_list(b, p, v, FC_KIND_RECEIVER);
        }
    }
}

/*
 * A component no pipeline uses never runs, but its config is checked all the
 * same, as the Collector validates every configured component: bound (unknown
 * keys, types) and created, which makes the checks the schema cannot say,
 * then destroyed at once.
 */
static void check_unused(struct build *b, enum fc_kind kind, const struct fc_node_pair *def)
{
    const struct fc_registry_entry *e;
    struct fc_error err = {0};
    char type[128];
    void *cfg;

    if (split_id(def->key->str, type, sizeof(type)) != 0 ||
        (e = fc_registry_find(kind, type)) == NULL) {
        return; /* check_section said so */
    }
    if ((cfg = bind_config(b, kind, def, e->info)) == NULL) {
        return;
    }
    if (kind == FC_KIND_RECEIVER) {
        struct fc_receiver r = {.type = fc_receiver_type_of(e), .id = def->key->str, .config = cfg};
        if (r.type->create(&r, &err) != FC_OK) {
            report_create(b, kind, def, &err);
        }
        if (r.ctx != NULL && r.type->destroy != NULL) {
            r.type->destroy(&r);
        }
    } else if (kind == FC_KIND_PROCESSOR) {
        struct fc_processor p = {
            .type = fc_processor_type_of(e), .id = def->key->str, .pipeline = "", .config = cfg};
        if (p.type->create(&p, &err) != FC_OK) {
            report_create(b, kind, def, &err);
        }
        if (p.ctx != NULL && p.type->destroy != NULL) {
            p.type->destroy(&p);
        }
    } else {
        struct fc_exporter x = {.type = fc_exporter_type_of(e), .id = def->key->str, .config = cfg};
        if (x.type->create(&x, &err) != FC_OK) {
            report_create(b, kind, def, &err);
        }
        if (x.ctx != NULL && x.type->destroy != NULL) {
            x.type->destroy(&x);
        }
    }
}

/* Every definition no pipeline took (with or without a service at all): warned and checked. */
static void check_unused_all(struct build *b)
{
    for (int k = 0; k < 3; k++) {
        const struct fc_node *sec = b->sections[k];
        for (size_t i = 0; sec != NULL && sec->kind == FC_NODE_MAP && i < sec->n_pairs; i++) {
            if (!b->used[k][i]) {
                fc_diag_warn(b->diag, sec->pairs[i].key,
                             "%s.%s is defined but not used in any pipeline", fc_kind_section(k),
                             sec->pairs[i].key->str);
                check_unused(b, (enum fc_kind)k, &sec->pairs[i]);
            }
        }
    }
}

/* The service map without `pipelines`, which is read separately. */
static struct fc_node *service_settings(struct fc_arena *a, const struct fc_node *service)
{
    struct fc_node *copy;

    if (service == NULL || service->kind != FC_NODE_MAP) {
        return (struct fc_node *)service;
    }
    copy = fc_arena_calloc(a, 1, sizeof(*copy));
    *copy = *service;
    copy->pairs = fc_arena_calloc(a, service->n_pairs + 1, sizeof(*copy->pairs));
    copy->n_pairs = 0;
    for (size_t i = 0; i < service->n_pairs; i++) {
        if (strcmp(service->pairs[i].key->str, "pipelines") != 0) {
            copy->pairs[copy->n_pairs++] = service->pairs[i];
        }
    }
    return copy;
}

struct fc_service *fc_service_build(const struct fc_node *root, struct fc_diag *diag)
{
    static const char *const top_keys[] = {"receivers", "processors", "exporters", "service",
                                           "extensions"};
    struct fc_service *svc = fc_xcalloc(1, sizeof(*svc));
    struct build b = {svc, diag, {NULL, NULL, NULL}, {NULL, NULL, NULL}};
    const struct fc_node *service;
    size_t errors_before = diag->n_errors;

    svc->arena = fc_arena_new(0);
    atomic_init(&svc->ready, 0);
    for (size_t i = 0; i < root->n_pairs; i++) {
        const struct fc_node *k = root->pairs[i].key;
        size_t j;
        for (j = 0; j < 5; j++) {
            if (strcmp(k->str, top_keys[j]) == 0) {
                break;
            }
        }
        if (j == 5) {
            fc_diag_error(diag, k,
                          "unknown top-level key '%s' (valid keys: receivers, processors, "
                          "exporters, extensions, service)%s",
                          k->str,
                          strcmp(k->str, "connectors") == 0 ? "; flamecol has no connectors" : "");
        }
    }
    svc->extensions = fc_extensions_build(root, diag);
    for (int k = 0; k < 3; k++) {
        const struct fc_node *sec = fc_node_get(root, fc_kind_section((enum fc_kind)k));
        b.sections[k] = sec;
        check_section(&b, (enum fc_kind)k);
        for (size_t i = 0; sec != NULL && sec->kind == FC_NODE_MAP && i < sec->n_pairs; i++) {
            char path[256];
            snprintf(path, sizeof(path), "%s.%s", fc_kind_section((enum fc_kind)k),
                     sec->pairs[i].key->str);
            fc_extensions_check_refs(svc->extensions, sec->pairs[i].value, path, diag);
        }
        b.used[k] = fc_xcalloc((sec != NULL && sec->kind == FC_NODE_MAP ? sec->n_pairs : 0) + 1,
                               sizeof(bool));
    }
    service = fc_node_get(root, "service");
    if (service == NULL) {
        fc_diag_error(diag, root, "missing 'service:' with service.pipelines.profiles");
    } else if (service->kind != FC_NODE_MAP) {
        fc_diag_error(diag, service, "service: expected a map, got a %s",
                      fc_node_kind_name(service->kind));
    } else {
        fc_schema_bind(svc->arena, fc_service_fields, service_settings(svc->arena, service),
                       &svc->cfg, "service", diag);
        fc_service_check_settings(&svc->cfg, service, diag);
        fc_extensions_check_refs(svc->extensions, fc_node_get(service, "telemetry"),
                                 "service.telemetry", diag);
        build_pipelines(&b, fc_node_get(service, "pipelines"));
    }
    check_unused_all(&b);
    for (int k = 0; k < 3; k++) {
        free(b.used[k]);
    }
    if (diag->n_errors > errors_before) {
        fc_service_free(svc);
        return NULL;
    }
    return svc;
}

/* ---- telemetry endpoints ------------------------------------------------------------------ */

static void on_metrics(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    (void)ctx;
    (void)req;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
    fc_metrics_render(&resp->body);
}

static void on_healthz(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    (void)ctx;
    (void)req;
    fc_http_response_text(resp, 200, "ok");
}

static void on_ready(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct fc_service *svc = ctx;

    (void)req;
    if (atomic_load(&svc->ready)) {
        fc_http_response_text(resp, 200, "ready");
    } else {
        fc_http_response_text(resp, 503, "not ready");
    }
}

static int register_telemetry(struct fc_service *svc, struct fc_error *err)
{
    struct fc_http_server *srv;
    struct fc_auth *auth = NULL;

    if (svc->cfg.telemetry.metrics.level == 0 || svc->cfg.telemetry.metrics.endpoint[0] == '\0') {
        return FC_OK;
    }
    srv = fc_http_server_get(svc->http, svc->cfg.telemetry.metrics.endpoint, err);
    if (srv == NULL) {
        return fc_error_wrap(err, "service.telemetry.metrics.endpoint");
    }
    if (fc_tls_server_check(&svc->cfg.telemetry.metrics.tls, err) != FC_OK ||
        fc_http_server_tls(srv, &svc->cfg.telemetry.metrics.tls, "service.telemetry.metrics",
                           err) != FC_OK) {
        return fc_error_wrap(err, "service.telemetry.metrics");
    }
    if (fc_extensions_auth(svc->extensions, svc->cfg.telemetry.metrics.auth.authenticator, &auth,
                           err) != FC_OK) {
        return fc_error_wrap(err, "service.telemetry.metrics.auth");
    }
    fc_http_server_auth(srv, "service", auth, FC_AUTH_READ);
    if (fc_http_route(srv, "GET", "/metrics", 0, on_metrics, svc, "service", err) != FC_OK ||
        fc_http_route(srv, "GET", "/healthz", 0, on_healthz, svc, "service", err) != FC_OK ||
        fc_http_route(srv, "GET", "/ready", 0, on_ready, svc, "service", err) != FC_OK) {
        return err->code;
    }
    return FC_OK;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

int fc_service_start(struct fc_service *svc, struct fc_error *err)
{
    struct fc_http_options opts = {
        .threads = (int)svc->cfg.http.threads,
        .read_timeout_ns = svc->cfg.http.read_timeout,
        .header_timeout_ns = svc->cfg.http.header_timeout,
        .body_timeout_ns = svc->cfg.http.body_timeout,
        .max_connections = (unsigned)svc->cfg.http.max_connections,
        .max_connections_per_client = (unsigned)svc->cfg.http.max_connections_per_client,
        .max_in_flight = (unsigned)svc->cfg.http.max_in_flight,
    };

    fc_log_set_level((enum fc_log_level)svc->cfg.telemetry.logs.level);
    svc->http = fc_http_registry_new(&opts);
    svc->host.http = svc->http;
    svc->host.extensions = svc->extensions;
    svc->host.shutdown_grace_ns = svc->cfg.shutdown_timeout;
    if (register_telemetry(svc, err) != FC_OK) {
        return err->code;
    }
    for (; svc->started_exporters < svc->n_exporters; svc->started_exporters++) {
        struct fc_exporter *e = svc->exporters[svc->started_exporters];
        if (e->type->start != NULL && e->type->start(e, &svc->host, err) != FC_OK) {
            return fc_error_wrap(err, "exporters.%s", e->id);
        }
        fc_log_info(e->id, "exporter started");
    }
    for (; svc->started_processors < svc->n_processors; svc->started_processors++) {
        struct fc_processor *p = svc->processors[svc->started_processors];
        if (p->type->start != NULL && p->type->start(p, &svc->host, err) != FC_OK) {
            return fc_error_wrap(err, "processors.%s", p->id);
        }
        fc_log_info(p->id, "processor started in pipeline %s", p->pipeline);
    }
    for (; svc->started_receivers < svc->n_receivers; svc->started_receivers++) {
        struct fc_receiver *r = svc->receivers[svc->started_receivers];
        if (r->type->start != NULL && r->type->start(r, &svc->host, err) != FC_OK) {
            return fc_error_wrap(err, "receivers.%s", r->id);
        }
        fc_log_info(r->id, "receiver started");
    }
    if (fc_http_registry_start(svc->http, err) != FC_OK) {
        return err->code;
    }
    atomic_store(&svc->ready, 1);
    fc_log_info("service", "everything is ready (%zu pipelines)", svc->n_pipelines);
    return FC_OK;
}

void fc_service_shutdown(struct fc_service *svc)
{
    int64_t deadline = fc_now_mono_ns() + svc->cfg.shutdown_timeout;

    if (svc->stopped || svc->http == NULL) {
        return; /* never started, or already stopped */
    }
    svc->stopped = true;
    atomic_store(&svc->ready, 0);
    fc_log_info("service", "shutting down");
    /* Exporters learn the deadline first: requests in flight wait on them. */
    for (size_t i = 0; i < svc->started_exporters; i++) {
        struct fc_exporter *e = svc->exporters[i];
        if (e->type->stopping != NULL) {
            e->type->stopping(e, deadline);
        }
    }
    /* Stop accepting, let in-flight requests finish (they run the pipelines). */
    if (svc->http != NULL) {
        int64_t left = deadline - fc_now_mono_ns();
        fc_http_registry_stop(svc->http, left > 0 ? left : 0);
    }
    while (svc->started_receivers > 0) {
        struct fc_receiver *r = svc->receivers[--svc->started_receivers];
        if (r->type->shutdown != NULL) {
            r->type->shutdown(r);
        }
        fc_log_info(r->id, "receiver stopped");
    }
    while (svc->started_processors > 0) {
        struct fc_processor *p = svc->processors[--svc->started_processors];
        if (p->type->shutdown != NULL) {
            p->type->shutdown(p);
        }
        fc_log_info(p->id, "processor stopped");
    }
    while (svc->started_exporters > 0) {
        struct fc_exporter *e = svc->exporters[--svc->started_exporters];
        if (e->type->shutdown != NULL) {
            e->type->shutdown(e, deadline);
        }
        fc_log_info(e->id, "exporter stopped");
    }
    fc_log_info("service", "shutdown complete");
}

void fc_service_free(struct fc_service *svc)
{
    if (svc == NULL) {
        return;
    }
    fc_service_shutdown(svc);
    for (size_t i = 0; i < svc->n_receivers; i++) {
        struct fc_receiver *r = svc->receivers[i];
        if (r->ctx != NULL && r->type->destroy != NULL) {
            r->type->destroy(r);
        }
        free(r->next->pipes);
        free(r->next);
        free(r);
    }
    for (size_t i = 0; i < svc->n_processors; i++) {
        struct fc_processor *p = svc->processors[i];
        if (p->ctx != NULL && p->type->destroy != NULL) {
            p->type->destroy(p);
        }
        free(p);
    }
    for (size_t i = 0; i < svc->n_exporters; i++) {
        struct fc_exporter *e = svc->exporters[i];
        if (e->ctx != NULL && e->type->destroy != NULL) {
            e->type->destroy(e);
        }
        free(e);
    }
    for (size_t i = 0; i < svc->n_pipelines; i++) {
        free(svc->pipelines[i].procs);
        free(svc->pipelines[i].exps);
    }
    free(svc->pipelines);
    free(svc->receivers);
    free(svc->processors);
    free(svc->exporters);
    fc_http_registry_free(svc->http);
    fc_extensions_free(svc->extensions);
    fc_arena_free(svc->arena);
    free(svc);
}

struct fc_receiver *fc_service_receiver(struct fc_service *svc, const char *id)
{
    for (size_t i = 0; i < svc->n_receivers; i++) {
        if (strcmp(svc->receivers[i]->id, id) == 0) {
            return svc->receivers[i];
        }
    }
    return NULL;
}

struct fc_exporter *fc_service_exporter(struct fc_service *svc, const char *id)
{
    for (size_t i = 0; i < svc->n_exporters; i++) {
        if (strcmp(svc->exporters[i]->id, id) == 0) {
            return svc->exporters[i];
        }
    }
    return NULL;
}

size_t fc_service_processor_count(const struct fc_service *svc)
{
    return svc->n_processors;
}

const char *fc_stability_name(enum fc_stability s)
{
    static const char *const names[] = {"development", "alpha", "beta", "stable"};
    return names[s];
}
