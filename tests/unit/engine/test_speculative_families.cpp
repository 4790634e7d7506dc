// Greedy identity of speculative decoding across the model families (tiny fixtures, CPU): on Qwen2,
// Llama 3, Mistral and Qwen3-MoE, n-gram drafts, the model as its own draft model and an EAGLE-3
// head shaped for it (the 3-layer fixtures: a head fuses three layers' hidden states) leave greedy outputs
// byte-identical to plain decoding, with prompts read in chunks, a prefix-cache hit and preemption (a small KV cache)
// in play; every KV block comes back (spec_engine_run.h checks the target's and the block manager's invariants after
// every step).
#include <gtest/gtest.h>

#include <string>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/models/hf_config.h"
#include "spec_engine_run.h"
#include "spec_methods.h"
#include "temp_dir.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;

namespace {

// Repeating prompts (n-gram drafts find matches), a random one, and a prefix-cache hit on the first.
std::vector<test::SpecRequest> workload(int32_t range) {
  auto repeat = [&](size_t period, size_t times, uint32_t seed) {
    return test::repeating_prompt(period, times, seed, range);
  };
  std::vector<test::SpecRequest> rs;
  rs.push_back({repeat(14, 5, 1), greedy(24)});  // 70 tokens: two chunks
  rs.push_back({test::spec_prompt(30, 2, range), greedy(24)});
  std::vector<int32_t> shared = repeat(14, 5, 1);
  shared.resize(32);
  const auto tail = test::spec_prompt(6, 3, range);
  shared.insert(shared.end(), tail.begin(), tail.end());
  rs.push_back({shared, greedy(16)});
  return rs;
}

EngineConfig base_cfg(const std::string& dir, int64_t kv_blocks) {
  EngineConfig cfg = test::tiny_cfg(dir);
  cfg.block_size = 16;
  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 64;
  cfg.max_num_seqs = 4;
  cfg.num_kvcache_blocks = kv_blocks;
  return cfg;
}

void expect_identity(const std::string& family) {
  SCOPED_TRACE(family);
  const std::string dir = test::fixture(family);
  const ModelConfig mc = load_model_config(dir);
  const auto reqs = workload(test::prompt_range(mc));
  const int64_t kv_blocks = 9;  // three sequences of up to ~94 tokens in 16-token blocks: preemptions
  const test::SpecRun plain = [&] {
    LLMEngine e(base_cfg(dir, kv_blocks));
    return test::run_requests(e, reqs);
  }();
  EXPECT_GT(plain.stats.preemptions, 0) << "the KV cache is small enough to preempt";
  EXPECT_GT(plain.stats.prefix_hit_tokens, 0) << "prefix caching in play";
  test::TempDir head;
  test::write_eagle3_head_for(head.dir.string(), mc);
  for (const auto& [name, json] : test::speculative_methods(dir, mc, head.dir.string())) {
    SCOPED_TRACE(name);
    EngineConfig cfg = base_cfg(dir, kv_blocks);
    cfg.speculative_config = SpeculativeConfig::parse(json, "test");
    LLMEngine e(cfg);
    ASSERT_TRUE(e.speculating());
    const test::SpecRun spec_run = test::run_requests(e, reqs);
    EXPECT_EQ(spec_run.outputs, plain.outputs);
    EXPECT_GT(spec_run.stats.spec.num_drafts, 0);
    if (name == "draft_model")  // the model itself: its drafts are the target's tokens
      EXPECT_GE(double(spec_run.stats.spec.num_accepted_tokens), 0.9 * double(spec_run.stats.spec.num_draft_tokens));
  }
}

}  // namespace

TEST(SpeculativeFamilies, Qwen2) { expect_identity("tiny-qwen2"); }
TEST(SpeculativeFamilies, Llama3) { expect_identity("tiny-llama3"); }
TEST(SpeculativeFamilies, Mistral) { expect_identity("tiny-mistral"); }
TEST(SpeculativeFamilies, Qwen3Moe) { expect_identity("tiny-qwen3-moe"); }
