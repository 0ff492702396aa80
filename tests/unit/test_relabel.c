/*
 * The relabel rule engine (processors/relabel/rules.h) against Prometheus'
 * documented relabel_config semantics (model/relabel, v3): one table of
 * cases, each a rule list in YAML, an input label set and the expected
 * result ("DROP", or the labels), or the expected error. Expected values
 * were worked out by hand from the documentation (Prometheus'
 * configuration reference, Go's regexp.Expand and regexp/syntax docs);
 * hashmod values with Python's hashlib, as noted at each case.
 *
 * YAML note: the config loader expands ${NAME} from the environment and
 * reads $$ as a literal $ (the Collector's rule), so a rule that wants
 * ${1} writes $${1} and one that wants $$ writes $$$$; $1 and $name pass as
 * they are.
 *
 * Label sets are written {a="1", b="x\ny"}: sorted by name, values with
 * \n, \" and \\ escapes (\xHH too in inputs); bytes >= 0x80 are printed raw.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "config/node.h"
#include "core/buf.h"
#include "core/mem.h"
#include "processors/relabel/rules.h"
#include "tests/unit/fc_test.h"

#define L FC_RELABEL_NAMES_LEGACY
#define U FC_RELABEL_NAMES_UTF8

struct tcase {
    const char *name;
    enum fc_relabel_names names;
    const char *rules; /* the list under relabel_configs: (from line 2 of test.yaml) */
    const char *in;
    const char *want; /* labels, or "DROP"; NULL when err is set */
    const char *err;  /* a substring of the compile error */
};

