// Speculative decoding under tensor parallelism on CUDA (TP=2 over NCCL, in one process): the
// drafter runs un-sharded on rank 0's GPU (a draft model with its own backend and CUDA graphs; an
// EAGLE-3 head on rank 0's target backend, reading its copy of the target's hidden states), the
// target's verify steps run sharded on both GPUs. Greedy tokens equal TP=1 non-speculative
// decoding's up to near-ties (tests/near_tie.h: a verify row's BF16 logits come from other kernels
// than decoding's, and the all-reduce adds partial sums in another order); every block of both
// caches is back; every rank holds rank 0's KV block count. Needs 2 GPUs.
#include <cstdio>

#include "eagle3_checkpoint_writer.h"
#include "engine_compare.h"
#include "gpu_test_util.h"
#include "nanovllm/engine/draft_model_drafter.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "temp_dir.h"
#include "tp_engine_run.h"

using namespace nanovllm;

namespace {

// A tiny fixture on CUDA with a 64 MiB KV cache of 16-token blocks; a rank that fails ends the
// test at once (the others would wait in a collective).
EngineConfig cuda_cfg(const std::string& model) {
  EngineConfig cfg = test::tiny_cfg(model);
  cfg.device = DeviceChoice::Cuda;
  cfg.kv_cache_memory = 64 << 20;
  cfg.block_size = 16;
  cfg.tp_connect_timeout_s = 120;
  cfg.on_tp_peer_lost = [](const std::string& what) {
    std::fprintf(stderr, "tensor-parallel test: %s\n", what.c_str());
    std::_Exit(1);
  };
  return cfg;
}

EngineConfig with_spec(EngineConfig cfg, const std::string& method, const std::string& model, int k) {
  cfg.speculative_config = SpeculativeConfig::parse(R"({"method": ")" + method + R"(", "model": ")" + model +
                                                        R"(", "num_speculative_tokens": )" + std::to_string(k) + "}",
                                                    "test");
  return cfg;
}

std::vector<std::vector<int32_t>> prompts(int n, int32_t range) {
  std::vector<std::vector<int32_t>> out;
  for (uint32_t seed = 0; seed < uint32_t(n); ++seed) {
    std::vector<int32_t> t = test::random_tokens(20 + 7 * seed, 60 + seed);
    for (auto& x : t) x = 3 + x % range;
    out.push_back(t);
  }
  return out;
}

}  // namespace

TEST(CudaTensorParallel, DraftModelGreedyEqualsTp1UpToNearTies) {
  REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  const std::string tiny = test::fixture("tiny-qwen3-tied");  // vocabulary 512
  const EngineConfig cfg = cuda_cfg(tiny);
  LLMEngine base(cfg);  // TP=1, no speculation, on GPU 0
  const std::vector<int64_t> blocks =
      test::run_tp_engine(with_spec(cfg, "draft_model", tiny, 4), 2, [&](LLMEngine& spec) {
        ASSERT_TRUE(spec.speculating());
        EXPECT_GT(spec.model_runner().num_cuda_graphs(), 0) << "the target's decode steps keep their graphs";
        const auto* d = dynamic_cast<const DraftModelDrafter*>(spec.drafter());
        ASSERT_NE(d, nullptr);
        EXPECT_GT(d->runner().num_cuda_graphs(), 0) << "the draft's passes run on graphs";
        const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts(6, 500), 48);
        const SpecDecodeStats& st = spec.scheduler_stats().spec;
        test::print_spec_comparison("TP=2 draft model (the target itself, on rank 0) k=4", compared, st);
        EXPECT_GT(compared, 100);
        EXPECT_GT(st.num_drafts, 20);
        // The same weights: drafts stand except where BF16 rounding (and the sharded sums) flip a near-tie.
        EXPECT_GE(double(st.num_accepted_tokens), 0.7 * double(st.num_draft_tokens));
        EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0) << "every target block back";
        EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks()) << "every draft block back";
        EXPECT_EQ(d->block_manager().num_blocks(),
                  spec.model_runner().num_kv_blocks() + draft_lookahead_blocks(spec.config()));
      });
  ASSERT_EQ(blocks.size(), 2u);
  EXPECT_EQ(blocks[1], blocks[0]) << "the worker holds rank 0's (smaller) block count";
}

TEST(CudaTensorParallel, Eagle3GreedyEqualsTp1UpToNearTies) {
  REQUIRE_GPU();
  if (cuda_device_count() < 2) GTEST_SKIP() << "needs 2 GPUs";
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});  // no embed_tokens: rank 0 loads the target's whole table
  const EngineConfig cfg = cuda_cfg(test::fixture("tiny-qwen3-untied"));  // vocabulary 700
  LLMEngine base(cfg);
  const std::vector<int64_t> blocks =
      test::run_tp_engine(with_spec(cfg, "eagle3", dir.dir.string(), 3), 2, [&](LLMEngine& spec) {
        ASSERT_TRUE(spec.speculating());
        EXPECT_GT(spec.model_runner().num_cuda_graphs(), 0) << "decode steps keep their graphs (and the copies)";
        const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts(4, 690), 40);
        const SpecDecodeStats& st = spec.scheduler_stats().spec;
        test::print_spec_comparison("TP=2 eagle3 (head on rank 0) k=3", compared, st);
        EXPECT_GT(compared, 80);
        EXPECT_GT(st.num_drafts, 10);
        EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0);
        const auto* h = dynamic_cast<const Eagle3Drafter*>(spec.drafter());
        ASSERT_NE(h, nullptr);
        EXPECT_EQ(h->block_manager().num_free_blocks(), h->block_manager().num_blocks()) << "every head block back";
      });
  EXPECT_EQ(blocks[1], blocks[0]);
}
