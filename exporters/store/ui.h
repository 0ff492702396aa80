/*
 * The web UI (ui/), embedded at build time and served by the store's query
 * endpoint: "/" is ui/index.html, "/ui/<file>" the other files.
 */
#ifndef FC_EXPORTERS_STORE_UI_H
#define FC_EXPORTERS_STORE_UI_H

#include "core/err.h"

#include <stddef.h>

struct fc_http_server;

struct fc_ui_asset {
    const char *name; /* relative to ui/, e.g. "app.js" */
    const unsigned char *data;
    size_t len;
};

/* Generated (build/ui_assets.c); ends with a {NULL} entry. */
extern const struct fc_ui_asset fc_ui_assets[];

/* The asset called name, or NULL. */
const struct fc_ui_asset *fc_ui_asset(const char *name);

/* Registers GET /, GET /ui/<file> and GET /favicon.ico (an SVG icon) on srv for owner. */
int store_ui_routes(struct fc_http_server *srv, const char *owner, struct fc_error *err);

#endif