static const struct tcase cases[] = {
    /* ---- replace: defaults, anchoring, '.' and '$' ---- */
    {"replace defaults: regex (.*), replacement $1", U, "- {source_labels: [a], target_label: b}",
     "{a=\"x\"}", "{a=\"x\", b=\"x\"}"},
    {"a missing source reads as \"\"; an empty result deletes the target", U,
     "- {source_labels: [nope], target_label: b}", "{a=\"1\", b=\"old\"}", "{a=\"1\"}"},
    {"no source_labels: the value is \"\", which (.*) matches", U,
     "- {target_label: b, replacement: set}", "{a=\"1\"}", "{a=\"1\", b=\"set\"}"},
    {"a literal replacement when the regex matches", U,
     "- {source_labels: [a], regex: x, target_label: c, replacement: lit}", "{a=\"x\"}",
     "{a=\"x\", c=\"lit\"}"},
    {"no match, no change", U,
     "- {source_labels: [a], regex: y, target_label: c, replacement: lit}", "{a=\"x\"}",
     "{a=\"x\"}"},
    {"anchored: x does not match xx", U,
     "- {source_labels: [a], regex: x, target_label: c, replacement: lit}", "{a=\"xx\"}",
     "{a=\"xx\"}"},
    {"anchored at the start: bar does not match foobar", U,
     "- {source_labels: [a], regex: bar, target_label: c, replacement: lit}", "{a=\"foobar\"}",
     "{a=\"foobar\"}"},
    {"anchored at the end: foo does not match foobar", U,
     "- {source_labels: [a], regex: foo, target_label: c, replacement: lit}", "{a=\"foobar\"}",
     "{a=\"foobar\"}"},
    {"the anchors wrap the whole alternation: a|b does not match ac", U,
     "- {source_labels: [a], regex: 'a|b', target_label: c, replacement: lit}", "{a=\"ac\"}",
     "{a=\"ac\"}"},
    {"a|b matches b", U, "- {source_labels: [a], regex: 'a|b', target_label: c, replacement: lit}",
     "{a=\"b\"}", "{a=\"b\", c=\"lit\"}"},
    {"'.' matches a newline (?s)", U,
     "- {source_labels: [a], regex: 'a.b', target_label: c, replacement: lit}", "{a=\"a\\nb\"}",
     "{a=\"a\\nb\", c=\"lit\"}"},
    {"the default (.*) copies a value with a newline", U, "- {source_labels: [a], target_label: b}",
     "{a=\"x\\ny\"}", "{a=\"x\\ny\", b=\"x\\ny\"}"},
    {"(?-s) turns dot-all off inside the pattern", U,
     "- {source_labels: [a], regex: '(?-s)a.b', target_label: c, replacement: lit}",
     "{a=\"a\\nb\"}", "{a=\"a\\nb\"}"},
    {"$ is the end of the text, not before a final newline", U,
     "- {source_labels: [a], regex: abc, target_label: c, replacement: lit}", "{a=\"abc\\n\"}",
     "{a=\"abc\\n\"}"},
    {"(?i) folds case", U,
     "- {source_labels: [a], regex: '(?i)foo', target_label: c, replacement: lit}", "{a=\"FoO\"}",
     "{a=\"FoO\", c=\"lit\"}"},
    {"non-ASCII literal and capture", U, "- {source_labels: [a], regex: 'ä(.)', target_label: c}",
     "{a=\"äb\"}", "{a=\"äb\", c=\"b\"}"},
    {"a byte that is not UTF-8 is one character (U+FFFD) for '.'", U,
     "- {source_labels: [a], regex: 'a.b', target_label: c, replacement: lit}", "{a=\"a\\xffb\"}",
     "{a=\"a\xff"
     "b\", c=\"lit\"}"},
    {"lazy quantifier", U,
     "- {source_labels: [a], regex: '(a+?)(a*)', target_label: c, replacement: '$1'}",
     "{a=\"aaa\"}", "{a=\"aaa\", c=\"a\"}"},

    /* ---- RE2 syntax that PCRE2 reads differently ---- */
    {"\\Q...\\E is literal", U,
     "- {source_labels: [a], regex: '\\Q.*\\E', target_label: c, replacement: lit}", "{a=\".*\"}",
     "{a=\".*\", c=\"lit\"}"},
    {"\\Q...\\E does not match anything else", U,
     "- {source_labels: [a], regex: '\\Q.*\\E', target_label: c, replacement: lit}", "{a=\"ab\"}",
     "{a=\"ab\"}"},
    {"a{,3} is a literal in Go", U,
     "- {source_labels: [a], regex: 'a{,3}', target_label: c, replacement: lit}", "{a=\"a{,3}\"}",
     "{a=\"a{,3}\", c=\"lit\"}"},
    {"\\101 is octal A", U,
     "- {source_labels: [a], regex: '\\101', target_label: c, replacement: lit}", "{a=\"A\"}",
     "{a=\"A\", c=\"lit\"}"},
    {"\\v is a vertical tab only, not a newline", U,
     "- {source_labels: [a], regex: '\\v', target_label: c, replacement: lit}", "{a=\"\\n\"}",
     "{a=\"\\n\"}"},
    {"[\\d-z]: '-' after a class escape is a literal", U,
     "- {source_labels: [a], regex: '[\\d-z]+', target_label: c, replacement: lit}", "{a=\"1-z\"}",
     "{a=\"1-z\", c=\"lit\"}"},

    /* ---- separator ---- */
    {"default separator ;", U, "- {source_labels: [a, b], target_label: c}", "{a=\"1\", b=\"2\"}",
     "{a=\"1\", b=\"2\", c=\"1;2\"}"},
    {"custom separator", U, "- {source_labels: [a, b], separator: '-', target_label: c}",
     "{a=\"1\", b=\"2\"}", "{a=\"1\", b=\"2\", c=\"1-2\"}"},
    {"a missing label in the middle joins as \"\"", U,
     "- {source_labels: [a, m, b], target_label: c}", "{a=\"1\", b=\"2\"}",
     "{a=\"1\", b=\"2\", c=\"1;;2\"}"},
    {"separator: null is \"\" (yaml zero value)", U,
     "- {source_labels: [a, b], separator: ~, target_label: c}", "{a=\"1\", b=\"2\"}",
     "{a=\"1\", b=\"2\", c=\"12\"}"},

    /* ---- $ expansion (Go regexp.Expand) ---- */
    {"$2.$1 reorders groups", U,
     "- {source_labels: [a], regex: '(\\w+)-(\\w+)', target_label: c, replacement: '$2.$1'}",
     "{a=\"foo-bar\"}", "{a=\"foo-bar\", c=\"bar.foo\"}"},
    {"${1}x", U, "- {source_labels: [a], target_label: c, replacement: '$${1}x'}", "{a=\"foo\"}",
     "{a=\"foo\", c=\"foox\"}"},
    {"$1x is ${1x}: no such group, \"\" deletes the target", U,
     "- {source_labels: [a], target_label: c, replacement: '$1x'}", "{a=\"foo\", c=\"old\"}",
     "{a=\"foo\"}"},
    {"$10 is group 10, ${1}0 is group 1 then 0", U,
     "- {source_labels: [a], regex: '(a)(b)(c)(d)(e)(f)(g)(h)(i)(j)', target_label: c, "
     "replacement: '$10-$${1}0'}",
     "{a=\"abcdefghij\"}", "{a=\"abcdefghij\", c=\"j-a0\"}"},
    {"$name", U,
     "- {source_labels: [a], regex: '(?P<first>\\w+)-(?P<second>\\w+)', target_label: c, "
     "replacement: '$second'}",
     "{a=\"foo-bar\"}", "{a=\"foo-bar\", c=\"bar\"}"},
    {"${name}", U,
     "- {source_labels: [a], regex: '(?P<first>\\w+)-(?P<second>\\w+)', target_label: c, "
     "replacement: '$${first}_x'}",
     "{a=\"foo-bar\"}", "{a=\"foo-bar\", c=\"foo_x\"}"},
    {"$first_x is the name first_x: empty", U,
     "- {source_labels: [a], regex: '(?P<first>\\w+)-(?P<second>\\w+)', target_label: c, "
     "replacement: 'a$first_x'}",
     "{a=\"foo-bar\"}", "{a=\"foo-bar\", c=\"a\"}"},
    {"(?<name>...) groups (Go 1.22)", U,
     "- {source_labels: [a], regex: '(?<n>.+)', target_label: c, replacement: '<$n>'}",
     "{a=\"foo\"}", "{a=\"foo\", c=\"<foo>\"}"},
    {"$$ is a literal $", U, "- {source_labels: [a], target_label: c, replacement: '$$$$1'}",
     "{a=\"foo\"}", "{a=\"foo\", c=\"$1\"}"},
    {"$ before a non-name character, and at the end, is text", U,
     "- {source_labels: [a], target_label: c, replacement: 'a$-b$'}", "{a=\"foo\"}",
     "{a=\"foo\", c=\"a$-b$\"}"},
    {"an unclosed ${ is text", U, "- {source_labels: [a], target_label: c, replacement: '$${1'}",
     "{a=\"foo\"}", "{a=\"foo\", c=\"${1\"}"},
    {"a group number past the last group is \"\"", U,
     "- {source_labels: [a], target_label: c, replacement: 'v$${9}w'}", "{a=\"foo\"}",
     "{a=\"foo\", c=\"vw\"}"},
    {"a group that did not take part is \"\"", U,
     "- {source_labels: [a], regex: '(a)?(b)', target_label: c, replacement: '[$1]'}", "{a=\"b\"}",
     "{a=\"b\", c=\"[]\"}"},
    {"replacement '' deletes the target", U,
     "- {source_labels: [a], target_label: c, replacement: ''}", "{a=\"1\", c=\"2\"}", "{a=\"1\"}"},
    {"replacement: null is \"\" and deletes the target", U,
     "- {source_labels: [a], target_label: c, replacement: ~}", "{a=\"1\", c=\"2\"}", "{a=\"1\"}"},
    {"regex: null is the empty regex: matches \"\"", U,
     "- {source_labels: [a], regex: ~, target_label: c, replacement: ok}", "{b=\"1\"}",
     "{b=\"1\", c=\"ok\"}"},
    {"regex: null does not match a non-empty value", U,
     "- {source_labels: [a], regex: ~, target_label: c, replacement: ok}", "{a=\"1\"}",
     "{a=\"1\"}"},

    /* ---- target_label with $ ---- */
    {"target_label $1", U,
     "- {source_labels: [a], regex: '(\\w+)=(\\w+)', target_label: '$1', replacement: '$2'}",
     "{a=\"k=v\"}", "{a=\"k=v\", k=\"v\"}"},
    {"target_label ${1}_x", U,
     "- {source_labels: [a], regex: '(\\w+)=(\\w+)', target_label: '$${1}_x', replacement: '$2'}",
     "{a=\"k=v\"}", "{a=\"k=v\", k_x=\"v\"}"},
    {"an expanded target that is empty is not a label name: no change", U,
     "- {source_labels: [nope], target_label: '$1'}", "{a=\"1\"}", "{a=\"1\"}"},
    {"UTF-8 names: an expanded target a-b is valid", U,
     "- {source_labels: [a], regex: '(.*)=(.*)', target_label: '$1', replacement: '$2'}",
     "{a=\"a-b=v\"}", "{a=\"a-b=v\", a-b=\"v\"}"},
    {"legacy names: an expanded target a-b is not: no change", L,
     "- {source_labels: [a], regex: '(.*)=(.*)', target_label: '$1', replacement: '$2'}",
     "{a=\"a-b=v\"}", "{a=\"a-b=v\"}"},
    {"legacy names: foo_${1} is a valid target", L,
     "- {source_labels: [a], target_label: 'foo_$${1}'}", "{a=\"x\"}", "{a=\"x\", foo_x=\"x\"}"},
    {"UTF-8 names: a dotted target", U, "- {source_labels: [a], target_label: k8s.pod}",
     "{a=\"p\"}", "{a=\"p\", k8s.pod=\"p\"}"},

    /* ---- keep / drop ---- */
    {"keep: match keeps", U, "- {source_labels: [a], regex: 'x.*', action: keep}", "{a=\"xy\"}",
     "{a=\"xy\"}"},
    {"keep: no match drops (anchored)", U, "- {source_labels: [a], regex: 'x.*', action: keep}",
     "{a=\"yx\"}", "DROP"},
    {"action is case-insensitive", U, "- {source_labels: [a], regex: x, action: KEEP}", "{a=\"y\"}",
     "DROP"},
    {"drop: match drops", U, "- {source_labels: [a], regex: debug, action: drop}", "{a=\"debug\"}",
     "DROP"},
    {"drop: anchored, debugger stays", U, "- {source_labels: [a], regex: debug, action: drop}",
     "{a=\"debugger\"}", "{a=\"debugger\"}"},
    {"keep with the default regex keeps even a missing label", U,
     "- {source_labels: [nope], action: keep}", "{a=\"1\"}", "{a=\"1\"}"},
    {"drop on joined sources", U, "- {source_labels: [a, b], regex: '1;2', action: drop}",
     "{a=\"1\", b=\"2\"}", "DROP"},
    {"rules apply in order: a label set by rule 1 drops in rule 2", U,
     "- {source_labels: [a], target_label: b, replacement: 'x_$1'}\n"
     "- {source_labels: [b], regex: 'x_.*', action: drop}",
     "{a=\"1\"}", "DROP"},
    {"a drop that does not match lets later rules run", U,
     "- {source_labels: [a], regex: nomatch, action: drop}\n"
     "- {target_label: c, replacement: set}",
     "{a=\"1\"}", "{a=\"1\", c=\"set\"}"},

    /* ---- keepequal / dropequal ---- */
    {"keepequal: equal keeps", U, "- {source_labels: [a], target_label: b, action: keepequal}",
     "{a=\"1\", b=\"1\"}", "{a=\"1\", b=\"1\"}"},
    {"keepequal: different drops", U, "- {source_labels: [a], target_label: b, action: keepequal}",
     "{a=\"1\", b=\"2\"}", "DROP"},
    {"keepequal: missing target equals a missing source (\"\")", U,
     "- {source_labels: [nope], target_label: other, action: keepequal}", "{a=\"1\"}", "{a=\"1\"}"},
    {"dropequal: equal drops", U, "- {source_labels: [a], target_label: b, action: dropequal}",
     "{a=\"1\", b=\"1\"}", "DROP"},
    {"dropequal: compares the joined sources", U,
     "- {source_labels: [a, b], target_label: c, action: dropequal}",
     "{a=\"1\", b=\"2\", c=\"1;2\"}", "DROP"},
    {"dropequal: different keeps", U, "- {source_labels: [a], target_label: b, action: dropequal}",
     "{a=\"1\", b=\"2\"}", "{a=\"1\", b=\"2\"}"},

    /* ---- hashmod: md5(value), last 8 bytes big-endian, mod modulus. Expected values from
     * python3: int.from_bytes(hashlib.md5(v.encode()).digest()[8:], 'big') % m ---- */
    {"hashmod md5('foo') % 10 = 6", U,
     "- {source_labels: [a], modulus: 10, target_label: h, action: hashmod}", "{a=\"foo\"}",
     "{a=\"foo\", h=\"6\"}"},
    {"hashmod md5('a;b') % 16 = 10 (joined sources)", U,
     "- {source_labels: [x, y], modulus: 16, target_label: h, action: hashmod}",
     "{x=\"a\", y=\"b\"}", "{h=\"10\", x=\"a\", y=\"b\"}"},
    {"hashmod md5('') % 7 = 1 (missing source)", U,
     "- {source_labels: [nope], modulus: 7, target_label: h, action: hashmod}", "{a=\"1\"}",
     "{a=\"1\", h=\"1\"}"},
    {"hashmod md5('service-a') % 2^63 = 6156059732812922176", U,
     "- {source_labels: [s], modulus: 9223372036854775808, target_label: h, action: hashmod}",
     "{s=\"service-a\"}", "{h=\"6156059732812922176\", s=\"service-a\"}"},
    {"hashmod md5('k8s-node-1') % 1000 = 538 overwrites the target", U,
     "- {source_labels: [n], modulus: 1000, target_label: h, action: hashmod}",
     "{h=\"old\", n=\"k8s-node-1\"}", "{h=\"538\", n=\"k8s-node-1\"}"},
    {"hashmod % 1 = 0", U, "- {source_labels: [a], modulus: 1, target_label: h, action: hashmod}",
     "{a=\"x\"}", "{a=\"x\", h=\"0\"}"},

    /* ---- labelmap ---- */
    {"labelmap with the default replacement $1 keeps the original", U,
     "- {regex: '__meta_(.+)', action: labelmap}", "{__meta_a=\"1\", b=\"2\"}",
     "{__meta_a=\"1\", a=\"1\", b=\"2\"}"},
    {"labelmap with a replacement", U,
     "- {regex: 'tag_(.*)', replacement: 'k_$1', action: labelmap}", "{tag_x=\"1\", y=\"2\"}",
     "{k_x=\"1\", tag_x=\"1\", y=\"2\"}"},
    {"labelmap overwrites an existing label", U, "- {regex: 'new_(.*)', action: labelmap}",
     "{a=\"0\", new_a=\"1\"}", "{a=\"1\", new_a=\"1\"}"},
    {"labelmap maps the labels as they were (no a_x_x, b_x made)", U,
     "- {regex: '(.*)', replacement: '$${1}_x', action: labelmap}", "{a=\"1\", b=\"2\"}",
     "{a=\"1\", a_x=\"1\", b=\"2\", b_x=\"2\"}"},
    {"labelmap: $1_x is ${1_x}, an empty name: nothing is set", U,
     "- {regex: '(.*)', replacement: '$1_x', action: labelmap}", "{a=\"1\"}", "{a=\"1\"}"},
    {"labelmap is anchored on names", U, "- {regex: a, replacement: z, action: labelmap}",
     "{ab=\"1\"}", "{ab=\"1\"}"},

    /* ---- labeldrop / labelkeep ---- */
    {"labeldrop", U, "- {regex: 'tmp_.*', action: labeldrop}",
     "{a=\"1\", tmp_x=\"2\", tmp_y=\"3\"}", "{a=\"1\"}"},
    {"labeldrop is anchored", U, "- {regex: a, action: labeldrop}", "{a=\"1\", ab=\"2\"}",
     "{ab=\"2\"}"},
    {"labelkeep", U, "- {regex: 'a|b', action: labelkeep}", "{a=\"1\", b=\"2\", c=\"3\"}",
     "{a=\"1\", b=\"2\"}"},
    {"labelkeep can empty the set (kept: the caller decides)", U, "- {regex: z, action: labelkeep}",
     "{a=\"1\"}", "{}"},

    /* ---- lowercase / uppercase (Go strings.ToLower/ToUpper) ---- */
    {"lowercase", U, "- {source_labels: [a], target_label: l, action: lowercase}", "{a=\"AbC\"}",
     "{a=\"AbC\", l=\"abc\"}"},
    {"uppercase of joined sources with a separator", U,
     "- {source_labels: [a, b], separator: '-', target_label: u, action: uppercase}",
     "{a=\"x\", b=\"y\"}", "{a=\"x\", b=\"y\", u=\"X-Y\"}"},
    {"lowercase is Unicode", U, "- {source_labels: [a], target_label: l, action: lowercase}",
     "{a=\"ÄÖÜ\"}", "{a=\"ÄÖÜ\", l=\"äöü\"}"},
    {"uppercase keeps ß (simple case mapping)", U,
     "- {source_labels: [a], target_label: u, action: uppercase}", "{a=\"straße\"}",
     "{a=\"straße\", u=\"STRAßE\"}"},
    {"lowercase of a missing source deletes the target", U,
     "- {source_labels: [a], target_label: l, action: lowercase}", "{l=\"old\"}", "{}"},
    {"uppercase writes a bad byte as U+FFFD", U,
     "- {source_labels: [a], target_label: u, action: uppercase}", "{a=\"a\\xffb\"}",
     "{a=\"a\xff"
     "b\", u=\"A\xef\xbf\xbd"
     "B\"}"},

    /* ---- validation: Prometheus' messages, at the offending node ---- */
    {"replace needs target_label (position: the rule)", U, "- source_labels: [a]\n  regex: x", NULL,
     NULL,
     "test.yaml:2:3: relabel_configs[0]: relabel configuration for replace action requires "
     "'target_label' value"},
    {"hashmod needs a modulus (second rule)", U,
     "- {source_labels: [a], target_label: b}\n- {action: hashmod, target_label: h}", NULL, NULL,
     "test.yaml:3:3: relabel_configs[1]: relabel configuration for hashmod requires non-zero "
     "modulus"},
    {"modulus 0 (position: the modulus)", U, "- action: hashmod\n  target_label: h\n  modulus: 0",
     NULL, NULL,
     "test.yaml:4:12: relabel_configs[0]: relabel configuration for hashmod requires non-zero "
     "modulus"},
    {"unknown action (position: the value)", U, "- action: foo", NULL, NULL,
     "test.yaml:2:11: relabel_configs[0].action: unknown relabel action \"foo\""},
    {"empty action", U, "- {action: '', target_label: x}", NULL, NULL,
     "relabel action cannot be empty"},
    {"labeldrop takes no source_labels", U, "- {source_labels: [a], regex: x, action: labeldrop}",
     NULL, NULL, "labeldrop action requires only 'regex', and no other fields"},
    {"labelkeep takes no target_label", U, "- {target_label: a, regex: x, action: labelkeep}", NULL,
     NULL, "labelkeep action requires only 'regex', and no other fields"},
    {"labeldrop takes no separator", U, "- {separator: ',', regex: x, action: labeldrop}", NULL,
     NULL, "labeldrop action requires only 'regex', and no other fields"},
    {"keepequal takes no regex, even the default's text", U,
     "- {source_labels: [a], target_label: b, regex: '(.*)', action: keepequal}", NULL, NULL,
     "keepequal action requires only 'source_labels' and `target_label`, and no other fields"},
    {"dropequal needs target_label", U, "- {source_labels: [a], action: dropequal}", NULL, NULL,
     "relabel configuration for dropequal action requires 'target_label' value"},
    {"lowercase takes no replacement", U,
     "- {source_labels: [a], target_label: b, replacement: x, action: lowercase}", NULL, NULL,
     "'replacement' can not be set for lowercase action"},
    {"uppercase needs target_label", U, "- {source_labels: [a], action: uppercase}", NULL, NULL,
     "relabel configuration for uppercase action requires 'target_label' value"},
    {"legacy: foo-bar is not a target_label", L, "- {source_labels: [a], target_label: foo-bar}",
     NULL, NULL, "\"foo-bar\" is invalid 'target_label' for replace action"},
    {"legacy: -foo${1} is not a target_label", L,
     "- {source_labels: [a], target_label: '-foo$${1}'}", NULL, NULL,
     "\"-foo${1}\" is invalid 'target_label' for replace action"},
    {"legacy: bar.foo${1}bar is not a target_label", L,
     "- {source_labels: [a], target_label: 'bar.foo$${1}bar'}", NULL, NULL,
     "\"bar.foo${1}bar\" is invalid 'target_label' for replace action"},
    {"legacy: a dotted source label is not a label name", L,
     "- {source_labels: [service.name], target_label: s}", NULL, NULL,
     "\"service.name\" is not a valid label name"},
    {"legacy: labelmap replacement a-$1", L,
     "- {regex: '(.*)', replacement: 'a-$1', action: labelmap}", NULL, NULL,
     "\"a-$1\" is invalid 'replacement' for labelmap action"},
    {"legacy: hashmod target h-1", L,
     "- {source_labels: [a], modulus: 2, target_label: h-1, action: hashmod}", NULL, NULL,
     "\"h-1\" is invalid 'target_label' for hashmod action"},
    {"unknown key (position: the key)", U, "- {source_label: [a], target_label: b}", NULL, NULL,
     "test.yaml:2:4: relabel_configs[0]: unknown key \"source_label\""},
    {"a null rule", U, "- ~", NULL, NULL,
     "test.yaml:2:3: relabel_configs[0]: empty or null relabeling rule"},
    {"not a list", U, "  a: 1", NULL, NULL,
     "test.yaml:2:3: relabel_configs: expected a list of relabel rules, got a map"},
    {"modulus must be a number", U,
     "- {source_labels: [a], modulus: ten, target_label: h, action: hashmod}", NULL, NULL,
     "relabel_configs[0].modulus: expected a non-negative integer, got \"ten\""},
    {"source_labels must be a list", U, "- {source_labels: a, target_label: b}", NULL, NULL,
     "relabel_configs[0].source_labels: expected a list of label names"},

    /* ---- what RE2 refuses ---- */
    {"backreference \\1 (position: the regex)", U,
     "- source_labels: [a]\n  regex: '(a)\\1'\n  target_label: b", NULL, NULL,
     "test.yaml:3:10: relabel_configs[0].regex: invalid escape sequence: `\\1` (backreferences "
     "are not supported in RE2 syntax)"},
    {"backreference \\k<n>", U, "- {regex: '(?P<n>a)\\k<n>', action: keep}", NULL, NULL,
     "backreferences are not supported"},
    {"backreference (?P=n)", U, "- {regex: '(?P<n>a)(?P=n)', action: keep}", NULL, NULL,
     "backreferences are not supported"},
    {"lookahead", U, "- {regex: '(?=a)a', action: keep}", NULL, NULL,
     "invalid or unsupported Perl syntax: `(?=` (lookahead and lookbehind assertions"},
    {"negative lookahead", U, "- {regex: '(?!a)b', action: keep}", NULL, NULL,
     "lookahead and lookbehind assertions are not supported"},
    {"lookbehind", U, "- {regex: '(?<=a)b', action: keep}", NULL, NULL,
     "invalid or unsupported Perl syntax: `(?<=` (lookahead and lookbehind"},
    {"atomic group", U, "- {regex: '(?>a+)b', action: keep}", NULL, NULL,
     "atomic groups are not supported"},
    {"possessive quantifier", U, "- {regex: 'a++b', action: keep}", NULL, NULL,
     "possessive quantifiers are not supported"},
    {"\\C", U, "- {regex: 'a\\Cb', action: keep}", NULL, NULL, "invalid escape sequence: `\\C`"},
    {"recursion (?R)", U, "- {regex: 'a(?R)?b', action: keep}", NULL, NULL,
     "recursion and subroutine calls are not supported"},
    {"subroutine call (?1)", U, "- {regex: '(a)(?1)', action: keep}", NULL, NULL,
     "recursion and subroutine calls are not supported"},
    {"conditional", U, "- {regex: '(a)?(?(1)b|c)', action: keep}", NULL, NULL,
     "conditionals are not supported"},
    {"an unmatched ) cannot escape the anchors", U, "- {regex: 'a)|(b', action: keep}", NULL, NULL,
     "unexpected ): `a)|(b`"},
    {"missing )", U, "- {regex: '(a', action: keep}", NULL, NULL, "missing closing ): `(a`"},
    {"missing ]", U, "- {regex: '[a', action: keep}", NULL, NULL, "missing closing ]: `[a`"},
    {"\\Z is not RE2", U, "- {regex: 'a\\Z', action: keep}", NULL, NULL,
     "invalid escape sequence: `\\Z`"},
    {"(?x) is not an RE2 flag", U, "- {regex: '(?x)a', action: keep}", NULL, NULL,
     "invalid or unsupported Perl syntax: `(?x`"},
    {"a** is a nested repetition", U, "- {regex: 'a**', action: keep}", NULL, NULL,
     "invalid nested repetition operator: `**`"},
    {"a{2}{3} is a nested repetition", U, "- {regex: 'a{2}{3}', action: keep}", NULL, NULL,
     "invalid nested repetition operator: `{2}{3}`"},
    {"*a has no argument", U, "- {regex: '*a', action: keep}", NULL, NULL,
     "missing argument to repetition operator: `*`"},
    {"a{1001} is too many", U, "- {regex: 'a{1001}', action: keep}", NULL, NULL,
     "invalid repeat count: `{1001}`"},
    {"PCRE verbs", U, "- {regex: '(*SKIP)a', action: keep}", NULL, NULL,
     "missing argument to repetition operator: `*`"},
    {"trailing backslash", U, "- {regex: 'a\\', action: keep}", NULL, NULL,
     "trailing backslash at end of expression"},
    {"invalid named capture", U, "- {regex: '(?P<a-b>x)', action: keep}", NULL, NULL,
     "invalid named capture: `(?P<a-b>`"},
};

