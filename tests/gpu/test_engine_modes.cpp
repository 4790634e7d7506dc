// On CUDA at Qwen3-0.6B size (the random-weight model of NANOVLLM_HF06B_DIR): greedy outputs
// are identical with and without CUDA graphs, with and without prefix caching, and under forced
// preemption (a KV pool smaller than the batch needs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "nanovllm/engine/llm_engine.h"

using namespace nanovllm;

namespace {

std::vector<std::vector<int32_t>> run(EngineConfig cfg, const std::vector<std::vector<int32_t>>& prompts,
                                      int64_t* preemptions) {
  LLMEngine e(cfg);
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 40;
  sp.ignore_eos = true;
  std::vector<int64_t> ids;
  for (auto& p : prompts) ids.push_back(e.add_request(p, sp));
  std::map<int64_t, std::vector<int32_t>> out;
  while (e.has_unfinished())
    for (auto& f : e.step().finished) out[f.request_id] = f.token_ids;
  *preemptions = e.scheduler().num_preemptions();
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  std::vector<std::vector<int32_t>> v;
  for (auto id : ids) v.push_back(out.at(id));
  return v;
}

}  // namespace

TEST(CudaEngineModes, GraphsPrefixCachingAndPreemptionGiveIdenticalGreedyOutputs) {
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  ASSERT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  std::mt19937 rng(7);
  std::vector<int32_t> prefix(512);
  for (auto& t : prefix) t = int32_t(rng() % 150000);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    auto p = prefix;
    for (int k = 0; k < 230 + i; ++k) p.push_back(int32_t(rng() % 150000));  // crosses 768 while decoding
    prompts.push_back(p);
  }
  EngineConfig base;
  base.model = dir;
  base.device = "cuda";
  base.gpu_memory_utilization = 0.5;
  int64_t pre = 0;
  auto want = run(base, prompts, &pre);

  EngineConfig eager = base;
  eager.enforce_eager = true;
  EXPECT_EQ(run(eager, prompts, &pre), want) << "eager vs CUDA graphs";

  EngineConfig nocache = base;
  nocache.enable_prefix_caching = false;
  EXPECT_EQ(run(nocache, prompts, &pre), want) << "prefix caching off";

  EngineConfig tight = base;
  tight.num_kvcache_blocks = 20;  // 2 shared + 16 x 2 own blocks would be needed at once
  EXPECT_EQ(run(tight, prompts, &pre), want) << "forced preemption";
  EXPECT_GT(pre, 0);
  std::printf(
      "16 prompts x 40 greedy tokens identical across graphs/eager, prefix caching on/off, and %lld preemptions\n",
      (long long)pre);
}
