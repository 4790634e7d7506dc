// Speculative decoding with a draft model, and the engine's other speculation controls, on the
// tiny fixtures (CPU): outputs byte-identical with and without a draft (the target itself as its
// draft: every draft stands; another tiny model of the same vocabulary: drafts decided both ways),
// greedy and seeded, with preemption (a small KV cache) and prefix caching; the target's and the
// draft's KV blocks all back after runs, rejections and aborts; the draft's cache shares the KV
// budget; a draft of another vocabulary refused; disable_by_batch_size honoured; the
// acceptance-controlled drafter through the engine. The draft's catch-up passes (the verified
// tokens it has not computed) run as decode rows and draft what a prefill over them drafts.
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/engine/draft_model_drafter.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/spec/controlled_drafter.h"
#include "nanovllm/utils/error.h"
#include "spec_engine_run.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::tiny_cfg;

namespace {

const std::string kTarget = test::fixture("tiny-qwen3-tied");  // vocabulary 512
const std::string kOther = test::fixture("tiny-qwen3-yarn");   // another model, the same vocabulary

using Request = test::SpecRequest;
using DraftRun = test::SpecRun;

std::vector<int32_t> prompt(size_t n, uint32_t seed) { return test::spec_prompt(n, seed, 500); }

std::vector<Request> workload() {
  std::vector<Request> rs;
  rs.push_back({prompt(40, 1), greedy(30)});
  SamplingParams seeded = greedy(30);
  seeded.temperature = 0.8f;
  seeded.seed = 5;
  rs.push_back({prompt(25, 2), seeded});
  SamplingParams processed = greedy(24);
  processed.repetition_penalty = 1.3f;
  processed.min_tokens = 4;
  rs.push_back({prompt(33, 3), processed});
  std::vector<int32_t> shared = prompt(40, 1);  // the first's first 32 tokens: a prefix-cache hit
  shared.resize(32);
  const auto tail = prompt(6, 4);
  shared.insert(shared.end(), tail.begin(), tail.end());
  rs.push_back({shared, greedy(20)});
  return rs;
}

EngineConfig cfg_with(const std::string& draft, int64_t kv_blocks) {
  EngineConfig cfg = tiny_cfg(kTarget);
  cfg.block_size = 16;
  cfg.enable_prefix_caching = true;
  cfg.max_num_batched_tokens = 64;  // prompts are read in chunks
  cfg.max_num_seqs = 8;
  if (kv_blocks > 0) cfg.num_kvcache_blocks = kv_blocks;
  if (!draft.empty())
    cfg.speculative_config =
        SpeculativeConfig::parse(R"({"model": ")" + draft + R"(", "num_speculative_tokens": 3})", "t");
  return cfg;
}

const DraftModelDrafter* draft_of(const LLMEngine& e) { return dynamic_cast<const DraftModelDrafter*>(e.drafter()); }

// draft_counts: where the draft runner's forward counts go (a run with a draft model).
DraftRun run(const EngineConfig& cfg, const std::vector<Request>& reqs,
             ModelRunner::ForwardCounts* draft_counts = nullptr) {
  LLMEngine e(cfg);
  const DraftRun out = test::run_requests(e, reqs);
  if (const DraftModelDrafter* d = draft_of(e)) {
    EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks()) << "every draft block back";
    EXPECT_EQ(d->num_sequences(), 0);
    if (draft_counts) *draft_counts = d->runner().forward_counts();
  }
  return out;
}

// The draft model of an engine over cfg, taken out of it to be driven by hand.
std::unique_ptr<DraftModelDrafter> take_draft_model(LLMEngine& e) {
  std::unique_ptr<Drafter> d = e.take_drafter();
  if (!dynamic_cast<DraftModelDrafter*>(d.get())) throw Error("the engine runs no draft model");
  return std::unique_ptr<DraftModelDrafter>(static_cast<DraftModelDrafter*>(d.release()));
}