/* ---- label text ---------------------------------------------------------------------------- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* {a="1", b="x\ny"} into ls, strings in arena. */
static void parse_labels(struct fc_arena *a, const char *s, struct fc_relabel_labels *ls)
{
    assert_true(*s == '{');
    s++;
    for (;;) {
        const char *name;
        size_t name_len;
        char *value = fc_arena_alloc(a, strlen(s) + 1);
        size_t n = 0;
        while (*s == ' ' || *s == ',') {
            s++;
        }
        if (*s == '}') {
            return;
        }
        name = s;
        while (*s != '=') {
            assert_true(*s != '\0');
            s++;
        }
        name_len = (size_t)(s - name);
        s++;
        assert_true(*s == '"');
        s++;
        while (*s != '"') {
            assert_true(*s != '\0');
            if (*s == '\\') {
                s++;
                if (*s == 'n') {
                    value[n++] = '\n';
                } else if (*s == 'x') {
                    value[n++] = (char)(hexval(s[1]) * 16 + hexval(s[2]));
                    s += 2;
                } else {
                    value[n++] = *s;
                }
                s++;
            } else {
                value[n++] = *s++;
            }
        }
        s++;
        fc_relabel_labels_set(ls, name, name_len, value, n);
    }
}

static void format_labels(const struct fc_relabel_labels *ls, struct fc_buf *out)
{
    fc_buf_puts(out, "{");
    for (size_t i = 0; i < ls->n; i++) {
        const struct fc_relabel_label *l = &ls->items[i];
        fc_buf_printf(out, "%s%.*s=\"", i ? ", " : "", (int)l->name_len, l->name);
        for (size_t k = 0; k < l->value_len; k++) {
            unsigned char c = (unsigned char)l->value[k];
            if (c == '\n') {
                fc_buf_puts(out, "\\n");
            } else if (c == '"' || c == '\\') {
                fc_buf_printf(out, "\\%c", c);
            } else if (c < 0x20) {
                fc_buf_printf(out, "\\x%02x", c);
            } else {
                fc_buf_append(out, &c, 1);
            }
        }
        fc_buf_puts(out, "\"");
    }
    fc_buf_puts(out, "}");
}

