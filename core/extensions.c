#include "core/extensions.h"

#include "core/auth.h"
#include "core/log.h"
#include "core/mem.h"

#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

const struct fc_field fc_server_auth_fields[] = {
    {"authenticator", FC_FIELD_STR, "", offsetof(struct fc_server_auth_config, authenticator),
     "the id of an auth extension listed in service.extensions"},
    {NULL},
};

struct extension {
    const char *id; /* the config's key: "auth", "auth/team" */
    struct fc_auth *auth;
};

struct fc_extensions {
    struct extension *started;
    size_t n;
};

/* "auth" or "auth/<name>". */
static bool is_auth_id(const char *id)
{
    return strcmp(id, "auth") == 0 || (strncmp(id, "auth/", 5) == 0 && id[5] != '\0');
}

static const struct fc_node *listed(const struct fc_node *list, const char *id)
{
    for (size_t i = 0; list != NULL && list->kind == FC_NODE_SEQ && i < list->n_items; i++) {
        if (list->items[i]->kind == FC_NODE_SCALAR && strcmp(list->items[i]->str, id) == 0) {
            return list->items[i];
        }
    }
    return NULL;
}

struct fc_extensions *fc_extensions_build(const struct fc_node *root, struct fc_diag *diag)
{
    struct fc_extensions *x = fc_xcalloc(1, sizeof(*x));
    const struct fc_node *defs = fc_node_get(root, "extensions");
    const struct fc_node *service = fc_node_get(root, "service");
    const struct fc_node *list =
        service != NULL && service->kind == FC_NODE_MAP ? fc_node_get(service, "extensions") : NULL;

    if (defs != NULL && defs->kind != FC_NODE_MAP && defs->kind != FC_NODE_NULL) {
        fc_diag_error(diag, defs, "extensions: expected a map of extension ids, got a %s",
                      fc_node_kind_name(defs->kind));
        defs = NULL;
    }
    if (list != NULL && list->kind != FC_NODE_SEQ && list->kind != FC_NODE_NULL) {
        fc_diag_error(diag, list, "service.extensions: expected a list of ids, got a %s",
                      fc_node_kind_name(list->kind));
        list = NULL;
    }
    for (size_t i = 0; list != NULL && list->kind == FC_NODE_SEQ && i < list->n_items; i++) {
        const struct fc_node *item = list->items[i];
        if (item->kind != FC_NODE_SCALAR) {
            fc_diag_error(diag, item, "service.extensions[%zu]: expected an id", i);
        } else if (defs == NULL || defs->kind != FC_NODE_MAP ||
                   fc_node_get(defs, item->str) == NULL) {
            fc_diag_error(diag, item,
                          "service.extensions: '%s' is not defined in extensions:", item->str);
        } else if (listed(list, item->str) != item) {
            fc_diag_error(diag, item, "service.extensions: '%s' is listed twice", item->str);
        }
    }
    for (size_t i = 0; defs != NULL && defs->kind == FC_NODE_MAP && i < defs->n_pairs; i++) {
        const struct fc_node *k = defs->pairs[i].key, *v = defs->pairs[i].value;
        struct fc_error err = {0};
        struct fc_auth *a = NULL;
        if (!is_auth_id(k->str)) {
            fc_diag_error(diag, k,
                          "extensions: unknown extension '%s' (flamecol has one type: auth, "
                          "as auth or auth/<name>)",
                          k->str);
            continue;
        }
        if (fc_auth_new(v, &a, &err) != FC_OK) {
            fc_diag_error(diag, v != NULL && v->kind != FC_NODE_NULL ? v : k, "extensions.%s: %s",
                          k->str, err.msg);
            continue;
        }
        if (listed(list, k->str) == NULL) {
            fc_diag_warn(diag, k,
                         "extensions.%s is defined but not in service.extensions: not started",
                         k->str);
            fc_auth_free(a);
            continue;
        }
        x->started = fc_xrealloc(x->started, (x->n + 1) * sizeof(*x->started));
        x->started[x->n++] = (struct extension){k->str, a};
    }
    return x;
}

void fc_extensions_free(struct fc_extensions *x)
{
    if (x == NULL) {
        return;
    }
    for (size_t i = 0; i < x->n; i++) {
        fc_auth_free(x->started[i].auth);
    }
    free(x->started);
    free(x);
}

static const struct extension *find(const struct fc_extensions *x, const char *id)
{
    for (size_t i = 0; x != NULL && i < x->n; i++) {
        if (strcmp(x->started[i].id, id) == 0) {
            return &x->started[i];
        }
    }
    return NULL;
}

static void check_node(const struct fc_extensions *x, const struct fc_node *n, bool in_auth,
                       const char *path, struct fc_diag *diag)
{
    if (n == NULL || n->kind != FC_NODE_MAP) {
        return;
    }
    for (size_t i = 0; i < n->n_pairs; i++) {
        const struct fc_node *k = n->pairs[i].key, *v = n->pairs[i].value;
        if (in_auth && strcmp(k->str, "authenticator") == 0) {
            if (v->kind != FC_NODE_SCALAR || v->str[0] == '\0') {
                fc_diag_error(diag, v->kind == FC_NODE_NULL ? k : v,
                              "%s: authenticator: expected the id of an auth extension", path);
            } else if (find(x, v->str) == NULL) {
                fc_diag_error(diag, v,
                              "%s: authenticator '%s' is not an enabled extension (define it under "
                              "extensions: and list it in service.extensions)",
                              path, v->str);
            }
            continue;
        }
        check_node(x, v, strcmp(k->str, "auth") == 0, path, diag);
    }
}

void fc_extensions_check_refs(const struct fc_extensions *x, const struct fc_node *config,
                              const char *path, struct fc_diag *diag)
{
    check_node(x, config, false, path, diag);
}

int fc_extensions_auth(const struct fc_extensions *x, const char *id, struct fc_auth **out,
                       struct fc_error *err)
{
    const struct extension *e;

    *out = NULL;
    if (id == NULL || id[0] == '\0') {
        return FC_OK;
    }
    e = find(x, id);
    if (e == NULL) {
        return fc_errorf(err, FC_ECONFIG, "authenticator '%s' is not an enabled extension", id);
    }
    *out = e->auth;
    return FC_OK;
}
