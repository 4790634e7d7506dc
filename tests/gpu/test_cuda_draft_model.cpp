// Speculative decoding with a draft model on CUDA (engine/draft_model_drafter.h): the draft is a
// copy of the target (the tied tiny fixture, BF16), so nearly every draft stands. Greedy tokens
// equal non-speculative decoding's up to near-ties (as CudaSpeculative compares: a verify row's
// logits come from a multi-row GEMM and prefill attention, decoding's from the GEMV and decode
// attention, so BF16 rounding differs; a reference token binds where it beats its runner-up by more
// than tests/near_tie.h's margin); both runners keep their CUDA graphs, the draft's catch-up passes
// (decode rows) replaying them too; every block of both caches is back after the runs. The KV budget: under
// gpu_memory_utilization the target's blocks cost target + draft bytes, the draft holds as many plus its lookahead, and
// a budget too small for the two is refused naming the draft.
#include <cstdio>

#include "engine_compare.h"
#include "gpu_test_util.h"
#include "nanovllm/engine/draft_model_drafter.h"
#include "near_tie.h"

using namespace nanovllm;

namespace {

const std::string kTiny = test::fixture("tiny-qwen3-tied");  // vocabulary 512

std::vector<int32_t> prompt(size_t n, uint32_t seed) {
  std::vector<int32_t> t = test::random_tokens(n, seed);
  for (auto& x : t) x = 3 + x % 500;
  return t;
}

EngineConfig draft_cfg(const EngineConfig& base, int k) {
  EngineConfig cfg = base;
  cfg.speculative_config = SpeculativeConfig::parse(
      R"({"method": "draft_model", "model": ")" + kTiny + R"(", "num_speculative_tokens": )" + std::to_string(k) + "}",
      "test");
  return cfg;
}

// The tiny target on CUDA with a 64 MiB KV cache of 16-token blocks.
EngineConfig cuda_cfg() {
  EngineConfig cfg = test::tiny_cfg(kTiny);
  cfg.device = DeviceChoice::Cuda;
  cfg.kv_cache_memory = 64 << 20;
  cfg.block_size = 16;
  return cfg;
}

const DraftModelDrafter& draft_of(const LLMEngine& e) {
  const auto* d = dynamic_cast<const DraftModelDrafter*>(e.drafter());
  if (!d) throw Error("the engine runs no draft model");
  return *d;
}

TEST(CudaDraftModel, GreedyEqualsDecodingUpToNearTies) {
  REQUIRE_GPU();
  EngineConfig cfg = cuda_cfg();
  LLMEngine base(cfg);
  LLMEngine spec(draft_cfg(cfg, 4));
  ASSERT_TRUE(spec.speculating());
  EXPECT_GT(spec.model_runner().num_cuda_graphs(), 0) << "the target's decode steps keep their graphs";
  const DraftModelDrafter& d = draft_of(spec);
  EXPECT_TRUE(d.runner().uses_cuda_graphs()) << "the draft's passes run on graphs";
  EXPECT_GT(d.runner().num_cuda_graphs(), 0);
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t seed = 0; seed < 6; ++seed) prompts.push_back(prompt(20 + 7 * seed, 60 + seed));
  const int compared = test::expect_greedy_prompts_up_to_near_ties(base, spec, prompts, 48);
  const SpecDecodeStats& st = spec.scheduler_stats().spec;
  test::print_spec_comparison("draft model (the target itself) k=4", compared, st);
  EXPECT_GT(compared, 100);
  EXPECT_GT(st.num_drafts, 20);
  // The same weights and sampling: drafts stand except where BF16 rounding flips a near-tie.
  EXPECT_GE(double(st.num_accepted_tokens), 0.75 * double(st.num_draft_tokens));
  // A step after every draft stood starts with 2 tokens a row (the target's and the last draft):
  // catch-up rows, laid out as decode rows and replayed through the draft's graphs as every
  // decode pass is; only prompts run eagerly as prefill passes.
  const ModelRunner::ForwardCounts& c = d.runner().forward_counts();
  std::printf("[gpu] draft model passes: %lld prefill, %lld decode, %lld catch-up as decode rows, %lld graphed\n",
              static_cast<long long>(c.prefill), static_cast<long long>(c.decode),
              static_cast<long long>(c.rows_as_decodes), static_cast<long long>(c.graph_replays));
  EXPECT_GT(c.rows_as_decodes, 0);
  EXPECT_EQ(c.graph_replays, c.decode + c.rows_as_decodes);
  EXPECT_LT(c.prefill, int64_t(prompts.size()) * 3) << "prompts (the warm-up's too), not catch-ups";
  EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0) << "every target block back";
  EXPECT_EQ(d.block_manager().num_free_blocks(), d.block_manager().num_blocks()) << "every draft block back";
  EXPECT_EQ(d.num_sequences(), 0);
}

