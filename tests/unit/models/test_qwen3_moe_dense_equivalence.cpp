// Qwen3-MoE's wiring without transformers: a checkpoint whose experts are all copies of a dense
// Qwen3 MLP computes the dense model, whatever the router picks (norm_topk_prob: the top-k weights
// sum to 1, and every expert gives the same output). Built from the tiny-qwen3-tied fixture: layer 0
// becomes sparse (3 experts, top-2, a random router) with the per-expert tensor names of the
// published checkpoint, layer 1 stays dense through mlp_only_layers. The engine's greedy tokens and
// logits must then be those of the dense model (CPU, exact path), prefill and decode, TP=1.
#include <gtest/gtest.h>

#include "nanovllm/engine/llm_engine.h"
#include "qwen3_moe_from_dense.h"
#include "temp_dir.h"

using namespace nanovllm;

namespace {

EngineConfig cpu_config(const std::string& dir) {
  EngineConfig cfg;
  cfg.model = dir;
  cfg.device = DeviceChoice::Cpu;
  cfg.cpu_precision = CpuPrecision::Exact;
  return cfg;
}

}  // namespace

TEST(Qwen3Moe, IdenticalExpertsComputeTheDenseModel) {
  test::TempDir tmp;
  const std::string src = test::write_moe_from_dense(tmp.dir.string());
  const test::GreedyRun dense = test::generate_greedy(cpu_config(src)),
                        moe = test::generate_greedy(cpu_config(tmp.dir.string()));
  EXPECT_EQ(moe.tokens, dense.tokens);
  ASSERT_EQ(moe.logits.size(), dense.logits.size());
  double worst = 0;
  for (size_t s = 0; s < dense.logits.size(); ++s) {
    ASSERT_EQ(moe.logits[s].size(), dense.logits[s].size());
    for (size_t i = 0; i < dense.logits[s].size(); ++i)
      worst = std::max(worst, double(std::abs(moe.logits[s][i] - dense.logits[s][i])));
  }
  EXPECT_LT(worst, 1e-4);
  EXPECT_GT(dense.logits.size(), 10u);
}