/* ---- the table ----------------------------------------------------------------------------- */

static struct fc_node *rules_node(struct fc_arena *a, const char *rules)
{
    struct fc_diag d;
    char *text = fc_xasprintf("relabel_configs:\n%s\n", rules);
    struct fc_node *root;

    fc_diag_init(&d);
    root = fc_test_yaml(a, text, &d);
    if (root == NULL || fc_diag_has_errors(&d)) {
        fc_diag_print(&d, stderr);
    }
    assert_non_null(root);
    fc_diag_release(&d);
    free(text);
    return fc_node_get(root, "relabel_configs");
}

/* Runs one case; returns 0 when it passes, printing why when not. */
static int run_case(const struct tcase *tc, struct fc_relabel_scratch *s)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_relabel_rules *rules = NULL;
    struct fc_relabel_labels ls;
    struct fc_error err = {0};
    struct fc_buf got;
    int fail = 0;
    int rc = fc_relabel_compile(rules_node(a, tc->rules), NULL, tc->names, &rules, &err);

    fc_relabel_labels_init(&ls);
    fc_buf_init(&got, 0);
    if (tc->err != NULL) {
        if (rc != FC_ECONFIG || strstr(err.msg, tc->err) == NULL) {
            fprintf(stderr, "FAIL %s:\n  want error containing: %s\n  got (%d): %s\n", tc->name,
                    tc->err, rc, rc == FC_OK ? "(compiled)" : err.msg);
            fail = 1;
        }
        assert_true(rc != FC_OK || rules != NULL);
        goto out;
    }
    if (rc != FC_OK) {
        fprintf(stderr, "FAIL %s: compile: %s\n", tc->name, err.msg);
        fail = 1;
        goto out;
    }
    parse_labels(a, tc->in, &ls);
    rc = fc_relabel_apply(rules, &ls, s, a);
    if (rc == FC_RELABEL_DROP) {
        fc_buf_puts(&got, "DROP");
    } else if (rc == FC_RELABEL_KEEP) {
        format_labels(&ls, &got);
    } else {
        fc_buf_printf(&got, "error %d", rc);
    }
    if (strcmp((const char *)got.data, tc->want) != 0) {
        fprintf(stderr, "FAIL %s:\n  want %s\n  got  %s\n", tc->name, tc->want,
                (const char *)got.data);
        fail = 1;
    }