// Several rows at once, seeded sampling, one with a repetition penalty (its batch samples on the
// host): outputs equal to decoding's where the rows stay decisive is covered above; here the
// batched passes and the fallback keep every block accounted for and drafts standing.
TEST(CudaDraftModel, BatchedRowsAndHostSampledRows) {
  REQUIRE_GPU();
  EngineConfig cfg = cuda_cfg();
  cfg.max_num_batched_tokens = 64;  // prompts read in chunks, alongside by the draft
  cfg.max_num_seqs = 16;
  LLMEngine spec(draft_cfg(cfg, 3));
  for (uint32_t i = 0; i < 6; ++i) {
    SamplingParams p = test::greedy(30 + 5 * int(i));
    if (i % 2) p.temperature = 0.8f, p.seed = int64_t(i);
    if (i == 5) p.repetition_penalty = 1.2f;
    spec.add_request(prompt(40 + 9 * i, 90 + i), p);
  }
  int steps = 0;
  while (spec.has_unfinished() && steps < 2000) {
    spec.step();
    ++steps;
  }
  EXPECT_FALSE(spec.has_unfinished());
  const SpecDecodeStats& st = spec.scheduler_stats().spec;
  EXPECT_GT(st.num_drafts, 20);
  EXPECT_GE(double(st.num_accepted_tokens), 0.7 * double(st.num_draft_tokens));
  const DraftModelDrafter& d = draft_of(spec);
  EXPECT_EQ(spec.scheduler_stats().kv_blocks_used, 0);
  EXPECT_EQ(d.block_manager().num_free_blocks(), d.block_manager().num_blocks());
  EXPECT_EQ(d.num_sequences(), 0);
}

TEST(CudaDraftModel, OneKvBudgetForBothCaches) {
  REQUIRE_GPU();
  EngineConfig cfg = cuda_cfg();
  cfg.kv_cache_memory = 0;
  cfg.gpu_memory_utilization = 0.2;  // sized from the warm-up steps' peaks
  cfg.max_num_batched_tokens = 2048;
  const EngineConfig with = draft_cfg(cfg, 4);
  {
    LLMEngine spec(with);
    ASSERT_TRUE(spec.speculating());
    const DraftModelDrafter& d = draft_of(spec);
    const int64_t target_blocks = spec.model_runner().num_kv_blocks();
    const int64_t own = kv_elements_per_block(spec.model_config(), cfg.block_size) * 2;  // BF16
    EXPECT_EQ(spec.model_runner().kv_bytes_per_block(), 2 * own) << "a block pays for the draft's too";
    EXPECT_GT(target_blocks, 0);
    EXPECT_EQ(d.block_manager().num_blocks(), target_blocks + draft_lookahead_blocks(with));
    EXPECT_GT(d.runner().resident_bytes(), 0) << "the draft's weights were counted";
    // Both caches and the draft's weights fit within the utilization.
    const int64_t total = spec.model_runner().backend().total_memory_bytes();
    EXPECT_LE(target_blocks * 2 * own + draft_lookahead_blocks(with) * own, int64_t(0.2 * double(total)));
  }
  EngineConfig tiny = with;
  tiny.gpu_memory_utilization = 0.001;  // less than the CUDA context alone
  try {
    LLMEngine e(tiny);
    ADD_FAILURE() << "a budget that holds neither cache was accepted";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("the draft model"), std::string::npos) << e.what();
  }
}

}  // namespace
