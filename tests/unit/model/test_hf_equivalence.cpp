// The CPU engine against Hugging Face transformers: tiny random Qwen3 fixtures (odd head_dim,
// GQA, tied BF16 single file and untied F32 sharded) with reference logits and greedy tokens
// made by scripts/make_fixtures.py (see hf_fixture_check.h for the comparison).
#include <gtest/gtest.h>

#include <cstdio>

#include "hf_fixture_check.h"

using namespace nanovllm;

namespace {

constexpr double kLogitAtol = 1e-4;  // FP32 engine vs FP32 transformers (seen: 1.3e-5)

void check_fixture(const std::string& name, int64_t block_size) {
  EngineConfig cfg;
  cfg.device = "cpu";
  cfg.block_size = block_size;
  cfg.kv_cache_memory = 64 << 20;
  auto r = test::run_fixture(name, cfg);
  std::printf("%s: %d greedy tokens compared, max |logit diff| %.2e\n", name.c_str(), r.compared, r.max_logit_diff);
  EXPECT_LT(r.max_logit_diff, kLogitAtol) << name;
  EXPECT_GT(r.compared, 100) << name;
  EXPECT_EQ(r.diverged, 0) << name;  // FP32 agrees closely enough that no near-tie flips
  EXPECT_TRUE(r.all_blocks_free);
}

}  // namespace

TEST(HFEquivalence, TiedBF16SingleFile) { check_fixture("tiny-qwen3-tied", 256); }
TEST(HFEquivalence, UntiedF32Sharded) { check_fixture("tiny-qwen3-untied", 256); }
// Small blocks: many pages per sequence, block tables with several entries.
TEST(HFEquivalence, UntiedSmallBlocks) { check_fixture("tiny-qwen3-untied", 16); }
TEST(HFEquivalence, TiedBlockSizeOne) { check_fixture("tiny-qwen3-tied", 1); }
