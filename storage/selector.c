#include "storage/selector.h"

#include "core/buf.h"
#include "core/mem.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <ctype.h>
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

struct parser {
    const char *s;
    size_t i;
    struct fc_error *err;
};

static int fail(struct parser *p, const char *what)
{
    return fc_errorf(p->err, FC_EPROTO, "selector: col %zu: %s", p->i + 1, what);
}

static void ws(struct parser *p)
{
    while (isspace((unsigned char)p->s[p->i])) {
        p->i++;
    }
}

static bool name_char(char c, bool first)
{
    return isalpha((unsigned char)c) || c == '_' ||
           (!first && (isdigit((unsigned char)c) || c == '.'));
}

/* A quoted string ("...", '...' with escapes, `...` raw) into a new string. */
static int quoted(struct parser *p, char **out)
{
    char q = p->s[p->i];
    struct fc_buf b;

    if (q != '"' && q != '\'' && q != '`') {
        return fail(p, "expected a quoted string");
    }
    p->i++;
    fc_buf_init(&b, 1 << 20);
    fc_buf_append(&b, "", 0);
    while (p->s[p->i] != q) {
        char c = p->s[p->i];
        if (c == '\0') {
            fc_buf_release(&b);
            return fail(p, "unterminated string");
        }
        if (c == '\\' && q != '`') {
            char e = p->s[++p->i];
            switch (e) {
            case 'n':
                c = '\n';
                break;
            case 't':
                c = '\t';
                break;
            case 'r':
                c = '\r';
                break;
            case '\\':
            case '"':
            case '\'':
                c = e;
                break;
            case '\0':
                fc_buf_release(&b);
                return fail(p, "unterminated escape");
            default:
                /* Unknown escapes keep the backslash: regexes use them (\d, \.). */
                fc_buf_append(&b, "\\", 1);
                c = e;
            }
        }
        if (fc_buf_append(&b, &c, 1) != FC_OK) {
            fc_buf_release(&b);
            return fail(p, "string too long");
        }
        p->i++;
    }
    p->i++;
    *out = (char *)fc_buf_detach(&b, NULL);
    return FC_OK;
}

static int label_name(struct parser *p, char **out)
{
    size_t start = p->i;

    if (p->s[p->i] == '"') {
        return quoted(p, out); /* UTF-8 names: {"service.name"="x"} */
    }
    if (!name_char(p->s[p->i], true)) {
        return fail(p, "expected a label name");
    }
    while (name_char(p->s[p->i], false)) {
        p->i++;
    }
    *out = fc_xstrndup(p->s + start, p->i - start);
    return FC_OK;
}

static int compile(struct parser *p, struct fc_matcher *m)
{
    int code;
    PCRE2_SIZE off;
    char *anchored = fc_xasprintf("^(?:%s)$", m->value);
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)anchored, PCRE2_ZERO_TERMINATED, PCRE2_UTF, &code, &off, NULL);

    free(anchored);
    if (re == NULL) {
        PCRE2_UCHAR msg[128];
        pcre2_get_error_message(code, msg, sizeof(msg));
        return fc_errorf(p->err, FC_EPROTO, "selector: label %s: bad regex \"%s\": %s", m->name,
                         m->value, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* best effort: falls back to the interpreter */
    m->re = re;
    return FC_OK;
}

int fc_selector_parse(const char *text, struct fc_selector *out, struct fc_error *err)
{
    struct parser p = {text, 0, err};
    size_t cap = 0;
    int rc = FC_OK;

    memset(out, 0, sizeof(*out));
    ws(&p);
    if (text[p.i] != '{' && text[p.i] != '\0') {
        size_t start = p.i;
        while (isalnum((unsigned char)text[p.i]) || text[p.i] == '_' || text[p.i] == ':' ||
               text[p.i] == '.' || text[p.i] == '-') {
            p.i++;
        }
        if (p.i == start) {
            return fail(&p, "expected a profile type or '{'");
        }
        out->profile_type = fc_xstrndup(text + start, p.i - start);
        ws(&p);
    }
    if (text[p.i] == '{') {
        p.i++;
        for (;;) {
            struct fc_matcher m = {0};
            ws(&p);
            if (text[p.i] == '}') {
                p.i++;
                break;
            }
            if ((rc = label_name(&p, &m.name)) != FC_OK) {
                break;
            }
            ws(&p);
            if (text[p.i] == '=' && text[p.i + 1] == '~') {
                m.op = FC_MATCH_RE;
                p.i += 2;
            } else if (text[p.i] == '!' && text[p.i + 1] == '~') {
                m.op = FC_MATCH_NRE;
                p.i += 2;
            } else if (text[p.i] == '!' && text[p.i + 1] == '=') {
                m.op = FC_MATCH_NE;
                p.i += 2;
            } else if (text[p.i] == '=') {
                m.op = FC_MATCH_EQ;
                p.i += 1;
            } else {
                free(m.name);
                rc = fail(&p, "expected '=', '!=', '=~' or '!~'");
                break;
            }
            ws(&p);
            if ((rc = quoted(&p, &m.value)) != FC_OK ||
                ((m.op == FC_MATCH_RE || m.op == FC_MATCH_NRE) &&
                 (rc = compile(&p, &m)) != FC_OK)) {
                free(m.name);
                free(m.value);
                break;
            }
            if (out->n == cap) {
                cap = cap ? cap * 2 : 4;
                out->matchers = fc_xrealloc(out->matchers, cap * sizeof(m));
            }
            out->matchers[out->n++] = m;
            ws(&p);
            if (text[p.i] == ',') {
                p.i++;
                continue;
            }
            if (text[p.i] != '}') {
                rc = fail(&p, "expected ',' or '}'");
                break;
            }
        }
        ws(&p);
    }
    if (rc == FC_OK && text[p.i] != '\0') {
        rc = fail(&p, "unexpected text after the selector");
    }
    if (rc != FC_OK) {
        fc_selector_release(out);
    }
    return rc;
}

void fc_selector_release(struct fc_selector *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->matchers[i].name);
        free(s->matchers[i].value);
        pcre2_code_free(s->matchers[i].re);
    }
    free(s->matchers);
    free(s->profile_type);
    memset(s, 0, sizeof(*s));
}

bool fc_matcher_match(const struct fc_matcher *m, const char *value)
{
    if (m->op == FC_MATCH_EQ || m->op == FC_MATCH_NE) {
        bool eq = strcmp(m->value, value) == 0;
        return m->op == FC_MATCH_EQ ? eq : !eq;
    }
    {
        pcre2_match_data *md = pcre2_match_data_create_from_pattern(m->re, NULL);
        int rc = pcre2_match(m->re, (PCRE2_SPTR)value, strlen(value), 0, 0, md, NULL);
        pcre2_match_data_free(md);
        return m->op == FC_MATCH_RE ? rc >= 0 : rc < 0;
    }
}
