#include "config/diag.h"

#include "config/node.h"
#include "core/mem.h"

#include <stdarg.h>
#include <stdlib.h>

void fc_diag_init(struct fc_diag *d)
{
    d->entries = NULL;
    d->n = 0;
    d->cap = 0;
    d->n_errors = 0;
}

void fc_diag_release(struct fc_diag *d)
{
    for (size_t i = 0; i < d->n; i++) {
        free(d->entries[i].text);
    }
    free(d->entries);
    fc_diag_init(d);
}

static void add(struct fc_diag *d, enum fc_diag_severity sev, const char *file, uint32_t line,
                uint32_t col, const char *fmt, va_list ap)
{
    char msg[768];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 8;
        d->entries = fc_xrealloc(d->entries, d->cap * sizeof(*d->entries));
    }
    d->entries[d->n].severity = sev;
    if (file != NULL && line > 0) {
        d->entries[d->n].text = fc_xasprintf("%s:%u:%u: %s", file, line, col, msg);
    } else if (file != NULL) {
        d->entries[d->n].text = fc_xasprintf("%s: %s", file, msg);
    } else {
        d->entries[d->n].text = fc_xstrdup(msg);
    }
    d->n++;
    if (sev == FC_DIAG_ERROR) {
        d->n_errors++;
    }
}

void fc_diag_add(struct fc_diag *d, enum fc_diag_severity sev, const struct fc_node *node,
                 const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    add(d, sev, node ? node->file : NULL, node ? node->line : 0, node ? node->col : 0, fmt, ap);
    va_end(ap);
}

void fc_diag_at(struct fc_diag *d, enum fc_diag_severity sev, const char *file, uint32_t line,
                uint32_t col, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    add(d, sev, file, line, col, fmt, ap);
    va_end(ap);
}

void fc_diag_print(const struct fc_diag *d, FILE *out)
{
    for (size_t i = 0; i < d->n; i++) {
        if (d->entries[i].severity == FC_DIAG_WARNING) {
            /* "file:line:col: warning: msg", as compilers print it. */
            const char *t = d->entries[i].text;
            const char *p = t;
            int colons = 0;
            while (*p != '\0' && colons < 3) {
                if (*p == ':') {
                    colons++;
                }
                p++;
            }
            if (colons == 3) {
                fprintf(out, "%.*s warning:%s\n", (int)(p - t), t, p);
            } else {
                fprintf(out, "warning: %s\n", t);
            }
        } else {
            fprintf(out, "%s\n", d->entries[i].text);
        }
    }
}
