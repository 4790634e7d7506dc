// The matcher and its cached token masks: on random walks, the mask from the per-state cache equals
// trying every token with accept_token; grammar checks (left recursion, no complete text) refuse.
#include <chrono>

#include <gtest/gtest.h>

#include "nanovllm/structured/compiled_grammar.h"
#include "structured_test_support.h"

namespace nanovllm::structured {
namespace {

using test::allowed_ids;
using test::brute_force_mask;
using test::mask_of;

std::vector<std::string> json_tokens() {
  std::vector<std::string> t = {
      "{",   "}",   "[",   "]",    ",",      ":",   "\"",   " ",   "\n",   "a",    "b",    "0",        "1",     "9",
      "-",   ".",   "e",   "\\",   "n",      "u",   "t",    "r",   "f",    "l",    "s",    "true",     "false", "null",
      "{\"", "\":", "\",", "\"}",  "\"]",    ", ",  ": ",   "\"a", "a\"",  "ab",   "12",   "0.",       ".5",    "e+",
      "[{",  "}]",  "}}",  "]}",   "\\n",    "\\u", "00",   "é",   "\xC3", "\xA9", "日本", "\xE6\x97", "\x01",  "\"\"",
      "{}",  "[]",  ",\"", "\": ", "\", \"", "1,",  "a\":", "tru", "nul",  "\" }"};
  return t;
}

// Walks at random through the grammar; at every step the cached mask must equal the brute force.
void check_random_walks(const Grammar& g, const std::vector<std::string>& tokens, int walks, int steps, uint32_t seed) {
  auto vocab = test::small_vocab(tokens);
  GrammarCompiler compiler(vocab);
  auto compiled = compiler.compile(g);
  std::mt19937 rng(seed);
  for (int w = 0; w < walks; ++w) {
    GrammarMatcher m(compiled);
    for (int s = 0; s < steps && !m.is_terminated(); ++s) {
      auto cached = mask_of(m);
      auto brute = brute_force_mask(m, vocab->size());
      ASSERT_EQ(allowed_ids(cached), allowed_ids(brute)) << "walk " << w << " step " << s;
      auto ids = allowed_ids(cached);
      ASSERT_FALSE(ids.empty()) << "dead end at walk " << w << " step " << s;
      ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]));
    }
  }
}

TEST(GrammarMatcher, CachedMaskEqualsBruteForceOnJson) {
  check_random_walks(test::json_grammar(), json_tokens(), 40, 60, 1);
}

TEST(GrammarMatcher, NestedRulesNullablesAndAmbiguity) {
  Grammar g = test::nested_grammar();
  check_random_walks(g, {"a", "b", "ab", ",", "[", "]", "[a", "a]", "],", ",a", "[]", "[[", "]]", "ba", "a,", "]a"}, 60,
                     40, 2);
}

TEST(GrammarMatcher, StopTokensOnlyWhereComplete) {
  Grammar g;
  g.set_root(g.add_rule("root", g.seq({g.literal("ab"), g.optional(g.literal("c"))})));
  auto vocab = test::small_vocab({"a", "b", "c", "ab", "abc", "d"});
  GrammarCompiler compiler(vocab);
  GrammarMatcher m(compiler.compile(g));
  const int32_t stop = vocab->stop_ids[0];
  EXPECT_EQ(allowed_ids(mask_of(m)), (std::vector<int32_t>{0, 3, 4}));
  EXPECT_FALSE(m.accept_token(stop));
  EXPECT_FALSE(m.accept_token(5));  // "d"
  ASSERT_TRUE(m.accept_token(3));   // "ab"
  EXPECT_TRUE(m.can_end());
  EXPECT_EQ(allowed_ids(mask_of(m)), (std::vector<int32_t>{2, stop}));
  GrammarMatcher fork = m;
  ASSERT_TRUE(fork.accept_token(2));
  EXPECT_EQ(allowed_ids(mask_of(fork)), (std::vector<int32_t>{stop}));  // finished: only EOS
  ASSERT_TRUE(fork.accept_token(stop));
  EXPECT_TRUE(fork.is_terminated());
  EXPECT_TRUE(allowed_ids(mask_of(fork)).empty());
  EXPECT_EQ(allowed_ids(mask_of(m)), (std::vector<int32_t>{2, stop}));  // the original did not move
  fork.rollback(2);
  EXPECT_FALSE(fork.is_terminated());
  EXPECT_EQ(allowed_ids(mask_of(fork)), (std::vector<int32_t>{2, stop}));
  EXPECT_THROW(fork.rollback(2), Error);
}

TEST(GrammarMatcher, Utf8ClassesAcrossTokenBoundaries) {
  Grammar g = test::utf8_grammar();
  check_random_walks(g,
                     {"\xC3", "\xA9", "\xC3\xA9", "\xE6", "\x97", "\xA5", "\xE6\x97", "\x97\xA5", "\xE6\x97\xA5", "!",
                      "\xA9!", "e", "\xE6\x9C\xAC"},
                     60, 12, 3);
}

