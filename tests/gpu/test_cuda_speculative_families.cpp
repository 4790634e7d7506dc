// Speculative decoding on CUDA across the model families (tiny fixtures: Qwen2, Llama 3, Mistral,
// Qwen3-MoE): n-gram drafts, the model as its own draft model and an EAGLE-3 head shaped for it
// (3-layer fixtures: a head fuses three layers' hidden states) give greedy tokens equal to
// non-speculative decoding's up to near-ties (engine_compare.h: a verify row's BF16 rounding may
// differ from a decode's where two logits nearly tie); drafts are proposed and every block comes back.
// Once more without CUDA graphs (--enforce-eager) on one family.
#include <cstdio>

#include "engine_compare.h"
#include "gpu_test_util.h"
#include "nanovllm/models/hf_config.h"
#include "near_tie.h"
#include "spec_methods.h"
#include "temp_dir.h"

using namespace nanovllm;

namespace {

void expect_families_identity(const std::string& family, bool eager = false) {
  SCOPED_TRACE(family + (eager ? " eager" : " CUDA graphs"));
  const std::string dir = test::fixture(family);
  const ModelConfig mc = load_model_config(dir);
  EngineConfig cfg = test::tiny_cfg(dir);
  cfg.device = DeviceChoice::Cuda;
  cfg.kv_cache_memory = 64 << 20;
  cfg.block_size = 16;
  cfg.enforce_eager = eager;
  LLMEngine base(cfg);
  EXPECT_EQ(base.model_runner().uses_cuda_graphs(), !eager);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t seed = 0; seed < 4; ++seed)
    prompts.push_back(test::repeating_prompt(6 + seed, 6, 40 + seed, test::prompt_range(mc)));
  test::TempDir head;
  test::write_eagle3_head_for(head.dir.string(), mc);
  for (const auto& [name, json] : test::speculative_methods(dir, mc, head.dir.string())) {
    SCOPED_TRACE(name);
    EngineConfig sc = cfg;
    sc.speculative_config = SpeculativeConfig::parse(json, "test");
    LLMEngine spec(sc);
    const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts, 32);
    const SpecDecodeStats& st = spec.scheduler_stats().spec;
    std::printf("[gpu] %s %s k=3: %d greedy tokens compared; %lld of %lld draft tokens accepted\n", family.c_str(),
                name.c_str(), compared, static_cast<long long>(st.num_accepted_tokens),
                static_cast<long long>(st.num_draft_tokens));
    EXPECT_GT(compared, 60);
    EXPECT_GT(st.num_drafts, 0);
    EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0) << "every block back";
  }
}

TEST(CudaSpeculativeFamilies, Qwen2) {
  REQUIRE_GPU();
  expect_families_identity("tiny-qwen2");
}
TEST(CudaSpeculativeFamilies, Llama3) {
  REQUIRE_GPU();
  expect_families_identity("tiny-llama3");
}
TEST(CudaSpeculativeFamilies, Mistral) {
  REQUIRE_GPU();
  expect_families_identity("tiny-mistral");
}
TEST(CudaSpeculativeFamilies, Qwen3Moe) {
  REQUIRE_GPU();
  expect_families_identity("tiny-qwen3-moe");
}
TEST(CudaSpeculativeFamilies, MistralWithoutCudaGraphs) {
  REQUIRE_GPU();
  expect_families_identity("tiny-mistral", /*eager=*/true);
}

}  // namespace
