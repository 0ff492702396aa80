/*
 * The relabel rule engine (see rules.h for the contract). Compiling follows
 * Prometheus' model/relabel Config.UnmarshalYAML and Validate (v3: anchoring
 * ^(?s:...)$, label names checked by the chosen scheme); applying follows
 * relabel() and Process, on a sorted label set whose strings are borrowed.
 *
 * Departures from Prometheus, each on purpose:
 *   - A regex whose parentheses do not balance on their own is refused. Go
 *     compiles "^(?s:" + "a)|(b" + ")$" without complaint, and the rule then
 *     matches unanchored; nobody means that.
 *   - Subjects that are not valid UTF-8 are matched with each bad byte read as
 *     U+FFFD, which is what Go's matcher sees too; captures then hold U+FFFD
 *     where Go would copy the bad byte, so results are valid UTF-8.
 *   - labelmap skips a result that is not a valid label name (Prometheus sets
 *     it and fails the scrape later).
 *   - PCRE2 backtracks where RE2 does not, so a match is capped (MATCH_LIMIT,
 *     a 1 MiB JIT stack); a match stopped by a cap counts as no match and in
 *     fc_relabel_scratch.match_errors.
 *   - Go's Expand takes any Unicode letter or digit into a $name; here every
 *     valid non-ASCII character is taken, as no Unicode tables are at hand.
 */
#include "processors/relabel/rules.h"

#include "config/node.h"
#include "core/mem.h"
#include "processors/relabel/md5.h"
#include "processors/relabel/re2.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <locale.h>
#include <pcre2.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <wctype.h>

#define EXPAND_LIMIT ((size_t)16 << 20) /* bytes of one joined value or expansion */
#define MATCH_LIMIT 1000000             /* PCRE2 match() calls per match */
#define HEAP_LIMIT_KIB 65536            /* PCRE2 interpreter backtracking memory */
#define JIT_STACK_MAX ((size_t)1 << 20)

enum action {
    ACT_REPLACE,
    ACT_KEEP,
    ACT_DROP,
    ACT_KEEPEQUAL,
    ACT_DROPEQUAL,
    ACT_HASHMOD,
    ACT_LABELMAP,
    ACT_LABELDROP,
    ACT_LABELKEEP,
    ACT_LOWERCASE,
    ACT_UPPERCASE,
};

static const char *const action_names[] = {
    "replace",  "keep",      "drop",      "keepequal", "dropequal", "hashmod",
    "labelmap", "labeldrop", "labelkeep", "lowercase", "uppercase",
};

struct str {
    const char *p;
    size_t n;
};

struct rule {
    enum action action;
    struct str *source;
    size_t n_source;
    struct str separator;
    pcre2_code *re;
    struct str target;
    bool target_expands; /* holds a '$' */
    struct str replacement;
    bool replacement_expands;
    uint64_t modulus;
};

struct fc_relabel_rules {
    struct fc_arena *arena; /* the rules, their strings; frees the compiled regexes */
    struct rule *rules;
    size_t n;
    uint32_t max_pairs; /* capture groups + 1, the most of any rule */
    enum fc_relabel_names names;
};

/* ---- label sets --------------------------------------------------------------------------- */

void fc_relabel_labels_init(struct fc_relabel_labels *ls)
{
    ls->items = NULL;
    ls->n = 0;
    ls->cap = 0;
}

void fc_relabel_labels_release(struct fc_relabel_labels *ls)
{
    free(ls->items);
    fc_relabel_labels_init(ls);
}

void fc_relabel_labels_clear(struct fc_relabel_labels *ls)
{
    ls->n = 0;
}

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);

    if (c != 0) {
        return c;
    }
    return an < bn ? -1 : an > bn ? 1 : 0;
}

/* The index of name, or where it would go (*found false). */
static size_t find(const struct fc_relabel_labels *ls, const char *name, size_t len, bool *found)
{
    size_t lo = 0;
    size_t hi = ls->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = name_cmp(ls->items[mid].name, ls->items[mid].name_len, name, len);
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    *found = false;
    return lo;
}

static void insert_at(struct fc_relabel_labels *ls, size_t at, const char *name, size_t name_len,
                      const char *value, size_t value_len)
{
    if (ls->n == ls->cap) {
        ls->cap = ls->cap ? ls->cap * 2 : 16;
        ls->items = fc_xrealloc(ls->items, ls->cap * sizeof(*ls->items));
    }
    memmove(&ls->items[at + 1], &ls->items[at], (ls->n - at) * sizeof(*ls->items));
    ls->items[at] = (struct fc_relabel_label){name, value, name_len, value_len};
    ls->n++;
}

static void remove_at(struct fc_relabel_labels *ls, size_t at)
{
    memmove(&ls->items[at], &ls->items[at + 1], (ls->n - at - 1) * sizeof(*ls->items));
    ls->n--;
}

void fc_relabel_labels_set(struct fc_relabel_labels *ls, const char *name, size_t name_len,
                           const char *value, size_t value_len)
{
    bool found;
    size_t at;

    if (name_len == 0) {
        return;
    }
    at = find(ls, name, name_len, &found);
    if (value_len == 0) {
        if (found) {
            remove_at(ls, at);
        }
    } else if (found) {
        ls->items[at].value = value;
        ls->items[at].value_len = value_len;
    } else {
        insert_at(ls, at, name, name_len, value, value_len);
    }
}

