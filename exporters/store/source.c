/* GET /api/v1/source: a profile's source file through query.ui.source_roots. */
#include "exporters/store/source.h"

#include "exporters/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define UI_OFF(f)                                                                                  \
    (offsetof(struct store_config, query.ui.f) - offsetof(struct store_config, query.ui))

const struct fc_field store_ui_fields[] = {
    {"source_roots", FC_FIELD_STR_MAP, NULL, UI_OFF(source_roots),
     "file path prefixes as in profiles mapped to local directories, e.g. "
     "`{\"/build/src/\": \"/home/me/src/\"}`: Function details then shows the source with each "
     "line's cost (GET /api/v1/source serves only regular files inside these directories)"},
    {"max_source_size", FC_FIELD_SIZE, "1MiB", UI_OFF(max_source_size),
     "the largest source file GET /api/v1/source serves; a larger one is refused with 413"},
    {NULL},
};

int store_source_map(const struct fc_str_map *roots, const char *file, char *out, size_t size)
{
    int best = -1;
    size_t best_len = 0;
    const char *rest;
    const char *dir;
    int n;

    for (size_t i = 0; i < roots->n; i++) {
        size_t k = strlen(roots->keys[i]);
        if (k == 0 || strncmp(file, roots->keys[i], k) != 0) {
            continue;
        }
        /* "/build/src" maps /build/src/x, not /build/srcx */
        if (roots->keys[i][k - 1] != '/' && file[k] != '/' && file[k] != '\0') {
            continue;
        }
        if (best < 0 || k > best_len) {
            best = (int)i;
            best_len = k;
        }
    }
    if (best < 0) {
        return -1;
    }
    rest = file + best_len;
    while (*rest == '/') {
        rest++;
    }
    dir = roots->values[best];
    n = snprintf(out, size, "%s%s%s", dir, dir[0] && dir[strlen(dir) - 1] == '/' ? "" : "/", rest);
    return n < 0 || (size_t)n >= size ? -1 : best;
}

int store_source_read(const struct fc_str_map *roots, const char *file, size_t max,
                      struct fc_buf *body, char *msg, size_t msize)
{
    char local[PATH_MAX];
    char root[PATH_MAX];
    char real[PATH_MAX];
    struct stat st;
    size_t rlen;
    int i;
    int fd;

    if (file == NULL || file[0] == '\0') {
        snprintf(msg, msize, "file is required");
        return 400;
    }
    if (roots->n == 0) {
        snprintf(msg, msize, "no source roots: set query.ui.source_roots");
        return 404;
    }
    i = store_source_map(roots, file, local, sizeof(local));
    if (i < 0) {
        snprintf(msg, msize, "no source root maps %s", file);
        return 404;
    }
    if (realpath(roots->values[i], root) == NULL) {
        /* the local directory is not told to clients, only the prefix */
        snprintf(msg, msize, "the source root of %s: %s", roots->keys[i], strerror(errno));
        return 404;
    }
    if (realpath(local, real) == NULL) {
        snprintf(msg, msize, "%s: no such file under the source root of %s", file, roots->keys[i]);
        return 404;
    }
    /* inside the root: the root itself or below it at a '/' */
    rlen = strlen(root);
    if (strcmp(root, "/") != 0 &&
        (strncmp(real, root, rlen) != 0 || (real[rlen] != '/' && real[rlen] != '\0'))) {
        snprintf(msg, msize, "%s resolves outside its source root", file);
        return 403;
    }
    fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(msg, msize, "%s is not a readable file", file);
        if (fd >= 0) {
            close(fd);
        }
        return 404;
    }
    if ((uintmax_t)st.st_size > (uintmax_t)max) {
        close(fd);
        snprintf(msg, msize, "%s is larger than %zu bytes (query.ui.max_source_size)", file, max);
        return 413;
    }
    for (;;) {
        char chunk[16384];
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        if (got < 0) {
            close(fd);
            snprintf(msg, msize, "%s: %s", file, strerror(errno));
            return 500;
        }
        if (got == 0) {
            break;
        }
        if (body->len + (size_t)got > max) {
            close(fd);
            snprintf(msg, msize, "%s is larger than %zu bytes (query.ui.max_source_size)", file,
                     max);
            return 413;
        }
        fc_buf_append(body, chunk, (size_t)got);
    }
    close(fd);
    return 0;
}

static void on_source(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    char msg[PATH_MAX + 128];
    int status;

    status =
        store_source_read(&x->cfg->query.ui.source_roots, fc_http_query(req, "file"),
                          (size_t)x->cfg->query.ui.max_source_size, &resp->body, msg, sizeof(msg));
    if (status != 0) {
        fc_buf_reset(&resp->body);
        fc_http_response_text(resp, status, "%s", msg);
        return;
    }
    resp->content_type = "text/plain; charset=utf-8";
    fc_http_response_header(resp, "Cache-Control", "no-cache");
}

/* The prefixes (not the local directories), so that the UI asks only for files that are mapped. */
static void on_roots(void *ctx, const struct fc_http_request *req, struct fc_http_response *resp)
{
    struct store_exporter *x = ctx;
    const struct fc_str_map *roots = &x->cfg->query.ui.source_roots;

    (void)req;
    resp->content_type = "application/json";
    fc_buf_puts(&resp->body, "{\"prefixes\":[");
    for (size_t i = 0; i < roots->n; i++) {
        fc_buf_puts(&resp->body, i ? ",\"" : "\"");
        fc_buf_json_escape(&resp->body, roots->keys[i], strlen(roots->keys[i]));
        fc_buf_puts(&resp->body, "\"");
    }
    fc_buf_puts(&resp->body, "]}");
}

int store_source_routes(struct store_exporter *x, struct fc_http_server *srv, struct fc_error *err)
{
    if (fc_http_route(srv, "GET", "/api/v1/source", 0, on_source, x, x->self->id, err) != FC_OK ||
        fc_http_route(srv, "GET", "/api/v1/source-roots", 0, on_roots, x, x->self->id, err) !=
            FC_OK) {
        return FC_ECONFIG;
    }
    return FC_OK;
}
