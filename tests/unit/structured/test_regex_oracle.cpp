// Regex -> grammar against the references: for every pattern in regex_test_patterns.h, plain and
// as JSON string content (RegexOptions::json_string_content), random strings must get the same
// answer from JavaScript's RegExp (whole-string match, flag u: the meaning of the pattern) and
// from xgrammar running the grammar we print (Grammar::to_ebnf: what we would enforce).
// tests/oracles/regex_oracle.mjs answers for all cases in one node run (cached, see
// structured_oracles.h).
//
// Strings: positives sampled from our grammar (regex_sampler.h), negatives made by mutating them
// and a few random strings over the patterns' alphabet. A mismatch either way fails: a string
// JavaScript matches but xgrammar refuses is a string we would wrongly forbid, and the reverse a
// string we would wrongly allow.
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/structured/regex.h"
#include "regex_sampler.h"
#include "regex_test_patterns.h"
#include "regex_xgrammar_compat.h"
#include "structured_oracles.h"

namespace nanovllm::structured::test {
namespace {

using json = nlohmann::json;

// Known differences between JavaScript and xgrammar on our grammars, pattern -> why. Every entry
// must explain a difference of the references (or a documented choice of ours), not hide a bug.
// None are needed at present.
const std::map<std::string, std::string>& divergences() {
  static const std::map<std::string, std::string> table = {};
  return table;
}

struct Case {
  size_t index = 0;
  bool json_content = false;
  std::string name() const { return "p" + std::to_string(index) + (json_content ? "_json" : ""); }
};

std::vector<Case> all_cases() {
  std::vector<Case> out;
  for (size_t i = 0; i < regex_cases().size(); ++i)
    for (bool j : {false, true}) out.push_back({i, j});
  return out;
}

Grammar grammar_of(const Case& c) {
  RegexOptions opt;
  opt.json_string_content = c.json_content;
  return regex_to_grammar(regex_cases()[c.index].pattern, opt);
}

std::vector<std::string> strings_for(const Case& c, const Grammar& g) {
  return oracle_strings(
      g, c.index * 2 + c.json_content, StringMix{},
      {'a', 'Z', '0', '9', ' ', '-', '.', '_', '@', '\n', '\t', '\r', '"', '\\', 0x00, 0xE9, 0x20AC, 0x2028, 0x1F600});
}

const json& oracle(std::string* why) {
  static std::string reason;
  static const json results = [] {
    json req = {{"cases", json::array()}};
    for (const Case& c : all_cases()) {
      const Grammar g = grammar_of(c);
      const std::vector<std::string> strings = strings_for(c, g);
      req["cases"].push_back({{"name", c.name()},
                              {"pattern", regex_cases()[c.index].pattern},
                              {"js", regex_cases()[c.index].js},
                              {"json", c.json_content},
                              {"ebnf", restrict_to_alphabet(g, non_ascii_alphabet(strings)).to_ebnf()},
                              {"strings", strings}});
    }
    return run_structured_oracle("regex_oracle.mjs", req, &reason);
  }();
  *why = reason;
  return results;
}

class RegexOracle : public ::testing::TestWithParam<Case> {};

TEST_P(RegexOracle, JavaScriptAndXgrammarAgree) {
  const Case& c = GetParam();
  std::string why;
  const json& results = oracle(&why);
  if (results.is_null()) {
    if (!xgrammar_installed()) GTEST_SKIP() << why;
    FAIL() << why;
  }
  const Grammar g = grammar_of(c);
  const std::vector<std::string> strings = strings_for(c, g);
  const json& r = results.at(c.name());
  ASSERT_FALSE(r.contains("error")) << r["error"] << "\npattern: " << regex_cases()[c.index].pattern
                                    << "\nebnf: " << g.to_ebnf();
  ASSERT_EQ(r["js"].size(), strings.size());
  ASSERT_EQ(r["xg"].size(), strings.size());
  const auto div = divergences().find(regex_cases()[c.index].pattern);
  int mismatches = 0;
  for (size_t i = 0; i < strings.size(); ++i) {
    if (r["js"][i] == r["xg"][i]) continue;
    ++mismatches;
    if (div == divergences().end())
      ADD_FAILURE() << "string " << json(strings[i]).dump() << ": JavaScript says " << r["js"][i]
                    << ", xgrammar on our grammar says " << r["xg"][i]
                    << "\npattern: " << regex_cases()[c.index].pattern << "\nebnf: " << g.to_ebnf();
  }
  if (div != divergences().end()) EXPECT_GT(mismatches, 0) << "divergence entry no longer needed: " << div->second;
}

INSTANTIATE_TEST_SUITE_P(Patterns, RegexOracle, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name(); });

// The strings are not vacuous: across all cases JavaScript matches many and refuses many.
TEST(RegexOracleStrings, MixPositivesAndNegatives) {
  std::string why;
  const json& results = oracle(&why);
  if (results.is_null()) {
    if (!xgrammar_installed()) GTEST_SKIP() << why;
    FAIL() << why;
  }
  size_t yes = 0, no = 0;
  for (const auto& [name, r] : results.items()) {
    if (!r.contains("js")) continue;
    for (const json& v : r["js"]) (v.get<bool>() ? yes : no)++;
  }
  EXPECT_GT(yes, 2000u);
  EXPECT_GT(no, 2000u);
  std::printf("regex oracle: %zu cases, %zu strings matched, %zu refused\n", results.size(), yes, no);
}

}  // namespace
}  // namespace nanovllm::structured::test
