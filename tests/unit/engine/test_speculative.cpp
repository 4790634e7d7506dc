// Speculative decoding (n-gram drafts) on the tiny model, CPU: outputs byte-identical with and
// without it (greedy and seeded sampling, logprobs to float rounding, penalties / logit_bias / min_tokens, stop ids
// that land inside a verify step), with preemption (a small KV cache) and prefix caching in play;
// drafts actually proposed, some accepted and some rejected; KV blocks all back once done and the
// block manager's invariants kept after every step.
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/spec/controlled_drafter.h"
#include "nanovllm/utils/error.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

struct SpecRun {
  std::map<int64_t, RequestOutput> outputs;
  std::map<int64_t, std::vector<int32_t>> streamed;  // new_tokens, in order
  SchedulerStats stats;
  int64_t steps = 0;
};

// A prompt that repeats itself: n-gram lookups find matches from the start.
std::vector<int32_t> repeating(size_t period, size_t times, uint32_t seed) {
  const std::vector<int32_t> unit = random_tokens(period, seed);
  std::vector<int32_t> p;
  for (size_t i = 0; i < times; ++i) p.insert(p.end(), unit.begin(), unit.end());
  return p;
}

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams params;
};

std::vector<Request> workload(const std::vector<int32_t>& stops = {}) {
  std::vector<Request> rs;
  rs.push_back({repeating(12, 4, 1), greedy(40)});
  rs.push_back({random_tokens(30, 2), greedy(48)});
  SamplingParams seeded = greedy(40);
  seeded.temperature = 0.9f;
  seeded.top_k = 50;
  seeded.seed = 7;
  rs.push_back({repeating(9, 5, 3), seeded});
  SamplingParams processed = greedy(36);
  processed.repetition_penalty = 1.2f;
  processed.frequency_penalty = 0.3f;
  processed.logit_bias = std::vector<std::pair<int32_t, float>>{{5, 2.0f}, {17, -1.5f}};
  processed.min_tokens = 8;
  processed.logprobs = 2;
  rs.push_back({repeating(16, 3, 4), processed});
  SamplingParams stopped = greedy(60);
  stopped.stop_token_ids = stops;
  rs.push_back({repeating(10, 4, 5), stopped});
  // Shares its first 32 tokens with the first request (prefix caching).
  std::vector<int32_t> shared = repeating(12, 4, 1);
  shared.resize(32);
  const auto tail = random_tokens(7, 6);
  shared.insert(shared.end(), tail.begin(), tail.end());
  rs.push_back({shared, greedy(30)});
  return rs;
}

SpecRun run(bool speculate, int64_t kv_blocks, const std::vector<Request>& reqs) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 96;
  cfg.max_num_seqs = 8;
  if (kv_blocks > 0) cfg.num_kvcache_blocks = kv_blocks;
  if (speculate)
    cfg.speculative_config = SpeculativeConfig::parse(
        R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3})",
        "--speculative-config");
  LLMEngine e(cfg);
  EXPECT_EQ(e.speculating(), speculate);
  SpecRun out;
  std::map<int64_t, int64_t> id_of;  // engine id -> request index
  for (size_t i = 0; i < reqs.size(); ++i) id_of[e.add_request(reqs[i].prompt, reqs[i].params)] = int64_t(i);
  while (e.has_unfinished()) {
    const StepResult r = e.step();
    ++out.steps;
    for (auto& [id, tok] : r.new_tokens) out.streamed[id_of.at(id)].push_back(tok);
    for (const RequestOutput& o : r.finished) out.outputs[id_of.at(o.request_id)] = o;
    EXPECT_EQ(e.block_manager().check_invariants(e.live_sequences()), "") << "after step " << out.steps;
    if (out.steps > 2000) {
      ADD_FAILURE() << "no end";
      break;
    }
  }
  out.stats = e.scheduler_stats();
  EXPECT_EQ(out.stats.kv_blocks_used, 0) << "every KV block back in the free list";
  return out;
}

void expect_same(const SpecRun& base, const SpecRun& spec) {
  ASSERT_EQ(base.outputs.size(), spec.outputs.size());
  for (auto& [i, o] : base.outputs) {
    const RequestOutput& s = spec.outputs.at(i);
    EXPECT_EQ(o.token_ids, s.token_ids) << "request " << i;
    EXPECT_EQ(o.finish_reason, s.finish_reason) << "request " << i;
    EXPECT_EQ(spec.streamed.at(i), s.token_ids) << "request " << i << ": streamed tokens = final tokens";
    ASSERT_EQ(o.logprobs.size(), s.logprobs.size()) << "request " << i;
    // A verify row's logits come from a multi-row forward (the GEMMs of a short chunk rather than
    // a decode's): equal up to float rounding, so logprobs match to 1e-4, the tokens exactly.
    for (size_t t = 0; t < o.logprobs.size(); ++t) {
      EXPECT_NEAR(o.logprobs[t].logprob, s.logprobs[t].logprob, 1e-4) << "request " << i << " token " << t;
      ASSERT_EQ(o.logprobs[t].top.size(), s.logprobs[t].top.size());
      for (size_t k = 0; k < o.logprobs[t].top.size(); ++k) {
        EXPECT_EQ(o.logprobs[t].top[k].first, s.logprobs[t].top[k].first) << "request " << i << " token " << t;
        EXPECT_NEAR(o.logprobs[t].top[k].second, s.logprobs[t].top[k].second, 1e-4);
      }
    }
  }
}

