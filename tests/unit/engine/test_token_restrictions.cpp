// vLLM's allowed_token_ids and bad_words in the engine (engine/token_restrictions.h): the mask alone,
// and whole runs, synchronous and async-scheduled (the rows run ahead as constrained rows): every
// token in the allowed set, a bad word's sequence never completed, the same tokens both ways.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/token_restrictions.h"
#include "nanovllm/utils/error.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

bool allowed(const std::vector<uint32_t>& mask, int32_t t) { return (mask[size_t(t) >> 5] >> (t & 31)) & 1u; }

TEST(TokenRestrictions, MaskOfAllowedIdsAndBadWords) {
  SamplingParams sp;
  EXPECT_EQ(TokenRestrictions::of(sp, 100), nullptr);
  sp.allowed_token_ids = {3, 40, 41, 99};
  sp.bad_words_token_ids = {{41}, {7, 8, 40}};
  auto r = TokenRestrictions::of(sp, 100);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(r->mask_words(), 4u);
  auto mask_after = [&](std::vector<int32_t> tokens, int64_t prompt) {
    std::vector<uint32_t> m(r->mask_words(), ~0u);
    r->apply(m.data(), tokens, prompt);
    return m;
  };
  auto m = mask_after({1, 2}, 2);
  for (int32_t t = 0; t < 100; ++t) EXPECT_EQ(allowed(m, t), t == 3 || t == 40 || t == 99) << t;  // 41 is bad
  m = mask_after({1, 7, 8}, 1);  // 7 8 generated: 40 would complete the bad word
  EXPECT_FALSE(allowed(m, 40));
  EXPECT_TRUE(allowed(m, 3));
  m = mask_after({7, 8}, 2);  // 7 8 in the prompt: vLLM looks at generated tokens only
  EXPECT_TRUE(allowed(m, 40));
  sp.allowed_token_ids = {100};
  EXPECT_THROW(TokenRestrictions::of(sp, 100), InvalidRequest);
}

TEST(TokenRestrictions, EngineRunsRespectThemSyncAndAsync) {
  auto run_all = [](bool async) {
    auto cfg = test::tiny_cfg();
    cfg.async_scheduling = async;
    LLMEngine e(cfg);
    std::map<int64_t, std::vector<int32_t>> out;
    std::vector<int64_t> ids;
    for (uint64_t i = 0; i < 4; ++i) {
      SamplingParams sp;
      sp.temperature = 1.0f;
      sp.seed = 7 + i;
      sp.max_tokens = 24;
      sp.ignore_eos = true;
      if (i % 2 == 0) sp.allowed_token_ids = {5, 9, 17, 300, 301};
      sp.bad_words_token_ids = {{9}, {300, 301}};
      ids.push_back(e.add_request(test::random_tokens(6 + i, uint32_t(i)), sp));
    }
    while (e.has_unfinished())
      for (auto& [id, t] : e.step().new_tokens) out[id].push_back(t);
    std::vector<std::vector<int32_t>> in_order;
    for (int64_t id : ids) in_order.push_back(out[id]);
    return in_order;
  };
  const auto want = run_all(false);
  EXPECT_EQ(run_all(true), want);
  ASSERT_EQ(want.size(), 4u);
  for (size_t i = 0; i < want.size(); ++i) {
    const auto& toks = want[i];
    EXPECT_EQ(toks.size(), 24u);
    EXPECT_EQ(std::count(toks.begin(), toks.end(), 9), 0);
    for (size_t k = 1; k < toks.size(); ++k) EXPECT_FALSE(toks[k - 1] == 300 && toks[k] == 301) << i;
    if (i % 2 == 0)
      for (int32_t t : toks) EXPECT_TRUE(t == 5 || t == 17 || t == 300 || t == 301) << t;
  }
}

}  // namespace
}  // namespace nanovllm