TEST(DraftModel, TheTargetAsItsOwnDraftAcceptsEveryDraft) {
  const DraftRun base = run(cfg_with("", 0), workload()), spec = run(cfg_with(kTarget, 0), workload());
  EXPECT_EQ(base.outputs, spec.outputs);
  const SpecDecodeStats& st = spec.stats.spec;
  EXPECT_GT(st.num_drafts, 10);
  // The same weights and the same sampling noise: each draft is the target's own token (up to a
  // near-tie between a decode's and a verify row's float rounding).
  EXPECT_GE(double(st.num_accepted_tokens), 0.95 * double(st.num_draft_tokens));
  EXPECT_LT(spec.steps, base.steps);
  EXPECT_GT(spec.stats.prefix_hit_tokens, 0) << "prefix caching in play";
}

// A catch-up of several verified tokens a row (drafts that were not the draft's own: here the
// sequences simply go on by 4 and 3 tokens) runs as one pass of decode rows, chained on the device
// to the passes after it, and proposes what a drafter that reads the same tokens in one prefill
// pass proposes, from the same logits (up to float rounding); past max_catch_up_decode_rows rows
// the pass is a prefill, with the same drafts.
TEST(DraftModel, CatchUpRowsDraftWhatAPrefillDrafts) {
  const SamplingParams p = greedy(100);
  const std::vector<int32_t> t1 = prompt(40, 11), t2 = prompt(30, 12);
  struct Proposal {
    std::vector<std::vector<int32_t>> drafts;
    std::vector<float> first_logits;    // of the first pass ([2, V]), when observed
    ModelRunner::ForwardCounts counts;  // the call's forwards
    int64_t passes_ahead = 0;
  };
  auto propose = [&](DraftModelDrafter& d, size_t n1, size_t n2, bool observe) {
    Proposal out;
    if (observe)  // the passes sample on the host then
      d.runner().logits_observer = [&out](const ScheduledBatch&, const std::vector<float>& l) {
        if (out.first_logits.empty()) out.first_logits = l;
      };
    const std::vector<DraftQuery> q{{1, {t1.data(), n1}, 3, &p, 0, 20}, {2, {t2.data(), n2}, 3, &p, 0, 20}};
    const ModelRunner::ForwardCounts c0 = d.runner().forward_counts();
    const int64_t ahead0 = d.num_passes_ahead();
    d.propose(q, out.drafts);
    d.runner().logits_observer = nullptr;
    const ModelRunner::ForwardCounts& c1 = d.runner().forward_counts();
    out.counts = {c1.prefill - c0.prefill, c1.decode - c0.decode, c1.rows_as_decodes - c0.rows_as_decodes, 0};
    out.passes_ahead = d.num_passes_ahead() - ahead0;
    return out;
  };
  EngineConfig cfg = cfg_with(kOther, 0), narrow = cfg;
  narrow.max_num_seqs = 4;  // the draft's limit of decode rows (no graphs): under the catch-up's 7
  LLMEngine ea(cfg), eb(cfg), ec(cfg), en(narrow);
  auto caught = take_draft_model(ea), chained = take_draft_model(eb), fresh = take_draft_model(ec),
       fallback = take_draft_model(en);
  for (DraftModelDrafter* d : {caught.get(), chained.get(), fallback.get()}) {
    const Proposal first = propose(*d, 20, 15, false);  // the prompts: a prefill pass
    EXPECT_EQ(first.counts.prefill, 1);
    ASSERT_EQ(first.drafts.size(), 2u);
    // The sequences go on with other tokens than the drafts: catch-ups of 4 and 3 tokens.
    ASSERT_NE(first.drafts[0][0], t1[20]);
    ASSERT_NE(first.drafts[1][0], t2[15]);
  }
  const Proposal reference = propose(*fresh, 24, 18, true);
  EXPECT_EQ(reference.counts.prefill, 1) << "tokens read in one prefill pass";
  const Proposal as_decodes = propose(*caught, 24, 18, true);
  EXPECT_EQ(as_decodes.counts.rows_as_decodes, 1);
  EXPECT_EQ(as_decodes.counts.prefill, 0);
  EXPECT_EQ(as_decodes.counts.decode, 2) << "k - 1 decode passes after it";
  EXPECT_EQ(as_decodes.drafts, reference.drafts);
  ASSERT_EQ(as_decodes.first_logits.size(), reference.first_logits.size());
  ASSERT_EQ(as_decodes.first_logits.size(), 2 * 512u) << "the last position of each row only";
  for (size_t i = 0; i < reference.first_logits.size(); ++i)
    ASSERT_NEAR(as_decodes.first_logits[i], reference.first_logits[i], 1e-4) << "logit " << i;
  const Proposal on_device = propose(*chained, 24, 18, false);
  EXPECT_EQ(on_device.counts.rows_as_decodes, 1);
  EXPECT_EQ(on_device.passes_ahead, 2) << "the passes after the catch-up read its tokens on the device";
  EXPECT_EQ(on_device.drafts, reference.drafts);
  const Proposal past_limit = propose(*fallback, 24, 18, false);
  EXPECT_EQ(past_limit.counts.rows_as_decodes, 0);
  EXPECT_EQ(past_limit.counts.prefill, 1) << "7 rows past the limit of 4: a prefill pass";
  EXPECT_EQ(past_limit.drafts, reference.drafts);
}

