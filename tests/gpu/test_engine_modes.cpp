// On CUDA at Qwen3-0.6B size (the random-weight model of NANOVLLM_HF06B_DIR): greedy outputs
// are identical with and without CUDA graphs, with and without async scheduling, with and without
// prefix caching, under forced preemption (a KV pool smaller than the batch needs), and with mixed steps (chunked
// prefill, the default) or prefill-first steps. Requests come in two waves, so the second wave's prompts are read in
// chunks while the first wave decodes. The long-context decode plan (more KV splits for a small batch's long contexts,
// kernel_plan.h) runs the same in graphs, which are captured per context range, as eagerly.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <random>

#include "nanovllm/engine/llm_engine.h"

using namespace nanovllm;

namespace {

struct Counts {
  int64_t preemptions = 0;
  int64_t mixed_steps = 0;  // steps with both decodes and prompt tokens
  int64_t steps_ahead = 0;  // async scheduling's steps launched before the last one's tokens came
};

std::vector<std::vector<int32_t>> run(EngineConfig cfg, const std::vector<std::vector<int32_t>>& prompts,
                                      Counts* counts) {
  LLMEngine e(cfg);
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 40;
  sp.ignore_eos = true;
  std::vector<int64_t> ids;
  std::map<int64_t, std::vector<int32_t>> out;
  *counts = {};
  auto step = [&] {
    const StepResult r = e.step();
    if (r.num_prefill_tokens > 0 && r.num_prefill_tokens < r.num_tokens) ++counts->mixed_steps;
    for (auto& f : r.finished) out[f.request_id] = f.token_ids;
  };
  const size_t first_wave = prompts.size() / 2;
  for (size_t i = 0; i < first_wave; ++i) ids.push_back(e.add_request(prompts[i], sp));
  for (int i = 0; i < 3; ++i) step();
  for (size_t i = first_wave; i < prompts.size(); ++i) ids.push_back(e.add_request(prompts[i], sp));
  while (e.has_unfinished()) step();
  counts->preemptions = e.scheduler().num_preemptions();
  counts->steps_ahead = e.num_steps_ahead();
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  std::vector<std::vector<int32_t>> v;
  for (auto id : ids) v.push_back(out.at(id));
  return v;
}

// 16 prompts sharing a 512-token prefix, each crossing 768 tokens while decoding, and one of
// 5,000 tokens inserted at 12.
std::vector<std::vector<int32_t>> two_wave_prompts() {
  std::mt19937 rng(7);
  std::vector<int32_t> prefix(512);
  for (auto& t : prefix) t = int32_t(rng() % 150000);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 16; ++i) {
    auto p = prefix;
    for (int k = 0; k < 230 + i; ++k) p.push_back(int32_t(rng() % 150000));  // crosses 768 while decoding
    prompts.push_back(p);
  }
  std::vector<int32_t> long_prompt(5000);  // read in 3 chunks of the 2048-token budget
  for (auto& t : long_prompt) t = int32_t(rng() % 150000);
  prompts.insert(prompts.begin() + 12, long_prompt);
  return prompts;
}

const char* model_dir() {
  const char* dir = std::getenv("NANOVLLM_HF06B_DIR");
  EXPECT_NE(dir, nullptr) << "set NANOVLLM_HF06B_DIR (scripts/make_qwen3_06b_reference.py --out DIR)";
  return dir;
}

}  // namespace

TEST(CudaEngineModes, GraphsPrefixCachingAndPreemptionGiveIdenticalGreedyOutputs) {
  const char* dir = model_dir();
  ASSERT_NE(dir, nullptr);
  const auto prompts = two_wave_prompts();
  EngineConfig base;
  base.model = dir;
  base.device = DeviceChoice::Cuda;
  base.gpu_memory_utilization = 0.5;
  base.max_num_batched_tokens = 2048;
  base.max_num_seqs = 64;
  Counts c;
  auto want = run(base, prompts, &c);
  EXPECT_GT(c.mixed_steps, 3) << "the second wave was not read alongside the first wave's decodes";
  const int64_t mixed = c.mixed_steps;
  EXPECT_GT(c.steps_ahead, 20) << "async scheduling (on by default on CUDA) took no step ahead";

  EngineConfig sync = base;
  sync.async_scheduling = false;
  EXPECT_EQ(run(sync, prompts, &c), want) << "synchronous steps vs async scheduling";
  EXPECT_EQ(c.steps_ahead, 0);

  EngineConfig first = base;
  first.enable_chunked_prefill = false;
  EXPECT_EQ(run(first, prompts, &c), want) << "prefill-first steps vs mixed steps";
  EXPECT_EQ(c.mixed_steps, 0);

  EngineConfig eager = base;
  eager.enforce_eager = true;
  EXPECT_EQ(run(eager, prompts, &c), want) << "eager vs CUDA graphs";

  EngineConfig nocache = base;
  nocache.enable_prefix_caching = false;
  EXPECT_EQ(run(nocache, prompts, &c), want) << "prefix caching off";

  EngineConfig tight = base;
  tight.num_kvcache_blocks = 40;  // the long prompt's 20 blocks + 2 shared + 17 x 2 own would be needed at once
  EXPECT_EQ(run(tight, prompts, &c), want) << "forced preemption";
  EXPECT_GT(c.preemptions, 0);
  std::printf(
      "17 prompts x 40 greedy tokens identical across mixed/prefill-first steps (%lld mixed steps), graphs/eager, "
      "prefix caching on/off, and %lld preemptions\n",
      (long long)mixed, (long long)c.preemptions);
}

// Decode batches of at most 16 sequences whose longest context reaches long_decode_context get the
// long-context plan (up to 64 KV splits, a merge kernel); graphs are captured per context range.
// With the threshold at 600 tokens, the first wave (8 sequences at 742..749 tokens) and the later
// small batches cross it while decoding: graph replays must pick the range's graph and give the
// eager run's tokens.
TEST(CudaEngineModes, LongContextDecodePlanInGraphsMatchesEager) {
  const char* dir = model_dir();
  ASSERT_NE(dir, nullptr);
  const auto prompts = two_wave_prompts();
  EngineConfig base;
  base.model = dir;
  base.device = DeviceChoice::Cuda;
  base.gpu_memory_utilization = 0.5;
  base.max_num_batched_tokens = 2048;
  base.max_num_seqs = 64;
  base.kernels.long_decode_context = 600;
  Counts c;
  auto graphs = run(base, prompts, &c);
  EngineConfig eager = base;
  eager.enforce_eager = true;
  EXPECT_EQ(run(eager, prompts, &c), graphs) << "eager vs CUDA graphs with the long-context decode plan";
}
