// Speculative decoding (n-gram drafts) on CUDA: verify steps run as mixed steps (eager, the
// prefill attention over the cached context), decode steps keep their CUDA graphs, and async
// scheduling (CUDA's default) gives way. Greedy tokens equal non-speculative decoding's up to
// near-ties: a verify row's logits come from a multi-row GEMM where decoding's come from the GEMV,
// so BF16 rounding differs, and a reference token binds where it beats its runner-up by more than
// tests/near_tie.h's margin. Drafts are proposed, and some stand (the prompts repeat themselves).
// Without the drafter (LLMEngine::take_drafter), async scheduling is back.
#include <algorithm>
#include <cstdio>

#include "engine_compare.h"
#include "gpu_test_util.h"
#include "near_tie.h"

using namespace nanovllm;

namespace {

std::vector<int32_t> repeating(size_t period, size_t times, uint32_t seed) {
  const std::vector<int32_t> unit = test::random_tokens(period, seed);
  std::vector<int32_t> p;
  for (size_t i = 0; i < times; ++i) p.insert(p.end(), unit.begin(), unit.end());
  return p;
}

TEST(CudaSpeculative, GreedyEqualsDecodingUpToNearTies) {
  REQUIRE_GPU();
  EngineConfig cfg = test::tiny_cfg();
  cfg.device = DeviceChoice::Cuda;
  cfg.kv_cache_memory = 64 << 20;
  LLMEngine base(cfg);
  cfg.speculative_config = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 4})", "test");
  LLMEngine spec(cfg);
  EXPECT_GT(spec.model_runner().num_cuda_graphs(), 0) << "decode steps keep their graphs";
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t seed = 0; seed < 6; ++seed) prompts.push_back(repeating(6 + seed, 6, 40 + seed));
  const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts, 48);
  const SpecDecodeStats& st = spec.scheduler_stats().spec;
  std::printf(
      "[gpu] speculative ngram k=4: %d greedy tokens compared; %lld drafts, %lld of %lld draft tokens accepted\n",
      compared, static_cast<long long>(st.num_drafts), static_cast<long long>(st.num_accepted_tokens),
      static_cast<long long>(st.num_draft_tokens));
  EXPECT_GT(compared, 100);
  EXPECT_GT(st.num_accepted_tokens, 0) << "some drafts stand";
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens) << "some are rejected";
  EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0) << "every block back, rejected slots included";
  // Speculation off (bench's pass without it): async scheduling, CUDA's default, comes back.
  EXPECT_FALSE(spec.async_scheduling());
  std::unique_ptr<Drafter> drafter = spec.take_drafter();
  EXPECT_TRUE(base.async_scheduling());
  EXPECT_TRUE(spec.async_scheduling()) << "as the engine runs without speculation";
  spec.set_drafter(std::move(drafter));
  EXPECT_FALSE(spec.async_scheduling());
}

}  // namespace
