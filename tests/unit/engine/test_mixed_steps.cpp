// Mixed steps (chunked prefill on, the default) against nano-vllm's prefill-first steps on the tiny
// model: requests arriving while others decode, a prompt longer than the step budget, a prefix
// hit, greedy and seeded sampling. Outputs must be identical under both policies (a sequence's
// logits do not depend on what shares its step), and the mixed run must actually mix: running
// streams get a token in every step that reads the long prompt.
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

struct Trace {
  std::map<int64_t, std::vector<int32_t>> outputs;  // request id -> completion tokens
  int64_t mixed_steps = 0;                          // steps with decodes and prompt tokens
  int64_t stalled_steps = 0;  // steps reading the long prompt in which some running stream got no token
};

// Three short requests start; after two steps a 700-token prompt (5.5 budgets) and two more
// requests arrive, one sharing the long prompt's first 3 blocks.
Trace run(bool chunked_prefill, const std::function<void(EngineConfig&)>& tweak = {}) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.max_num_batched_tokens = 128;
  cfg.max_num_seqs = 8;
  cfg.enable_chunked_prefill = chunked_prefill;
  if (tweak) tweak(cfg);
  LLMEngine e(cfg);
  SamplingParams seeded;
  seeded.temperature = 0.8f;
  seeded.top_k = 40;
  seeded.seed = 11;
  seeded.max_tokens = 30;
  seeded.ignore_eos = true;
  e.add_request(random_tokens(40, 1), greedy(30));
  e.add_request(random_tokens(23, 2), seeded);
  e.add_request(random_tokens(70, 3), greedy(25));
  Trace t;
  auto record = [&](const StepResult& r) {
    for (auto& [id, tok] : r.new_tokens) t.outputs[id].push_back(tok);
  };
  record(e.step());
  record(e.step());
  auto long_prompt = random_tokens(700, 4);
  const int64_t long_id = e.add_request(long_prompt, greedy(10));
  std::vector<int32_t> shared(long_prompt.begin(), long_prompt.begin() + 48);
  auto tail = random_tokens(30, 5);
  shared.insert(shared.end(), tail.begin(), tail.end());
  e.add_request(random_tokens(9, 6), greedy(12));
  e.add_request(shared, greedy(12));
  while (e.has_unfinished()) {
    // Streams running before this step (with a token already) must each get one now.
    std::vector<int64_t> streaming;
    for (const Sequence* s : e.live_sequences())
      if (s->num_completion_tokens() > 0 && !s->is_finished()) streaming.push_back(s->id);
    const bool long_unread = t.outputs.count(long_id) == 0;
    const StepResult r = e.step();
    record(r);
    if (r.num_prefill_tokens > 0 && r.num_prefill_tokens < r.num_tokens) ++t.mixed_steps;
    if (long_unread && r.num_prefill_tokens > 0)
      for (int64_t id : streaming) {
        bool got = false;
        for (auto& nt : r.new_tokens) got |= nt.first == id;
        if (!got) ++t.stalled_steps;
      }
  }
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  EXPECT_EQ(e.block_manager().check_invariants(e.live_sequences()), "");
  return t;
}

}  // namespace

TEST(MixedSteps, SameOutputsAsPrefillFirstAndNoStalls) {
  const Trace mixed = run(true), first = run(false);
  ASSERT_EQ(mixed.outputs.size(), 6u);
  EXPECT_EQ(mixed.outputs, first.outputs);
  EXPECT_GT(mixed.mixed_steps, 5);    // the long prompt alone takes 6 chunks
  EXPECT_EQ(mixed.stalled_steps, 0);  // every running stream advanced in every such step
  EXPECT_EQ(first.mixed_steps, 0);    // prefill-first never mixes...
  EXPECT_GT(first.stalled_steps, 5);  // ...and pauses the streams while the long prompt is read
}

// The latency target (chunks sized by the measured step times, so they differ run to run), vLLM's
// partial prefills and the priority policy change only which tokens share a step: the outputs stay.
TEST(MixedSteps, LatencyTargetPartialPrefillsAndPriorityKeepTheOutputs) {
  const Trace first = run(false);
  const std::vector<std::function<void(EngineConfig&)>> tweaks = {
      [](EngineConfig& c) {
        c.max_num_batched_tokens = 1024;
        c.target_itl_ms = 0.2;
      },
      [](EngineConfig& c) {
        c.max_num_batched_tokens = 512;
        c.target_itl_ms = 1e4;
      },
      [](EngineConfig& c) {
        c.max_num_partial_prefills = 2;
        c.long_prefill_token_threshold = 64;
      },
      [](EngineConfig& c) { c.scheduling_policy = SchedulingPolicy::Priority; },
  };
  for (size_t i = 0; i < tweaks.size(); ++i) {
    const Trace t = run(true, tweaks[i]);
    EXPECT_EQ(t.outputs, first.outputs) << "tweak " << i;
    EXPECT_EQ(t.stalled_steps, 0) << "tweak " << i;
  }
}

TEST(Priority, NonZeroPriorityNeedsThePriorityPolicy) {
  auto cfg = tiny_cfg();
  SamplingParams p = greedy(4);
  p.priority = -1;
  {
    LLMEngine e(cfg);
    try {
      e.add_request(random_tokens(10, 1), p);
      FAIL() << "accepted";
    } catch (const InvalidRequest& err) {
      EXPECT_NE(std::string(err.what()).find("Got priority -1 but Priority scheduling is not enabled"),
                std::string::npos);
    }
  }
  cfg.scheduling_policy = SchedulingPolicy::Priority;
  LLMEngine e(cfg);
  SamplingParams late = greedy(4);
  late.priority = 5;
  const int64_t low = e.add_request(random_tokens(10, 2), late);
  const int64_t high = e.add_request(random_tokens(10, 3), p);
  ASSERT_EQ(e.scheduler().waiting().size(), 2u);
  EXPECT_EQ(e.scheduler().waiting()[0]->id, high);
  EXPECT_EQ(e.scheduler().waiting()[1]->id, low);
  while (e.has_unfinished()) e.step();
}

// The UserError an engine is refused with; "accepted" when it starts.
std::string refusal(const EngineConfig& cfg) {
  try {
    LLMEngine e(cfg);
  } catch (const UserError& err) {
    return err.what();
  }
  return "accepted";
}

// The budget must hold a decode token of every running sequence, and at least one block.
TEST(MixedSteps, BudgetBelowMaxNumSeqsOrOneBlockIsRefused) {
  auto cfg = tiny_cfg();
  cfg.max_num_seqs = 256;
  cfg.max_num_batched_tokens = 128;
  std::string why = refusal(cfg);
  EXPECT_NE(why.find("--max-num-batched-tokens (128) must be at least --max-num-seqs (256)"), std::string::npos) << why;
  cfg.max_num_seqs = 8;
  cfg.block_size = 256;
  why = refusal(cfg);
  EXPECT_NE(why.find("at least one block (--block-size 256)"), std::string::npos) << why;
}
