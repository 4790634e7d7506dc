// Tensor parallelism end to end in one process: rank 0's LLMEngine in this thread, the workers
// (run_tp_worker) in others, over the CPU communicator. On the tiny fixtures TP=2 gives the
// greedy tokens of TP=1 and logits within 1e-4 at every step; a preset-shaped dummy model with
// 8 KV heads does the same at TP=4 (dummy weights are sharded exactly).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include "int_checkpoint_writer.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tp_engine_run.h"

using namespace nanovllm;

namespace {

std::vector<std::vector<int32_t>> random_prompts(const std::vector<int>& lens, int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> v;
  for (int len : lens) {
    std::vector<int32_t> prompt(static_cast<size_t>(len));
    for (auto& t : prompt) t = int32_t(3 + rng() % uint32_t(vocab - 3));
    v.push_back(prompt);
  }
  return v;
}

struct TpRun {
  std::vector<std::vector<int32_t>> tokens;  // per request
  std::vector<std::vector<float>> logits;    // per step, [B * V] flattened
  int64_t granule_hit_tokens = 0;            // prefix-cache hits copied inside blocks
};

// prompt_of(vocab): the prompts (default: four random ones of 5, 40, 17 and 3 tokens).
TpRun generate(EngineConfig cfg, int tp,
               std::function<std::vector<std::vector<int32_t>>(int64_t)> prompts_of = nullptr) {
  cfg.tp_connect_timeout_s = 30;
  TpRun run;
  test::run_tp_engine(cfg, tp, [&](LLMEngine& e) {
    e.model_runner().logits_observer = [&](const ScheduledBatch&, const std::vector<float>& l) {
      run.logits.push_back(l);
    };
    SamplingParams p;
    p.temperature = 0;
    p.max_tokens = 12;
    p.ignore_eos = true;
    const int64_t V = e.model_config().vocab_size;
    std::vector<int64_t> ids;
    for (const auto& prompt : prompts_of ? prompts_of(V) : random_prompts({5, 40, 17, 3}, V, 7))
      ids.push_back(e.add_request(prompt, p));
    std::map<int64_t, std::vector<int32_t>> outs;
    while (e.has_unfinished())
      for (auto& o : e.step().finished) outs[o.request_id] = o.token_ids;
    for (auto id : ids) run.tokens.push_back(outs.at(id));
    run.granule_hit_tokens = e.block_manager().num_granule_hit_tokens();
  });
  return run;
}

void expect_same(const TpRun& a, const TpRun& b, const std::string& what) {
  EXPECT_EQ(a.tokens, b.tokens) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  double worst = 0;
  for (size_t s = 0; s < a.logits.size(); ++s) {
    ASSERT_EQ(a.logits[s].size(), b.logits[s].size()) << what << " step " << s;
    for (size_t i = 0; i < a.logits[s].size(); ++i)
      worst = std::max(worst, double(std::abs(a.logits[s][i] - b.logits[s][i])));
  }
  EXPECT_LT(worst, 1e-4) << what;
  EXPECT_GT(a.logits.size(), 10u) << what;
}

EngineConfig base(const std::string& model) {
  EngineConfig cfg;
  cfg.model = model;
  cfg.device = DeviceChoice::Cpu;
  // FP32 weights: TP=N's partial sums then agree with TP=1's to the greedy token.
  cfg.cpu_precision = CpuPrecision::Exact;
  cfg.kv_cache_memory = 8 << 20;
  cfg.block_size = 16;
  cfg.max_num_batched_tokens = 48;  // chunked prefill too
  cfg.max_num_seqs = 8;
  cfg.num_threads = 1;
  return cfg;
}

}  // namespace

TEST(TensorParallelEngine, Tp2MatchesTp1OnTheFixtures) {
  // (tiny-qwen2: its q/k/v biases split by heads; tiny-mistral: the sliding window on each rank;
  // tiny-qwen3-moe: every expert's intermediate split, the router whole on each rank.)
  for (std::string model : {"tiny-qwen3-tied", "tiny-qwen3-untied", "tiny-qwen2", "tiny-mistral", "tiny-qwen3-moe",
                            "tiny-qwen3-moe-nonorm"}) {
    const auto cfg = base(test::fixture(model));
    expect_same(generate(cfg, 2), generate(cfg, 1), model + " TP=2");
  }
}

TEST(TensorParallelEngine, IntCheckpointsTp2MatchTp1) {
  // Column-parallel layers take whole rows; o_proj's 64 columns a rank are one group of 64, or the
  // half of one group of 128; down_proj's 128 two groups of 64 or one of 128; channel-wise rows split.
  // Qwen3-MoE: each expert's gate/up rows and down columns split (64 of a group of 128), dequantized.
  using test::IntFormat;
  test::IntSpec moe{IntFormat::AWQ, 4, 128, true};
  moe.moe = true;
  for (const test::IntSpec& s :
       {test::IntSpec{IntFormat::AWQ, 4, 64, true}, test::IntSpec{IntFormat::GPTQv2, 8, 128, true},
        test::IntSpec{IntFormat::CT, 4, -1, false, true}, moe}) {
    test::TempDir d;
    const auto cfg = base(test::write_int_checkpoints(d.dir.string(), s).q);
    expect_same(generate(cfg, 2), generate(cfg, 1), "int checkpoint TP=2, bits " + std::to_string(s.bits));
  }
}

