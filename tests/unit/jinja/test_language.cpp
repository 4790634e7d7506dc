// Language pieces with exact expected outputs: whitespace control, loops, scoping, namespace,
// macros, slicing, operators, literals, tests, filters, string/dict methods. The expectations of
// the first group were checked against @huggingface/jinja 0.5.11; the "ext_" group covers what
// it lacks (Python Jinja semantics).
#include <gtest/gtest.h>

#include "template_test_util.h"

namespace nanovllm::test {
namespace {

struct LangCase {
  const char* name;
  const char* source;
  const char* vars;  // JSON
  const char* expected;
};

const LangCase kCases[] = {
    {"ws_trim_left", "a  {{- 'b' }}  c", "{}", "ab  c"},
    {"ws_trim_right", "a  {{ 'b' -}}  \n c", "{}", "a  bc"},
    {"ws_stmt_both", "x\n  {%- if true -%}\n  y  \n{%- endif -%}\n  z", "{}", "xyz"},
    {"ws_trim_blocks", "{% if true %}\nyes\n{% endif %}\nend", "{}", "yes\nend"},
    {"ws_lstrip_blocks", "line\n    {% if true %}A{% endif %}\n  {{ 'B' }}", "{}", "line\nA  B"},
    {"ws_comment", "a {#- comment -#} b{# c #}\nd", "{}", "abd"},
    {"loop_vars",
     "{% for x in ['a','b','c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last "
     "}}{{ loop.length }}|{% endfor %}",
     "{}", "103truefalse3|212falsefalse3|321falsetrue3|"},
    {"loop_prev_next", "{% for x in [1,2,3] %}({{ loop.previtem }},{{ loop.nextitem }}){% endfor %}", "{}",
     "(,2)(1,3)(2,)"},
    {"loop_else", "{% for x in [] %}{{ x }}{% else %}empty{% endfor %}", "{}", "empty"},
    {"loop_filter", "{% for x in [1,2,3,4,5] if x is odd %}{{ x }}{{ loop.index }},{% endfor %}", "{}", "11,32,53,"},
    {"loop_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"a\": 1, \"b\": \"x\"}}",
     "a=1;b=x;"},
    {"loop_dict_keys", "{% for k in d %}{{ k }}{% endfor %}", "{\"d\": {\"a\": 1, \"b\": 2}}", "ab"},
    {"loop_nested",
     "{% for a in [1,2] %}{% for b in [3,4] %}{{ a }}{{ b }}{{ loop.index }} {% endfor %}{{ loop.index }};{% endfor %}",
     "{}", "131 142 1;231 242 2;"},
    {"loop_scope", "{% set x = 1 %}{% for i in [1,2] %}{% set x = x + i %}{{ x }}{% endfor %}{{ x }}", "{}", "241"},
    {"namespace",
     "{% set ns = namespace(n=0, s='') %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% set ns.s = ns.s ~ i %}{% "
     "endfor %}{{ ns.n }} {{ ns.s }}",
     "{}", "6 0123"},
    {"set_block", "{% set body %}Hello {{ name }}!{% endset %}[{{ body }}]", "{\"name\": \"Ann\"}", "[Hello Ann!]"},
    {"set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "{}", "12"},
    {"macro_defaults",
     "{% macro greet(name, greeting='Hi') %}{{ greeting }}, {{ name }}!{% endmacro %}{{ greet('Bob') }} {{ greet('Al', "
     "greeting='Yo') }} {{ greet('Cy', 'Hey') }}",
     "{}", "Hi, Bob! Yo, Al! Hey, Cy!"},
    {"macro_recursive",
     "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n }}*{{ fact(n - 1) }}{% endif %}{% endmacro %}{{ fact(4) }}",
     "{}", "4*3*2*1"},
    {"call_block", "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}", "{}",
     "[inside]"},
    {"slicing", "{{ s[1:3] }} {{ s[::-1] }} {{ s[-2:] }} {{ xs[::2] }} {{ xs[1:] }} {{ xs[:-1] }} {{ xs[::-1] }}",
     "{\"s\": \"hello\", \"xs\": [1, 2, 3, 4]}", "el olleh lo [1, 3] [2, 3, 4] [1, 2, 3] [4, 3, 2, 1]"},
    {"index_negative", "{{ xs[-1] }} {{ s[0] }} {{ xs[10] }}|", "{\"s\": \"hey\", \"xs\": [1, 2, 3]}", "3 h |"},
    {"arith",
     "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.5 + 1 }} "
     "{{ 2.0 }} {{ 0.1 + 0.2 }}",
     "{}", "3 -4 1 3.5 1024 7 9 2.5 2.0 0.30000000000000004"},
    {"concat", "{{ 'a' ~ 1 ~ true ~ 2.5 }} {{ 'x' + 'y' }} {{ [1] + [2] }}", "{}", "a1true2.5 xy [1, 2]"},
    {"compare", "{{ 1 < 2 }} {{ 2 >= 3 }} {{ 'a' == 'a' }} {{ 1 == 1.0 }} {{ 1 != 2 }} {{ x == none }}", "{}",
     "true false true true true true"},
    {"in_ops", "{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in d }} {{ 'z' not in d }} {{ 3 not in [1] }}",
     "{\"d\": {\"k\": 1}}", "true true true true true"},
    {"logic", "{{ true and 'x' }} {{ false or 'y' }} {{ not 0 }} {{ '' or 'fallback' }} {{ [] and 1 }}", "{}",
     "x y true fallback []"},
    {"ternary", "{{ 'yes' if x else 'no' }} {{ 'a' if false else 'b' if true else 'c' }}", "{\"x\": 1}", "yes b"},
    {"literals", "{{ [1, 'two', 3.5, none, true] | tojson }} {{ {'a': 1, 'b': [1, 2]} | tojson }}", "{}",
     "[1, \"two\", 3.5, null, true] {\"a\": 1, \"b\": [1, 2]}"},
    {"string_escapes", "{{ 'tab\\there' }}|{{ \"q\\\"uote\" }}|{{ 'nl\\n' | tojson }}|{{ '\\u00e9\\x41' }}", "{}",
     "tab\there|q\"uote|\"nl\\n\"|éA"},
    {"tests",
     "{{ x is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ 3 is number }} {{ 3 is integer }} "
     "{{ 3.5 is integer }} {{ true is boolean }} {{ d is mapping }} {{ xs is iterable }} {{ s is sequence }} {{ true "
     "is true }} {{ 0 is false }} {{ 3 is odd }} {{ 4 is even }} {{ x is not none }}",
     "{\"x\": 1, \"n\": null, \"s\": \"s\", \"d\": {}, \"xs\": []}",
     "true true true true true true false true true true true true false true true true"},
    {"filters_string",
     "{{ '  hi  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello world' | title }}|{{ 'hello World' | "
     "capitalize }}|{{ 'abc' | length }}|{{ 'a-b-a' | replace('a', 'x') }}",
     "{}", "hi|ABC|abc|Hello World|Hello World|3|x-b-x"},
    {"filters_list",
     "{{ xs | length }} {{ xs | first }} {{ xs | last }} {{ xs | join(', ') }} {{ xs | reverse | list | tojson }} {{ "
     "[3,1,2] | sort | tojson }} {{ [1,2,1,3] | unique | tojson }} {{ xs | join }}",
     "{\"xs\": [1, 2, 3]}", "3 1 3 1, 2, 3 [3, 2, 1] [1, 2, 3] [1, 2, 3] 123"},
    {"filters_default", "{{ u | default('dflt') }} {{ '' | default('e', true) }} {{ 'v' | default('x') }}", "{}",
     "dflt e v"},
    {"filters_dict",
     "{{ d | items | tojson }} {{ d | length }} {{ d.get('a') }} {{ d.get('zz', 'none!') }} {{ d.keys() | tojson }} {{ "
     "d.values() | tojson }}",
     "{\"d\": {\"a\": 1, \"b\": 2}}", "[[\"a\", 1], [\"b\", 2]] 2 1 none! [\"a\", \"b\"] [1, 2]"},
    {"filters_map_select",
     "{{ people | map(attribute='name') | join(',') }} {{ people | selectattr('admin') | map(attribute='name') | join "
     "}} {{ people | rejectattr('admin') | length }} {{ people | selectattr('name', 'equalto', 'Bo') | length }}",
     "{\"people\": [{\"name\": \"Al\", \"admin\": true}, {\"name\": \"Bo\", \"admin\": false}]}", "Al,Bo Al 1 1"},
    {"filters_numbers",
     "{{ -3 | abs }} {{ '42' | int + 1 }} {{ '3.5' | float }} {{ 3.7 | int }} {{ 5 | string }} {{ 'x' | int }}", "{}",
     "3 43 3.5 3 5 0"},
    {"filter_indent", "{{ 'a\\nb\\n\\nc' | indent(2) }}|{{ 'a\\nb' | indent(2, true) }}", "{}",
     "a\n  b\n\n  c|  a\n  b"},
    {"tojson_indent", "{{ d | tojson(indent=2) }}",
     "{\"d\": {\"a\": [1, {\"b\": null}], \"c\": \"é\", \"e\": [], \"f\": {}}}",
     "{\n  \"a\": [\n    1,\n    {\n      \"b\": null\n    }\n  ],\n  \"c\": \"é\",\n  \"e\": [],\n  \"f\": {}\n}"},
    {"tojson_unicode", "{{ s | tojson }}", "{\"s\": \"é中😀\\u0001\\\"\\\\\"}", "\"é中😀\\u0001\\\"\\\\\""},
    {"string_methods",
     "{{ 'Hello'.startswith('He') }} {{ 'Hello'.endswith(('x', 'lo')) }} {{ 'a,b,,c'.split(',') | tojson }} {{ '  a b  "
     "'.split() | tojson }} {{ '\\n x \\n'.strip() }}|{{ 'xyx'.replace('x', 'z') }} {{ 'AbC'.upper() }}{{ "
     "'AbC'.lower() }} {{ 'ab cd'.title() }}",
     "{}", "true true [\"a\", \"b\", \"\", \"c\"] [\"a\", \"b\"] x|zyz ABCabc Ab Cd"},
    {"range_fn", "{{ range(3) | tojson }} {{ range(1, 7, 2) | tojson }} {{ range(3, 0, -1) | tojson }}", "{}",
     "[0, 1, 2] [1, 3, 5] [3, 2, 1]"},
    {"undefined_behaviour",
     "[{{ missing }}][{{ missing.attr }}][{{ 'yes' if missing else 'no' }}][{{ missing is defined }}]", "{}",
     "[][][no][false]"},
    {"bool_print", "{{ true }} {{ false }} {{ none }}|{{ [true, none] }}", "{}", "true false |[true, null]"},
    {"raw_concat_strings", "{{ 'a' 'b' \"c\" }}", "{}", "abc"},
    {"filter_block", "{% filter upper %}shout {{ 'it' }}{% endfilter %}", "{}", "SHOUT IT"},
    {"break_continue_free",
     "{% for x in [1,2,3,4] %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 4 %}{% break %}{% endif %}{% endfor "
     "%}done",
     "{}", "done"},
    {"generation_tag", "A {% generation %}B{% endgeneration %} C", "{}", "A B C"},
    {"ext_tuple_tojson", "{{ (1, 2) | tojson }}", "{}", "[1, 2]"},
    {"ext_break_keeps_output",
     "{% for x in [1,2,3,4] %}{{ x }}{% if x == 2 %}{% continue %}{% endif %}-{% if x == 3 %}{% break %}{% endif %}{% "
     "endfor %}",
     "{}", "1-23-"},
    {"ext_test_args", "{{ 9 is divisibleby(3) }} {{ 3 is eq 3 }} {{ 4 is equalto(5) }} {{ 2 is in [1, 2] }}", "{}",
     "true true false true"},
    {"ext_select_reject",
     "{{ [1,2,3,4] | select('odd') | tojson }} {{ [1,2,3,4] | reject('even') | tojson }} {{ [0, 1, '', 'a'] | select | "
     "tojson }}",
     "{}", "[1, 3] [1, 3] [1, \"a\"]"},
    {"ext_d_count_round",
     "{{ u | d('z') }} {{ [1,2] | count }} {{ 2.567 | round(2) }} {{ 2.5 | round }} {{ 7 | round(method='floor') }}",
     "{}", "z 2 2.57 3.0 7.0"},
    {"ext_map_filter", "{{ ['a', 'b'] | map('upper') | join }}", "{}", "AB"},
    {"ext_escape", "{{ '<a href=\"x\">&' | e }}", "{}", "&lt;a href=&#34;x&#34;&gt;&amp;"},
    {"ext_dict_global", "{{ dict(a=1, b=2) | tojson }}", "{}", "{\"a\": 1, \"b\": 2}"},
    {"ext_join_method", "{{ ', '.join(['a', 'b']) }}", "{}", "a, b"},
    {"ext_string_iteration", "{% for c in 'ab' %}[{{ c }}]{% endfor %}", "{}", "[a][b]"},
    {"ext_loop_cycle", "{% for x in [1,2,3] %}{{ loop.cycle('o', 'e') }}{% endfor %}", "{}", "oeo"},
    {"ext_macro_kwargs_varargs",
     "{% macro f(a) %}{{ a }}{{ varargs | tojson }}{{ kwargs | tojson }}{% endmacro %}{{ f(1, 2, k=3) }}", "{}",
     "1[2]{\"k\": 3}"},
    {"ext_string_compare", "{{ 'a' < 'b' }} {{ 'b' <= 'a' }}", "{}", "true false"},
};

class LanguageTest : public ::testing::TestWithParam<LangCase> {};

TEST_P(LanguageTest, RendersExactly) {
  const LangCase& c = GetParam();
  EXPECT_EQ(render(c.source, nlohmann::json::parse(c.vars)), c.expected) << "template: " << c.source;
}

INSTANTIATE_TEST_SUITE_P(Pieces, LanguageTest, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<LangCase>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace nanovllm::test
