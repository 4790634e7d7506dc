// The CPU engine against Hugging Face transformers: tiny random Qwen3 fixtures (odd head_dim,
// GQA, tied BF16 single file, untied F32 sharded, YaRN RoPE) with reference logits and greedy
// tokens made by scripts/make_fixtures.py (see hf_fixture_check.h for the comparison).
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hf_fixture_check.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/hf_config.h"

using namespace nanovllm;

namespace {

constexpr double kLogitAtol = 1e-4;  // FP32 engine vs FP32 transformers (seen: 1.3e-5)

// The exact path (FP32 weights), the oracle; the fast path's tests are below.
void check_fixture(const std::string& name, int64_t block_size) {
  EngineConfig cfg;
  cfg.device = DeviceChoice::Cpu;
  cfg.cpu_precision = CpuPrecision::Exact;
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
// YaRN (factor 4 over 128 pre-training positions): prompts of up to 300 tokens, positions up to 323.
TEST(HFEquivalence, YarnRope) {
  // Our YaRN table against the inv_freq buffer and attention_scaling of transformers' model.
  std::ifstream in(test::fixture("tiny-qwen3-yarn") + "/reference.json");
  const auto rope = nlohmann::json::parse(in).at("rope");
  const RopeParams ours = rotary_embedding(load_model_config(test::fixture("tiny-qwen3-yarn")));
  const auto theirs = rope.at("inv_freq").get<std::vector<double>>();
  ASSERT_EQ(ours.inv_freq.size(), theirs.size());
  for (size_t i = 0; i < theirs.size(); ++i) EXPECT_NEAR(ours.inv_freq[i], theirs[i], 3e-7 * theirs[i]) << "pair " << i;
  EXPECT_FLOAT_EQ(ours.attention_scaling, float(rope.at("attention_scaling").get<double>()));
  EXPECT_GT(ours.attention_scaling, 1.1f);
  check_fixture("tiny-qwen3-yarn", 16);
}

// The fast path (CpuPrecision::Fast): BF16 weights (an F32 checkpoint is rounded: relative error
// 2^-9 per weight); GEMMs of FP32 activations with the widened weights, or, where the CPU has
// vdpbf16ps, of activations rounded to BF16. Logits within 0.15 of transformers' (seen: 0.025 for the BF16
// checkpoints, 0.074 for the F32 one), greedy tokens equal wherever the reference's top-1/top-2
// margin exceeds 0.05 (run_fixture checks each), a near-tie may flip.
void check_fast(const std::string& name, int64_t block_size) {
  EngineConfig cfg;
  cfg.device = DeviceChoice::Cpu;
  cfg.block_size = block_size;
  cfg.kv_cache_memory = 64 << 20;
  cfg.cpu_precision = CpuPrecision::Fast;
  auto r = test::run_fixture(name, cfg);
  std::printf("%s (fast): %d greedy tokens compared, max |logit diff| %.2e\n", name.c_str(), r.compared,
              r.max_logit_diff);
  EXPECT_LT(r.max_logit_diff, 0.15) << name;
  EXPECT_GT(r.compared, 60) << name;  // near-ties may end a prompt's comparison early
  EXPECT_TRUE(r.all_blocks_free);
}

TEST(HFEquivalenceFast, TiedBF16SingleFile) { check_fast("tiny-qwen3-tied", 256); }
TEST(HFEquivalenceFast, UntiedF32SmallBlocks) { check_fast("tiny-qwen3-untied", 16); }
TEST(HFEquivalenceFast, YarnRope) { check_fast("tiny-qwen3-yarn", 16); }
