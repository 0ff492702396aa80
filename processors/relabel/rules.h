/*
 * The relabel rule engine: Prometheus relabel_configs, compiled once from the
 * config tree and applied to many label sets.
 *
 * Semantics are Prometheus' model/relabel (v3): keys and defaults
 * (source_labels, separator ";", regex "(.*)" anchored as ^(?s:...)$,
 * target_label, replacement "$1", modulus, action replace), its
 * UnmarshalYAML/Validate messages, Go regexp.Expand for $1 ${1} $name ${name}
 * and $$, and Process: rules run in order and the first keep/drop that rejects
 * the set stops. Regexes use RE2 syntax, run by PCRE2 (JIT); what RE2 refuses
 * (backreferences, lookaround, atomic groups, possessive quantifiers, \C,
 * recursion, conditionals, ...) is refused at compile time.
 *
 * As in Prometheus' labels.Builder, setting a label to "" deletes it. A set
 * that ends up empty is still FC_RELABEL_KEEP: the caller decides (the relabel
 * processor drops it). Deliberate departures, each documented in rules.c:
 * a regex with unbalanced parentheses is refused (Go would compile
 * "a)|(b" into an unanchored ^(?s:a)|(b)$); a regex subject that is not valid
 * UTF-8 is matched with each bad byte read as U+FFFD, and captures come from
 * that reading; labelmap skips result names that are not valid label names;
 * a match that exceeds PCRE2's match limit counts as no match
 * (fc_relabel_scratch.match_errors).
 */
#ifndef FC_PROCESSORS_RELABEL_RULES_H
#define FC_PROCESSORS_RELABEL_RULES_H

#include "core/arena.h"
#include "core/buf.h"
#include "core/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct fc_node;

/* ---- label sets --------------------------------------------------------------------------- */

struct fc_relabel_label {
    const char *name; /* not NUL-terminated */
    const char *value;
    size_t name_len;  /* > 0 */
    size_t value_len; /* > 0: an empty value is no label */
};

/*
 * A label set, kept sorted by name (bytewise) with unique names. The items
 * array is the set's own (malloc, reused across fc_relabel_labels_clear); the
 * strings are borrowed: from the caller, from the rules, or from the arena
 * given to fc_relabel_apply. Copy them before any of those goes away.
 */
struct fc_relabel_labels {
    struct fc_relabel_label *items;
    size_t n;
    size_t cap;
};

void fc_relabel_labels_init(struct fc_relabel_labels *ls);
void fc_relabel_labels_release(struct fc_relabel_labels *ls);
/* Empties the set and keeps its memory. */
void fc_relabel_labels_clear(struct fc_relabel_labels *ls);
/* Sets name to value (both borrowed); an existing name takes the new value; an empty value
 * deletes the label, as Prometheus' labels.Builder does. An empty name is ignored. */
void fc_relabel_labels_set(struct fc_relabel_labels *ls, const char *name, size_t name_len,
                           const char *value, size_t value_len);
/* Returns true when the label was there. */
bool fc_relabel_labels_del(struct fc_relabel_labels *ls, const char *name, size_t name_len);
/* The label, or NULL. */
const struct fc_relabel_label *fc_relabel_labels_get(const struct fc_relabel_labels *ls,
                                                     const char *name, size_t name_len);

/* ---- rules -------------------------------------------------------------------------------- */

/* Which label names are valid (target_label, source_labels, labelmap results). */
enum fc_relabel_names {
    FC_RELABEL_NAMES_UTF8,   /* Prometheus 3's default: any non-empty UTF-8 string */
    FC_RELABEL_NAMES_LEGACY, /* [a-zA-Z_][a-zA-Z0-9_]* (Prometheus 2, Alloy) */
};

struct fc_relabel_rules;

/*
 * Compiles a relabel_configs list (a sequence node of maps; NULL or a null node
 * is an empty list) into rules. path names the list in messages ("relabel_configs"
 * when NULL). On error returns FC_ECONFIG with "file:line:col: path[i]: message"
 * in err, the position being the offending node's, and *out is NULL.
 */
int fc_relabel_compile(const struct fc_node *list, const char *path, enum fc_relabel_names names,
                       struct fc_relabel_rules **out, struct fc_error *err);
void fc_relabel_rules_free(struct fc_relabel_rules *r);
size_t fc_relabel_rules_count(const struct fc_relabel_rules *r);

/*
 * What fc_relabel_apply needs between calls, so that a call allocates only
 * the strings its result holds: buffers, PCRE2 match data, match context and
 * JIT stack. One per thread; fields are private except match_errors.
 */
struct fc_relabel_scratch {
    struct fc_buf val;             /* joined source values */
    struct fc_buf subj;            /* a subject made valid UTF-8 */
    struct fc_buf tmp;             /* an expanded replacement */
    struct fc_buf name;            /* an expanded target label */
    struct fc_relabel_label *snap; /* labelmap/labeldrop/labelkeep snapshot */
    size_t snap_cap;
    void *md;              /* pcre2_match_data * */
    void *mctx;            /* pcre2_match_context * */
    void *jit_stack;       /* pcre2_jit_stack * */
    uint64_t match_errors; /* matches abandoned at PCRE2's limits (counted as no match) */
};

void fc_relabel_scratch_init(struct fc_relabel_scratch *s);
void fc_relabel_scratch_release(struct fc_relabel_scratch *s);

enum fc_relabel_verdict { FC_RELABEL_DROP = 0, FC_RELABEL_KEEP = 1 };

/*
 * Applies the rules in order to ls. Returns FC_RELABEL_KEEP (ls holds the
 * result, possibly empty), FC_RELABEL_DROP (a keep/drop rule rejected the set;
 * ls is as far as the rules got), or FC_ETOOBIG when arena refused memory or an
 * expansion passed 16 MiB. New strings (expansions, hashmod values, changed
 * case) are allocated from arena; the rest of the result borrows.
 */
int fc_relabel_apply(const struct fc_relabel_rules *r, struct fc_relabel_labels *ls,
                     struct fc_relabel_scratch *s, struct fc_arena *arena);

#endif