TEST(GrammarAutomaton, RefusesLeftRecursionAndEndlessRules) {
  Grammar g;
  int32_t expr = g.add_rule("expr");
  g.define(expr, g.choice({g.seq({g.ref(expr), g.literal("+"), g.literal("1")}), g.literal("1")}));
  g.set_root(expr);
  try {
    build_automaton(g);
    FAIL() << "left recursion accepted";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("'expr' is left-recursive"), std::string::npos) << e.what();
  }
  Grammar h;
  int32_t loop = h.add_rule("loop");
  h.define(loop, h.seq({h.literal("("), h.ref(loop), h.literal(")")}));
  h.set_root(loop);
  EXPECT_THROW(build_automaton(h), GrammarError);
  Grammar big;  // (a|b)*a(a|b){N}: the DFA needs 2^N states
  int32_t ab = big.char_class({{'a', 'b'}});
  big.set_root(big.add_rule("root", big.seq({big.star(ab), big.literal("a"), big.repeat(ab, 24, 24)})));
  AutomatonLimits limits;
  limits.max_states = 100000;
  EXPECT_THROW(build_automaton(big, limits), GrammarError);
}

// .*a.{100}: the DFA's states are 2^100 subsets, each holding up to ~100 positions of the dots (and
// their UTF-8 continuation states). Counting states alone let a 10-byte pattern run for seconds
// before the state limit; the work budget refuses it after a bounded amount of subset construction.
TEST(GrammarAutomaton, RefusesDfasOfFewButLargeStatesByTheirWork) {
  Grammar g;
  g.set_root(g.add_rule("root", g.seq({g.star(g.any_char()), g.literal("a"), g.repeat(g.any_char(), 100, 100)})));
  AutomatonLimits limits;
  limits.max_states = 1 << 30;  // only the work budget stands in the way
  limits.max_work = 2'000'000;
  const auto t0 = std::chrono::steady_clock::now();
  try {
    build_automaton(g, limits);
    FAIL() << "a 2^100-state DFA was built";
  } catch (const GrammarError& e) {
    EXPECT_NE(std::string(e.what()).find("too much work"), std::string::npos) << e.what();
  }
  // 2M units take ~20 ms natively; the bound leaves room for sanitizers and a loaded machine.
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  // The same pattern with a short tail fits: the budget does not refuse ordinary grammars.
  Grammar small;
  small.set_root(small.add_rule(
      "root", small.seq({small.star(small.any_char()), small.literal("a"), small.repeat(small.any_char(), 4, 4)})));
  EXPECT_GT(build_automaton(small, limits).num_states(), 16);
}

}  // namespace
}  // namespace nanovllm::structured

namespace nanovllm::structured {
namespace {

TEST(GrammarMatcher, Qwen3VocabularyMasksEqualBruteForce) {
  auto vocab = test::qwen3_vocab();
  if (!vocab) GTEST_SKIP() << "tests/oracles/node_modules missing (run scripts/setup.sh)";
  EXPECT_EQ(vocab->size(), 151936);
  GrammarCompiler compiler(vocab);
  auto compiled = compiler.compile(test::json_grammar());
  std::mt19937 rng(7);
  GrammarMatcher m(compiled);
  size_t allowed_total = 0;
  for (int s = 0; s < 12; ++s) {
    auto cached = test::mask_of(m);
    auto brute = test::brute_force_mask(m, vocab->size());
    auto ids = test::allowed_ids(cached);
    ASSERT_EQ(ids, test::allowed_ids(brute)) << "step " << s;
    ASSERT_FALSE(ids.empty());
    allowed_total += ids.size();
    ASSERT_TRUE(m.accept_token(ids[rng() % ids.size()]));
  }
  EXPECT_GT(allowed_total, 12u * 50);  // inside strings most of the vocabulary is allowed
}

// A string of at most 200 characters: 200 automaton states, each of which starts nearly the whole
// vocabulary, so the token-mask cache classifies ~30M tokens (~2.5 s on this machine, several
// times that under sanitizers). The compile limit stops the build at its deadline rather than
// refusing the grammar once it is done.
TEST(GrammarCompiler, TokenMasksStopAtTheCompileDeadline) {
  auto vocab = test::qwen3_vocab();
  if (!vocab) GTEST_SKIP() << "tests/oracles/node_modules missing (run scripts/setup.sh)";
  CompileLimits limits;
  limits.max_compile_seconds = 0.2;
  GrammarCompiler compiler(vocab, limits);
  StructuredOutputs so;
  so.kind = StructuredOutputs::Kind::JsonSchema;
  so.text = R"({"type": "string", "maxLength": 200})";
  const auto t0 = std::chrono::steady_clock::now();
  try {
    compiler.compile(so);
    FAIL() << "compiled past the deadline";
  } catch (const InvalidRequest& e) {
    // Not the check after the build ("took N s to compile"): the build itself stopped.
    EXPECT_NE(std::string(e.what()).find("token masks took more than"), std::string::npos) << e.what();
  }
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
  // A grammar within the limit still compiles under it.
  so.text = R"({"type": "string", "maxLength": 2})";
  EXPECT_GT(compiler.compile(so)->automaton.num_states(), 2);
}

}  // namespace
}  // namespace nanovllm::structured