out:
    fc_buf_release(&got);
    fc_relabel_labels_release(&ls);
    fc_relabel_rules_free(rules);
    fc_arena_free(a);
    return fail;
}

static void test_table(void **state)
{
    struct fc_relabel_scratch s;
    int failed = 0;

    (void)state;
    assert_true(FC_ARRAY_LEN(cases) >= 60);
    fc_relabel_scratch_init(&s);
    for (size_t i = 0; i < FC_ARRAY_LEN(cases); i++) {
        failed += run_case(&cases[i], &s);
    }
    fc_relabel_scratch_release(&s);
    if (failed > 0) {
        fprintf(stderr, "%d of %zu cases failed\n", failed, FC_ARRAY_LEN(cases));
    }
    assert_int_equal(failed, 0);
}

/* ---- around the table ---------------------------------------------------------------------- */

static void test_label_set(void **state)
{
    struct fc_relabel_labels ls;

    (void)state;
    fc_relabel_labels_init(&ls);
    fc_relabel_labels_set(&ls, "b", 1, "2", 1);
    fc_relabel_labels_set(&ls, "a", 1, "1", 1);
    fc_relabel_labels_set(&ls, "ab", 2, "3", 1);
    fc_relabel_labels_set(&ls, "", 0, "x", 1); /* no empty names */
    assert_int_equal(ls.n, 3);
    assert_memory_equal(ls.items[0].name, "a", 1);
    assert_memory_equal(ls.items[1].name, "ab", 2);
    assert_memory_equal(ls.items[2].name, "b", 1);
    fc_relabel_labels_set(&ls, "a", 1, "9", 1); /* replaces */
    assert_int_equal(ls.n, 3);
    assert_memory_equal(fc_relabel_labels_get(&ls, "a", 1)->value, "9", 1);
    fc_relabel_labels_set(&ls, "ab", 2, "", 0); /* "" deletes */
    assert_null(fc_relabel_labels_get(&ls, "ab", 2));
    assert_true(fc_relabel_labels_del(&ls, "b", 1));
    assert_false(fc_relabel_labels_del(&ls, "b", 1));
    assert_int_equal(ls.n, 1);
    fc_relabel_labels_clear(&ls);
    assert_int_equal(ls.n, 0);
    fc_relabel_labels_release(&ls);
}

