// EBNF parser without the oracle: what each construct parses into (seen through Grammar::to_ebnf),
// errors with line:column, the printer's round trip (parse(print(g)) prints as g, for every
// regex and EBNF test grammar), the printer's escapes and rule names, and random texts (which must
// parse or throw GrammarError, never anything else).
#include <gtest/gtest.h>

#include <random>

#include "ebnf_test_grammars.h"
#include "nanovllm/structured/ebnf.h"
#include "nanovllm/structured/regex.h"
#include "regex_test_patterns.h"

namespace nanovllm::structured {
namespace {

std::string reprint(std::string_view text, const std::string& root = "root") {
  return parse_ebnf(text, root).to_ebnf();
}

std::string error_of(std::string_view text, const std::string& root = "root") {
  try {
    parse_ebnf(text, root);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(EbnfParse, Constructs) {
  EXPECT_EQ(reprint("root ::= \"a\" b | [x-z]+\nb ::= (\"c\" | 'd'){2,3} \"e\"?"),
            "root ::= \"a\" b | ([x-z])+\nb ::= (\"c\" | \"d\"){2,3} (\"e\")?\n");
  EXPECT_EQ(reprint("root ::= \"a\"* \"b\"{2} \"c\"{2,} \"d\"{0,1} ()"),
            "root ::= (\"a\")* (\"b\"){2} (\"c\"){2,} (\"d\")? \"\"\n");
  EXPECT_EQ(reprint("root ::= [^a-c\\d] [\\w]"), "root ::= [^0-9a-c] [0-9A-Z_a-z]\n");
  EXPECT_EQ(reprint("root ::= x\nx ::= root2\nroot2 ::= \"\""), "root ::= x\nx ::= root2\nroot2 ::= \"\"\n");
  // The root comes first in the print, the others in the order of the text.
  EXPECT_EQ(reprint("a ::= \"x\"\nstart ::= a a", "start"), "start ::= a a\na ::= \"x\"\n");
}

TEST(EbnfParse, LiteralsAndEscapes) {
  EXPECT_EQ(reprint("root ::= 'it''s' \"say \\\"hi\\\"\" 'q\\'s'"),
            "root ::= \"it\" \"s\" \"say \\\"hi\\\"\" \"q's\"\n");
  EXPECT_EQ(reprint("root ::= \"\\n\\t\\r\\\\\\a\\b\\f\\v\\0\\e\\/\\?\""),
            "root ::= \"\\n\\t\\r\\\\\\u0007\\u0008\\u000C\\u000B\\u0000\\u001B/?\"\n");
  // \x takes exactly two hex digits (GBNF), \u four, \U eight.
  EXPECT_EQ(reprint("root ::= \"\\x41B\\u00e9\\U0001F600\""), "root ::= \"AB\\u00E9\\U0001F600\"\n");
  EXPECT_EQ(reprint("root ::= \"é😀\""), "root ::= \"\\u00E9\\U0001F600\"\n");
  EXPECT_EQ(reprint("root ::= [\\]\\[\\-\\^\\\\] [a-] [-a] [\\x41-\\x43]"),
            "root ::= [\\-\\[-\\^] [\\-a] [\\-a] [A-C]\n");
}

TEST(EbnfParse, LayoutCommentsAndLookahead) {
  const char* text =
      "# leading comment\r\n"
      "root ::= # after the arrow\r\n"
      "   a   # one\r\n"
      "   | b # two\r\n"
      "a ::= \"#\" [#] (= \"x\" | [y])\n"
      "b ::= \"b\" (= (\"z\"))   # trailing\n";
  EXPECT_EQ(reprint(text), "root ::= a | b\na ::= \"#\" [#]\nb ::= \"b\"\n");
  EXPECT_EQ(reprint("root::=\"a\"\tb\nb::=\"c\""), "root ::= \"a\" b\nb ::= \"c\"\n");
  EXPECT_EQ(reprint("root ::= my-rule.v2\nmy-rule.v2 ::= \"ok\""), "root ::= my-rule_v2\nmy-rule_v2 ::= \"ok\"\n");
}

struct Refusal {
  const char* text;
  const char* what;  // a piece the message must contain
  const char* at;    // "line:column", or "" for errors without a position
};

TEST(EbnfErrors, NameLineAndColumn) {
  const Refusal cases[] = {
      {"root ::= x", "undefined rule 'x'", "1:10"},
      {"root ::= \"a\"\n  | \"b\" y", "undefined rule 'y'", "2:9"},
      {"start ::= \"a\"", "the root rule 'root' is not defined", ""},
      {"root ::= \"a\"\nroot ::= \"b\"", "rule 'root' is defined twice", "2:1"},
      {"root ::= \"a", "unterminated string literal", "1:10"},
      {"root ::= \"a\nb\"", "a newline inside a string literal", "1:12"},
      {"root ::= [a-", "unterminated character class", "1:10"},
      {"root ::= [a\n]", "a newline inside a character class", "1:12"},
      {"root ::= [z-a]", "range start is after its end", "1:11"},
      {"root ::= [\\d-z]", "shorthand class cannot be a range end", "1:11"},
      {"root ::= \"\\q\"", "unknown escape '\\q'", "1:11"},
      {"root ::= \"\\x4\"", "needs 2 hex digits", "1:11"},
      {"root ::= \"\\uD800\"", "surrogate U+D800", "1:11"},
      {"root ::= \"\\U00110000\"", "past U+10FFFF", "1:11"},
      {"root ::= (\"a\" | \"b\"", "expected ')' (opened at 1:10)", "1:20"},
      {"root ::= \"a\")", "expected a new rule or the end", "1:13"},
      {"root ::= ", "expected an expression, found the end", "1:10"},
      {"root ::= \"a\" |", "expected an expression", "1:15"},
      {"root ::= | \"a\"", "expected an expression, found '|'", "1:10"},
      {"root ::= \"a\"**", "a second quantifier", "1:14"},
      {"root ::= \"a\"{3,2}", "minimum above its maximum", "1:13"},
      {"root ::= \"a\"{x}", "expected a number", "1:14"},
      {"root ::= \"a\"{2", "expected '}' closing the repetition bounds", "1:15"},
      {"root ::= \"a\"{99999999999}", "repetition bound 99999999999 is too large", "1:14"},
      {"root ::= \"a\" (= \"b\") \"c\"", "expected a new rule or the end", "1:22"},
      {"root ::= (= \"b\")", "only accepted at the end of a rule", "1:10"},
      {"root ::= \"a\" : \"b\"", "unexpected character U+003A ':'", "1:14"},
      {"root = \"a\"", "unexpected character U+003D '='", "1:6"},
      {"\"a\" ::= \"b\"\nroot ::= \"c\"", "expected a rule (name ::= ...), found a string literal", "1:1"},
      {"root ::= \"a\"\n\xFF", "not valid UTF-8", "2:1"},
      {"root ::= \"a\\", "a backslash at the end", "1:12"},
  };
  for (const Refusal& r : cases) {
    const std::string msg = error_of(r.text);
    EXPECT_NE(msg.find(r.what), std::string::npos) << r.text << " -> " << msg;
    if (*r.at) EXPECT_NE(msg.find(std::string("ebnf at ") + r.at + ":"), std::string::npos) << r.text << " -> " << msg;
  }
}

TEST(EbnfErrors, NestingIsBounded) {
  EXPECT_EQ(error_of("root ::= " + std::string(400, '(') + "\"a\"" + std::string(400, ')')), "");
  const std::string deep = "root ::= " + std::string(100000, '(') + "\"a\"" + std::string(100000, ')');
  EXPECT_NE(error_of(deep).find("nested more than 500 deep"), std::string::npos);
}

// print(parse(print(g))) == print(g): the printer writes nothing the parser reads differently.
void expect_round_trip(const Grammar& g, const std::string& what) {
  const std::string printed = g.to_ebnf();
  std::string again;
  try {
    again = parse_ebnf(printed, g.rule(g.root()).name).to_ebnf();
  } catch (const GrammarError& e) {
    ADD_FAILURE() << what << ": our parser refuses our print: " << e.what() << "\n" << printed;
    return;
  }
  EXPECT_EQ(again, printed) << what;
}

TEST(EbnfRoundTrip, EveryTestGrammarAndRegex) {
  for (const auto& c : test::ebnf_cases()) expect_round_trip(parse_ebnf(c.text), c.name);
  for (const auto& c : test::regex_cases())
    for (bool json : {false, true}) {
      RegexOptions opt;
      opt.json_string_content = json;
      expect_round_trip(regex_to_grammar(c.pattern, opt), c.pattern);
    }
}

TEST(EbnfRoundTrip, PrinterCorners) {
  Grammar g;
  const int32_t root = g.add_rule("root");
  const int32_t odd = g.add_rule("a b/c");
  const int32_t macro = g.add_rule("Regex");
  const int32_t digit = g.add_rule("1st");
  const int32_t clash = g.add_rule("a_b_c");
  g.define(odd, g.literal("\x01"
                          "A\x7F"));                         // \u0001 then A: not the greedy \x01A
  g.define(macro, g.seq({g.char_class({}), g.choice({})}));  // both match nothing
  g.define(digit, g.repeat(g.seq({g.literal("x"), g.seq({g.literal("y"), g.empty()})}), 0, 0));
  g.define(clash, g.char_class({{0, 0x1F}, {'"', '"'}, {'-', '-'}, {0x10FFFF, 0x10FFFF}}));
  g.define(root, g.seq({g.ref(odd), g.ref(macro), g.ref(digit), g.ref(clash)}));
  g.set_root(root);
  EXPECT_EQ(g.to_ebnf(),
            "root ::= a_b_c_1 Regex_ r_1st a_b_c\n"
            "a_b_c_1 ::= \"\\u0001A\\u007F\"\n"
            "Regex_ ::= [^\\x00-\\U0010FFFF] [^\\x00-\\U0010FFFF]\n"
            "r_1st ::= (\"x\" (\"y\" \"\")){0}\n"
            "a_b_c ::= [\\u0000-\\u001F\"\\-\\U0010FFFF]\n");
  expect_round_trip(g, "printer corners");
  const Grammar back = parse_ebnf(g.to_ebnf());
  EXPECT_TRUE(back.expr(back.rule(back.rule_named("Regex_")).body).kind == ExprKind::Sequence);
}

// Random texts over the dialect's alphabet: each parses or throws GrammarError.
TEST(EbnfRobustness, RandomTextsParseOrThrowGrammarError) {
  const std::vector<std::string> pieces = {"root",   " ::= ",       "a",    "\n", "\"x\"", "'y'",      "[a-z]", "[^\"]",
                                           "(",      ")",           "|",    "*",  "+",     "?",        "{2}",   "{1,}",
                                           "{0,3}",  "(=",          "#c\n", "\\", "\"",    "[",        "-",     "]",
                                           "a ::= ", "\"\\u00e9\"", ",",    "{",  "}",     "\xC3\xA9", "\xFF"};
  std::mt19937_64 rng(7);
  int parsed = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string text = "root ::= ";
    for (size_t len = std::uniform_int_distribution<size_t>(1, 14)(rng); len > 0; --len)
      text += pieces[std::uniform_int_distribution<size_t>(0, pieces.size() - 1)(rng)];
    try {
      const Grammar g = parse_ebnf(text);
      expect_round_trip(g, text);
      ++parsed;
    } catch (const GrammarError&) {}
  }
  EXPECT_GT(parsed, 200);
}

}  // namespace
}  // namespace nanovllm::structured