bool fc_relabel_labels_del(struct fc_relabel_labels *ls, const char *name, size_t name_len)
{
    bool found;
    size_t at = find(ls, name, name_len, &found);

    if (found) {
        remove_at(ls, at);
    }
    return found;
}

const struct fc_relabel_label *fc_relabel_labels_get(const struct fc_relabel_labels *ls,
                                                     const char *name, size_t name_len)
{
    bool found;
    size_t at = find(ls, name, name_len, &found);

    return found ? &ls->items[at] : NULL;
}

/* ---- names -------------------------------------------------------------------------------- */

static bool valid_utf8(const char *p, size_t n)
{
    size_t i = 0;

    while (i < n) {
        int32_t cp;
        if ((unsigned char)p[i] < 0x80) {
            i++;
            continue;
        }
        i += fc__relabel_utf8_decode((const uint8_t *)p + i, n - i, &cp);
        if (cp < 0) {
            return false;
        }
    }
    return true;
}

static bool is_word(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

/* model.LabelName.IsValid under the scheme. */
static bool valid_name(enum fc_relabel_names names, const char *p, size_t n)
{
    if (n == 0) {
        return false;
    }
    if (names == FC_RELABEL_NAMES_UTF8) {
        return valid_utf8(p, n);
    }
    if (p[0] >= '0' && p[0] <= '9') {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!is_word((unsigned char)p[i])) {
            return false;
        }
    }
    return true;
}

/*
 * A name that may hold $ variables. Legacy: Prometheus' relabelTargetLegacy,
 * ^(?:(?:[a-zA-Z_]|\$(?:\{\w+\}|\w+))+\w*)+$, i.e. word characters and $var /
 * ${var}, not starting with a digit. UTF-8: any valid name.
 */
static bool valid_name_with_vars(enum fc_relabel_names names, const char *p, size_t n)
{
    size_t i = 0;

    if (names == FC_RELABEL_NAMES_UTF8) {
        return valid_name(names, p, n);
    }
    if (n == 0 || (p[0] >= '0' && p[0] <= '9')) {
        return false;
    }
    while (i < n) {
        if (is_word((unsigned char)p[i])) {
            i++;
        } else if (p[i] == '$') {
            size_t start;
            bool brace = i + 1 < n && p[i + 1] == '{';
            i += brace ? 2 : 1;
            start = i;
            while (i < n && is_word((unsigned char)p[i])) {
                i++;
            }
            if (i == start) {
                return false;
            }
            if (brace) {
                if (i >= n || p[i] != '}') {
                    return false;
                }
                i++;
            }
        } else {
            return false;
        }
    }
    return true;
}

/* ---- compiling ---------------------------------------------------------------------------- */

/* s as Go's %q shows it: quoted, with \" \\ and control bytes escaped. */
static const char *quote(char *buf, size_t size, const char *s, size_t n)
{
    size_t o = 0;

    buf[o++] = '"';
    for (size_t i = 0; i < n && o + 6 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            buf[o++] = '\\';
            buf[o++] = (char)c;
        } else if (c == '\n') {
            buf[o++] = '\\';
            buf[o++] = 'n';
        } else if (c == '\t') {
            buf[o++] = '\\';
            buf[o++] = 't';
        } else if (c < 0x20 || c == 0x7f) {
            o += (size_t)snprintf(buf + o, size - o, "\\x%02x", c);
        } else {
            buf[o++] = (char)c;
        }
    }
    buf[o++] = '"';
    buf[o] = '\0';
    return buf;
}

struct compiler {
    const char *path;
    size_t index;
    struct fc_error *err;
};

