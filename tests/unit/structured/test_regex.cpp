// Regex -> grammar without the oracle: the grammar's shape for small patterns, JSON string content
// escapes, every refused construct with its offset, the size limits, and random patterns (which
// must convert or throw GrammarError, never anything else).
#include <gtest/gtest.h>

#include <random>

#include "nanovllm/structured/regex.h"

namespace nanovllm::structured {
namespace {

std::string ebnf_of(std::string_view pattern, bool json = false) {
  RegexOptions opt;
  opt.json_string_content = json;
  return regex_to_grammar(pattern, opt).to_ebnf();
}

// The message of the GrammarError `pattern` throws ("" when it converts).
std::string error_of(std::string_view pattern, const RegexOptions& opt = {}) {
  try {
    regex_to_grammar(pattern, opt);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

TEST(RegexShape, LiteralsMergeAndQuantifiersBindToTheLastAtom) {
  EXPECT_EQ(ebnf_of("abc"), "root ::= \"abc\"\n");
  EXPECT_EQ(ebnf_of("abc+"), "root ::= \"ab\" (\"c\")+\n");
  EXPECT_EQ(ebnf_of("(abc)+"), "root ::= (\"abc\")+\n");
  EXPECT_EQ(ebnf_of("a|bc|"), "root ::= \"a\" | \"bc\" | \"\"\n");
  EXPECT_EQ(ebnf_of("x{2}y{2,}z{,3}w{1,4}?"), "root ::= (\"x\"){2} (\"y\"){2,} (\"z\"){0,3} (\"w\"){1,4}\n");
  EXPECT_EQ(ebnf_of("(?:a|b)(?P<n>c)(?<m>d)(?#note)"), "root ::= (\"a\" | \"b\") \"cd\"\n");
  EXPECT_EQ(ebnf_of(""), "root ::= \"\"\n");
  EXPECT_EQ(ebnf_of("()"), "root ::= \"\"\n");
}

TEST(RegexShape, ClassesAndEscapes) {
  EXPECT_EQ(ebnf_of("[a-cx]"), "root ::= [a-cx]\n");
  EXPECT_EQ(ebnf_of("[^\\x00-\\x7F]"), "root ::= [^\\u0000-\\u007F]\n");  // printed negated: shorter
  EXPECT_EQ(ebnf_of("\\d\\w"), "root ::= [0-9] [0-9A-Z_a-z]\n");
  EXPECT_EQ(ebnf_of("[\\d\\-z]"), "root ::= [\\-0-9z]\n");
  EXPECT_EQ(ebnf_of("[\\b]\\t\\n\\r\\f\\v\\0\\a"), "root ::= [\\u0008] \"\\t\\n\\r\\u000C\\u000B\\u0000\\u0007\"\n");
  EXPECT_EQ(ebnf_of("\\x41\\u00e9\\u{1F600}\\uD83D\\uDE00\\U0001F601"),
            "root ::= \"A\\u00E9\\U0001F600\\U0001F600\\U0001F601\"\n");
  EXPECT_EQ(ebnf_of("."), "root ::= [^\\n]\n");
  EXPECT_EQ(ebnf_of("\\.\\*\\\\\\/"), "root ::= \".*\\\\/\"\n");
  EXPECT_EQ(ebnf_of("a{b}c]"), "root ::= \"a{b}c]\"\n");  // Python: not a quantifier, a literal
}

TEST(RegexShape, AnchorsAtTheEnds) {
  EXPECT_EQ(ebnf_of("^abc$"), "root ::= \"abc\"\n");
  EXPECT_EQ(ebnf_of("\\Aabc\\Z"), "root ::= \"abc\"\n");
  EXPECT_EQ(ebnf_of("^a|^b$|c$"), "root ::= \"a\" | \"b\" | \"c\"\n");
  EXPECT_EQ(ebnf_of("(^a|b)c"), "root ::= (\"a\" | \"b\") \"c\"\n");
  EXPECT_EQ(ebnf_of("a(b|c$)"), "root ::= \"a\" (\"b\" | \"c\")\n");
  EXPECT_EQ(ebnf_of("^^a$$"), "root ::= \"a\"\n");
}

TEST(RegexShape, JsonStringContent) {
  EXPECT_EQ(ebnf_of("a\"b\\\\c\\n", true), "root ::= \"a\\\\\\\"b\\\\\\\\c\\\\n\"\n");
  // A class splits into its safe part and the escapes of the members JSON escapes.
  EXPECT_EQ(ebnf_of("[\\t\"a-c]", true), "root ::= [a-c] | \"\\\\t\" | \"\\\\\\\"\"\n");
  EXPECT_EQ(ebnf_of("[\\x00\\x1f]", true), "root ::= \"\\\\u0000\" | \"\\\\u001f\"\n");
  EXPECT_EQ(ebnf_of("\\x08\\x0c\\x0b", true), "root ::= \"\\\\b\\\\f\\\\u000b\"\n");
  const std::string dot = ebnf_of(".", true);
  EXPECT_NE(dot.find("[^\\u0000-\\u001F\"\\\\]"), std::string::npos) << dot;
  EXPECT_EQ(dot.find("\"\\\\n\""), std::string::npos) << dot;  // `.` leaves out \n
  EXPECT_NE(dot.find("\"\\\\r\""), std::string::npos) << dot;
}

struct Refusal {
  const char* pattern;
  const char* construct;  // a piece the message must contain
  int offset;
};

TEST(RegexErrors, NameTheConstructAndOffset) {
  const Refusal cases[] = {
      {"ab\\1", "backreference '\\1'", 2},
      {"(?P<x>a)(?P=x)", "backreference '(?P=...)'", 8},
      {"(?<x>a)\\k<x>", "backreference '\\k'", 7},
      {"a(?=b)", "lookaround '(?='", 1},
      {"a(?!b)", "lookaround '(?!'", 1},
      {"(?<=a)b", "lookaround '(?<='", 0},
      {"(?<!a)b", "lookaround '(?<!'", 0},
      {"a\\bc", "word boundary '\\b'", 1},
      {"a\\B", "'\\B'", 1},
      {"(?i)abc", "inline flags", 0},
      {"a(?s:.)", "inline flags", 1},
      {"(?>a)", "atomic group", 0},
      {"(?(1)a|b)", "conditional group", 0},
      {"a*+", "possessive quantifier '*+'", 1},
      {"a{2}+", "possessive quantifier '{2}+'", 1},
      {"a**", "multiple repeat", 2},
      {"a{2}{3}", "multiple repeat", 4},
      {"*a", "nothing to repeat", 0},
      {"a|?", "nothing to repeat", 2},
      {"(+)", "nothing to repeat", 1},
      {"{2}", "nothing to repeat", 0},
      {"^*a", "nothing to repeat", 1},
      {"a^b", "'^' (start anchor)", 1},
      {"a\\Ab", "'\\A' (start anchor)", 1},
      {"a$b", "'$' (end anchor)", 1},
      {"(a$)b", "'$' (end anchor)", 2},
      {"(^a)+", "anchor (^ or $) inside a repeated group", 0},
      {"a{1001}", "past the limit of 1000", 1},
      {"a{2000,}", "past the limit of 1000", 1},
      {"a{99999999999}", "past the limit of 1000", 1},
      {"a{3,2}", "minimum above its maximum", 1},
      {"(ab", "unbalanced '('", 0},
      {"a(b(c)", "unbalanced '('", 1},
      {"ab)", "unbalanced ')'", 2},
      {"[abc", "unterminated character class", 0},
      {"x[z-a]", "bad range 'z-a'", 2},
      {"[\\d-z]", "bad range", 1},
      {"[]a]", "escape it as '\\]'", 0},
      {"[^]", "escape it as '\\]'", 0},
      {"a\\", "lone backslash", 1},
      {"\\q", "unknown escape '\\q'", 0},
      {"\\p{L}", "Unicode property escape '\\p'", 0},
      {"\\x4", "\\x needs 2 hex digits", 0},
      {"\\u12", "\\u needs 4 hex digits", 0},
      {"\\u{110000}", "past U+10FFFF", 0},
      {"\\uD800", "lone surrogate", 0},
      {"\\012", "octal escapes", 0},
      {"(?P<1x>a)", "bad group name", 0},
      {"(?Q)", "unknown group syntax", 0},
      {"[\\A]", "anchor '\\A' inside a character class", 1},
  };
  for (const Refusal& r : cases) {
    const std::string msg = error_of(r.pattern);
    EXPECT_NE(msg.find(r.construct), std::string::npos) << r.pattern << " -> " << msg;
    EXPECT_NE(msg.find("regex at offset " + std::to_string(r.offset) + ":"), std::string::npos)
        << r.pattern << " -> " << msg;
  }
}

TEST(RegexErrors, OffsetsAreBytes) {
  EXPECT_NE(error_of("é(?=x)").find("offset 2:"), std::string::npos);
  EXPECT_NE(error_of("ab\xFF").find("offset 2: the pattern is not valid UTF-8"), std::string::npos);
  EXPECT_NE(error_of("\xE2\x82").find("offset 0: the pattern is not valid UTF-8"), std::string::npos);
}

TEST(RegexLimits, ExpansionIsBounded) {
  EXPECT_NE(error_of("((a{1000}){1000})").find("RegexOptions::max_expansion"), std::string::npos);
  EXPECT_NE(error_of("(((a{100}){100}){100})").find("max_expansion"), std::string::npos);
  EXPECT_EQ(error_of("(a{100}){100}"), "");  // 10,000 units
  RegexOptions small;
  small.max_expansion = 50;
  EXPECT_NE(error_of("[a-z]{51}", small).find("more than 50"), std::string::npos);
  EXPECT_EQ(error_of("[a-z]{50}", small), "");
  EXPECT_NE(error_of("x{3}abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz", small).find("more than 50"),
            std::string::npos);
  small.max_repeat = 5;
  EXPECT_NE(error_of("a{6}", small).find("past the limit of 5"), std::string::npos);
}

TEST(RegexLimits, NestingIsBounded) {
  const std::string ok = std::string(150, '(') + "a" + std::string(150, ')');
  EXPECT_EQ(error_of(ok), "");
  const std::string deep = std::string(100000, '(') + "a" + std::string(100000, ')');
  EXPECT_NE(error_of(deep).find("nested more than 200 deep"), std::string::npos);
}

TEST(RegexApi, AddRegexIntoAnExistingGrammar) {
  Grammar g;
  const int32_t root = g.add_rule("root");
  const int32_t a = add_regex(g, "[0-9]+");
  const int32_t b = add_regex(g, "x|y", {}, "other");
  g.define(root, g.seq({a, g.literal(","), b}));
  g.set_root(root);
  EXPECT_EQ(g.to_ebnf(), "root ::= ([0-9])+ \",\" (\"x\" | \"y\")\n");
}

// Random patterns over the regex alphabet: each converts or throws GrammarError.
TEST(RegexRobustness, RandomPatternsConvertOrThrowGrammarError) {
  const std::string alphabet = "ab()[]{}|*+?^$.\\-,:<>=!P0123dwsDWSbBxu\xC3\xA9";
  std::mt19937_64 rng(42);
  int converted = 0;
  for (int n = 0; n < 20000; ++n) {
    std::string p;
    for (size_t len = std::uniform_int_distribution<size_t>(0, 16)(rng); len > 0; --len)
      p += alphabet[std::uniform_int_distribution<size_t>(0, alphabet.size() - 1)(rng)];
    for (bool json : {false, true}) {
      RegexOptions opt;
      opt.json_string_content = json;
      try {
        regex_to_grammar(p, opt).check_complete();
        ++converted;
      } catch (const GrammarError&) {}
    }
  }
  EXPECT_GT(converted, 2000);  // not everything is refused
}

}  // namespace
}  // namespace nanovllm::structured
