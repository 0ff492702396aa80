/*
 * HTTP POST over libcurl for the otlphttp and pyroscope exporters. One easy
 * handle per consumer thread: curl keeps its connections (and TLS sessions)
 * alive from one request to the next. No redirects are followed (a 3xx is
 * a permanent answer, as an error status is).
 */
#include "exporters/helper/http_client.h"

#include "core/mem.h"
#include "core/version.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* What is read of an answer body (the Collector's otlphttp reads 64 KiB); the rest is dropped. */
#define MAX_ANSWER (64u * 1024u)

struct fc_http_conn {
    CURL *curl;
    const struct fc_tls_client_config *tls; /* borrowed: the exporter's config */
    struct fc_buf body;                     /* the answer, at most MAX_ANSWER bytes */
    char errbuf[CURL_ERROR_SIZE];
};

void fc_http_global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static bool set(const char *s)
{
    return s != NULL && s[0] != '\0';
}

struct fc_http_conn *fc_http_conn_new(const struct fc_tls_client_config *tls)
{
    struct fc_http_conn *c = fc_xcalloc(1, sizeof(*c));

    c->curl = curl_easy_init();
    if (c->curl == NULL) {
        free(c);
        return NULL;
    }
    c->tls = tls;
    fc_buf_init(&c->body, 0);
    return c;
}

void fc_http_conn_free(struct fc_http_conn *c)
{
    if (c == NULL) {
        return;
    }
    curl_easy_cleanup(c->curl);
    fc_buf_release(&c->body);
    free(c);
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
    struct fc_http_conn *c = arg;
    size_t len = size * n;
    size_t room = c->body.len < MAX_ANSWER ? MAX_ANSWER - c->body.len : 0;

    /* Past the cap the rest is read and dropped, so the connection stays usable. */
    if (room > 0 && fc_buf_append(&c->body, data, len < room ? len : room) != 0) {
        return 0;
    }
    return len;
}

static bool header_set(const struct fc_str_map *h, const char *name)
{
    for (size_t i = 0; h != NULL && i < h->n; i++) {
        if (strcasecmp(h->keys[i], name) == 0) {
            return true;
        }
    }
    return false;
}

static struct curl_slist *add_header(struct curl_slist *list, const char *name, const char *value)
{
    char *line = fc_xasprintf("%s: %s", name, value);
    struct curl_slist *l = curl_slist_append(list, line);

    free(line);
    return l != NULL ? l : list;
}

/*
 * server_name_override: curl has no SNI option apart from the URL's host,
 * so the URL names the override and CURLOPT_CONNECT_TO sends the
 * connection to the real host; Host: keeps the real authority.
 */
static char *override_url(const char *url, const char *name, struct curl_slist **connect_to,
                          char **host_header)
{
    CURLU *u = curl_url();
    char *host = NULL, *port = NULL, *out = NULL;

    if (curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT) == CURLUE_OK &&
        curl_url_set(u, CURLUPART_HOST, name, 0) == CURLUE_OK &&
        curl_url_get(u, CURLUPART_URL, &out, 0) == CURLUE_OK) {
        char *line = fc_xasprintf("%s:%s:%s:%s", name, port, host, port);
        *connect_to = curl_slist_append(*connect_to, line);
        free(line);
        *host_header = fc_xasprintf("%s:%s", host, port);
    }
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return out; /* NULL: the URL as it was */
}

static void set_tls(struct fc_http_conn *c)
{
    const struct fc_tls_client_config *tls = c->tls;

    if (tls == NULL) {
        return;
    }
    if (set(tls->ca_file)) {
        curl_easy_setopt(c->curl, CURLOPT_CAINFO, tls->ca_file);
    }
    if (set(tls->cert_file)) {
        curl_easy_setopt(c->curl, CURLOPT_SSLCERT, tls->cert_file);
        curl_easy_setopt(c->curl, CURLOPT_SSLKEY, tls->key_file);
    }
    if (tls->insecure_skip_verify) {
        curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(c->curl, CURLOPT_SSL_VERIFYHOST, 0L);
    }
}