// A penalised request's prompt read in chunks: the draft computes each chunk from a shadow that
// holds the tokens read so far, fewer than the prompt's; that pass's token is not wanted, so no
// logits processing builds on those tokens (it read past them: "token id ... outside the
// vocabulary", CudaDraftModel.BatchedRowsAndHostSampledRows). Then the request's drafts come as
// in a run whose prompt came at once, and an engine run with it chunked is lossless.
TEST(DraftModel, PenalisedPromptsAreReadInChunks) {
  SamplingParams p = greedy(12);
  p.repetition_penalty = 1.2f;
  const std::vector<int32_t> t = prompt(90, 21);
  LLMEngine ea(cfg_with(kOther, 0)), eb(cfg_with(kOther, 0));
  auto chunked = take_draft_model(ea), whole = take_draft_model(eb);
  for (size_t n : {32, 64}) {
    const DraftQuery chunk{7, {t.data(), n}, 0, &p, 0, 90};
    chunked->observe_prefill({&chunk, 1});
  }
  EXPECT_EQ(chunked->runner().forward_counts().prefill, 2);
  const DraftQuery full{7, {t.data(), t.size()}, 3, &p, 0, 90};
  std::vector<std::vector<int32_t>> a, b;
  chunked->propose({&full, 1}, a);
  whole->propose({&full, 1}, b);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a[0].size(), 3u);
  EXPECT_EQ(a, b);
  const std::vector<Request> reqs{{t, p}, {prompt(70, 22), greedy(20)}};  // 160 prompt tokens, 64 a step
  const DraftRun base = run(cfg_with("", 0), reqs), spec = run(cfg_with(kOther, 0), reqs);
  EXPECT_EQ(base.outputs, spec.outputs);
  EXPECT_GT(spec.stats.spec.num_drafts, 0);
}

