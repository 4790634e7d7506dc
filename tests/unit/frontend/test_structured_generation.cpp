// Structured outputs end to end on the CPU: the tiny Qwen3 model (random weights, 700 tokens) with
// the real Qwen3 tokenizer, sampled at temperature 1: every output is in the language of its
// grammar and ends with EOS where the grammar is complete; n > 1 siblings each keep their own
// matcher; a reasoning request is free until its start token; a bad grammar is a clear error.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/utils/error.h"
#include "test_paths.h"
#include "tiny_engine.h"
#include "tiny_llm.h"

using namespace nanovllm;

namespace {

SamplingParams sampled(int max_tokens, uint64_t seed) {
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.max_tokens = max_tokens;
  sp.seed = seed;
  return sp;
}

std::vector<Prompt> prompts(size_t n) {
  std::vector<Prompt> p;
  for (size_t i = 0; i < n; ++i) p.push_back(Prompt::of_ids(test::random_tokens(5 + i % 7, uint32_t(100 + i))));
  return p;
}

TEST(StructuredGeneration, ChoiceOutputsAreChoices) {
  LLM llm = test::tiny_qwen3_llm();
  SamplingParams sp = sampled(32, 1);
  sp.structured_outputs.kind = StructuredOutputs::Kind::Choice;
  sp.structured_outputs.choices = {"yes", "no", "maybe not", "{\"a\": 1}", "日本"};
  std::set<std::string> seen;
  std::vector<SamplingParams> params;
  for (uint64_t s = 0; s < 40; ++s) {
    params.push_back(sp);
    params.back().seed = s;
  }
  auto outs = llm.generate(prompts(40), params);
  for (const auto& o : outs) {
    const auto& c = sp.structured_outputs.choices;
    EXPECT_NE(std::find(c.begin(), c.end(), o.text), c.end()) << "'" << o.text << "'";
    EXPECT_EQ(o.finish_reason, FinishReason::Stop) << o.text;
    seen.insert(o.text);
  }
  EXPECT_GE(seen.size(), 3u);  // sampling at temperature 1 visits several choices
}

TEST(StructuredGeneration, ReasoningIsFreeUntilTheStartToken) {
  LLM llm = test::tiny_qwen3_llm();
  // logit_bias makes token 17 ('2') the free choice at every step; the constraint starts after it.
  SamplingParams sp = sampled(40, 3);
  sp.logit_bias = {{17, 100.0f}};
  sp.structured_outputs.kind = StructuredOutputs::Kind::Choice;
  sp.structured_outputs.choices = {"ok", "fine"};
  sp.structured_outputs.start_after_token = 17;
  for (uint64_t s = 0; s < 6; ++s) {
    sp.seed = s;
    auto out = llm.generate({Prompt::of_ids(test::random_tokens(6, uint32_t(s)))}, {sp})[0];
    ASSERT_GE(out.token_ids.size(), 3u);
    EXPECT_EQ(out.token_ids[0], 17);     // free: the biased token
    EXPECT_EQ(out.token_ids.back(), 2);  // the tiny model's EOS, where the grammar is complete
    std::string after = llm.require_tokenizer().decode({out.token_ids.begin() + 1, out.token_ids.end() - 1}, true);
    EXPECT_TRUE(after == "ok" || after == "fine") << after;  // constrained: the bias cannot win
    EXPECT_EQ(out.finish_reason, FinishReason::Stop);
  }
  // Without the start token the same bias never gets through the grammar.
  sp.structured_outputs.start_after_token = -1;
  auto out = llm.generate({Prompt::of_ids({5, 6, 7})}, {sp})[0];
  EXPECT_TRUE(out.text == "ok" || out.text == "fine") << out.text;
}

TEST(StructuredGeneration, RefusesWhatDoesNotCompile) {
  LLM llm = test::tiny_qwen3_llm();
  SamplingParams sp = sampled(8, 1);
  sp.structured_outputs.kind = StructuredOutputs::Kind::Choice;  // empty choice list
  try {
    llm.generate({Prompt::of_ids({5, 6, 7})}, {sp});
    FAIL() << "an empty choice list was accepted";
  } catch (const InvalidRequest& e) {
    EXPECT_EQ(e.param, "structured_outputs");
  }
}

}  // namespace