static void transport_error(CURLcode cc, const char *errbuf, struct fc_send_result *res)
{
    memset(res, 0, sizeof(*res));
    /* No answer: the peer may never have seen the request, so it is sent again. */
    res->outcome = FC_SEND_RETRY;
    snprintf(res->error_type, sizeof(res->error_type), "%s",
             cc == CURLE_OPERATION_TIMEDOUT ? "timeout" : "transport");
    snprintf(res->message, sizeof(res->message), "%s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

void fc_http_post(struct fc_http_conn *c, const struct fc_http_request *rq,
                  struct fc_send_result *res, struct fc_buf *answer)
{
    CURL *h = c->curl;
    struct curl_slist *headers = NULL, *connect_to = NULL;
    char *url = NULL, *host_header = NULL;
    long ms = (long)(rq->timeout_ns / 1000000);
    long status = 0;
    struct curl_header *ra = NULL;
    const char *ctype = NULL;
    bool json = rq->json;
    CURLcode cc;

    curl_easy_reset(h); /* keeps the connection cache and TLS sessions */
    fc_buf_reset(&c->body);
    if (answer != NULL) {
        fc_buf_reset(answer);
    }
    c->errbuf[0] = '\0';
    if (ms < 1) {
        ms = 1;
    }
    if (c->tls != NULL && set(c->tls->server_name_override)) {
        url = override_url(rq->url, c->tls->server_name_override, &connect_to, &host_header);
    }
    curl_easy_setopt(h, CURLOPT_URL, url != NULL ? url : rq->url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L); /* from threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->errbuf);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "flamecol/" FC_VERSION);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body_len ? (const char *)rq->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
    if (connect_to != NULL) {
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, connect_to);
        headers = add_header(headers, "Host", host_header);
    }
    set_tls(c);

    /* No "Expect: 100-continue" round trip before large bodies. */
    headers = curl_slist_append(headers, "Expect:");
    if (set(rq->content_type) && !header_set(rq->headers, "Content-Type")) {
        headers = add_header(headers, "Content-Type", rq->content_type);
    }
    if (set(rq->content_encoding)) {
        headers = add_header(headers, "Content-Encoding", rq->content_encoding);
    }
    if (set(rq->tenant) && !header_set(rq->headers, "X-Scope-OrgID")) {
        headers = add_header(headers, "X-Scope-OrgID", rq->tenant);
    }
    if (!header_set(rq->headers, "Authorization")) {
        if (rq->basic_user != NULL) {
            curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
            curl_easy_setopt(h, CURLOPT_USERNAME, rq->basic_user);
            curl_easy_setopt(h, CURLOPT_PASSWORD,
                             rq->basic_password != NULL ? rq->basic_password : "");
        } else if (set(rq->bearer_token)) {
            char *v = fc_xasprintf("Bearer %s", rq->bearer_token);
            headers = add_header(headers, "Authorization", v);
            free(v);
        }
    }
    for (size_t i = 0; rq->headers != NULL && i < rq->headers->n; i++) {
        headers = add_header(headers, rq->headers->keys[i], rq->headers->values[i]);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

    cc = curl_easy_perform(h);
    if (cc != CURLE_OK) {
        transport_error(cc, c->errbuf, res);
    } else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype != NULL) {
            json = strstr(ctype, "json") != NULL;
        }
        if (curl_easy_header(h, "Retry-After", 0, CURLH_HEADER, -1, &ra) != CURLHE_OK) {
            ra = NULL;
        }
        fc_http_result(status, ra != NULL ? ra->value : NULL, c->body.data, c->body.len, json, res);
        if (answer != NULL && status >= 200 && status < 300 && c->body.len > 0) {
            fc_buf_append(answer, c->body.data, c->body.len);
        }
    }
    curl_slist_free_all(headers);
    curl_slist_free_all(connect_to);
    curl_free(url);
    free(host_header);
}