TEST(TensorParallelEngine, Tp4MatchesTp1WithDummyWeights) {
  // Hq 16, Hkv 8, I 96, V 256: divisible by 4 (the fixtures' 2 KV heads are not).
  const auto dir = std::filesystem::temp_directory_path() / ("nanovllm_tp4_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3ForCausalLM"], "vocab_size": 256, "hidden_size": 64,
    "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 16, "max_position_embeddings": 512, "eos_token_id": 1})";
  auto cfg = base(dir.string());
  cfg.load_dummy = true;
  const TpRun one = generate(cfg, 1);
  expect_same(generate(cfg, 4), one, "dummy TP=4");
  expect_same(generate(cfg, 2), one, "dummy TP=2");
  std::filesystem::remove_all(dir);
}

TEST(TensorParallelEngine, Qwen3MoeTp2MatchesTp1WithDummyWeights) {
  // Every expert's moe_intermediate_size (24) and the dense layer's (40) split in halves; the router
  // whole on each rank; layer 1 dense between two sparse layers.
  const auto dir = std::filesystem::temp_directory_path() / ("nanovllm_tp_moe_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["Qwen3MoeForCausalLM"], "vocab_size": 256,
    "hidden_size": 64, "intermediate_size": 40, "moe_intermediate_size": 24, "num_experts": 8,
    "num_experts_per_tok": 2, "norm_topk_prob": true, "mlp_only_layers": [1], "num_hidden_layers": 3,
    "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "max_position_embeddings": 512,
    "eos_token_id": 1})";
  auto cfg = base(dir.string());
  cfg.load_dummy = true;
  expect_same(generate(cfg, 2), generate(cfg, 1), "Qwen3-MoE dummy TP=2");
  std::filesystem::remove_all(dir);
}

TEST(TensorParallelEngine, PrefixGranuleCopiesRunOnEveryRank) {
  // Blocks of 32 tokens: prompts sharing 80 and 50 tokens with the first, admitted once its chunks
  // are computed, copy granules inside a block; each rank copies in its own shard of the cache.
  auto cfg = base(test::fixture("tiny-qwen3-untied"));
  cfg.block_size = 32;
  auto prompts_of = [](int64_t V) {
    auto v = random_prompts({100, 20, 10}, V, 9);
    v[1].insert(v[1].begin(), v[0].begin(), v[0].begin() + 80);
    v[2].insert(v[2].begin(), v[0].begin(), v[0].begin() + 50);
    return v;
  };
  const TpRun two = generate(cfg, 2, prompts_of);
  expect_same(two, generate(cfg, 1, prompts_of), "granule hits TP=2");
  EXPECT_GT(two.granule_hit_tokens, 0);
  cfg.enable_prefix_caching = false;
  EXPECT_EQ(generate(cfg, 1, prompts_of).tokens, two.tokens);
}

TEST(TensorParallelEngine, SpeculativeVerifyStepsRunOnEveryRank) {
  // Prompts that repeat themselves, so n-gram drafts are proposed from the first step: rank 0
  // drafts and samples, the workers run the verify rows' forward from the step message.
  auto cfg = base(test::fixture("tiny-qwen3-untied"));
  auto prompts_of = [](int64_t V) {
    auto v = random_prompts({7, 9, 5}, V, 11);
    for (auto& p : v) {
      const auto unit = p;
      for (int i = 0; i < 4; ++i) p.insert(p.end(), unit.begin(), unit.end());
    }
    return v;
  };
  const TpRun plain = generate(cfg, 1, prompts_of);
  cfg.speculative_config = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 3})", "test");
  const TpRun two = generate(cfg, 2, prompts_of);
  expect_same(two, generate(cfg, 1, prompts_of), "speculative TP=2");
  EXPECT_EQ(two.tokens, plain.tokens) << "speculation leaves the outputs as they were";
  EXPECT_LT(two.logits.size(), plain.logits.size()) << "accepted drafts save steps";
}

TEST(TensorParallelEngine, IndivisibleSizesAreRefusedBeforeStarting) {
  auto cfg = base(test::fixture("tiny-qwen3-untied"));  // 6 heads, 2 KV heads
  for (int tp : {3, 4}) {
    cfg.tensor_parallel_size = tp;
    cfg.master_port = 1;  // never reached: the check comes first
    try {
      LLMEngine e(cfg);
      FAIL() << "TP=" << tp << " accepted";
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("--tensor-parallel-size " + std::to_string(tp) + " does not divide"),
                std::string::npos)
          << e.what();
    }
  }
}