TEST(DraftModel, PassesChainedOnTheDeviceDraftTheSameTokens) {
  // No row processes logits: every pass after the first reads the tokens of the pass before as a
  // device tensor (run_ahead), as on a GPU; a wrong position or token there would be rejected.
  // Every draft standing, a step's first pass computes the target's token and the last draft (2
  // tokens a row): catch-up rows, laid out as decode rows.
  std::vector<Request> plain = workload();
  plain.erase(plain.begin() + 2);  // the repetition penalty's row samples on the host
  const DraftRun base = run(cfg_with("", 0), plain);
  LLMEngine e(cfg_with(kTarget, 0));
  std::map<int64_t, std::vector<int32_t>> outputs;
  std::map<int64_t, int64_t> index;
  for (size_t i = 0; i < plain.size(); ++i) index[e.add_request(plain[i].prompt, plain[i].params)] = int64_t(i);
  int64_t prompt_steps = 0;  // steps that read prompt tokens
  while (e.has_unfinished()) {
    const StepResult r = e.step();
    prompt_steps += r.num_prefill_tokens > 0;
    for (const RequestOutput& o : r.finished) outputs[index.at(o.request_id)] = o.token_ids;
  }
  EXPECT_EQ(outputs, base.outputs);
  const SpecDecodeStats& st = e.scheduler_stats().spec;
  EXPECT_GE(double(st.num_accepted_tokens), 0.95 * double(st.num_draft_tokens));
  ASSERT_NE(draft_of(e), nullptr);
  // k = 3: two passes ahead per proposal, except near a row's end (max_tokens).
  EXPECT_GE(draft_of(e)->num_passes_ahead(), st.num_drafts / int64_t(plain.size()));
  const ModelRunner::ForwardCounts& c = draft_of(e)->runner().forward_counts();
  EXPECT_GT(c.rows_as_decodes, st.num_drafts / int64_t(2 * plain.size())) << "catch-up passes as decode rows";
  // The draft's prefill passes: a step's prompt chunks (observe_prefill) and prompts completed in
  // it (a proposal's prompt tail), never a catch-up.
  EXPECT_LE(c.prefill, 2 * prompt_steps);
  EXPECT_EQ(c.graph_replays, 0) << "the CPU has no graphs";
}

TEST(DraftModel, AnotherDraftIsLosslessUnderPreemption) {
  // 10 blocks of 16 slots for four sequences of up to ~70 tokens: preemptions.
  ModelRunner::ForwardCounts counts;
  const DraftRun base = run(cfg_with("", 10), workload()), spec = run(cfg_with(kOther, 10), workload(), &counts);
  EXPECT_EQ(base.outputs, spec.outputs);
  EXPECT_GT(spec.stats.preemptions, 0);
  EXPECT_GT(counts.rows_as_decodes, 0) << "catch-up passes (every draft stood) as decode rows";
  const SpecDecodeStats& st = spec.stats.spec;
  EXPECT_GT(st.num_drafts, 0);
  EXPECT_GT(st.num_rejections, 0) << "a different model's drafts are rejected at times";
}

TEST(DraftModel, AbortReleasesBothCaches) {
  LLMEngine e(cfg_with(kOther, 0));
  const int64_t id = e.add_request(prompt(50, 8), greedy(100));
  e.add_request(prompt(20, 9), greedy(5));
  for (int i = 0; i < 6; ++i) e.step();
  const DraftModelDrafter* d = draft_of(e);
  ASSERT_NE(d, nullptr);
  EXPECT_LT(d->block_manager().num_free_blocks(), d->block_manager().num_blocks());
  EXPECT_TRUE(e.abort(id));
  while (e.has_unfinished()) e.step();
  EXPECT_EQ(e.scheduler_stats().kv_blocks_used, 0);
  EXPECT_EQ(d->block_manager().num_free_blocks(), d->block_manager().num_blocks());
}

