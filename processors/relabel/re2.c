/*
 * RE2 syntax -> PCRE2 pattern. The walk follows Go's regexp/syntax parser
 * (parse.go: parse, parsePerlFlags, parseRepeat, parseEscape, parseClass) so
 * that it accepts what Go accepts and fails where Go fails, with Go's message
 * and, for PCRE-only syntax, a note saying what RE2 does not support.
 *
 * What is rewritten, because PCRE2 reads it differently:
 *   - every single-character escape becomes \x{...}: Go's \v is a vertical
 *     tab (PCRE2: any vertical space) and Go's \12 is octal (PCRE2: maybe a
 *     backreference);
 *   - a '{' that does not start a Go repeat ({n}, {n,}, {n,m}, no leading
 *     zeros) is a literal \{ (PCRE2 10.43 reads {,n} as a repeat);
 *   - inside a class, every ASCII character other than a letter or digit is
 *     written as \x{...}, so '-' next to \d or [:alpha:] stays a literal
 *     (PCRE2 refuses it) and '[' never starts [. or [=;
 *   - \Q...\E becomes escaped literals, so an unterminated \Q cannot swallow
 *     the anchoring added around the pattern.
 * The walk is iterative; nesting depth is counted, not recursed.
 */
#include "processors/relabel/re2.h"

#include "core/err.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define MAX_REPEAT 1000 /* Go: "invalid repeat count" above this */
#define MAX_NESTING 1000

struct tr {
    const char *s;
    size_t n;
    size_t i;
    struct fc_buf *out;
    char *why;
    size_t why_size;
    int depth;
    bool can_repeat;     /* an item precedes, so *, +, ?, {n} have an argument */
    bool after_repeat;   /* the previous token was a repetition */
    bool repeated;       /* this token was one */
    size_t repeat_start; /* where that repetition began */
};

