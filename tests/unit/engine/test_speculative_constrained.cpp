// Speculative decoding (n-gram drafts) on constrained sequences, CPU: every draft position is
// sampled under the mask that decoding would apply there (the grammar forked and advanced by the
// drafts before it, allowed_token_ids / bad_words over them as context: GrammarMasks::fill), so
// seeded outputs are the same with and without speculation and stay in the language; drafts are
// proposed for them, some stand and some are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;

namespace {

struct SpecRun {
  std::map<int64_t, std::vector<int32_t>> tokens;  // new_tokens, in order
  SpecDecodeStats spec;
};

// The prompt repeats itself, so drafts are proposed from the start; make(i) sets the constraint.
template <class Make>
SpecRun run(bool speculate, int requests, Make make, const Tokenizer* tok = nullptr) {
  auto cfg = test::tiny_cfg();
  cfg.block_size = 16;
  if (speculate)
    cfg.speculative_config =
        SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1})", "t");
  LLMEngine e(cfg);
  if (tok) e.enable_structured_outputs(tok);
  for (int i = 0; i < requests; ++i) {
    const std::vector<int32_t> unit = test::random_tokens(5 + size_t(i), uint32_t(i));
    std::vector<int32_t> prompt;
    for (int r = 0; r < 4; ++r) prompt.insert(prompt.end(), unit.begin(), unit.end());
    e.add_request(prompt, make(i));
  }
  SpecRun out;
  while (e.has_unfinished())
    for (auto& [id, t] : e.step().new_tokens) out.tokens[id].push_back(t);
  out.spec = e.scheduler_stats().spec;
  EXPECT_EQ(e.scheduler_stats().kv_blocks_used, 0);
  return out;
}

void expect_drafts_decided(const SpecDecodeStats& st) {
  EXPECT_GT(st.num_draft_tokens, 0) << "constrained sequences get drafts";
  EXPECT_GT(st.num_accepted_tokens, 0) << "some stand";
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens) << "some are refused";
}

TEST(SpeculativeConstrained, GrammarMasksAtEveryDraftPosition) {
  const std::string dir = test::qwen3_tokenizer_dir();
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "npm data missing (scripts/setup.sh)";
  auto tok = Tokenizer::from_dir(dir);
  const char* patterns[] = {"(ab|c|de)+ [0-9]{2,9}", "[a-z]{8,30}!", "(xy)+z"};
  auto make = [&](int i) {
    SamplingParams sp;
    sp.temperature = i % 3 ? 0.9f : 0.0f;
    sp.seed = 100 + uint64_t(i);
    sp.max_tokens = 40;
    sp.structured_outputs.kind = StructuredOutputs::Kind::Regex;
    sp.structured_outputs.text = patterns[i % 3];
    return sp;
  };
  const SpecRun base = run(false, 6, make, tok.get()), spec = run(true, 6, make, tok.get());
  EXPECT_EQ(spec.tokens, base.tokens);
  expect_drafts_decided(spec.spec);
  for (auto& [id, toks] : spec.tokens) {
    std::vector<int32_t> body(toks.begin(), toks.end());
    if (!body.empty() && body.back() == 2) body.pop_back();  // the tiny model's EOS
    const std::string text = tok->decode(body, false);
    EXPECT_TRUE(std::regex_match(text, std::regex(patterns[id % 3]))) << id << ": '" << text << "'";
  }
}

TEST(SpeculativeConstrained, AllowedIdsAndBadWordsAtEveryDraftPosition) {
  auto make = [](int i) {
    SamplingParams sp;
    sp.temperature = i % 2 ? 1.0f : 0.0f;
    sp.seed = 7 + uint64_t(i);
    sp.max_tokens = 32;
    sp.ignore_eos = true;
    sp.allowed_token_ids = {5, 9, 17, 300, 301};
    sp.bad_words_token_ids = {{9}, {300, 301}};
    return sp;
  };
  const SpecRun base = run(false, 4, make), spec = run(true, 4, make);
  EXPECT_EQ(spec.tokens, base.tokens);
  expect_drafts_decided(spec.spec);
  for (auto& [id, toks] : spec.tokens) {
    EXPECT_EQ(toks.size(), 32u);
    for (size_t k = 0; k < toks.size(); ++k) {
      EXPECT_TRUE(toks[k] == 5 || toks[k] == 17 || toks[k] == 300 || toks[k] == 301) << toks[k];
      if (k > 0) EXPECT_FALSE(toks[k - 1] == 300 && toks[k] == 301) << id;
    }
  }
}

}  // namespace
