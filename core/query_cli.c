#include "core/query_cli.h"

#include "core/arena.h"
#include "core/buf.h"
#include "formats/json.h"

#include <curl/curl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
    "usage: flamecol query [--url URL] [--tenant ID] [--from T] [--until T]\n"
    "                      [--top N | --findings | --folded | --pprof FILE | --function NAME]\n"
    "                      [--lines] '<type>{selector}'\n"
    "\n"
    "Asks a flamecol store (default --url http://127.0.0.1:4040) about a selection, e.g.\n"
    "  flamecol query 'process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name=\"api\"}' --from "
    "-1h\n"
    "--from/--until: -1h, -30m, -7d (relative to now), now, or unix seconds/ms/ns.\n"
    "--top N (default 10): the top functions by self value; --findings adds the hottest path;\n"
    "--folded prints folded stacks; --lines tells frames apart by line (\"function file:line\")\n"
    "in the top, the findings and the folded stacks;\n"
    "--pprof FILE writes a pprof file for `go tool pprof` (with files, lines and inlining);\n"
    "--function NAME: that function's self and total per source line, callers and callees.\n";

static size_t on_data(char *p, size_t size, size_t n, void *ctx)
{
    return fc_buf_append(ctx, p, size * n) == FC_OK ? size * n : 0;
}

/* -1h -> now-1h; everything else as given. */
static const char *time_arg(const char *v, char *buf, size_t size)
{
    if (v[0] == '-') {
        snprintf(buf, size, "now%s", v);
        return buf;
    }
    return v;
}

static void print_message(const struct fc_buf *body, long status)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *doc;
    struct fc_error err = {0};
    const struct fc_json *m;

    if (fc_json_parse(a, (const char *)body->data, body->len, &doc, &err) == FC_OK &&
        (m = fc_json_get(doc, "message")) != NULL && m->type == FC_JSON_STRING) {
        fprintf(stderr, "flamecol query: %s (HTTP %ld)\n", m->str, status);
    } else {
        fprintf(stderr, "flamecol query: HTTP %ld: %.*s\n", status, (int)body->len,
                body->data ? (const char *)body->data : "");
    }
    fc_arena_free(a);
}

static double num(const struct fc_json *o, const char *key)
{
    const struct fc_json *v = fc_json_get(o, key);
    return v != NULL && v->type == FC_JSON_NUMBER ? strtod(v->str, NULL) : 0;
}

static const char *str(const struct fc_json *o, const char *key)
{
    const struct fc_json *v = fc_json_get(o, key);
    return v != NULL && v->type == FC_JSON_STRING ? v->str : "";
}

static int print_findings(const struct fc_buf *body, bool path)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *doc;
    struct fc_error err = {0};
    const struct fc_json *top, *hot;

    if (fc_json_parse(a, (const char *)body->data, body->len, &doc, &err) != FC_OK) {
        fprintf(stderr, "flamecol query: bad answer: %s\n", err.msg);
        fc_arena_free(a);
        return 1;
    }
    printf("%s  total %.0f %s\n", str(doc, "profile_type"), num(doc, "total"), str(doc, "unit"));
    printf("%16s %7s %16s %7s  %s\n", "self", "self%", "total", "total%", "function");
    top = fc_json_get(doc, "top");
    for (size_t i = 0; top != NULL && i < top->n; i++) {
        const struct fc_json *f = top->items[i];
        printf("%16.0f %6.2f%% %16.0f %6.2f%%  %s\n", num(f, "self"), 100 * num(f, "self_share"),
               num(f, "total"), 100 * num(f, "total_share"), str(f, "name"));
    }
    hot = fc_json_get(doc, "hottest_path");
    if (path && hot != NULL) {
        printf("\nhottest path:\n");
        for (size_t i = 0; i < hot->n; i++) {
            printf("%*s%s  %.2f%%\n", (int)(i < 40 ? i : 40), "", str(hot->items[i], "name"),
                   100 * num(hot->items[i], "share"));
        }
    }
    fc_arena_free(a);
    return 0;
}

static void print_rows(const struct fc_json *rows, const char *title, double total)
{
    printf("\n%s:\n", title);
    if (rows == NULL || rows->n == 0) {
        printf("  (none)\n");
    }
    for (size_t i = 0; rows != NULL && i < rows->n; i++) {
        const struct fc_json *r = rows->items[i];
        printf("%16.0f %6.2f%%  %s\n", num(r, "total"),
               total > 0 ? 100 * num(r, "total") / total : 0.0, str(r, "name"));
    }
}

static int print_function(const struct fc_buf *body)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_json *doc;
    struct fc_error err = {0};
    const struct fc_json *lines;
    double all, total;

    if (fc_json_parse(a, (const char *)body->data, body->len, &doc, &err) != FC_OK) {
        fprintf(stderr, "flamecol query: bad answer: %s\n", err.msg);
        fc_arena_free(a);
        return 1;
    }
    all = num(doc, "selection_total");
    total = num(doc, "total");
    printf("%s  %s\n", str(doc, "function"), str(doc, "profile_type"));
    printf("self %.0f %s (%.2f%%), total %.0f %s (%.2f%%) of %.0f\n", num(doc, "self"),
           str(doc, "unit"), all > 0 ? 100 * num(doc, "self") / all : 0.0, total, str(doc, "unit"),
           all > 0 ? 100 * total / all : 0.0, all);
    printf("\n%16s %16s  %s\n", "self", "total", "line");
    lines = fc_json_get(doc, "lines");
    for (size_t i = 0; lines != NULL && i < lines->n; i++) {
        const struct fc_json *l = lines->items[i];
        printf("%16.0f %16.0f  %s:%.0f\n", num(l, "self"), num(l, "total"), str(l, "file"),
               num(l, "line"));
    }
    print_rows(fc_json_get(doc, "callers"), "callers (total through each)", total);
    print_rows(fc_json_get(doc, "callees"), "callees (total of each)", total);
    fc_arena_free(a);
    return 0;
}