static int fail(struct tr *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static int fail(struct tr *t, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(t->why, t->why_size, fmt, ap);
    va_end(ap);
    return -1;
}

static int emit(struct tr *t, const char *p, size_t n)
{
    if (fc_buf_append(t->out, p, n) != FC_OK) {
        return fail(t, "pattern too long");
    }
    return 0;
}

static int emit_cp(struct tr *t, int32_t cp)
{
    char tmp[16];
    int n = snprintf(tmp, sizeof(tmp), "\\x{%X}", (unsigned)cp);

    return emit(t, tmp, (size_t)n);
}

size_t fc__relabel_utf8_decode(const uint8_t *s, size_t n, int32_t *cp)
{
    uint8_t b0 = s[0];
    uint8_t lo = 0x80;
    uint8_t hi = 0xBF;
    size_t need;
    int32_t v;

    *cp = -1;
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    if (b0 < 0xC2) {
        return 1;
    } else if (b0 < 0xE0) {
        need = 1;
        v = b0 & 0x1F;
    } else if (b0 < 0xF0) {
        need = 2;
        v = b0 & 0x0F;
        lo = b0 == 0xE0 ? 0xA0 : 0x80; /* overlong */
        hi = b0 == 0xED ? 0x9F : 0xBF; /* surrogates */
    } else if (b0 < 0xF5) {
        need = 3;
        v = b0 & 0x07;
        lo = b0 == 0xF0 ? 0x90 : 0x80; /* overlong */
        hi = b0 == 0xF4 ? 0x8F : 0xBF; /* above U+10FFFF */
    } else {
        return 1;
    }
    if (n < need + 1 || s[1] < lo || s[1] > hi) {
        return 1;
    }
    v = (v << 6) | (s[1] & 0x3F);
    for (size_t k = 2; k <= need; k++) {
        if (s[k] < 0x80 || s[k] > 0xBF) {
            return 1;
        }
        v = (v << 6) | (s[k] & 0x3F);
    }
    *cp = v;
    return need + 1;
}

int fc__relabel_utf8_put(struct fc_buf *out, int32_t cp)
{
    uint8_t b[4];
    size_t n;

    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (uint8_t)(0xC0 | (cp >> 6));
        b[1] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (uint8_t)(0xE0 | (cp >> 12));
        b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (uint8_t)(0xF0 | (cp >> 18));
        b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (uint8_t)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return fc_buf_append(out, b, n);
}

static bool is_alnum(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_word(int c)
{
    return is_alnum(c) || c == '_';
}

static bool is_octal(const struct tr *t, size_t i)
{
    return i < t->n && t->s[i] >= '0' && t->s[i] <= '7';
}

static int hex_val(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* The next rune at t->i, which must be valid UTF-8 (Go: "invalid UTF-8"). */
static int next_rune(struct tr *t, int32_t *cp)
{
    size_t k = fc__relabel_utf8_decode((const uint8_t *)t->s + t->i, t->n - t->i, cp);

    if (*cp < 0) {
        return fail(t, "invalid UTF-8: `%.*s`", (int)(t->n - t->i), t->s + t->i);
    }
    t->i += k;
    return 0;
}

/*
 * One escape that stands for one character (Go's parseEscape), t->i at the
 * backslash: octal, \x.., C escapes, escaped punctuation. Anything else fails.
 */
static int escape_char(struct tr *t, int32_t *cp)
{
    size_t start = t->i;
    int c;

    t->i++;
    if (t->i >= t->n) {
        return fail(t, "trailing backslash at end of expression: ``");
    }
    c = (unsigned char)t->s[t->i];
    if (c >= 0x80) {
        int32_t r;
        if (next_rune(t, &r) != 0) {
            return -1;
        }
        return fail(t, "invalid escape sequence: `%.*s`", (int)(t->i - start), t->s + start);
    }
    t->i++;
    switch (c) {
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
        if (!is_octal(t, t->i)) {
            break; /* a single non-zero digit is a backreference */
        }
        /* fall through */
    case '0':
        *cp = c - '0';
        for (int k = 1; k < 3 && is_octal(t, t->i); k++) {
            *cp = *cp * 8 + (t->s[t->i++] - '0');
        }
        return 0;
    case 'x': {
        int x;
        int y;
        if (t->i >= t->n) {
            break;
        }
        if (t->s[t->i] == '{') {
            int32_t v = 0;
            int nhex = 0;
            t->i++;
            for (;;) {
                if (t->i >= t->n) {
                    goto invalid;
                }
                c = (unsigned char)t->s[t->i++];
                if (c == '}') {
                    break;
                }
                if (hex_val(c) < 0) {
                    goto invalid;
                }
                v = v * 16 + hex_val(c);
                if (v > 0x10FFFF) {
                    goto invalid;
                }
                nhex++;
            }
            if (nhex == 0) {
                goto invalid;
            }
            *cp = v;
            return 0;
        }
        if (t->i + 1 >= t->n) {
            t->i = t->n;
            break;
        }
        x = hex_val((unsigned char)t->s[t->i]);
        y = hex_val((unsigned char)t->s[t->i + 1]);
        t->i += 2;
        if (x < 0 || y < 0) {
            break;
        }
        *cp = x * 16 + y;
        return 0;
    }
    case 'a':
        *cp = '\a';
        return 0;
    case 'f':
        *cp = '\f';
        return 0;
    case 'n':
        *cp = '\n';
        return 0;
    case 'r':
        *cp = '\r';
        return 0;
    case 't':
        *cp = '\t';
        return 0;
    case 'v':
        *cp = '\v';
        return 0;
    default:
        if (!is_alnum(c)) {
            *cp = c; /* escaped punctuation is itself */
            return 0;
        }
    }
invalid:
    if ((c >= '1' && c <= '9') || c == 'g' || c == 'k') {
        return fail(t,
                    "invalid escape sequence: `%.*s` (backreferences are not supported in RE2 "
                    "syntax)",
                    (int)(t->i - start), t->s + start);
    }
    if (c == 'C') {
        return fail(t, "invalid escape sequence: `\\C` (matching a single byte is not supported "
                       "in RE2 syntax)");
    }
    return fail(t, "invalid escape sequence: `%.*s`", (int)(t->i - start), t->s + start);
}

/* \pL, \PL, \p{Greek}, \p{^Greek}: copied (PCRE2 knows Go's categories and scripts). */
static int unicode_class(struct tr *t)
{
    size_t start = t->i;

    t->i += 2;
    if (t->i >= t->n) {
        return fail(t, "invalid character class range: `%.*s`", (int)(t->i - start), t->s + start);
    }
    if (t->s[t->i] == '{') {
        const char *close = memchr(t->s + t->i, '}', t->n - t->i);
        if (close == NULL) {
            return fail(t, "invalid character class range: `%.*s`", (int)(t->n - start),
                        t->s + start);
        }
        for (const char *p = t->s + t->i + 1; p < close; p++) {
            if (!is_word((unsigned char)*p) && !(*p == '^' && p == t->s + t->i + 1)) {
                return fail(t, "invalid character class range: `%.*s`",
                            (int)(close + 1 - (t->s + start)), t->s + start);
            }
        }
        t->i = (size_t)(close + 1 - t->s);
    } else {
        int32_t cp;
        if (next_rune(t, &cp) != 0) {
            return -1;
        }
        if (cp >= 0x80 || !is_alnum(cp)) {
            return fail(t, "invalid character class range: `%.*s`", (int)(t->i - start),
                        t->s + start);
        }
    }
    return emit(t, t->s + start, t->i - start);
}

static bool perl_class(const struct tr *t)
{
    return t->i + 1 < t->n && t->s[t->i] == '\\' && t->s[t->i + 1] != '\0' &&
           strchr("dDsSwW", t->s[t->i + 1]) != NULL;
}

static const char *const posix_classes[] = {
    "alnum", "alpha", "ascii", "blank", "cntrl", "digit", "graph",
    "lower", "print", "punct", "space", "upper", "word",  "xdigit",
};

/* One character in a class: an escape or a rune. */
static int class_char(struct tr *t, int32_t *cp)
{
    if (t->s[t->i] == '\\') {
        return escape_char(t, cp);
    }
    return next_rune(t, cp);
}

static int emit_class_cp(struct tr *t, int32_t cp)
{
    if (cp < 0x80 && !is_alnum(cp)) {
        return emit_cp(t, cp);
    }
    return fc__relabel_utf8_put(t->out, cp) == FC_OK ? 0 : fail(t, "pattern too long");
}

/* [...] (Go's parseClass), t->i at '['. */
static int char_class(struct tr *t)
{
    size_t start = t->i;
    bool first = true;

    t->i++;
    if (emit(t, "[", 1) != 0) {
        return -1;
    }
    if (t->i < t->n && t->s[t->i] == '^') {
        t->i++;
        if (emit(t, "^", 1) != 0) {
            return -1;
        }
    }
    for (;;) {
        int32_t lo;
        int32_t hi;
        size_t item;
        if (t->i >= t->n) {
            return fail(t, "missing closing ]: `%.*s`", (int)(t->n - start), t->s + start);
        }
        if (t->s[t->i] == ']' && !first) {
            t->i++;
            return emit(t, "]", 1);
        }
        first = false;
        if (t->i + 2 < t->n && t->s[t->i] == '[' && t->s[t->i + 1] == ':') {
            const char *end = NULL;
            for (size_t k = t->i + 2; k + 1 < t->n; k++) {
                if (t->s[k] == ':' && t->s[k + 1] == ']') {
                    end = t->s + k;
                    break;
                }
            }
            if (end != NULL) {
                const char *name = t->s + t->i + 2;
                size_t len = (size_t)(end - name);
                bool known = false;
                if (len > 0 && name[0] == '^') {
                    name++;
                    len--;
                }
                for (size_t k = 0; k < sizeof(posix_classes) / sizeof(posix_classes[0]); k++) {
                    if (strlen(posix_classes[k]) == len &&
                        memcmp(posix_classes[k], name, len) == 0) {
                        known = true;
                    }
                }
                if (!known) {
                    return fail(t, "invalid character class range: `%.*s`",
                                (int)(end + 2 - (t->s + t->i)), t->s + t->i);
                }
                if (emit(t, t->s + t->i, (size_t)(end + 2 - (t->s + t->i))) != 0) {
                    return -1;
                }
                t->i = (size_t)(end + 2 - t->s);
                continue;
            }
        }
        if (t->i + 1 < t->n && t->s[t->i] == '\\' &&
            (t->s[t->i + 1] == 'p' || t->s[t->i + 1] == 'P')) {
            if (unicode_class(t) != 0) {
                return -1;
            }
            continue;
        }
        if (perl_class(t)) {
            if (emit(t, t->s + t->i, 2) != 0) {
                return -1;
            }
            t->i += 2;
            continue;
        }
        item = t->i;
        if (class_char(t, &lo) != 0 || emit_class_cp(t, lo) != 0) {
            return -1;
        }
        hi = lo;
        if (t->i + 1 < t->n && t->s[t->i] == '-' && t->s[t->i + 1] != ']') {
            t->i++;
            if (class_char(t, &hi) != 0) {
                return -1;
            }
            if (hi < lo) {
                return fail(t, "invalid character class range: `%.*s`", (int)(t->i - item),
                            t->s + item);
            }
            if (emit(t, "-", 1) != 0 || emit_class_cp(t, hi) != 0) {
                return -1;
            }
        }
    }
}

/* {n}, {n,}, {n,m} as Go's parseRepeat reads them; false when s is not one (a literal '{'). */
static bool parse_repeat(const struct tr *t, size_t i, long *min, long *max, size_t *end)
{
    long *slot = min;

    if (i >= t->n || t->s[i] != '{') {
        return false;
    }
    i++;
    *max = -2; /* not seen */
    for (int part = 0; part < 2; part++) {
        long v = 0;
        size_t digits = 0;
        if (part == 1) {
            if (i >= t->n) {
                return false;
            }
            if (t->s[i] == '}') {
                *max = -1;
                break;
            }
            slot = max;
        }
        if (i >= t->n || t->s[i] < '0' || t->s[i] > '9') {
            return false;
        }
        if (t->s[i] == '0' && i + 1 < t->n && t->s[i + 1] >= '0' && t->s[i + 1] <= '9') {
            return false; /* leading zero */
        }
        while (i < t->n && t->s[i] >= '0' && t->s[i] <= '9') {
            if (v < 100000000) {
                v = v * 10 + (t->s[i] - '0');
            } else {
                v = 100000001; /* too big: an error later, not a literal */
            }
            i++;
            digits++;
        }
        *slot = v;
        if (part == 0) {
            if (i >= t->n) {
                return false;
            }
            if (t->s[i] != ',') {
                *max = v;
                break;
            }
            i++;
        }
    }
    if (i >= t->n || t->s[i] != '}') {
        return false;
    }
    *end = i + 1;
    return true;
}

/* After *, +, ?, {..} at t->i (operator already checked): lazy '?', refuses '+'. */
static int repetition(struct tr *t, size_t op_start, const char *text, size_t len)
{
    if (!t->can_repeat) {
        return fail(t, "missing argument to repetition operator: `%.*s`", (int)(t->i - op_start),
                    t->s + op_start);
    }
    if (t->after_repeat) {
        if (t->s[op_start] == '+') {
            return fail(t,
                        "invalid nested repetition operator: `%.*s` (possessive quantifiers "
                        "are not supported in RE2 syntax)",
                        (int)(t->i - t->repeat_start), t->s + t->repeat_start);
        }
        return fail(t, "invalid nested repetition operator: `%.*s`", (int)(t->i - t->repeat_start),
                    t->s + t->repeat_start);
    }
    if (emit(t, text, len) != 0) {
        return -1;
    }
    if (t->i < t->n && t->s[t->i] == '?') {
        t->i++;
        if (emit(t, "?", 1) != 0) {
            return -1;
        }
    }
    t->repeated = true;
    t->repeat_start = op_start;
    return 0;
}

static int unsupported_group(struct tr *t, size_t start, size_t len, const char *what)
{
    return fail(t,
                "invalid or unsupported Perl syntax: `%.*s` (%s are not supported in RE2 syntax)",
                (int)len, t->s + start, what);
}

/* PCRE group syntax after "(?" that RE2 refuses, and what to call it. */
static const struct {
    char c;
    const char *what;
} refused[] = {
    {'=', "lookahead and lookbehind assertions"},
    {'!', "lookahead and lookbehind assertions"},
    {'<', "lookahead and lookbehind assertions"},
    {'>', "atomic groups"},
    {'(', "conditionals"},
    {'R', "recursion and subroutine calls"},
    {'&', "recursion and subroutine calls"},
    {'+', "recursion and subroutine calls"},
    {'#', "comments"},
    {'|', "branch resets"},
    {'C', "callouts"},
};

/* "(?" at t->i: named groups, flags, non-capturing groups (Go's parsePerlFlags). */
static int perl_group(struct tr *t)
{
    size_t start = t->i;
    const char *s = t->s;
    size_t n = t->n;
    size_t j = start + 2;
    char c = j < n ? s[j] : '\0';
    char d = j + 1 < n ? s[j + 1] : '\0';
    bool named = (c == 'P' && d == '<') || (c == '<' && d != '=' && d != '!');

    if (named) {
        size_t name_at = c == 'P' ? j + 2 : j + 1;
        const char *gt = memchr(s + name_at, '>', n - name_at);
        if (gt == NULL) {
            return fail(t, "invalid named capture: `%.*s`", (int)(n - start), s + start);
        }
        if (gt == s + name_at) {
            return fail(t, "invalid named capture: `%.*s`", (int)(gt + 1 - (s + start)), s + start);
        }
        for (const char *p = s + name_at; p < gt; p++) {
            if (!is_word((unsigned char)*p)) {
                return fail(t, "invalid named capture: `%.*s`", (int)(gt + 1 - (s + start)),
                            s + start);
            }
        }
        if (emit(t, "(?<", 3) != 0 || emit(t, s + name_at, (size_t)(gt - (s + name_at))) != 0 ||
            emit(t, ">", 1) != 0) {
            return -1;
        }
        t->i = (size_t)(gt + 1 - s);
        t->depth++;
        t->can_repeat = false;
        return 0;
    }
    if (c == 'P') {
        if (d == '=') {
            return unsupported_group(t, start, 4, "backreferences");
        }
        if (d == '>') {
            return unsupported_group(t, start, 4, "recursion and subroutine calls");
        }
        return fail(t, "invalid or unsupported Perl syntax: `%.*s`", (int)(j + 1 - start),
                    s + start);
    }
    for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
        if (c == refused[k].c) {
            /* '<' is here only as (?<= or (?<!: names were taken above */
            return unsupported_group(t, start, c == '<' ? 4 : 3, refused[k].what);
        }
    }
    if ((c >= '0' && c <= '9') || (c == '-' && d >= '0' && d <= '9')) {
        return unsupported_group(t, start, c == '-' ? 4 : 3, "recursion and subroutine calls");
    }
    {
        int sign = 1;
        bool saw = false;
        for (; j < n; j++) {
            c = s[j];
            if (c == 'i' || c == 'm' || c == 's' || c == 'U') {
                saw = true;
                continue;
            }
            if (c == '-') {
                if (sign < 0) {
                    break;
                }
                sign = -1;
                saw = false;
                continue;
            }
            if (c == ':' || c == ')') {
                if (sign < 0 && !saw) {
                    break;
                }
                if (emit(t, s + start, j + 1 - start) != 0) {
                    return -1;
                }
                t->i = j + 1;
                if (c == ':') {
                    t->depth++;
                }
                t->can_repeat = false;
                return 0;
            }
            break;
        }
        if (j < n) {
            j++;
        }
        return fail(t, "invalid or unsupported Perl syntax: `%.*s`", (int)(j - start), s + start);
    }
}

/* \Q...\E: literals up to \E or the end. */
static int quoted_literal(struct tr *t)
{
    const char *end = NULL;
    size_t stop;

    t->i += 2;
    for (size_t k = t->i; k + 1 < t->n; k++) {
        if (t->s[k] == '\\' && t->s[k + 1] == 'E') {
            end = t->s + k;
            break;
        }
    }
    stop = end != NULL ? (size_t)(end - t->s) : t->n;
    while (t->i < stop) {
        int32_t cp;
        if (next_rune(t, &cp) != 0 || emit_class_cp(t, cp) != 0) {
            return -1;
        }
        t->can_repeat = true;
    }
    t->i = end != NULL ? stop + 2 : t->n;
    return 0;
}

static int step(struct tr *t)
{
    char c = t->s[t->i];
    size_t op_start = t->i;

    switch (c) {
    case '(':
        if (t->i + 1 < t->n && t->s[t->i + 1] == '?') {
            return perl_group(t);
        }
        if (t->i + 1 < t->n && t->s[t->i + 1] == '*') {
            return fail(t, "missing argument to repetition operator: `*` (PCRE verbs such as "
                           "(*SKIP) are not supported in RE2 syntax)");
        }
        if (++t->depth > MAX_NESTING) {
            return fail(t, "expression nests too deeply");
        }
        t->i++;
        t->can_repeat = false;
        return emit(t, "(", 1);
    case ')':
        if (t->depth == 0) {
            return fail(t, "unexpected ): `%.*s`", (int)t->n, t->s);
        }
        t->depth--;
        t->i++;
        t->can_repeat = true;
        return emit(t, ")", 1);
    case '|':
        t->i++;
        t->can_repeat = false;
        return emit(t, "|", 1);
    case '^':
    case '$':
    case '.':
        t->i++;
        t->can_repeat = true;
        return emit(t, &c, 1);
    case '[':
        t->can_repeat = true;
        return char_class(t);
    case '*':
    case '+':
    case '?':
        t->i++;
        return repetition(t, op_start, &c, 1);
    case '{': {
        long min;
        long max;
        size_t end;
        char text[48];
        int len;
        if (!parse_repeat(t, t->i, &min, &max, &end)) {
            t->i++;
            t->can_repeat = true;
            return emit(t, "\\{", 2);
        }
        t->i = end;
        if (min > MAX_REPEAT || max > MAX_REPEAT || (max >= 0 && min > max)) {
            return fail(t, "invalid repeat count: `%.*s`", (int)(end - op_start), t->s + op_start);
        }
        if (max == -1) {
            len = snprintf(text, sizeof(text), "{%ld,}", min);
        } else if (max == min) {
            len = snprintf(text, sizeof(text), "{%ld}", min);
        } else {
            len = snprintf(text, sizeof(text), "{%ld,%ld}", min, max);
        }
        return repetition(t, op_start, text, (size_t)len);
    }
    case '}':
    case ']':
        t->i++;
        t->can_repeat = true;
        return emit_cp(t, c);
    case '\\': {
        char e = t->i + 1 < t->n ? t->s[t->i + 1] : '\0';
        int32_t cp;
        t->can_repeat = true;
        if (e == 'A' || e == 'b' || e == 'B' || e == 'z') {
            t->i += 2;
            return emit(t, t->s + op_start, 2);
        }
        if (e == 'C') {
            t->i += 2;
            return fail(t, "invalid escape sequence: `\\C` (matching a single byte is not "
                           "supported in RE2 syntax)");
        }
        if (e == 'Q') {
            t->can_repeat = false;
            return quoted_literal(t);
        }
        if (e == 'p' || e == 'P') {
            return unicode_class(t);
        }
        if (perl_class(t)) {
            t->i += 2;
            return emit(t, t->s + op_start, 2);
        }
        if (escape_char(t, &cp) != 0) {
            return -1;
        }
        return emit_cp(t, cp);
    }
    default: {
        int32_t cp;
        if (next_rune(t, &cp) != 0) {
            return -1;
        }
        t->can_repeat = true;
        return emit(t, t->s + op_start, t->i - op_start);
    }
    }
}

int fc__relabel_re2_translate(const char *re, size_t len, struct fc_buf *out, char *why,
                              size_t why_size)
{
    struct tr t = {re, len, 0, out, why, why_size, 0, false, false, false, 0};

    while (t.i < t.n) {
        t.repeated = false;
        if (step(&t) != 0) {
            return -1;
        }
        t.after_repeat = t.repeated;
    }
    if (t.depth > 0) {
        return fail(&t, "missing closing ): `%.*s`", (int)t.n, t.s);
    }
    return 0;
}