/* Compile once, apply many times with one scratch; results borrow only what they must. */
static void test_apply_many(void **state)
{
    struct fc_arena *cfg = fc_arena_new(0);
    struct fc_relabel_rules *rules;
    struct fc_relabel_scratch s;
    struct fc_relabel_labels ls;
    struct fc_error err = {0};
    const struct fc_node *list = rules_node(
        cfg, "- {source_labels: [service_name], regex: 'api-(.*)', target_label: team}\n"
             "- {source_labels: [service_name], modulus: 4, target_label: shard, action: hashmod}\n"
             "- {regex: 'tmp_.*', action: labeldrop}");

    (void)state;
    assert_int_equal(
        fc_relabel_compile(list, "processors.relabel.relabel_configs", U, &rules, &err), FC_OK);
    assert_int_equal(fc_relabel_rules_count(rules), 3);
    fc_relabel_scratch_init(&s);
    fc_relabel_labels_init(&ls);
    for (int i = 0; i < 1000; i++) {
        struct fc_arena *a = fc_arena_new(0);
        char svc[32];
        int n = snprintf(svc, sizeof(svc), "api-%d", i % 10);
        fc_relabel_labels_clear(&ls);
        fc_relabel_labels_set(&ls, "service_name", 12, svc, (size_t)n);
        fc_relabel_labels_set(&ls, "tmp_x", 5, "1", 1);
        assert_int_equal(fc_relabel_apply(rules, &ls, &s, a), FC_RELABEL_KEEP);
        assert_int_equal(ls.n, 3); /* service_name, shard, team */
        assert_memory_equal(fc_relabel_labels_get(&ls, "team", 4)->value, svc + 4, (size_t)n - 4);
        /* service_name is borrowed from the caller, not copied */
        assert_ptr_equal(fc_relabel_labels_get(&ls, "service_name", 12)->value, svc);
        fc_arena_free(a);
    }
    assert_int_equal(s.match_errors, 0);
    fc_relabel_labels_release(&ls);
    fc_relabel_scratch_release(&s);
    fc_relabel_rules_free(rules);
    fc_arena_free(cfg);
}

