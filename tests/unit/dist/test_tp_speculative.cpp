// Speculative decoding with a draft model and with EAGLE-3 under tensor parallelism (TP=2 over the
// CPU communicator, in one process): the drafter runs un-sharded on rank 0, the workers run the
// verify steps from the step messages. Greedy outputs equal non-speculative TP=1 decoding's with
// chunked prefill, a prefix-cache hit and preemption in play; every block of both caches comes
// back; only rank 0's budget pays for the draft's cache and every rank ends with its (smaller)
// block count; EAGLE-3 reads rank 0's copy of the sharded target's hidden states, which equals
// TP=1's, and drafts what TP=1 drafts. (n-gram under TP: test_tp_engine.cpp.)
#include <gtest/gtest.h>

#include <map>

#include "eagle3_checkpoint_writer.h"
#include "nanovllm/engine/draft_model_drafter.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "spec_engine_run.h"
#include "temp_dir.h"
#include "tiny_engine.h"
#include "tp_engine_run.h"

using namespace nanovllm;
using test::greedy;

namespace {

using Request = test::SpecRequest;

EngineConfig tp_cfg(const std::string& model, int64_t kv_blocks) {
  EngineConfig cfg = test::tiny_cfg(model);
  cfg.block_size = 16;
  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 64;  // prompts are read in chunks
  cfg.max_num_seqs = 4;
  cfg.num_threads = 1;
  cfg.tp_connect_timeout_s = 30;
  if (kv_blocks > 0) cfg.num_kvcache_blocks = kv_blocks;
  return cfg;
}

EngineConfig with_spec(EngineConfig cfg, const std::string& method, const std::string& model) {
  cfg.speculative_config = SpeculativeConfig::parse(
      R"({"method": ")" + method + R"(", "model": ")" + model + R"(", "num_speculative_tokens": 3})", "test");
  return cfg;
}

// Greedy requests over [3, 3 + range): a 70-token prompt (two chunks), one with a repetition
// penalty (sampled with logits processing at every verify position), one sharing the first's first
// 32 tokens (a prefix-cache hit).
std::vector<Request> workload(int32_t range) {
  std::vector<Request> rs;
  rs.push_back({test::spec_prompt(70, 1, range), greedy(24)});
  SamplingParams penalized = greedy(20);
  penalized.repetition_penalty = 1.3f;
  rs.push_back({test::spec_prompt(25, 2, range), penalized});
  std::vector<int32_t> shared = test::spec_prompt(70, 1, range);
  shared.resize(32);
  const auto tail = test::spec_prompt(6, 4, range);
  shared.insert(shared.end(), tail.begin(), tail.end());
  rs.push_back({shared, greedy(16)});
  return rs;
}

struct TpSpecRun {
  test::SpecRun run;
  std::vector<int64_t> kv_blocks;  // by rank
  int64_t kv_bytes_per_block = 0;  // rank 0's: its shard's, plus the drafter's where it pays for one
  int64_t drafter_blocks = 0;      // the drafter's cache
};

// Runs the workload at size tp; the drafter's blocks must all be back at the end.
TpSpecRun run(const EngineConfig& cfg, int tp, const std::vector<Request>& reqs) {
  TpSpecRun out;
  out.kv_blocks = test::run_tp_engine(cfg, tp, [&](LLMEngine& e) {
    out.kv_bytes_per_block = e.model_runner().kv_bytes_per_block();
    out.run = test::run_requests(e, reqs);
    if (const auto* d = dynamic_cast<const DraftModelDrafter*>(e.drafter())) {
      out.drafter_blocks = d->block_manager().num_blocks();
      EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks()) << "every draft block back";
      EXPECT_EQ(d->num_sequences(), 0);
    } else if (const auto* h = dynamic_cast<const Eagle3Drafter*>(e.drafter())) {
      out.drafter_blocks = h->block_manager().num_blocks();
      EXPECT_EQ(h->block_manager().num_free_blocks(), h->block_manager().num_blocks()) << "every head block back";
      EXPECT_EQ(h->num_sequences(), 0);
    }
  });
  for (int64_t b : out.kv_blocks) EXPECT_EQ(b, out.kv_blocks[0]) << "every rank holds rank 0's blocks";
  return out;
}

const std::string kTarget = test::fixture("tiny-qwen3-tied");  // vocabulary 512, 2 KV heads
const std::string kOther = test::fixture("tiny-qwen3-yarn");   // another model, the same vocabulary

}  // namespace

TEST(TensorParallelEngine, DraftModelTp2EqualsDecodingTp1) {
  const auto reqs = workload(500);
  const test::SpecRun base = run(tp_cfg(kTarget, 0), 1, reqs).run;
  // The target as its own draft: drafts stand, so verify steps accept them on every rank.
  const TpSpecRun same = run(with_spec(tp_cfg(kTarget, 0), "draft_model", kTarget), 2, reqs);
  EXPECT_EQ(same.run.outputs, base.outputs);
  const SpecDecodeStats& st = same.run.stats.spec;
  EXPECT_GT(st.num_drafts, 10);
  EXPECT_GE(double(st.num_accepted_tokens), 0.9 * double(st.num_draft_tokens));
  EXPECT_LT(same.run.steps, base.steps);
  EXPECT_GT(same.run.stats.prefix_hit_tokens, 0) << "prefix caching in play";
  // Another draft in 8 blocks of 16 slots: rejections, preemptions (both caches let go).
  const test::SpecRun small = run(tp_cfg(kTarget, 8), 1, reqs).run;
  const TpSpecRun other = run(with_spec(tp_cfg(kTarget, 8), "draft_model", kOther), 2, reqs);
  EXPECT_EQ(other.run.outputs, small.outputs);
  EXPECT_EQ(small.outputs, base.outputs);
  EXPECT_GT(other.run.stats.preemptions, 0);
  EXPECT_GT(other.run.stats.spec.num_rejections, 0);
  EXPECT_EQ(other.kv_blocks[0], 8);
}

