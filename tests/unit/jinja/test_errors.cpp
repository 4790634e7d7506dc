// Bad templates and hostile input: syntax errors name the construct and line:col, runtime errors
// name the filter/test/function, raise_exception surfaces its message, and nothing crashes or
// runs away (recursion, nesting, loops and output are bounded).
#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "nanovllm/utils/error.h"
#include "template_test_util.h"

namespace nanovllm::test {
namespace {

// The TokenizerError message of parsing + rendering `source`, or "" if it succeeded.
std::string error_of(const std::string& source, const nlohmann::json& vars = nlohmann::json::object()) {
  try {
    render(source, vars);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(source, ...)                                                             \
  do {                                                                                            \
    std::string msg_ = error_of(source);                                                          \
    ASSERT_FALSE(msg_.empty()) << "no error for: " << source;                                     \
    for (const char* part : {__VA_ARGS__}) EXPECT_NE(msg_.find(part), std::string::npos) << msg_; \
  } while (0)

TEST(TemplateErrors, UnclosedBlockNamesBlockAndPosition) {
  EXPECT_ERROR_HAS("ab\n  {% if x %}yes", "unclosed 'if'", "endif", "2:3");
  EXPECT_ERROR_HAS("{% for m in xs %}{{ m }}", "unclosed 'for'", "1:1");
  EXPECT_ERROR_HAS("{% macro f() %}x", "unclosed 'macro'");
}

TEST(TemplateErrors, UnclosedTags) {
  EXPECT_ERROR_HAS("hello {{ name", "1:");
  EXPECT_ERROR_HAS("{{ 'abc }}", "unterminated string", "1:4");
  EXPECT_ERROR_HAS("x {# never closed", "unclosed comment", "1:3");
  EXPECT_ERROR_HAS("{{ x }", "1:");
}

TEST(TemplateErrors, UnknownStatement) {
  EXPECT_ERROR_HAS("line\n{% frobnicate x %}", "unknown statement 'frobnicate'", "2:4");
  EXPECT_ERROR_HAS("{% endif %}", "unknown statement 'endif'", "1:4");
}

TEST(TemplateErrors, BadExpression) {
  EXPECT_ERROR_HAS("{{ 1 + }}", "unexpected", "1:8");
  EXPECT_ERROR_HAS("{{ (1, 2 }}", "1:");
  EXPECT_ERROR_HAS("{{ x | }}", "filter name", "1:8");
  EXPECT_ERROR_HAS("{{ x is }}", "test name");
  EXPECT_ERROR_HAS("{{ 'a' @ 'b' }}", "unexpected character '@'", "1:8");
  EXPECT_ERROR_HAS("{{ '\\q' }}", "escape");
  EXPECT_ERROR_HAS("{% macro f(a=1, b) %}{% endmacro %}", "non-default parameter");
}

TEST(TemplateErrors, UnknownFilterAndTestAreNamed) {
  EXPECT_ERROR_HAS("{{ 'x' | frobnicate }}", "unknown filter 'frobnicate'", "1:10");
  EXPECT_ERROR_HAS("\n{{ 3 is prime }}", "unknown test 'prime'", "2:");
  EXPECT_ERROR_HAS("{{ 3 | upper }}", "filter 'upper'", "IntegerValue");
  EXPECT_ERROR_HAS("{{ nothing() }}", "cannot call 'nothing'");
}

TEST(TemplateErrors, RaiseExceptionSurfacesMessage) {
  EXPECT_ERROR_HAS("{% if true %}{{ raise_exception('Conversation roles must alternate!') }}{% endif %}",
                   "Conversation roles must alternate!", "1:17");
}

TEST(TemplateErrors, RuntimeTypeErrors) {
  EXPECT_ERROR_HAS("{{ 'a' ~ missing }}", "undefined");
  EXPECT_ERROR_HAS("{{ none + 1 }}", "none");
  EXPECT_ERROR_HAS("{{ 1 // 0 }}", "division");
  EXPECT_ERROR_HAS("{% for x in 3 %}{% endfor %}", "cannot iterate");
  EXPECT_ERROR_HAS("{% set a, b = [1] %}", "unpack");
  EXPECT_ERROR_HAS("{% set d = {} %}{% set d.x = 1 %}", "non-namespace");
  EXPECT_ERROR_HAS("{% break %}", "outside of a loop");
}

TEST(TemplateErrors, InfiniteMacroRecursionIsBounded) {
  EXPECT_ERROR_HAS("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "macro 'f' recursed deeper");
}

TEST(TemplateErrors, DeepNestingIsBounded) {
  std::string parens = "{{ " + std::string(100000, '(') + "1" + std::string(100000, ')') + " }}";
  EXPECT_ERROR_HAS(parens, "nested too deeply");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_ERROR_HAS(ifs, "nested too deeply");
  std::string nots = "{{ ";
  for (int i = 0; i < 50000; ++i) nots += "not ";
  EXPECT_ERROR_HAS(nots + "x }}", "nested too deeply");
  std::string list = "{{ " + std::string(50000, '[') + std::string(50000, ']') + " }}";
  EXPECT_ERROR_HAS(list, "nested too deeply");
}

// Chains parse in a loop but nest one node per link: 5,000 links used to parse and fail at render
// ('template recursion too deep'), 200,000 to overflow the stack. Each link now counts as a
// level of nesting, so the parser refuses them at start-up.
TEST(TemplateErrors, LongChainsAreBounded) {
  auto repeat = [](const std::string& s, int n) {
    std::string out;
    for (int i = 0; i < n; ++i) out += s;
    return out;
  };
  for (const std::string link :
       {"|trim", ".a", "[0]", "()", " is defined", " + 1", " ~ x", " * 2", " ** 2", " == x", " and x", " or x"})
    EXPECT_ERROR_HAS("{{ x" + repeat(link, 5000) + " }}", "nested too deeply", "more than 200 levels", "1:");
  // Within the limit, a chain still renders.
  EXPECT_EQ(render("{{ ' a '" + repeat("|trim", 150) + " }}"), "a");
  EXPECT_EQ(render("{{ 0" + repeat(" + 1", 150) + " }}"), "150");
  // Chains nested in brackets are bounded by the interpreter's depth limit, not the stack.
  EXPECT_ERROR_HAS(
      "{{ " + repeat("(", 40) + "x" + repeat("|trim", 100) + repeat(")" + repeat("|trim", 100), 40) + " }}",
      "too deep");
}

// Containers nested by a loop ({% set x = [x] %}) are as deep as the step budget allows; freeing
// them used to recurse once per level (SIGSEGV at 300,000; test_deep_structures.cpp goes deeper).
TEST(TemplateErrors, DeeplyNestedValuesRender) {
  EXPECT_EQ(render("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                   "{{ ns.x|length }}"),
            "1");
  EXPECT_EQ(render("{% set ns = namespace(x=none) %}{% for i in range(1000) %}{% set ns.x = {'a': ns.x} %}"
                   "{% endfor %}{{ ns.x.a.a is mapping }}"),
            "true");
  EXPECT_EQ(render("{% set root = namespace(n=none) %}{% set cur = namespace(c=root) %}{% for i in range(1000) %}"
                   "{% set nxt = namespace(n=none) %}{% set cur.c.n = nxt %}{% set cur.c = nxt %}{% endfor %}ok"),
            "ok");
  EXPECT_ERROR_HAS(
      "{% set ns = namespace(v=[]) %}{% for i in range(1000) %}{% set ns.v = [ns.v] %}{% endfor %}{{ ns.v }}",
      "deeper");
}

TEST(TemplateErrors, HugeLoopsAndOutputsAreBounded) {
  // A million steps, or the work budget first (each range() is a list to make and copy).
  EXPECT_ERROR_HAS("{% for i in range(1000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}", "template exceeded");
  EXPECT_ERROR_HAS("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "work limit");
  EXPECT_ERROR_HAS("{{ range(100000000) | length }}", "range()");
  EXPECT_ERROR_HAS("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                   "work limit");
}

// A short template is a server's input (a request's own chat_template): whatever it does, its
// cost stays bounded by the caller's output limit and a work budget, even when it prints nothing.
std::string bounded_error(const std::string& source, size_t max_output) {
  try {
    ChatTemplate(source).render(ChatTemplateInputs{}, max_output);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "";
}

TEST(TemplateErrors, OutputStopsAtTheCallersLimit) {
  const std::string bomb = "{% for i in range(20000) %}0123456789{% endfor %}";
  EXPECT_NE(bounded_error(bomb, 100000).find("output exceeds 100000 bytes"), std::string::npos);
  EXPECT_EQ(ChatTemplate("{% for i in range(100) %}0123456789{% endfor %}").render({}, 1000).size(), 1000u);
  // A string built past the limit is refused as it is made, before it is printed.
  EXPECT_NE(bounded_error("{% set ns = namespace(s='x') %}{% for i in range(20) %}{% set ns.s = ns.s ~ ns.s %}"
                          "{% endfor %}",
                          100000)
                .find("longer than 100000"),
            std::string::npos);
}

TEST(TemplateErrors, WorkWithoutOutputIsBounded) {
  const auto start = std::chrono::steady_clock::now();
  // Reads a 64 KB string 100,000 times (6.4 GB of scanning), printing nothing.
  EXPECT_NE(bounded_error("{% set ns = namespace(s='x') %}{% for i in range(16) %}{% set ns.s = ns.s ~ ns.s %}"
                          "{% endfor %}{% for i in range(100000) %}{% if ns.s|length > 1 %}{% endif %}{% endfor %}",
                          100000)
                .find("work limit"),
            std::string::npos);
  // Doubles a list 40 times (2^40 elements), printing nothing.
  EXPECT_NE(bounded_error("{% set ns = namespace(l=['abc']) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}"
                          "{% endfor %}",
                          100000)
                .find("work limit"),
            std::string::npos);
  // Copies a big range over and over; a range past what is left is refused before it is made.
  EXPECT_NE(
      bounded_error("{% for i in range(1000) %}{% set r = range(100000) %}{% endfor %}", 100000).find("work limit"),
      std::string::npos);
  EXPECT_NE(bounded_error("{% for i in range(1000000) %}x{% endfor %}", 100000).find("work limit: range() of 1000000"),
            std::string::npos);
  // A list holding one list twice, nested 40 times: 2^40 leaves to print.
  const std::string nested =
      "{% set ns = namespace(x=[1]) %}{% for i in range(40) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}";
  EXPECT_NE(bounded_error(nested + "{{ ns.x|tojson|length }}", 100000).find("tojson: result too large"),
            std::string::npos);
  EXPECT_NE(bounded_error(nested + "{{ ns.x|join(',')|length }}", 100000).find("too large"), std::string::npos);
  EXPECT_NE(bounded_error(nested + "{{ ns.x }}", 100000).find("too large"), std::string::npos);
  // replace('', big) multiplies a string by another.
  EXPECT_NE(bounded_error("{% set ns = namespace(s='x') %}{% for i in range(16) %}{% set ns.s = ns.s ~ ns.s %}"
                          "{% endfor %}{{ (ns.s|replace('', ns.s))|length }}",
                          100000)
                .find("replace: result longer than"),
            std::string::npos);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 5.0) << "the bounds took too long to stop these templates";
}

TEST(TemplateErrors, RealTemplatesFitTheBudget) {
  // Long conversations through a template that reads each message several times still render
  // under the server's limits: the budget grows with the input.
  const std::string source =
      "{% for m in messages %}{% if m.content is string and '<tool>' not in m.content %}"
      "{{ m.role ~ ': ' ~ m.content.strip()|trim }}\n{% endif %}{% endfor %}";
  ChatTemplateInputs in;
  const std::string text(2000, 'a');
  for (int i = 0; i < 500; ++i)
    in.messages.push_back(nlohmann::ordered_json{{"role", i % 2 ? "assistant" : "user"}, {"content", text}});
  EXPECT_GT(ChatTemplate(source).render(in, 2u << 20).size(), 1000000u);
}

TEST(TemplateErrors, SelfReferencingNamespaceDoesNotCrash) {
  EXPECT_ERROR_HAS("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns | tojson }}", "deeper");
}

TEST(TemplateErrors, BadInputsAreErrorsNotCrashes) {
  ChatTemplate t("{{ messages[0].content.upper() }}");
  ChatTemplateInputs in;
  in.messages = nlohmann::json::array({{{"role", "user"}, {"content", 5}}});
  EXPECT_THROW(t.render(in), TokenizerError);  // calling undefined
  nlohmann::json deep = 1;
  for (int i = 0; i < 1000; ++i) deep = nlohmann::json::array({deep});
  in.messages = deep;
  EXPECT_THROW(t.render(in), TokenizerError);
}

// Random edits of a real template: every outcome is a render or a TokenizerError.
TEST(TemplateErrors, MutatedTemplatesNeverCrash) {
  std::string base = read_file(source_dir() / "tests/fixtures/chat/qwen2_5_style.jinja") +
                     read_file(source_dir() / "tests/fixtures/chat/llama3_1_style.jinja");
  ChatTemplateInputs in;
  in.messages = nlohmann::json::parse(R"([{"role":"system","content":"s"},{"role":"user","content":"u"},
    {"role":"assistant","content":"","tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]},
    {"role":"tool","content":"r"}])");
  in.tools = nlohmann::json::parse(R"([{"type":"function","function":{"name":"f"}}])");
  std::mt19937 rng(1234);
  const std::string alphabet = "{}%#-()[]'\".,|~+*/ \nabcifendforsetx0123456789";
  int rendered = 0, rejected = 0;
  for (int iter = 0; iter < 400; ++iter) {
    std::string s = base;
    int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0: s.erase(pos, 1 + rng() % 8); break;
        case 1: s.insert(pos, 1, alphabet[rng() % alphabet.size()]); break;
        default: s[pos] = alphabet[rng() % alphabet.size()];
      }
    }
    try {
      ChatTemplate(s).render(in);
      ++rendered;
    } catch (const TokenizerError&) {
      ++rejected;
    }
  }
  EXPECT_EQ(rendered + rejected, 400);
}

}  // namespace
}  // namespace nanovllm::test
