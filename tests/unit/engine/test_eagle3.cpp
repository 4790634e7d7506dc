// EAGLE-3 drafting through the engine on the CPU (engine/eagle3_drafter.h), with a tiny head written
// by the test (vLLM's layout) over tiny-qwen3-untied: the target's captured hidden states equal its
// residual streams; outputs byte-identical with and without the head (greedy and seeded, chunked
// prompts, a prefix-cache hit, preemption); every head KV block back after runs with rejections and
// aborts; a dummy head shaped for the target runs under --load-format dummy.
#include <gtest/gtest.h>

#include <map>

#include "eagle3_checkpoint_writer.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "spec_engine_run.h"
#include "temp_dir.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::tiny_cfg;

namespace {

using Request = test::SpecRequest;
using EngineRun = test::SpecRun;

std::vector<int32_t> prompt(size_t n, uint32_t seed) { return test::spec_prompt(n, seed, 690); }

std::vector<Request> workload() {
  std::vector<Request> rs;
  rs.push_back({prompt(70, 1), greedy(24)});  // read in two chunks
  SamplingParams seeded = greedy(20);
  seeded.temperature = 0.8f;
  seeded.seed = 5;
  rs.push_back({prompt(25, 2), seeded});
  std::vector<int32_t> shared = prompt(70, 1);  // the first's first 32 tokens: a prefix-cache hit
  shared.resize(32);
  const auto tail = prompt(6, 4);
  shared.insert(shared.end(), tail.begin(), tail.end());
  rs.push_back({shared, greedy(16)});
  return rs;
}

EngineConfig cfg_with(const std::string& head, int64_t kv_blocks) {
  EngineConfig cfg = tiny_cfg();  // tiny-qwen3-untied: 3 layers, vocabulary 700
  cfg.block_size = 16;
  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 64;
  cfg.max_num_seqs = 4;
  if (kv_blocks > 0) cfg.num_kvcache_blocks = kv_blocks;
  if (!head.empty())
    cfg.speculative_config = SpeculativeConfig::parse(
        R"({"method": "eagle3", "model": ")" + head + R"(", "num_speculative_tokens": 3})", "t");
  return cfg;
}

const Eagle3Drafter* eagle_of(const LLMEngine& e) { return dynamic_cast<const Eagle3Drafter*>(e.drafter()); }

EngineRun run(const EngineConfig& cfg, const std::vector<Request>& reqs) {
  LLMEngine e(cfg);
  const EngineRun out = test::run_requests(e, reqs);
  if (const Eagle3Drafter* d = eagle_of(e)) {
    EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks()) << "every head block back";
    EXPECT_EQ(d->num_sequences(), 0);
  }
  return out;
}

TEST(Eagle3, CapturesTheTargetsResidualStreams) {
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  LLMEngine e(cfg_with(dir.dir.string(), 0));
  CausalLM& m = e.model_runner().model();
  std::map<int64_t, std::vector<float>> seen;  // layer output (stage 1) by layer
  m.layer_observer = [&](int64_t layer, int stage, const Tensor& t) {
    if (stage == 1) seen[layer] = e.model_runner().backend().to_host_f32(t);
  };
  const std::vector<int32_t> p = prompt(9, 3);
  e.add_request(p, greedy(1));
  e.step();
  const auto& rows = e.model_runner().last_step_rows();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].first_position, 0);
  EXPECT_EQ(rows[0].num_rows, 9);
  const std::vector<float> aux = e.model_runner().backend().to_host_f32(m.aux_hidden_states());
  const int64_t cap = m.aux_rows_per_layer(), H = 96;
  // Layers 0, 1, 2: the embedding output, then the outputs of layers 0 and 1.
  const std::vector<float> emb = e.model_runner().backend().to_host_f32(*m.embedding_table());
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t i = 0; i < H; ++i) {
      ASSERT_EQ(aux[size_t(t * H + i)], emb[size_t(p[size_t(t)] * H + i)]);
      for (int64_t j = 1; j < 3; ++j) ASSERT_EQ(aux[size_t((j * cap + t) * H + i)], seen.at(j - 1)[size_t(t * H + i)]);
    }
  m.layer_observer = nullptr;
}

