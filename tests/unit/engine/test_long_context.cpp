// Long contexts on a real (tiny) model: max_model_len settled as vLLM does (the model's length by
// default, lowered to what the KV cache holds, an explicit one refused past either), prompts longer
// than max_num_batched_tokens prefilled in chunks (block-unaligned, after a prefix hit that ends
// mid-block) with the logits of a single-step prefill, and a YaRN model running past its
// pre-training length.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "temp_dir.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

// One request run alone to the end: its tokens, the logits of each token it got (the last prefill
// chunk's, then every decode step's), and the prefill steps it took with their sizes.
struct RunResult {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;
  std::vector<int64_t> prefill_steps;  // tokens computed per prefill step
  int64_t cached = 0;
};

RunResult run_one(LLMEngine& e, const std::vector<int32_t>& prompt, int max_tokens) {
  RunResult r;
  const int64_t V = e.model_config().vocab_size;
  e.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    const Sequence* s = b.seqs.at(0);
    if (s->num_cached_tokens + s->num_scheduled_tokens == s->num_tokens())
      r.logits.emplace_back(l.begin(), l.begin() + V);
  };
  const int64_t id = e.add_request(prompt, greedy(max_tokens));
  while (e.has_unfinished()) {
    StepResult s = e.step();
    if (s.is_prefill) r.prefill_steps.push_back(s.num_tokens);
    for (auto& o : s.finished)
      if (o.request_id == id) {
        r.tokens = o.token_ids;
        r.cached = o.num_cached_prompt_tokens;
      }
  }
  e.model_runner().logits_observer = nullptr;
  return r;
}

double max_diff(const std::vector<std::vector<float>>& a, const std::vector<std::vector<float>>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t s = 0; s < std::min(a.size(), b.size()); ++s)
    for (size_t v = 0; v < a[s].size(); ++v) d = std::max(d, double(std::abs(a[s][v] - b[s][v])));
  return d;
}

std::string engine_error(const EngineConfig& cfg) {
  try {
    LLMEngine e(cfg);
  } catch (const UserError& err) {
    return err.what();
  }
  return "";
}

// A copy of the untied fixture with rope_scaling YaRN in its config.json.
struct YarnModel {
  test::TempDir dir;
  explicit YarnModel(const nlohmann::json& rope_scaling) {
    const std::string src = test::fixture("tiny-qwen3-untied");
    for (const auto& f : std::filesystem::directory_iterator(src))
      if (f.path().filename() != "config.json" && f.path().filename() != "reference.json")
        std::filesystem::copy_file(f.path(), dir.dir / f.path().filename());
    std::ifstream in(src + "/config.json");
    nlohmann::json cfg = nlohmann::json::parse(in);
    cfg["rope_scaling"] = rope_scaling;
    dir.write("config.json", cfg.dump());
  }
  std::string path() const { return dir.dir.string(); }
};

}  // namespace

TEST(MaxModelLen, UnsetIsTheModelsLength) {
  LLMEngine e(tiny_cfg());
  EXPECT_EQ(e.config().max_model_len, 1024);  // max_position_embeddings; the cache holds more
}

TEST(MaxModelLen, UnsetIsLoweredToWhatTheKvCacheHolds) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.num_kvcache_blocks = 10;
  testing::internal::CaptureStderr();
  LLMEngine e(cfg);
  const std::string said = testing::internal::GetCapturedStderr();
  EXPECT_EQ(e.config().max_model_len, 160);
  EXPECT_EQ(e.model_runner().max_model_len(), 160);
  EXPECT_EQ(said, "max_model_len lowered from 1024 to 160: the KV cache holds 10 blocks of 16 tokens\n");
  // The lowered length is what requests meet.
  try {
    e.add_request(random_tokens(160, 1), greedy(1));
    ADD_FAILURE() << "accepted a 160-token prompt with max_model_len 160";
  } catch (const InvalidRequest& err) {
    EXPECT_EQ(err.param, "prompt");
  }
  EXPECT_EQ(run_one(e, random_tokens(150, 2), 50).tokens.size(), 10u);  // stops at max_model_len
}

TEST(MaxModelLen, ByteBudgetLowersToWholeBlocks) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  // The untied fixture: 3 layers, 2 KV heads of 24, F32: 2 * 3 * 16 * 2 * 24 * 4 = 18,432 bytes a block.
  cfg.kv_cache_memory = 18432 * 20 + 18431;  // 20 blocks and most of another
  testing::internal::CaptureStderr();
  LLMEngine e(cfg);
  testing::internal::GetCapturedStderr();
  EXPECT_EQ(e.model_runner().kv_bytes_per_block(), 18432);
  EXPECT_EQ(e.config().max_model_len, 320);
}

TEST(MaxModelLen, ExplicitOneIsCheckedNotLowered) {
  auto cfg = tiny_cfg();
  cfg.max_model_len = 1025;
  EXPECT_NE(engine_error(cfg).find("--max-model-len 1025 is larger than the model's 1024 (max_position_embeddings"),
            std::string::npos)
      << engine_error(cfg);
  cfg.max_model_len = 200;
  cfg.block_size = 16;
  cfg.num_kvcache_blocks = 10;
  EXPECT_NE(engine_error(cfg).find("max_model_len 200 is larger than the KV cache can hold (10 blocks of 16 tokens"),
            std::string::npos);
  cfg.max_model_len = 100;
  LLMEngine e(cfg);
  EXPECT_EQ(e.config().max_model_len, 100);
}

