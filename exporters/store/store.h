/* Private to exporters/store: config, state, and the query routes. */
#ifndef FC_EXPORTERS_STORE_H
#define FC_EXPORTERS_STORE_H

#include "core/component.h"
#include "core/http_server.h"
#include "storage/store.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct store_config {
    const char *path;
    int64_t retention;
    int64_t fine_retention;
    int64_t retention_interval;
    int64_t max_size;
    int sync; /* enum fc_store_sync, in the order of the schema's choices */
    struct {
        const char *endpoint;
        int64_t max_query_length;
        int64_t max_nodes;
    } query;
};

/* A batch waiting for the writer; the exporting thread waits on `done`. */
struct pending {
    struct fc_batch *batch;
    struct pending *next;
    bool done;
    int rc;
    struct fc_error err;
};

struct store_exporter {
    struct fc_exporter *self;
    const struct store_config *cfg;
    struct fc_store *store;
    pthread_t writer;
    bool writer_started;
    pthread_mutex_t lock;
    pthread_cond_t wake;   /* the writer: work arrived or stop */
    pthread_cond_t served; /* exporters: a commit finished */
    struct pending *head, *tail;
    bool stopping;
    _Atomic int64_t *nodes_merged;
    _Atomic int64_t *queries;
    _Atomic int64_t *disk_bytes;
    _Atomic int64_t *commits;
    _Atomic int64_t *corrupt;
    _Atomic int64_t *used_bytes;
    _Atomic int64_t *retention_deleted;
    int64_t next_retention_ns; /* CLOCK_MONOTONIC */
};

int store_query_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err);
int store_connect_routes(struct store_exporter *x, struct fc_http_server *srv,
                         struct fc_error *err);
/* The merged tree as an uncompressed pprof (one sample per node with self). */
int store_tree_to_pprof(const struct fc_store_result *r, const char *type_id, struct fc_buf *out,
                        struct fc_error *err);

#endif