int fc_cmd_query(int argc, char **argv)
{
    const char *url = "http://127.0.0.1:4040", *tenant = NULL, *from = "-1h", *until = "now";
    const char *selector = NULL, *pprof_file = NULL, *function = NULL;
    long top = 10;
    bool lines = false;
    enum { TOP, FINDINGS, FOLDED, PPROF, FUNCTION } mode = TOP;
    char fbuf[64], ubuf[64];
    char *full, *q, *f, *u;
    struct fc_buf body;
    struct curl_slist *headers = NULL;
    CURL *curl;
    CURLcode cc;
    long status = 0;
    int rc = 0;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            return 0;
        } else if (strcmp(a, "--url") == 0 && next) {
            url = argv[++i];
        } else if (strcmp(a, "--tenant") == 0 && next) {
            tenant = argv[++i];
        } else if (strcmp(a, "--from") == 0 && next) {
            from = argv[++i];
        } else if (strcmp(a, "--until") == 0 && next) {
            until = argv[++i];
        } else if (strcmp(a, "--top") == 0 && next) {
            top = strtol(argv[++i], NULL, 10);
            mode = TOP;
        } else if (strcmp(a, "--findings") == 0) {
            mode = FINDINGS;
        } else if (strcmp(a, "--folded") == 0) {
            mode = FOLDED;
        } else if (strcmp(a, "--pprof") == 0 && next) {
            pprof_file = argv[++i];
            mode = PPROF;
        } else if (strcmp(a, "--function") == 0 && next) {
            function = argv[++i];
            mode = FUNCTION;
        } else if (strcmp(a, "--lines") == 0) {
            lines = true;
        } else if (a[0] != '-' && selector == NULL) {
            selector = a;
        } else {
            fprintf(stderr, "flamecol query: unexpected argument '%s'\n\n%s", a, usage);
            return 2;
        }
    }
    if (selector == NULL || top <= 0) {
        fputs(usage, stderr);
        return 2;
    }
    curl_global_init(CURL_GLOBAL_DEFAULT);
    curl = curl_easy_init();
    q = curl_easy_escape(curl, selector, 0);
    f = curl_easy_escape(curl, time_arg(from, fbuf, sizeof(fbuf)), 0);
    u = curl_easy_escape(curl, time_arg(until, ubuf, sizeof(ubuf)), 0);
    if (mode == TOP || mode == FINDINGS) {
        full = malloc(strlen(url) + strlen(q) + strlen(f) + strlen(u) + 128);
        sprintf(full, "%s/api/v1/findings?query=%s&from=%s&until=%s&top=%ld%s", url, q, f, u,
                mode == FINDINGS && top == 10 ? 10L : top, lines ? "&granularity=lines" : "");
    } else if (mode == FUNCTION) {
        char *fn = curl_easy_escape(curl, function, 0);
        full = malloc(strlen(url) + strlen(q) + strlen(f) + strlen(u) + strlen(fn) + 128);
        sprintf(full, "%s/api/v1/function?query=%s&from=%s&until=%s&name=%s", url, q, f, u, fn);
        curl_free(fn);
    } else {
        full = malloc(strlen(url) + strlen(q) + strlen(f) + strlen(u) + 128);
        sprintf(full, "%s/pyroscope/render?query=%s&from=%s&until=%s&format=%s%s", url, q, f, u,
                mode == FOLDED ? "folded" : "pprof", lines ? "&granularity=lines" : "");
    }
    if (tenant != NULL) {
        char h[256];
        snprintf(h, sizeof(h), "X-Scope-OrgID: %s", tenant);
        headers = curl_slist_append(headers, h);
    }
    fc_buf_init(&body, 1u << 30);
    curl_easy_setopt(curl, CURLOPT_URL, full);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT, 120L);
    cc = curl_easy_perform(curl);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (cc != CURLE_OK) {
        fprintf(stderr, "flamecol query: %s: %s\n", url, curl_easy_strerror(cc));
        rc = 1;
    } else if (status != 200) {
        print_message(&body, status);
        rc = 1;
    } else if (mode == FOLDED) {
        fwrite(body.data, 1, body.len, stdout);
    } else if (mode == PPROF) {
        FILE *out = fopen(pprof_file, "wb");
        if (out == NULL || fwrite(body.data, 1, body.len, out) != body.len) {
            fprintf(stderr, "flamecol query: cannot write %s\n", pprof_file);
            rc = 1;
        } else {
            fprintf(stderr, "wrote %zu bytes to %s (go tool pprof -top %s)\n", body.len, pprof_file,
                    pprof_file);
        }
        if (out != NULL) {
            fclose(out);
        }
    } else if (mode == FUNCTION) {
        rc = print_function(&body);
    } else {
        rc = print_findings(&body, mode == FINDINGS);
    }
    fc_buf_release(&body);
    curl_free(q);
    curl_free(f);
    curl_free(u);
    free(full);
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    curl_global_cleanup();
    return rc;
}