TEST(TensorParallelEngine, DraftKvCacheIsPaidOnRankZeroOnly) {
  EngineConfig plain = tp_cfg(kTarget, 0);
  plain.kv_cache_memory = 4 << 20;
  const EngineConfig spec = with_spec(plain, "draft_model", kTarget);
  const std::vector<Request> one = {{test::spec_prompt(20, 5, 500), greedy(8)}};
  const TpSpecRun a = run(plain, 2, one), b = run(spec, 2, one);
  // A rank's target block holds half the KV heads; rank 0's also pays a whole block of the draft's
  // (the same model, un-sharded: twice a shard's), and the draft's lookahead comes off its budget
  // first. The worker's own budget would hold a.kv_blocks[1]; it takes rank 0's count (the minimum).
  const int64_t shard = a.kv_bytes_per_block, draft = b.kv_bytes_per_block - shard;
  const int64_t lookahead = draft_lookahead_blocks(spec);
  EXPECT_EQ(draft, 2 * shard);
  EXPECT_EQ(a.kv_blocks[0], (4 << 20) / shard);
  EXPECT_EQ(b.kv_blocks[0], ((4 << 20) - lookahead * draft) / (shard + draft));
  EXPECT_LT(b.kv_blocks[1], a.kv_blocks[1]) << "the worker took rank 0's smaller count";
  EXPECT_EQ(b.drafter_blocks, b.kv_blocks[0] + lookahead);
  EXPECT_EQ(b.run.outputs, a.run.outputs);
}

TEST(TensorParallelEngine, Eagle3Tp2EqualsDecodingTp1) {
  // tiny-qwen3-untied: 6 heads, 2 KV heads, vocabulary 700. The head has no embed_tokens: rank 0
  // loads the target's whole table (its own runner holds half of it).
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  const std::string untied = test::fixture("tiny-qwen3-untied");
  const auto reqs = workload(690);
  const test::SpecRun base = run(tp_cfg(untied, 0), 1, reqs).run;
  const EngineConfig cfg = with_spec(tp_cfg(untied, 0), "eagle3", dir.dir.string());
  const TpSpecRun spec = run(cfg, 2, reqs);
  EXPECT_EQ(spec.run.outputs, base.outputs);
  EXPECT_GT(spec.run.stats.spec.num_drafts, 10);
  EXPECT_GT(spec.run.stats.prefix_hit_tokens, 0) << "prefix caching in play";
  EXPECT_EQ(spec.drafter_blocks, spec.kv_blocks[0] + draft_lookahead_blocks(cfg));
  // 7 blocks of 16 slots: preemptions.
  const test::SpecRun small = run(tp_cfg(untied, 7), 1, reqs).run;
  const TpSpecRun tight = run(with_spec(tp_cfg(untied, 7), "eagle3", dir.dir.string()), 2, reqs);
  EXPECT_EQ(tight.run.outputs, small.outputs);
  EXPECT_GT(tight.run.stats.preemptions, 0);
}

TEST(TensorParallelEngine, Eagle3ReadsRankZerosWholeHiddenStates) {
  test::TempDir dir;
  test::write_eagle3_head(dir.dir.string(), {});
  const EngineConfig cfg = with_spec(tp_cfg(test::fixture("tiny-qwen3-untied"), 0), "eagle3", dir.dir.string());
  struct Seen {
    std::vector<float> aux;                          // the first step's captured rows, layer by layer
    std::map<int64_t, std::vector<int32_t>> drafts;  // by sequence length
  };
  auto seen_at = [&](int tp) {
    Seen s;
    test::run_tp_engine(cfg, tp, [&](LLMEngine& e) {
      const std::vector<int32_t> p = test::spec_prompt(9, 3, 690);
      e.add_request(p, greedy(12));
      e.step();
      const CausalLM& m = e.model_runner().model();
      const std::vector<float> all = e.model_runner().backend().to_host_f32(m.aux_hidden_states());
      const size_t H = size_t(all.size() / size_t(3 * m.aux_rows_per_layer())), cap = size_t(m.aux_rows_per_layer());
      for (size_t j = 0; j < 3; ++j)
        s.aux.insert(s.aux.end(), all.begin() + long(j * cap * H), all.begin() + long((j * cap + 9) * H));
      while (e.has_unfinished()) {
        for (const Sequence* q : e.live_sequences())
          if (!q->draft_ids.empty()) s.drafts[q->num_tokens()] = q->draft_ids;
        e.step();
      }
    });
    return s;
  };
  const Seen one = seen_at(1), two = seen_at(2);
  ASSERT_EQ(one.aux.size(), two.aux.size());
  double worst = 0;
  for (size_t i = 0; i < one.aux.size(); ++i) worst = std::max(worst, double(std::abs(one.aux[i] - two.aux[i])));
  EXPECT_LT(worst, 1e-5) << "rank 0's copy is the whole residual stream";
  EXPECT_GE(one.drafts.size(), 3u);
  EXPECT_EQ(two.drafts, one.drafts) << "the head sees what it sees at TP=1 (the whole embedding too)";
}
