/*
 * The relabel rule engine: a rule list in YAML, compiled under both name
 * schemes, applied (twice, with one scratch) to a label set. Input: the body
 * of relabel_configs: (a YAML list), then a line "%%", then name=value lines.
 * Checks the result's invariants: names sorted and unique, none empty, no
 * empty value.
 */
#include "config/load.h"
#include "processors/relabel/rules.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct fc_relabel_labels *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        const struct fc_relabel_label *l = &ls->items[i];
        if (l->name_len == 0 || l->value_len == 0) {
            abort();
        }
        if (i > 0) {
            const struct fc_relabel_label *p = &ls->items[i - 1];
            size_t n = p->name_len < l->name_len ? p->name_len : l->name_len;
            int c = memcmp(p->name, l->name, n);
            if (c > 0 || (c == 0 && p->name_len >= l->name_len)) {
                abort();
            }
        }
    }
}

static void labels_from(const char *p, const char *end, struct fc_relabel_labels *ls)
{
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl != NULL ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(line_end - p));
        if (eq != NULL) {
            fc_relabel_labels_set(ls, p, (size_t)(eq - p), eq + 1, (size_t)(line_end - eq - 1));
        }
        p = line_end + 1;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char head[] = "relabel_configs:\n";
    const char *in = (const char *)data;
    const char *sep = NULL;
    size_t yaml_len = size;
    char *text;
    struct fc_arena *a = fc_arena_new(0);
    struct fc_diag d;
    struct fc_node *root;

    for (size_t i = 0; i + 3 <= size; i++) {
        if (memcmp(in + i, "%%\n", 3) == 0 && (i == 0 || in[i - 1] == '\n')) {
            sep = in + i;
            yaml_len = i;
            break;
        }
    }
    text = malloc(sizeof(head) + yaml_len);
    memcpy(text, head, sizeof(head) - 1);
    memcpy(text + sizeof(head) - 1, in, yaml_len);
    fc_diag_init(&d);
    root = fc_config_load_string(a, "fuzz.yaml", text, sizeof(head) - 1 + yaml_len, &d);
    for (int scheme = 0; root != NULL && scheme < 2; scheme++) {
        struct fc_relabel_rules *rules;
        struct fc_error err = {0};
        struct fc_relabel_scratch s;
        struct fc_relabel_labels ls;
        if (fc_relabel_compile(fc_node_get(root, "relabel_configs"), NULL,
                               scheme ? FC_RELABEL_NAMES_LEGACY : FC_RELABEL_NAMES_UTF8, &rules,
                               &err) != FC_OK) {
            continue;
        }
        fc_relabel_scratch_init(&s);
        fc_relabel_labels_init(&ls);
        if (sep != NULL) {
            labels_from(sep + 3, in + size, &ls);
        } else {
            fc_relabel_labels_set(&ls, "service_name", 12, "api-checkout", 12);
            fc_relabel_labels_set(&ls, "__name__", 8, "process_cpu", 11);
        }
        for (int round = 0; round < 2; round++) {
            struct fc_arena *out = fc_arena_new(1 << 24);
            int rc = fc_relabel_apply(rules, &ls, &s, out);
            if (rc == FC_RELABEL_KEEP) {
                check(&ls);
            }
            /* The next round reads the result, whose strings live in out: copy them first. */
            for (size_t i = 0; i < ls.n; i++) {
                ls.items[i].name = fc_arena_memdup(a, ls.items[i].name, ls.items[i].name_len);
                ls.items[i].value = fc_arena_memdup(a, ls.items[i].value, ls.items[i].value_len);
            }
            fc_arena_free(out);
            if (rc != FC_RELABEL_KEEP) {
                break;
            }
        }
        fc_relabel_labels_release(&ls);
        fc_relabel_scratch_release(&s);
        fc_relabel_rules_free(rules);
    }
    fc_diag_release(&d);
    free(text);
    fc_arena_free(a);
    return 0;
}