TEST(DraftModel, SharesTheKvBudgetAndRefusesAnotherVocabulary) {
  EngineConfig plain = tiny_cfg(kTarget), with = cfg_with(kTarget, 0);
  plain.kv_cache_memory = with.kv_cache_memory = 4 << 20;
  plain.block_size = 16;
  LLMEngine a(plain), b(with);
  // The draft (the same model) takes as much per block as the target, and its lookahead blocks
  // (drafts past the verified tokens) come off the budget first: a bit under half the blocks each.
  const int64_t per_block = a.model_runner().kv_bytes_per_block(), lookahead = draft_lookahead_blocks(with);
  EXPECT_EQ(b.model_runner().kv_bytes_per_block(), 2 * per_block);
  EXPECT_GT(lookahead, 0);
  EXPECT_EQ(b.model_runner().num_kv_blocks(), ((4 << 20) - lookahead * per_block) / (2 * per_block));
  EXPECT_LT(b.model_runner().num_kv_blocks(), a.model_runner().num_kv_blocks() / 2);
  ASSERT_NE(draft_of(b), nullptr);
  EXPECT_EQ(draft_of(b)->block_manager().num_blocks(), b.model_runner().num_kv_blocks() + lookahead);
  EngineConfig lookahead_only = with;  // room for the draft's lookahead and nothing else
  lookahead_only.kv_cache_memory = lookahead * per_block + per_block;
  try {
    LLMEngine none(lookahead_only);
    ADD_FAILURE() << "a budget without one block of both caches was accepted";
  } catch (const ResourceError& e) {
    EXPECT_NE(std::string(e.what()).find("the draft model"), std::string::npos) << e.what();
  }
  try {
    LLMEngine bad(cfg_with(test::fixture("tiny-qwen3-untied"), 0));  // vocabulary 700
    ADD_FAILURE() << "a draft of another vocabulary was accepted";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary of 700 tokens"), std::string::npos) << e.what();
  }
}

TEST(Speculation, DisableByBatchSizeIsHonoured) {
  EngineConfig cfg = cfg_with(kTarget, 0);
  cfg.speculative_config = SpeculativeConfig::parse(
      R"({"model": ")" + kTarget + R"(", "num_speculative_tokens": 3, "disable_by_batch_size": 2})", "t");
  LLMEngine e(cfg);
  for (int i = 0; i < 4; ++i) e.add_request(prompt(20, 20 + uint32_t(i)), greedy(10 + 12 * i));
  int64_t running_before = 0, drafts_before = 0, verified_alone = 0;
  while (e.has_unfinished()) {
    const StepResult r = e.step();
    const int64_t verified = r.stats.spec.num_drafts - drafts_before;
    if (running_before > 2) EXPECT_EQ(verified, 0) << "drafts proposed while " << running_before << " ran";
    if (running_before <= 2) verified_alone += verified;
    running_before = r.stats.running;
    drafts_before = r.stats.spec.num_drafts;
  }
  EXPECT_GT(verified_alone, 0) << "drafts once the batch is small enough";
}

TEST(Speculation, ControlledDrafterThroughTheEngine) {
  EngineConfig cfg = tiny_cfg(kTarget);
  LLMEngine e(cfg);
  std::vector<std::vector<int32_t>> prompts, outs;
  for (uint32_t i = 0; i < 4; ++i) prompts.push_back(prompt(20, 40 + i));
  SamplingParams sp = greedy(150);
  sp.temperature = 0.7f;
  sp.seed = 3;
  for (auto& p : prompts) e.add_request(p, sp);
  outs.resize(4);
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step().finished) outs[size_t(o.request_id)] = o.token_ids;
  auto owned = std::make_unique<AcceptanceControlledDrafter>(4, 0.6, 512, 1);
  AcceptanceControlledDrafter* d = owned.get();
  e.set_drafter(std::move(owned));
  std::map<int64_t, size_t> index;
  for (size_t i = 0; i < 4; ++i) {
    const int64_t id = e.add_request(prompts[i], sp);
    index[id] = i;
    std::vector<int32_t> rec = prompts[i];
    rec.insert(rec.end(), outs[i].begin(), outs[i].end());
    d->expect(id, rec);
  }
  while (e.has_unfinished())
    for (const RequestOutput& o : e.step().finished) EXPECT_EQ(o.token_ids, outs[index.at(o.request_id)]);
  const SpecDecodeStats& st = e.scheduler_stats().spec;
  const double per_token = double(st.num_accepted_tokens) / double(st.num_accepted_tokens + st.num_rejections);
  EXPECT_NEAR(per_token, 0.6, 0.1) << st.num_accepted_tokens << " accepted, " << st.num_rejections << " rejected";
  EXPECT_EQ(d->num_diverged(), 0);
}

}  // namespace
