// EBNF parser against xgrammar: for every grammar in ebnf_test_grammars.h, we parse the text and
// print it back (Grammar::to_ebnf); xgrammar must accept exactly the same random strings under our
// printed grammar as under the original text, and must read our printed text as it stands.
// tests/oracles/ebnf_oracle.mjs answers for all grammars in one node run (cached, see
// structured_oracles.h).
//
// Strings: positives sampled from our parsed grammar (regex_sampler.h), negatives made by mutating
// them and a few random strings over their alphabet. For the comparison xgrammar gets our grammar
// restricted to the strings' alphabet (regex_xgrammar_compat.h: the npm build mis-compiles classes
// past U+007F), which accepts exactly the same of these strings as our grammar.
#include <gtest/gtest.h>

#include "ebnf_test_grammars.h"
#include "nanovllm/structured/ebnf.h"
#include "regex_sampler.h"
#include "regex_xgrammar_compat.h"
#include "structured_oracles.h"

namespace nanovllm::structured::test {
namespace {

using json = nlohmann::json;

std::vector<std::string> strings_for(size_t index, const Grammar& g) {
  StringMix mix;
  mix.positives = 14;
  mix.mutations = 18;
  mix.max_random_len = 10;
  mix.max_alphabet = 48;
  return oracle_strings(g, index + 1000, mix, {'a', '0', ' ', '\n', '"', '\\', '(', ')', ',', 0xE9, 0x1F600});
}

const json& oracle(std::string* why) {
  static std::string reason;
  static const json results = [] {
    json req = {{"cases", json::array()}};
    for (size_t i = 0; i < ebnf_cases().size(); ++i) {
      const Grammar g = parse_ebnf(ebnf_cases()[i].text);
      const std::vector<std::string> strings = strings_for(i, g);
      req["cases"].push_back({{"name", ebnf_cases()[i].name},
                              {"root", "root"},
                              {"grammars",
                               {{"original", ebnf_cases()[i].text},
                                {"ours", restrict_to_alphabet(g, non_ascii_alphabet(strings)).to_ebnf()},
                                {"ours_as_printed", g.to_ebnf()}}},
                              {"strings", strings}});
    }
    return run_structured_oracle("ebnf_oracle.mjs", req, &reason);
  }();
  *why = reason;
  return results;
}

class EbnfOracle : public ::testing::TestWithParam<size_t> {};

TEST_P(EbnfOracle, SameStringsAsXgrammarOnTheOriginal) {
  const size_t i = GetParam();
  std::string why;
  const json& results = oracle(&why);
  if (results.is_null()) {
    if (!xgrammar_installed()) GTEST_SKIP() << why;
    FAIL() << why;
  }
  const EbnfCase& c = ebnf_cases()[i];
  const Grammar g = parse_ebnf(c.text);
  const std::vector<std::string> strings = strings_for(i, g);
  const json& r = results.at(c.name);
  ASSERT_TRUE(r["original"].is_array()) << "xgrammar refuses the original: " << r["original"];
  ASSERT_TRUE(r["ours"].is_array()) << "xgrammar refuses ours: " << r["ours"] << "\n" << g.to_ebnf();
  ASSERT_TRUE(r["ours_as_printed"].is_array()) << "xgrammar refuses our print: " << r["ours_as_printed"] << "\n"
                                               << g.to_ebnf();
  ASSERT_EQ(r["original"].size(), strings.size());
  size_t accepted = 0;
  for (size_t k = 0; k < strings.size(); ++k) {
    accepted += r["original"][k].get<bool>();
    EXPECT_EQ(r["original"][k], r["ours"][k]) << "string " << json(strings[k]).dump() << "\noriginal:\n"
                                              << c.text << "\nours:\n"
                                              << g.to_ebnf();
  }
  EXPECT_GT(accepted, 0u) << "no sampled string is in the original's language";
  EXPECT_LT(accepted, strings.size()) << "no negative among the strings";
}

INSTANTIATE_TEST_SUITE_P(Grammars, EbnfOracle, ::testing::Range<size_t>(0, ebnf_cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) { return ebnf_cases()[info.param].name; });

}  // namespace
}  // namespace nanovllm::structured::test