// As vLLM (and unlike nano-vllm's assert), max_num_batched_tokens may be below max_model_len:
// longer prompts are chunked.
TEST(MaxModelLen, MayExceedMaxNumBatchedTokens) {
  auto cfg = tiny_cfg();
  cfg.max_num_batched_tokens = 64;
  cfg.max_num_seqs = 8;  // the budget holds a decode token of every running sequence
  cfg.block_size = 16;   // and a block
  LLMEngine e(cfg);
  EXPECT_EQ(e.config().max_model_len, 1024);
  EXPECT_EQ(run_one(e, random_tokens(900, 3), 4).tokens.size(), 4u);
}

// A prompt of 3.5 x max_num_batched_tokens, chunks not aligned to blocks (100 tokens, blocks of
// 16): four prefill steps, and the tokens and every logit row of a one-step prefill.
TEST(ChunkedPrefill, UnalignedChunksGiveTheOneStepLogits) {
  const auto prompt = random_tokens(350, 4);
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  LLMEngine whole(cfg);
  const RunResult want = run_one(whole, prompt, 8);
  EXPECT_EQ(want.prefill_steps, std::vector<int64_t>{350});

  cfg.max_num_batched_tokens = 100;
  cfg.max_num_seqs = 8;
  LLMEngine chunked(cfg);
  const RunResult got = run_one(chunked, prompt, 8);
  EXPECT_EQ(got.prefill_steps, (std::vector<int64_t>{100, 100, 100, 50}));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.logits.size(), 8u);
  EXPECT_LT(max_diff(got.logits, want.logits), 1e-4);
  EXPECT_EQ(chunked.block_manager().num_free_blocks(), chunked.block_manager().num_blocks());
}

// A prefix hit that ends mid-block: the second prompt shares 203 tokens (12 blocks of 16 and 11
// more) with the first, so 192 come from the cache and its 158 others are computed in chunks of
// 100 and 58, starting inside block 12. Same tokens and logits as a cold one-step prefill.
TEST(ChunkedPrefill, AfterAPrefixHitEndingMidBlock) {
  const auto first = random_tokens(260, 5);
  std::vector<int32_t> second(first.begin(), first.begin() + 203);
  const auto tail = random_tokens(147, 6);
  second.insert(second.end(), tail.begin(), tail.end());  // 350 tokens

  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.enable_prefix_caching = false;
  LLMEngine cold(cfg);
  const RunResult want = run_one(cold, second, 8);

  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 100;
  cfg.max_num_seqs = 8;
  LLMEngine warm(cfg);
  run_one(warm, first, 2);
  const RunResult got = run_one(warm, second, 8);
  EXPECT_EQ(got.cached, 192);
  EXPECT_EQ(got.prefill_steps, (std::vector<int64_t>{100, 58}));
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_LT(max_diff(got.logits, want.logits), 1e-4);
  EXPECT_EQ(warm.block_manager().check_invariants(warm.live_sequences()), "");
}

// A YaRN model (factor 4 over 512 pre-training positions): its length is 2048, past
// max_position_embeddings (1024); a 1,500-token prompt runs, chunked or not, and YaRN changes
// the outputs (compared with the same weights under plain RoPE).
TEST(YarnModel, RunsPastItsPreTrainingLength) {
  YarnModel m({{"rope_type", "yarn"}, {"factor", 4.0}, {"original_max_position_embeddings", 512}});
  auto cfg = tiny_cfg(m.path());
  cfg.block_size = 16;
  LLMEngine e(cfg);
  EXPECT_EQ(e.config().max_model_len, 2048);
  const auto prompt = random_tokens(1500, 7);
  const RunResult whole = run_one(e, prompt, 6);
  EXPECT_EQ(whole.tokens.size(), 6u);

  cfg.max_num_batched_tokens = 333;
  cfg.max_num_seqs = 8;
  LLMEngine chunked(cfg);
  const RunResult got = run_one(chunked, prompt, 6);
  EXPECT_EQ(got.prefill_steps.size(), 5u);
  EXPECT_EQ(got.tokens, whole.tokens);
  EXPECT_LT(max_diff(got.logits, whole.logits), 1e-4);

  LLMEngine plain(tiny_cfg());
  const RunResult p = run_one(plain, std::vector<int32_t>(prompt.begin(), prompt.begin() + 1000), 1);
  const RunResult y = run_one(e, std::vector<int32_t>(prompt.begin(), prompt.begin() + 1000), 1);
  EXPECT_GT(max_diff(p.logits, y.logits), 1e-2);

  cfg.max_model_len = 2049;
  EXPECT_NE(
      engine_error(cfg).find("larger than the model's 2048 (YaRN factor 4 * original_max_position_embeddings 512)"),
      std::string::npos)
      << engine_error(cfg);
}
