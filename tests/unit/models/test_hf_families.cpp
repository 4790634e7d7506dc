// The CPU engine against Hugging Face transformers for the families beside Qwen3 (fixtures made by
// scripts/make_family_fixtures.py; see hf_fixture_check.h for the comparison): tiny-qwen2 (random
// q/k/v biases, tied, a sliding window in config.json that use_sliding_window leaves off),
// tiny-llama3 (llama3 RoPE scaling reaching 5x past its original 64 positions, 9 query heads over
// 3 KV heads, untied F32 in 2 shards), tiny-mistral (a 48-token sliding window under prompts of up
// to 300 tokens, head_dim 32 != hidden / heads). Each also through small blocks and chunked
// prefill, whose later chunks read the earlier ones (and, with a window, only the last 48 keys of
// them) from the paged cache. Qwen3-MoE (scripts/make_moe_fixtures.py): tiny-qwen3-moe (8 experts,
// top-2 renormalized, a dense layer between two sparse ones through mlp_only_layers, BF16 in 2
// shards) and tiny-qwen3-moe-nonorm (6 experts, top-3 not renormalized, decoder_sparse_step 2, tied).
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "hf_fixture_check.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/hf_config.h"

using namespace nanovllm;

namespace {

constexpr double kLogitAtol = 1e-4;  // FP32 engine vs FP32 transformers, as the Qwen3 fixtures

void check_fixture(const std::string& name, int64_t block_size, int64_t max_batched_tokens = 16384) {
  EngineConfig cfg;
  cfg.device = DeviceChoice::Cpu;
  cfg.cpu_precision = CpuPrecision::Exact;  // the oracle path: FP32 weights, as transformers ran
  cfg.block_size = block_size;
  cfg.kv_cache_memory = 64 << 20;
  cfg.max_num_batched_tokens = max_batched_tokens;
  cfg.max_num_seqs = std::min<int64_t>(cfg.max_num_seqs, max_batched_tokens);
  auto r = test::run_fixture(name, cfg);
  std::printf("%s bs%lld budget %lld: %d greedy tokens compared, max |logit diff| %.2e\n", name.c_str(),
              (long long)block_size, (long long)max_batched_tokens, r.compared, r.max_logit_diff);
  EXPECT_LT(r.max_logit_diff, kLogitAtol) << name;
  EXPECT_GT(r.compared, 100) << name;
  EXPECT_EQ(r.diverged, 0) << name;
  EXPECT_TRUE(r.all_blocks_free);
}

nlohmann::json reference(const std::string& name) {
  std::ifstream in(test::fixture(name) + "/reference.json");
  return nlohmann::json::parse(in);
}

// Our rotary table against the inv_freq buffer of transformers' model, and our per-layer windows
// against the ones the fixture's generator recorded.
void check_rope_and_windows(const std::string& name) {
  const auto ref = reference(name);
  const ModelConfig cfg = load_model_config(test::fixture(name));
  EXPECT_EQ(cfg.architecture, ref.at("architecture").get<std::string>());
  const RopeParams ours = rotary_embedding(cfg);
  const auto theirs = ref.at("rope").at("inv_freq").get<std::vector<double>>();
  ASSERT_EQ(ours.inv_freq.size(), theirs.size());
  for (size_t i = 0; i < theirs.size(); ++i) EXPECT_NEAR(ours.inv_freq[i], theirs[i], 3e-7 * theirs[i]) << "pair " << i;
  EXPECT_FLOAT_EQ(ours.attention_scaling, float(ref.at("rope").at("attention_scaling").get<double>()));
  const auto& windows = ref.at("attention").at("layer_windows");
  ASSERT_EQ(int64_t(windows.size()), cfg.num_hidden_layers);
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
    EXPECT_EQ(cfg.layer_window(i), windows[size_t(i)].is_null() ? 0 : windows[size_t(i)].get<int64_t>()) << i;
}

}  // namespace

TEST(HFFamilies, Qwen2Biases) {
  check_rope_and_windows("tiny-qwen2");
  check_fixture("tiny-qwen2", 256);
  check_fixture("tiny-qwen2", 16, 64);
}

TEST(HFFamilies, Llama3Rope) {
  check_rope_and_windows("tiny-llama3");
  const RopeParams rope = rotary_embedding(load_model_config(test::fixture("tiny-llama3")));
  const RopeParams plain = RopeParams::plain(16, 10000);
  int scaled = 0;
  for (size_t i = 0; i < rope.inv_freq.size(); ++i) scaled += rope.inv_freq[i] != plain.inv_freq[i];
  EXPECT_EQ(scaled, 7);  // of 8 pairs: 2 blended, 5 divided by the factor
  check_fixture("tiny-llama3", 16);
  check_fixture("tiny-llama3", 1, 64);
}

TEST(HFFamilies, MistralSlidingWindow) {
  check_rope_and_windows("tiny-mistral");
  // The generator's own check: the window changes transformers' logits exactly where a sequence
  // outgrows it (64-, 130- and 300-token prompts), so matching them needs the window.
  const nlohmann::json ref = reference("tiny-mistral");  // a named object: the loop reads into it
  for (const auto& w : ref.at("checks").at("window"))
    EXPECT_EQ(w.at("window_expected_to_matter").get<bool>(), w.at("max_abs_diff_vs_no_window").get<double>() > 1e-3);
  check_fixture("tiny-mistral", 256);
  check_fixture("tiny-mistral", 16, 40);  // chunks shorter than the window
  check_fixture("tiny-mistral", 1, 100);
}

// Qwen3-MoE: the engine's router picks the experts transformers picked (the generator recorded the
// smallest gap between the k-th and (k+1)-th router probability, far above rounding), and the
// sparse layers are the ones transformers built.
namespace {
void check_moe(const std::string& name) {
  ASSERT_TRUE(std::filesystem::exists(test::fixture(name) + "/reference.json"))
      << "missing fixture " << name << ": generate it with scripts/make_moe_fixtures.py (tests/fixtures/README.md)";
  const auto ref = reference(name);
  const ModelConfig cfg = load_model_config(test::fixture(name));
  EXPECT_EQ(cfg.architecture, "Qwen3MoeForCausalLM");
  std::vector<int64_t> sparse;
  for (int64_t i = 0; i < cfg.num_hidden_layers; ++i)
    if (cfg.is_moe_layer(i)) sparse.push_back(i);
  EXPECT_EQ(sparse, ref.at("moe").at("sparse_layers").get<std::vector<int64_t>>());
  EXPECT_LT(sparse.size(), size_t(cfg.num_hidden_layers));  // a dense layer too
  for (double gap : ref.at("moe").at("min_router_gap").get<std::vector<double>>()) EXPECT_GT(gap, 1e-5);
}
}  // namespace

TEST(HFFamilies, Qwen3MoeRenormalizedTopK) {
  check_moe("tiny-qwen3-moe");
  check_fixture("tiny-qwen3-moe", 256);
  check_fixture("tiny-qwen3-moe", 16, 64);
}

TEST(HFFamilies, Qwen3MoeTopKWithoutRenormalization) {
  check_moe("tiny-qwen3-moe-nonorm");
  check_fixture("tiny-qwen3-moe-nonorm", 256);
  check_fixture("tiny-qwen3-moe-nonorm", 1, 64);
}
