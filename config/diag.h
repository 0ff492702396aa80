/*
 * Config diagnostics: every error and warning found while loading and
 * binding, each as "file:line:col: message", so `flamecol validate` can print
 * them all at once instead of stopping at the first.
 */
#ifndef FC_CONFIG_DIAG_H
#define FC_CONFIG_DIAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct fc_node;

enum fc_diag_severity { FC_DIAG_ERROR, FC_DIAG_WARNING };

struct fc_diag_entry {
    enum fc_diag_severity severity;
    char *text; /* "file:line:col: message" (or "file: message"); owned here */
};

struct fc_diag {
    struct fc_diag_entry *entries;
    size_t n;
    size_t cap;
    size_t n_errors;
};

void fc_diag_init(struct fc_diag *d);
void fc_diag_release(struct fc_diag *d);
/* node may be NULL when no position is known; the message then stands alone. */
void fc_diag_add(struct fc_diag *d, enum fc_diag_severity sev, const struct fc_node *node,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void fc_diag_at(struct fc_diag *d, enum fc_diag_severity sev, const char *file, uint32_t line,
                uint32_t col, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
#define fc_diag_error(d, node, ...) fc_diag_add((d), FC_DIAG_ERROR, (node), __VA_ARGS__)
#define fc_diag_warn(d, node, ...) fc_diag_add((d), FC_DIAG_WARNING, (node), __VA_ARGS__)
/* Prints every entry, one per line ("warning: " marks warnings). */
void fc_diag_print(const struct fc_diag *d, FILE *out);
static inline bool fc_diag_has_errors(const struct fc_diag *d)
{
    return d->n_errors > 0;
}

#endif