void expect_drafts_decided_both_ways(const SpecRun& spec) {
  const SpecDecodeStats& st = spec.stats.spec;
  EXPECT_GT(st.num_drafts, 0);
  EXPECT_GT(st.num_accepted_tokens, 0) << "some drafts stand";
  EXPECT_LT(st.num_accepted_tokens, st.num_draft_tokens) << "some drafts are rejected";
  int64_t per_pos = 0;
  for (int64_t a : st.accepted_per_pos) per_pos += a;
  EXPECT_EQ(per_pos, st.num_accepted_tokens);
  ASSERT_FALSE(st.accepted_per_pos.empty());
  for (size_t j = 1; j < st.accepted_per_pos.size(); ++j)
    EXPECT_LE(st.accepted_per_pos[j], st.accepted_per_pos[j - 1]) << "a draft stands only after those before it";
}

TEST(Speculative, OutputsAreIdenticalWithAndWithoutIt) {
  // A stop id taken from the fifth request's own output, 20 tokens in: it ends there in both runs.
  const SpecRun probe = run(false, 0, workload());
  const std::vector<int32_t> stop = {probe.outputs.at(4).token_ids.at(20)};
  const SpecRun base = run(false, 0, workload(stop)), spec = run(true, 0, workload(stop));
  EXPECT_EQ(base.outputs.at(4).finish_reason, FinishReason::Stop);
  expect_same(base, spec);
  expect_drafts_decided_both_ways(spec);
  EXPECT_LT(spec.steps, base.steps) << "accepted drafts save steps";
  EXPECT_GT(spec.stats.prefix_hit_tokens, 0) << "prefix caching in play";
}

TEST(Speculative, IdenticalUnderPreemption) {
  // 12 blocks of 16 slots for six sequences of up to ~110 tokens: preemptions, and drafts that
  // find no free slot.
  const SpecRun base = run(false, 12, workload()), spec = run(true, 12, workload());
  EXPECT_GT(spec.stats.preemptions, 0);
  expect_same(base, spec);
  expect_drafts_decided_both_ways(spec);
}

TEST(Speculative, AbortReleasesDraftSlots) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.speculative_config = SpeculativeConfig::parse(R"({"method": "ngram", "num_speculative_tokens": 4})", "t");
  LLMEngine e(cfg);
  const int64_t id = e.add_request(repeating(8, 8, 9), greedy(100));
  for (int i = 0; i < 4; ++i) e.step();
  EXPECT_GT(e.scheduler_stats().kv_blocks_used, 0);
  EXPECT_TRUE(e.abort(id));
  EXPECT_EQ(e.scheduler_stats().kv_blocks_used, 0);
  EXPECT_FALSE(e.has_unfinished());
}

// Drafts that never stand (the controlled drafter at acceptance 0): with the backoff a sequence
// soon verifies about once per DraftBackoff::kMaxSkip steps; without it, every step. Outputs equal.
TEST(Speculative, BackoffStopsDraftsThatNeverStand) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  const std::vector<int32_t> prompt = random_tokens(20, 11);
  std::vector<int32_t> plain, record = prompt;
  {
    LLMEngine e(cfg);
    e.add_request(prompt, greedy(300));
    while (e.has_unfinished())
      for (auto& o : e.step().finished) plain = o.token_ids;
  }
  record.insert(record.end(), plain.begin(), plain.end());
  int64_t verifies[2] = {0, 0};
  for (bool backoff : {false, true}) {
    LLMEngine e(cfg);
    auto d = std::make_unique<AcceptanceControlledDrafter>(3, 0.0, e.model_config().vocab_size, 5);
    d->set_stop_on_divergence(false);
    AcceptanceControlledDrafter* drafter = d.get();
    e.set_drafter(std::move(d));
    e.set_draft_backoff(backoff);
    drafter->expect(e.add_request(prompt, greedy(300)), record);
    std::vector<int32_t> out;
    while (e.has_unfinished())
      for (auto& o : e.step().finished) out = o.token_ids;
    EXPECT_EQ(out, plain) << "backoff " << backoff;
    const SpecDecodeStats& st = e.scheduler_stats().spec;
    EXPECT_EQ(st.num_accepted_tokens, 0);
    verifies[backoff] = st.num_drafts;
  }
  EXPECT_GE(verifies[0], 290) << "without the backoff every step but the last verifies drafts";
  EXPECT_LE(verifies[1], 20) << "with it, a handful of probes";
  EXPECT_GE(verifies[1], 8);
}

}  // namespace

TEST(Speculative, ADraftOutsideTheVocabularyIsADrafterBug) {
  // A drafter that proposes ids the model does not have (here: corrupting into a vocabulary larger
  // than the model's) is stopped with an error naming the token, before a verify step embeds it.
  auto cfg = tiny_cfg();
  LLMEngine e(cfg);
  const int64_t vocab = e.model_config().vocab_size;
  auto d = std::make_unique<AcceptanceControlledDrafter>(3, 0.0, 100 * vocab, 5);
  d->set_stop_on_divergence(false);
  AcceptanceControlledDrafter* drafter = d.get();
  e.set_drafter(std::move(d));
  e.set_draft_backoff(false);
  const std::vector<int32_t> prompt = random_tokens(20, 11);
  std::vector<int32_t> record = prompt;
  {
    LLMEngine plain(cfg);
    plain.add_request(prompt, greedy(40));
    while (plain.has_unfinished())
      for (auto& o : plain.step().finished) record.insert(record.end(), o.token_ids.begin(), o.token_ids.end());
  }
  drafter->expect(e.add_request(prompt, greedy(40)), record);
  try {
    while (e.has_unfinished()) e.step();
    ADD_FAILURE() << "drafts outside the vocabulary were verified";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("outside the vocabulary"), std::string::npos) << err.what();
  }
}