TEST(Eagle3, OutputsUnchangedAndBlocksBack) {
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  const EngineRun base = run(cfg_with("", 0), workload()), spec = run(cfg_with(dir.dir.string(), 0), workload());
  EXPECT_EQ(base.outputs, spec.outputs);
  const SpecDecodeStats& st = spec.stats.spec;
  EXPECT_GT(st.num_drafts, 10);
  EXPECT_GT(st.num_rejections, 0) << "a random head's drafts are rejected";
  EXPECT_GT(spec.stats.prefix_hit_tokens, 0) << "prefix caching in play";
}

// The head's state does not depend on how the target read the prompt: in chunks of 64 (a carried
// row at each chunk's end) or at once, and step by step or in one catch-up, it proposes the same
// drafts after each number of verified tokens.
TEST(Eagle3, DraftsDoNotDependOnChunking) {
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  auto drafts_of = [&](int64_t budget) {
    EngineConfig cfg = cfg_with(dir.dir.string(), 0);
    cfg.max_num_batched_tokens = budget;
    LLMEngine e(cfg);
    e.add_request(prompt(150, 11), greedy(12));
    std::map<int64_t, std::vector<int32_t>> by_length;
    while (e.has_unfinished()) {
      e.step();
      for (const Sequence* s : e.live_sequences())
        if (!s->draft_ids.empty()) by_length[s->num_tokens()] = s->draft_ids;
    }
    return by_length;
  };
  const auto chunked = drafts_of(64), whole = drafts_of(256);
  EXPECT_GE(chunked.size(), 3u);
  EXPECT_EQ(chunked, whole);
}

TEST(Eagle3, LosslessUnderPreemptionAndAbort) {
  test::TempDir dir;
  test::Eagle3HeadSpec s;
  s.own_embedding = true;
  s.draft_vocab = 700;  // the target's vocabulary: the identity mapping
  s.with_d2t = false;
  test::write_eagle3_head(dir.dir.string(), s);
  const EngineRun base = run(cfg_with("", 7), workload()), spec = run(cfg_with(dir.dir.string(), 7), workload());
  EXPECT_EQ(base.outputs, spec.outputs);
  EXPECT_GT(spec.stats.preemptions, 0);
  LLMEngine e(cfg_with(dir.dir.string(), 0));
  const int64_t id = e.add_request(prompt(50, 8), greedy(100));
  e.add_request(prompt(20, 9), greedy(5));
  for (int i = 0; i < 6; ++i) e.step();
  const Eagle3Drafter* d = eagle_of(e);
  ASSERT_NE(d, nullptr);
  EXPECT_LT(d->block_manager().num_free_blocks(), d->block_manager().num_blocks());
  EXPECT_TRUE(e.abort(id));
  while (e.has_unfinished()) e.step();
  EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks());
  EXPECT_EQ(d->num_sequences(), 0);
}

TEST(Eagle3, DummyHeadForTheTarget) {
  EngineConfig plain = cfg_with("", 0), dummy = cfg_with("", 0);
  plain.load_dummy = dummy.load_dummy = true;
  dummy.speculative_config = SpeculativeConfig::parse(R"({"method": "eagle3", "num_speculative_tokens": 2})", "t");
  const EngineRun a = run(plain, workload()), b = run(dummy, workload());
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_GT(b.stats.spec.num_drafts, 0);
  EngineConfig no_head = cfg_with("", 0);
  no_head.speculative_config = dummy.speculative_config;
  try {
    LLMEngine e(no_head);
    ADD_FAILURE() << "without --load-format dummy a head directory is needed";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("needs 'model'"), std::string::npos) << e.what();
  }
}

}  // namespace