/* The path given names the list in messages; an empty list is no rules. */
static void test_path_and_empty(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_relabel_rules *rules;
    struct fc_error err = {0};

    (void)state;
    assert_int_equal(fc_relabel_compile(rules_node(a, "- {action: drop, regex: '('}"),
                                        "sample_relabel_configs", U, &rules, &err),
                     FC_ECONFIG);
    assert_null(rules);
    assert_non_null(strstr(err.msg, "sample_relabel_configs[0].regex: "));
    assert_int_equal(fc_relabel_compile(NULL, NULL, U, &rules, &err), FC_OK);
    assert_int_equal(fc_relabel_rules_count(rules), 0);
    fc_relabel_rules_free(rules);
    fc_arena_free(a);
}

/* An arena that refuses memory gives FC_ETOOBIG, not a crash. */
static void test_arena_budget(void **state)
{
    struct fc_arena *a = fc_arena_new(0);
    struct fc_arena *tiny;
    struct fc_relabel_rules *rules;
    struct fc_relabel_scratch s;
    struct fc_relabel_labels ls;
    struct fc_error err = {0};
    char *big = fc_xmalloc(1 << 16);

    (void)state;
    memset(big, 'x', 1 << 16);
    assert_int_equal(fc_relabel_compile(rules_node(a, "- {source_labels: [a], target_label: b, "
                                                      "replacement: '$1$1'}"),
                                        NULL, U, &rules, &err),
                     FC_OK);
    fc_relabel_scratch_init(&s);
    fc_relabel_labels_init(&ls);
    fc_relabel_labels_set(&ls, "a", 1, big, 1 << 16);
    tiny = fc_arena_new(4096);
    assert_int_equal(fc_relabel_apply(rules, &ls, &s, tiny), FC_ETOOBIG);
    fc_arena_free(tiny);
    fc_relabel_labels_release(&ls);
    fc_relabel_scratch_release(&s);
    fc_relabel_rules_free(rules);
    free(big);
    fc_arena_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),        cmocka_unit_test(test_label_set),
        cmocka_unit_test(test_apply_many),   cmocka_unit_test(test_path_and_empty),
        cmocka_unit_test(test_arena_budget),
    };
    return cmocka_run_group_tests_name("relabel", tests, NULL, NULL);
}
