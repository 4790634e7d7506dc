// EAGLE-3 on CUDA (engine/eagle3_drafter.h): the head runs over the CUDA backend's ops unchanged, the
// target's hidden-state copies sit inside its decode CUDA graphs (a static buffer), and greedy
// tokens equal non-speculative decoding's up to near-ties (a verify row's BF16 logits come from
// another GEMM than decoding's, tests/near_tie.h). The head's KV blocks all come back. The head is a
// tiny one the test writes (vLLM's layout) over tiny-qwen3-untied.
#include "eagle3_checkpoint_writer.h"
#include "engine_compare.h"
#include "gpu_test_util.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "near_tie.h"
#include "temp_dir.h"

using namespace nanovllm;

namespace {

TEST(CudaEagle3, GreedyEqualsDecodingUpToNearTies) {
  REQUIRE_GPU();
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  EngineConfig cfg = test::tiny_cfg();
  cfg.device = DeviceChoice::Cuda;
  cfg.kv_cache_memory = 64 << 20;
  LLMEngine base(cfg);
  cfg.speculative_config = SpeculativeConfig::parse(
      R"({"method": "eagle3", "model": ")" + dir.dir.string() + R"(", "num_speculative_tokens": 3})", "test");
  LLMEngine spec(cfg);
  EXPECT_GT(spec.model_runner().num_cuda_graphs(), 0) << "decode steps keep their graphs";
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t seed = 0; seed < 4; ++seed) prompts.push_back(test::random_tokens(20 + 7 * seed, 60 + seed));
  const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts, 40);
  const SpecDecodeStats& st = spec.scheduler_stats().spec;
  test::print_spec_comparison("eagle3 k=3", compared, st);
  EXPECT_GT(compared, 80);
  EXPECT_GT(st.num_drafts, 10);
  EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0);
  const auto* d = dynamic_cast<const Eagle3Drafter*>(spec.drafter());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks()) << "every head block back";
}

}  // namespace
