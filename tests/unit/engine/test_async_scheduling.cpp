// Async scheduling (llm_engine.h) on the tiny model, forced on for the CPU backend: every request
// gets the same tokens and finish reason as with it off, through the cases where the step ahead
// is refused or wasted: a request asking for logprobs (synchronous steps while it runs), arrivals
// (the next step admits them), a stop token and max_tokens (a row of the step ahead wasted, or no
// step ahead), an abort while a step ahead holds the aborted row, and a KV pool small enough to
// preempt. The block invariants hold after every step and every block is free at the end.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/tokenizer/tokenizer.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

struct Outcome {
  std::map<int64_t, std::vector<int32_t>> tokens;  // streamed, by request id
  std::map<int64_t, FinishReason> reasons;
  int64_t steps_ahead = 0;
  int64_t preemptions = 0;
};

struct Script {
  int32_t stop_token = -1;  // a stop token of request 2 (-1: none)
  int64_t kv_blocks = 0;    // 0: the default pool
};

Outcome run(bool async, const Script& sc) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.max_num_seqs = 8;
  cfg.max_num_batched_tokens = 256;
  cfg.async_scheduling = async;
  if (sc.kv_blocks > 0) cfg.num_kvcache_blocks = sc.kv_blocks;
  LLMEngine e(cfg);
  EXPECT_EQ(e.async_scheduling(), async);
  SamplingParams seeded;
  seeded.temperature = 0.8f;
  seeded.top_k = 40;
  seeded.seed = 11;
  seeded.max_tokens = 40;
  seeded.ignore_eos = true;
  SamplingParams stopping = greedy(45);
  if (sc.stop_token >= 0) stopping.stop_token_ids = {sc.stop_token};
  SamplingParams with_logprobs = greedy(6);
  with_logprobs.logprobs = 2;
  Outcome o;
  e.add_request(random_tokens(40, 1), greedy(50));                         // 0
  e.add_request(random_tokens(23, 2), seeded);                             // 1
  e.add_request(random_tokens(70, 3), stopping);                           // 2
  e.add_request(random_tokens(17, 4), with_logprobs);                      // 3
  const int64_t doomed = e.add_request(random_tokens(30, 5), greedy(45));  // 4, aborted at step 14
  int64_t steps = 0;
  while (e.has_unfinished()) {
    const StepResult r = e.step();
    ++steps;
    for (auto& [id, tok] : r.new_tokens) o.tokens[id].push_back(tok);
    for (auto& f : r.finished) o.reasons[f.request_id] = f.finish_reason;
    EXPECT_EQ(e.block_manager().check_invariants(e.live_sequences()), "") << "after step " << steps;
    if (steps == 10) {  // arrivals while the others decode
      e.add_request(random_tokens(33, 6), greedy(20));
      e.add_request(random_tokens(9, 7), seeded);
    }
    if (steps == 14) EXPECT_TRUE(e.abort(doomed));
  }
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  o.steps_ahead = e.num_steps_ahead();
  o.preemptions = e.scheduler().num_preemptions();
  return o;
}

void expect_same(const Outcome& sync, const Outcome& async) {
  ASSERT_EQ(sync.tokens.size(), 7u);
  EXPECT_EQ(async.tokens, sync.tokens);
  EXPECT_EQ(async.reasons, sync.reasons);
  EXPECT_EQ(sync.steps_ahead, 0);
  EXPECT_GT(async.steps_ahead, 10);
}

TEST(AsyncScheduling, SameTokensAsSynchronousSteps) {
  const Outcome sync = run(false, {}), async = run(true, {});
  expect_same(sync, async);
  EXPECT_EQ(sync.tokens.at(4).size(), 14u);  // aborted: the tokens of its first 14 steps only
  EXPECT_EQ(sync.reasons.count(4), 0u);      // an aborted request reports no output
  EXPECT_EQ(sync.reasons.at(0), FinishReason::Length);
}

// Request 2 stops on a token it samples mid-run, while the step ahead already holds its next row.
TEST(AsyncScheduling, StopTokenWastesOnlyItsRowOfTheStepAhead) {
  const Outcome plain = run(false, {});
  const auto& out = plain.tokens.at(2);
  ASSERT_GE(out.size(), 12u);
  // The first token from the 8th on that did not come before: the request stops there.
  size_t at = 8;
  while (at < out.size() && std::find(out.begin(), out.begin() + long(at), out[at]) != out.begin() + long(at)) ++at;
  ASSERT_LT(at, out.size()) << "the tiny model repeats itself: no fresh token to stop on";
  Script sc;
  sc.stop_token = out[at];
  const Outcome sync = run(false, sc), async = run(true, sc);
  expect_same(sync, async);
  EXPECT_EQ(sync.tokens.at(2).size(), at + 1);
  EXPECT_EQ(sync.reasons.at(2), FinishReason::Stop);
}