static int rule_error(struct compiler *c, const struct fc_node *pos, const char *field,
                      const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int rule_error(struct compiler *c, const struct fc_node *pos, const char *field,
                      const char *fmt, ...)
{
    char msg[400];
    char where[160];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (pos != NULL && pos->file != NULL && pos->line > 0) {
        snprintf(where, sizeof(where), "%s:%u:%u: ", pos->file, pos->line, pos->col);
    } else {
        where[0] = '\0';
    }
    return fc_errorf(c->err, FC_ECONFIG, "%s%s[%zu]%s%s: %s", where, c->path, c->index,
                     field ? "." : "", field ? field : "", msg);
}

static void free_code(void *re)
{
    pcre2_code_free(re);
}

/* "^(?s:" + translated regex + ")$", compiled with JIT; NULL with why filled. */
static pcre2_code *compile_regex(const char *src, size_t len, char *why, size_t why_size)
{
    struct fc_buf pat;
    pcre2_compile_context *cc;
    pcre2_code *re = NULL;
    int code;
    PCRE2_SIZE off;

    fc_buf_init(&pat, 0);
    fc_buf_append(&pat, "^(?s:", 5);
    if (fc__relabel_re2_translate(src, len, &pat, why, why_size) != 0) {
        fc_buf_release(&pat);
        return NULL;
    }
    fc_buf_append(&pat, ")$", 2);
    cc = pcre2_compile_context_create(NULL);
    if (cc != NULL) {
        pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
        /*
         * DOLLAR_ENDONLY: Go's $ (without (?m)) is the end of the text; PCRE2's
         * would also match before a final newline, so "a" would match "a\n".
         */
        re = pcre2_compile((PCRE2_SPTR)pat.data, pat.len,
                           PCRE2_UTF | PCRE2_DOLLAR_ENDONLY | PCRE2_NEVER_BACKSLASH_C, &code, &off,
                           cc);
        pcre2_compile_context_free(cc);
    }
    fc_buf_release(&pat);
    if (re == NULL) {
        PCRE2_UCHAR msg[160] = "out of memory";
        if (cc != NULL) {
            pcre2_get_error_message(code, msg, sizeof(msg));
        }
        snprintf(why, why_size, "error parsing regexp: %s", (const char *)msg);
        return NULL;
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort: the interpreter otherwise */
    return re;
}

enum field { F_SOURCE, F_SEPARATOR, F_REGEX, F_MODULUS, F_TARGET, F_REPLACEMENT, F_ACTION, F_N };

static const char *const field_names[F_N] = {
    "source_labels", "separator", "regex", "modulus", "target_label", "replacement", "action",
};

/* A scalar field's text: null reads as "" (yaml.v2 sets the zero value). */
static int scalar(struct compiler *c, const struct fc_node *v, enum field f, struct str *out)
{
    if (v->kind == FC_NODE_NULL) {
        *out = (struct str){"", 0};
        return FC_OK;
    }
    if (v->kind != FC_NODE_SCALAR) {
        return rule_error(c, v, field_names[f], "expected a string, got a %s",
                          fc_node_kind_name(v->kind));
    }
    *out = (struct str){v->str, strlen(v->str)};
    return FC_OK;
}

static int parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '+') {
        s++;
    }
    if (*s == '\0') {
        return -1;
    }
    for (; *s != '\0'; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10) {
            return -1;
        }
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

static bool is_str(struct str s, const char *lit)
{
    return s.n == strlen(lit) && memcmp(s.p, lit, s.n) == 0;
}

static char *dup(struct fc_arena *a, struct str s)
{
    return fc_arena_strndup(a, s.p, s.n);
}

/* One rule map into *rl; Prometheus' order: fields as unmarshalled, then Validate. */
static int compile_rule(struct compiler *c, const struct fc_relabel_rules *rs,
                        const struct fc_node *m, struct rule *rl, uint32_t *pairs)
{
    const struct fc_node *at[F_N] = {0};
    struct str sep = {";", 1};
    struct str regex = {"(.*)", 4};
    struct str target = {"", 0};
    struct str repl = {"$1", 2};
    struct str act = {"replace", 7};
    enum action action = ACT_REPLACE;
    uint64_t modulus = 0;
    struct str *text[F_N] = {NULL, &sep, &regex, NULL, &target, &repl, NULL};
    enum fc_relabel_names names = rs->names;
    const char *aname;
    char q[300];
    char why[300];
    int rc;

    if (m->kind == FC_NODE_NULL) {
        return rule_error(c, m, NULL, "empty or null relabeling rule");
    }
    if (m->kind != FC_NODE_MAP) {
        return rule_error(c, m, NULL, "expected a map (a relabel rule), got a %s",
                          fc_node_kind_name(m->kind));
    }
    for (size_t k = 0; k < m->n_pairs; k++) {
        const struct fc_node *key = m->pairs[k].key;
        const struct fc_node *v = m->pairs[k].value;
        int f = -1;
        rc = FC_OK;
        for (int j = 0; j < F_N; j++) {
            if (strcmp(key->str, field_names[j]) == 0) {
                f = j;
            }
        }
        if (f < 0) {
            return rule_error(c, key, NULL,
                              "unknown key \"%s\" (a rule takes source_labels, separator, regex, "
                              "modulus, target_label, replacement, action)",
                              key->str);
        }
        at[f] = v;
        switch ((enum field)f) {
        case F_SOURCE:
            if (v->kind == FC_NODE_NULL) {
                break;
            }
            if (v->kind != FC_NODE_SEQ) {
                return rule_error(c, v, "source_labels",
                                  "expected a list of label names such as [a, b], got a %s",
                                  fc_node_kind_name(v->kind));
            }
            rl->source =
                fc_arena_calloc(rs->arena, v->n_items ? v->n_items : 1, sizeof(*rl->source));
            for (size_t i = 0; i < v->n_items; i++) {
                const struct fc_node *item = v->items[i];
                struct str s = {"", 0};
                if ((rc = scalar(c, item, F_SOURCE, &s)) != FC_OK) {
                    return rc;
                }
                if (!valid_name(names, s.p, s.n)) {
                    return rule_error(c, item, "source_labels", "%s is not a valid label name",
                                      quote(q, sizeof(q), s.p, s.n));
                }
                rl->source[i] = (struct str){dup(rs->arena, s), s.n};
            }
            rl->n_source = v->n_items;
            break;
        case F_SEPARATOR:
        case F_REGEX:
        case F_TARGET:
        case F_REPLACEMENT:
            rc = scalar(c, v, (enum field)f, text[f]);
            break;
        case F_MODULUS:
            if (v->kind == FC_NODE_NULL) {
                modulus = 0;
            } else if (v->kind != FC_NODE_SCALAR || parse_u64(v->str, &modulus) != 0) {
                return rule_error(c, v, "modulus", "expected a non-negative integer, got %s",
                                  v->kind == FC_NODE_SCALAR
                                      ? quote(q, sizeof(q), v->str, strlen(v->str))
                                      : fc_node_kind_name(v->kind));
            }
            break;
        case F_ACTION: {
            bool known = false;
            if ((rc = scalar(c, v, F_ACTION, &act)) != FC_OK) {
                return rc;
            }
            for (size_t j = 0; j < FC_ARRAY_LEN(action_names) && act.n > 0; j++) {
                if (strlen(action_names[j]) == act.n &&
                    strncasecmp(action_names[j], act.p, act.n) == 0) {
                    action = (enum action)j;
                    known = true;
                }
            }
            if (!known && act.n > 0) {
                return rule_error(c, v, "action", "unknown relabel action %s",
                                  quote(q, sizeof(q), act.p, act.n));
            }
            break;
        }
        case F_N:
            break;
        }
        if (f != F_SOURCE && f != F_MODULUS && f != F_ACTION && rc != FC_OK) {
            return rc;
        }
        if (f == F_REGEX) {
            rl->re = compile_regex(regex.p, regex.n, why, sizeof(why));
            if (rl->re == NULL) {
                return rule_error(c, v, "regex", "%s", why);
            }
            fc_arena_on_free(rs->arena, free_code, rl->re);
        }
    }
    if (rl->re == NULL) {
        rl->re = compile_regex(regex.p, regex.n, why, sizeof(why));
        if (rl->re == NULL) {
            return rule_error(c, m, "regex", "%s", why);
        }
        fc_arena_on_free(rs->arena, free_code, rl->re);
    }

    /* Validate(), in Prometheus' order. */
    aname = action_names[action];
    if (act.n == 0) {
        return rule_error(c, at[F_ACTION], NULL, "relabel action cannot be empty");
    }
    if (modulus == 0 && action == ACT_HASHMOD) {
        return rule_error(c, at[F_MODULUS] ? at[F_MODULUS] : m, NULL,
                          "relabel configuration for hashmod requires non-zero modulus");
    }
    if ((action == ACT_REPLACE || action == ACT_HASHMOD || action == ACT_LOWERCASE ||
         action == ACT_UPPERCASE || action == ACT_KEEPEQUAL || action == ACT_DROPEQUAL) &&
        target.n == 0) {
        return rule_error(c, at[F_TARGET] ? at[F_TARGET] : m, NULL,
                          "relabel configuration for %s action requires 'target_label' value",
                          aname);
    }
    if (action == ACT_REPLACE && memchr(target.p, '$', target.n) == NULL &&
        !valid_name(names, target.p, target.n)) {
        return rule_error(c, at[F_TARGET], NULL, "%s is invalid 'target_label' for %s action",
                          quote(q, sizeof(q), target.p, target.n), aname);
    }
    if (action == ACT_REPLACE && memchr(target.p, '$', target.n) != NULL &&
        !valid_name_with_vars(names, target.p, target.n)) {
        return rule_error(c, at[F_TARGET], NULL, "%s is invalid 'target_label' for %s action",
                          quote(q, sizeof(q), target.p, target.n), aname);
    }
    if ((action == ACT_LOWERCASE || action == ACT_UPPERCASE || action == ACT_KEEPEQUAL ||
         action == ACT_DROPEQUAL) &&
        !valid_name(names, target.p, target.n)) {
        return rule_error(c, at[F_TARGET], NULL, "%s is invalid 'target_label' for %s action",
                          quote(q, sizeof(q), target.p, target.n), aname);
    }
    if ((action == ACT_LOWERCASE || action == ACT_UPPERCASE || action == ACT_KEEPEQUAL ||
         action == ACT_DROPEQUAL) &&
        !is_str(repl, "$1")) {
        return rule_error(c, at[F_REPLACEMENT], NULL, "'replacement' can not be set for %s action",
                          aname);
    }
    if (action == ACT_LABELMAP && !valid_name_with_vars(names, repl.p, repl.n)) {
        return rule_error(c, at[F_REPLACEMENT] ? at[F_REPLACEMENT] : m, NULL,
                          "%s is invalid 'replacement' for %s action",
                          quote(q, sizeof(q), repl.p, repl.n), aname);
    }
    if (action == ACT_HASHMOD && !valid_name(names, target.p, target.n)) {
        return rule_error(c, at[F_TARGET], NULL, "%s is invalid 'target_label' for %s action",
                          quote(q, sizeof(q), target.p, target.n), aname);
    }
    if (action == ACT_KEEPEQUAL || action == ACT_DROPEQUAL) {
        /* Prometheus compares the regex by pointer: any regex given is "set". */
        const struct fc_node *bad = at[F_REGEX]           ? at[F_REGEX]
                                    : modulus != 0        ? at[F_MODULUS]
                                    : !is_str(sep, ";")   ? at[F_SEPARATOR]
                                    : !is_str(repl, "$1") ? at[F_REPLACEMENT]
                                                          : NULL;
        if (bad != NULL) {
            return rule_error(c, bad, NULL,
                              "%s action requires only 'source_labels' and `target_label`, and "
                              "no other fields",
                              aname);
        }
    }
    if (action == ACT_LABELDROP || action == ACT_LABELKEEP) {
        const struct fc_node *bad = (at[F_SOURCE] && at[F_SOURCE]->kind != FC_NODE_NULL)
                                        ? at[F_SOURCE]
                                    : target.n != 0       ? at[F_TARGET]
                                    : modulus != 0        ? at[F_MODULUS]
                                    : !is_str(sep, ";")   ? at[F_SEPARATOR]
                                    : !is_str(repl, "$1") ? at[F_REPLACEMENT]
                                                          : NULL;
        if (bad != NULL) {
            return rule_error(c, bad, NULL, "%s action requires only 'regex', and no other fields",
                              aname);
        }
    }

    rl->action = action;
    rl->separator = (struct str){dup(rs->arena, sep), sep.n};
    rl->target = (struct str){dup(rs->arena, target), target.n};
    rl->target_expands = memchr(target.p, '$', target.n) != NULL;
    rl->replacement = (struct str){dup(rs->arena, repl), repl.n};
    rl->replacement_expands = memchr(repl.p, '$', repl.n) != NULL;
    rl->modulus = modulus;
    {
        uint32_t groups = 0;
        pcre2_pattern_info(rl->re, PCRE2_INFO_CAPTURECOUNT, &groups);
        *pairs = groups + 1;
    }
    return FC_OK;
}

int fc_relabel_compile(const struct fc_node *list, const char *path, enum fc_relabel_names names,
                       struct fc_relabel_rules **out, struct fc_error *err)
{
    struct fc_relabel_rules *rs = fc_xcalloc(1, sizeof(*rs));
    struct compiler c = {path ? path : "relabel_configs", 0, err};

    *out = NULL;
    rs->arena = fc_arena_new(0);
    rs->names = names;
    rs->max_pairs = 1;
    if (list != NULL && list->kind != FC_NODE_NULL) {
        if (list->kind != FC_NODE_SEQ) {
            char where[160] = "";
            if (list->file != NULL && list->line > 0) {
                snprintf(where, sizeof(where), "%s:%u:%u: ", list->file, list->line, list->col);
            }
            fc_relabel_rules_free(rs);
            return fc_errorf(err, FC_ECONFIG, "%s%s: expected a list of relabel rules, got a %s",
                             where, c.path, fc_node_kind_name(list->kind));
        }
        rs->rules =
            fc_arena_calloc(rs->arena, list->n_items ? list->n_items : 1, sizeof(*rs->rules));
        for (size_t i = 0; i < list->n_items; i++) {
            uint32_t pairs = 1;
            int rc;
            c.index = i;
            rc = compile_rule(&c, rs, list->items[i], &rs->rules[i], &pairs);
            if (rc != FC_OK) {
                fc_relabel_rules_free(rs);
                return rc;
            }
            rs->n++;
            if (pairs > rs->max_pairs) {
                rs->max_pairs = pairs;
            }
        }
    }
    *out = rs;
    return FC_OK;
}

void fc_relabel_rules_free(struct fc_relabel_rules *r)
{
    if (r == NULL) {
        return;
    }
    fc_arena_free(r->arena);
    free(r);
}

size_t fc_relabel_rules_count(const struct fc_relabel_rules *r)
{
    return r->n;
}

/* ---- applying ----------------------------------------------------------------------------- */

void fc_relabel_scratch_init(struct fc_relabel_scratch *s)
{
    memset(s, 0, sizeof(*s));
    fc_buf_init(&s->val, EXPAND_LIMIT);
    fc_buf_init(&s->subj, 3 * EXPAND_LIMIT);
    fc_buf_init(&s->tmp, EXPAND_LIMIT);
    fc_buf_init(&s->name, EXPAND_LIMIT);
}

void fc_relabel_scratch_release(struct fc_relabel_scratch *s)
{
    fc_buf_release(&s->val);
    fc_buf_release(&s->subj);
    fc_buf_release(&s->tmp);
    fc_buf_release(&s->name);
    free(s->snap);
    pcre2_match_data_free(s->md);
    pcre2_match_context_free(s->mctx);
    pcre2_jit_stack_free(s->jit_stack);
    fc_relabel_scratch_init(s);
}

static int scratch_ready(const struct fc_relabel_rules *r, struct fc_relabel_scratch *s)
{
    if (s->md == NULL || pcre2_get_ovector_count(s->md) < r->max_pairs) {
        pcre2_match_data_free(s->md);
        s->md = pcre2_match_data_create(r->max_pairs, NULL);
    }
    if (s->mctx == NULL) {
        s->mctx = pcre2_match_context_create(NULL);
        s->jit_stack = pcre2_jit_stack_create(32 * 1024, JIT_STACK_MAX, NULL);
        if (s->mctx != NULL) {
            pcre2_set_match_limit(s->mctx, MATCH_LIMIT);
            pcre2_set_heap_limit(s->mctx, HEAP_LIMIT_KIB);
            if (s->jit_stack != NULL) {
                pcre2_jit_stack_assign(s->mctx, NULL, s->jit_stack);
            }
        }
    }
    return s->md != NULL && s->mctx != NULL ? FC_OK : FC_ETOOBIG;
}

static const char *buf_str(const struct fc_buf *b)
{
    return b->data != NULL ? (const char *)b->data : "";
}

/* The source values joined by the separator; borrows a label value when there is one source. */
static int source_value(const struct rule *rl, const struct fc_relabel_labels *ls,
                        struct fc_relabel_scratch *s, struct str *val)
{
    if (rl->n_source <= 1) {
        const struct fc_relabel_label *l =
            rl->n_source == 1 ? fc_relabel_labels_get(ls, rl->source[0].p, rl->source[0].n) : NULL;
        *val = l != NULL ? (struct str){l->value, l->value_len} : (struct str){"", 0};
        return FC_OK;
    }
    fc_buf_reset(&s->val);
    for (size_t i = 0; i < rl->n_source; i++) {
        const struct fc_relabel_label *l =
            fc_relabel_labels_get(ls, rl->source[i].p, rl->source[i].n);
        if ((i > 0 && fc_buf_append(&s->val, rl->separator.p, rl->separator.n) != FC_OK) ||
            (l != NULL && fc_buf_append(&s->val, l->value, l->value_len) != FC_OK)) {
            return FC_ETOOBIG;
        }
    }
    *val = (struct str){buf_str(&s->val), s->val.len};
    return FC_OK;
}

/*
 * Matches in against the rule's regex. *subj is what was matched (in, or in
 * with bad UTF-8 bytes read as U+FFFD); captures index it, *set of them
 * (from group 0) are valid. 1 match, 0 none,
 * FC_ETOOBIG when the subject could not be made.
 */
static int match(const pcre2_code *re, struct str in, struct fc_relabel_scratch *s,
                 struct str *subj, uint32_t *set)
{
    int rc;

    *set = 0;
    *subj = in;
    if (!valid_utf8(in.p, in.n)) {
        fc_buf_reset(&s->subj);
        for (size_t i = 0; i < in.n;) {
            int32_t cp;
            size_t k = fc__relabel_utf8_decode((const uint8_t *)in.p + i, in.n - i, &cp);
            if (fc__relabel_utf8_put(&s->subj, cp < 0 ? 0xFFFD : cp) != FC_OK) {
                return FC_ETOOBIG;
            }
            i += k;
        }
        *subj = (struct str){buf_str(&s->subj), s->subj.len};
    }
    rc = pcre2_match(re, (PCRE2_SPTR)subj->p, subj->n, 0, PCRE2_NO_UTF_CHECK, s->md, s->mctx);
    if (rc > 0) {
        *set = (uint32_t)rc; /* groups past rc - 1 are unset (their slots are stale) */
        return 1;
    }
    if (rc != PCRE2_ERROR_NOMATCH) {
        s->match_errors++; /* a limit: RE2 would have answered, we cannot say yes */
    }
    return 0;
}

static bool name_char(const char *p, size_t n, size_t *len)
{
    int32_t cp;

    if ((unsigned char)p[0] < 0x80) {
        *len = 1;
        return is_word((unsigned char)p[0]);
    }
    *len = fc__relabel_utf8_decode((const uint8_t *)p, n, &cp);
    return cp >= 0;
}

/* The group a $name refers to, or -1 (empty). */
static int group_of(const pcre2_code *re, const char *name, size_t n)
{
    bool digits = true;
    char tmp[40];
    int g;

    for (size_t i = 0; i < n; i++) {
        digits = digits && name[i] >= '0' && name[i] <= '9';
    }
    if (digits) {
        long v = 0;
        if (n > 1 && name[0] == '0') {
            return -1; /* Go: no leading zeros, and no group has such a name */
        }
        for (size_t i = 0; i < n && v < 100000000; i++) {
            v = v * 10 + (name[i] - '0');
        }
        return v < 100000000 ? (int)v : -1;
    }
    if (n >= sizeof(tmp)) {
        return -1; /* PCRE2 names are at most 32 bytes */
    }
    memcpy(tmp, name, n);
    tmp[n] = '\0';
    g = pcre2_substring_number_from_name(re, (PCRE2_SPTR)tmp);
    return g >= 0 ? g : -1;
}

/* Go's Regexp.Expand: $1 ${1} $name ${name} $$; $1x is ${1x}; anything malformed is a literal $. */
static int expand(const pcre2_code *re, struct str tmpl, struct str subj, pcre2_match_data *md,
                  uint32_t pairs, struct fc_buf *out)
{
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    size_t i = 0;

    while (i < tmpl.n) {
        const char *dollar = memchr(tmpl.p + i, '$', tmpl.n - i);
        size_t j;
        size_t start;
        size_t clen;
        bool brace;
        int g;
        if (dollar == NULL) {
            return fc_buf_append(out, tmpl.p + i, tmpl.n - i);
        }
        if (fc_buf_append(out, tmpl.p + i, (size_t)(dollar - (tmpl.p + i))) != FC_OK) {
            return FC_ETOOBIG;
        }
        i = (size_t)(dollar - tmpl.p) + 1;
        if (i < tmpl.n && tmpl.p[i] == '$') {
            if (fc_buf_append(out, "$", 1) != FC_OK) {
                return FC_ETOOBIG;
            }
            i++;
            continue;
        }
        brace = i < tmpl.n && tmpl.p[i] == '{';
        j = brace ? i + 1 : i;
        start = j;
        while (j < tmpl.n && name_char(tmpl.p + j, tmpl.n - j, &clen)) {
            j += clen;
        }
        if (j == start || (brace && (j >= tmpl.n || tmpl.p[j] != '}'))) {
            if (fc_buf_append(out, "$", 1) != FC_OK) { /* malformed: the $ is text */
                return FC_ETOOBIG;
            }
            continue;
        }
        g = group_of(re, tmpl.p + start, j - start);
        i = brace ? j + 1 : j;
        if (g >= 0 && (uint32_t)g < pairs && ov[2 * g] != PCRE2_UNSET &&
            fc_buf_append(out, subj.p + ov[2 * g], ov[2 * g + 1] - ov[2 * g]) != FC_OK) {
            return FC_ETOOBIG;
        }
    }
    return FC_OK;
}

/* A template's result: itself when it has no $, else expanded into out. */
static int fill(const struct rule *rl, struct str tmpl, bool expands, struct str subj,
                const struct fc_relabel_scratch *s, uint32_t set, struct fc_buf *out,
                struct str *res)
{
    if (!expands) {
        *res = tmpl;
        return FC_OK;
    }
    fc_buf_reset(out);
    if (expand(rl->re, tmpl, subj, s->md, set, out) != FC_OK) {
        return FC_ETOOBIG;
    }
    *res = (struct str){buf_str(out), out->len};
    return FC_OK;
}

/*
 * Sets name=value in ls. A transient string (in scratch) is copied into the
 * arena unless the set already holds the same bytes; a stable one (the
 * caller's, the rules', the arena's) is borrowed. An empty value deletes.
 */
static int put(struct fc_relabel_labels *ls, struct fc_arena *arena, struct str name,
               bool name_transient, struct str value, bool value_transient)
{
    bool found;
    size_t at;

    if (name.n == 0) {
        return FC_OK;
    }
    at = find(ls, name.p, name.n, &found);
    if (value.n == 0) {
        if (found) {
            remove_at(ls, at);
        }
        return FC_OK;
    }
    if (found) {
        struct fc_relabel_label *l = &ls->items[at];
        if (l->value_len == value.n && memcmp(l->value, value.p, value.n) == 0) {
            return FC_OK;
        }
        if (value_transient && (value.p = fc_arena_memdup(arena, value.p, value.n)) == NULL) {
            return FC_ETOOBIG;
        }
        l->value = value.p;
        l->value_len = value.n;
        return FC_OK;
    }
    if (name_transient && (name.p = fc_arena_memdup(arena, name.p, name.n)) == NULL) {
        return FC_ETOOBIG;
    }
    if (value_transient && (value.p = fc_arena_memdup(arena, value.p, value.n)) == NULL) {
        return FC_ETOOBIG;
    }
    insert_at(ls, at, name.p, name.n, value.p, value.n);
    return FC_OK;
}

static locale_t utf8_locale;
static pthread_once_t utf8_locale_once = PTHREAD_ONCE_INIT;

static void utf8_locale_init(void)
{
    utf8_locale = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
}

/* Go's strings.ToLower/ToUpper: simple Unicode case mapping, bad bytes become U+FFFD. */
static int change_case(struct str in, bool upper, struct fc_buf *out)
{
    fc_buf_reset(out);
    pthread_once(&utf8_locale_once, utf8_locale_init);
    for (size_t i = 0; i < in.n;) {
        int32_t cp;
        size_t k = fc__relabel_utf8_decode((const uint8_t *)in.p + i, in.n - i, &cp);
        if (cp < 0) {
            cp = 0xFFFD;
        } else if (cp < 0x80) {
            if (upper && cp >= 'a' && cp <= 'z') {
                cp -= 'a' - 'A';
            } else if (!upper && cp >= 'A' && cp <= 'Z') {
                cp += 'a' - 'A';
            }
        } else if (utf8_locale != (locale_t)0) {
            wint_t w =
                upper ? towupper_l((wint_t)cp, utf8_locale) : towlower_l((wint_t)cp, utf8_locale);
            cp = (int32_t)w;
        }
        if (fc__relabel_utf8_put(out, cp) != FC_OK) {
            return FC_ETOOBIG;
        }
        i += k;
    }
    return FC_OK;
}

static int snapshot(const struct fc_relabel_labels *ls, struct fc_relabel_scratch *s)
{
    if (s->snap_cap < ls->n) {
        s->snap_cap = ls->n;
        s->snap = fc_xrealloc(s->snap, s->snap_cap * sizeof(*s->snap));
    }
    if (ls->n > 0) {
        memcpy(s->snap, ls->items, ls->n * sizeof(*s->snap));
    }
    return FC_OK;
}

static int apply_rule(const struct fc_relabel_rules *r, const struct rule *rl,
                      struct fc_relabel_labels *ls, struct fc_relabel_scratch *s,
                      struct fc_arena *arena)
{
    struct str val;
    struct str subj;
    uint32_t set;
    int m;

    if (rl->action != ACT_LABELMAP && rl->action != ACT_LABELDROP && rl->action != ACT_LABELKEEP &&
        source_value(rl, ls, s, &val) != FC_OK) {
        return FC_ETOOBIG;
    }
    switch (rl->action) {
    case ACT_DROP:
    case ACT_KEEP:
        if ((m = match(rl->re, val, s, &subj, &set)) < 0) {
            return m;
        }
        return (m == 1) == (rl->action == ACT_KEEP) ? FC_RELABEL_KEEP : FC_RELABEL_DROP;
    case ACT_DROPEQUAL:
    case ACT_KEEPEQUAL: {
        const struct fc_relabel_label *t = fc_relabel_labels_get(ls, rl->target.p, rl->target.n);
        struct str cur = t != NULL ? (struct str){t->value, t->value_len} : (struct str){"", 0};
        bool equal = cur.n == val.n && memcmp(cur.p, val.p, val.n) == 0;
        return equal == (rl->action == ACT_KEEPEQUAL) ? FC_RELABEL_KEEP : FC_RELABEL_DROP;
    }
    case ACT_REPLACE: {
        struct str name;
        struct str res;
        if ((m = match(rl->re, val, s, &subj, &set)) <= 0) {
            return m < 0 ? m : FC_RELABEL_KEEP;
        }
        if (fill(rl, rl->target, rl->target_expands, subj, s, set, &s->name, &name) != FC_OK ||
            fill(rl, rl->replacement, rl->replacement_expands, subj, s, set, &s->tmp, &res) !=
                FC_OK) {
            return FC_ETOOBIG;
        }
        if (rl->target_expands && !valid_name(r->names, name.p, name.n)) {
            return FC_RELABEL_KEEP;
        }
        if (put(ls, arena, name, rl->target_expands, res, rl->replacement_expands) != FC_OK) {
            return FC_ETOOBIG;
        }
        return FC_RELABEL_KEEP;
    }
    case ACT_LOWERCASE:
    case ACT_UPPERCASE:
        if (change_case(val, rl->action == ACT_UPPERCASE, &s->tmp) != FC_OK ||
            put(ls, arena, rl->target, false, (struct str){buf_str(&s->tmp), s->tmp.len}, true) !=
                FC_OK) {
            return FC_ETOOBIG;
        }
        return FC_RELABEL_KEEP;
    case ACT_HASHMOD: {
        uint8_t sum[16];
        uint64_t h = 0;
        char digits[24];
        int n;
        fc_md5(val.p, val.n, sum);
        for (int i = 8; i < 16; i++) {
            h = (h << 8) | sum[i]; /* the last 8 bytes, big-endian */
        }
        n = snprintf(digits, sizeof(digits), "%llu", (unsigned long long)(h % rl->modulus));
        if (put(ls, arena, rl->target, false, (struct str){digits, (size_t)n}, true) != FC_OK) {
            return FC_ETOOBIG;
        }
        return FC_RELABEL_KEEP;
    }
    case ACT_LABELMAP:
        /* Over the labels as they were before this rule (Prometheus' Builder.Range). */
        snapshot(ls, s);
        for (size_t i = 0, n = ls->n; i < n; i++) {
            const struct fc_relabel_label *l = &s->snap[i];
            struct str res;
            if ((m = match(rl->re, (struct str){l->name, l->name_len}, s, &subj, &set)) < 0) {
                return m;
            }
            if (m == 0) {
                continue;
            }
            if (fill(rl, rl->replacement, rl->replacement_expands, subj, s, set, &s->tmp, &res) !=
                FC_OK) {
                return FC_ETOOBIG;
            }
            if (!valid_name(r->names, res.p, res.n)) {
                continue;
            }
            if (put(ls, arena, res, rl->replacement_expands, (struct str){l->value, l->value_len},
                    false) != FC_OK) {
                return FC_ETOOBIG;
            }
        }
        return FC_RELABEL_KEEP;
    case ACT_LABELDROP:
    case ACT_LABELKEEP: {
        size_t o = 0;
        for (size_t i = 0; i < ls->n; i++) {
            struct fc_relabel_label l = ls->items[i];
            if ((m = match(rl->re, (struct str){l.name, l.name_len}, s, &subj, &set)) < 0) {
                return m;
            }
            if ((m == 1) == (rl->action == ACT_LABELKEEP)) {
                ls->items[o++] = l;
            }
        }
        ls->n = o;
        return FC_RELABEL_KEEP;
    }
    }
    return FC_RELABEL_KEEP;
}

int fc_relabel_apply(const struct fc_relabel_rules *r, struct fc_relabel_labels *ls,
                     struct fc_relabel_scratch *s, struct fc_arena *arena)
{
    if (r->n == 0) {
        return FC_RELABEL_KEEP;
    }
    if (scratch_ready(r, s) != FC_OK) {
        return FC_ETOOBIG;
    }
    for (size_t i = 0; i < r->n; i++) {
        int rc = apply_rule(r, &r->rules[i], ls, s, arena);
        if (rc != FC_RELABEL_KEEP) {
            return rc;
        }
    }
    return FC_RELABEL_KEEP;
}