// A pool of 14 blocks of 16 tokens for up to seven requests of up to 120 tokens: decodes preempt,
// where no step is taken ahead.
TEST(AsyncScheduling, SameTokensUnderPreemption) {
  Script sc;
  sc.kv_blocks = 14;
  const Outcome sync = run(false, sc), async = run(true, sc);
  expect_same(sync, async);
  EXPECT_GT(sync.preemptions, 0);
  EXPECT_EQ(async.preemptions, sync.preemptions);
}

// Every request of a step ahead aborted while it runs: it is dropped, and the engine goes on with
// the next request as a fresh engine would.
TEST(AsyncScheduling, AbortEverythingInFlightThenContinue) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.async_scheduling = true;
  LLMEngine e(cfg);
  const int64_t a = e.add_request(random_tokens(20, 8), greedy(30));
  for (int i = 0; i < 4; ++i) e.step();
  EXPECT_GT(e.num_steps_ahead(), 0);
  EXPECT_TRUE(e.abort(a));
  EXPECT_FALSE(e.has_unfinished());
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
  const int64_t b = e.add_request(random_tokens(25, 9), greedy(12));
  std::vector<int32_t> got;
  while (e.has_unfinished())
    for (auto& [id, tok] : e.step().new_tokens) {
      EXPECT_EQ(id, b);
      got.push_back(tok);
    }
  cfg.async_scheduling = false;
  LLMEngine fresh(cfg);
  fresh.add_request(random_tokens(25, 9), greedy(12));
  std::vector<int32_t> want;
  while (fresh.has_unfinished())
    for (auto& [id, tok] : fresh.step().new_tokens) want.push_back(tok);
  EXPECT_EQ(got, want);
  EXPECT_EQ(e.block_manager().num_free_blocks(), e.block_manager().num_blocks());
}

// Unset, it follows the backend: off on the CPU, whose work never runs ahead of the host.
TEST(AsyncScheduling, OffByDefaultOnTheCpu) {
  LLMEngine e(tiny_cfg());
  EXPECT_FALSE(e.async_scheduling());
}

// Constrained rows run ahead too (the forward launched before the previous token is on the host,
// the sampling after it advanced the matcher): the same tokens as synchronous steps, every output
// in the grammar's language.
TEST(AsyncScheduling, StructuredOutputsMatchSynchronousSteps) {
  const std::string dir = test::qwen3_tokenizer_dir();
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "npm data missing (scripts/setup.sh)";
  auto tok = Tokenizer::from_dir(dir);
  auto run_all = [&](bool async, int64_t* ahead) {
    auto cfg = tiny_cfg();
    cfg.block_size = 16;
    cfg.async_scheduling = async;
    LLMEngine e(cfg);
    e.enable_structured_outputs(tok.get());
    std::map<int64_t, std::vector<int32_t>> out;
    for (uint64_t i = 0; i < 6; ++i) {
      SamplingParams sp;
      sp.temperature = 0.9f;
      sp.seed = 100 + i;
      sp.max_tokens = 40;
      sp.structured_outputs.kind = StructuredOutputs::Kind::Regex;
      sp.structured_outputs.text = i % 2 ? "[a-z]{8,30}!" : "(ab|c|de)+ [0-9]{2,9}";
      e.add_request(random_tokens(8 + i, uint32_t(i)), sp);
    }
    while (e.has_unfinished())
      for (auto& [id, t] : e.step().new_tokens) out[id].push_back(t);
    *ahead = e.num_steps_ahead();
    return out;
  };
  int64_t sync_ahead = 0, async_ahead = 0;
  auto want = run_all(false, &sync_ahead);
  auto got = run_all(true, &async_ahead);
  EXPECT_EQ(got, want);
  EXPECT_GT(async_ahead, 0);
  for (auto& [id, toks] : got) {
    std::vector<int32_t> body(toks.begin(), toks.end());
    if (!body.empty() && body.back() == 2) body.pop_back();  // the tiny model's EOS
    const std::string text = tok->decode(body, false);
    EXPECT_TRUE(id % 2 ? std::regex_match(text, std::regex("[a-z]{8,30}!"))
                       : std::regex_match(text, std::regex("(ab|c|de)+ [0-9]{2,9}")))
        << id << ": '" << text << "'";
  }
}

}  // namespace
