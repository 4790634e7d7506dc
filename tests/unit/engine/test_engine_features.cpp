// Engine behaviour on a real (tiny) model: prefix caching, preemption, chunked prefill, sampling
// seeds, request validation. Outputs are compared against runs with the feature off.
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "test_paths.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

// Runs all prompts to completion; returns outputs in submission order.
std::vector<RequestOutput> run_all(LLMEngine& e, const std::vector<std::vector<int32_t>>& prompts,
                                   const std::vector<SamplingParams>& params) {
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(e.add_request(prompts[i], params[i % params.size()]));
  std::map<int64_t, RequestOutput> outs;
  while (e.has_unfinished())
    for (auto& o : e.step().finished) outs[o.request_id] = o;
  std::vector<RequestOutput> v;
  for (auto id : ids) v.push_back(outs.at(id));
  return v;
}

}  // namespace

TEST(PrefixCaching, SecondPromptComputesOnlyUncachedTokens) {
  auto a = random_tokens(800, 1);                      // 3 full blocks of 256 + 32
  std::vector<int32_t> b(a.begin(), a.begin() + 768);  // shares exactly 3 full blocks
  auto tail = random_tokens(70, 2);
  b.insert(b.end(), tail.begin(), tail.end());

  auto cfg = tiny_cfg();
  LLMEngine on(cfg);
  run_all(on, {a}, {greedy(4)});
  const int64_t before = on.num_prefill_tokens_computed();
  auto out_on = run_all(on, {b}, {greedy(8)});
  EXPECT_EQ(on.num_prefill_tokens_computed() - before, 70);  // only the uncached tokens
  EXPECT_EQ(out_on[0].num_cached_prompt_tokens, 768);
  EXPECT_GT(on.block_manager().num_hit_tokens(), 0);

  cfg.enable_prefix_caching = false;
  LLMEngine off(cfg);
  run_all(off, {a}, {greedy(4)});
  auto out_off = run_all(off, {b}, {greedy(8)});
  EXPECT_EQ(out_off[0].num_cached_prompt_tokens, 0);
  EXPECT_EQ(out_on[0].token_ids, out_off[0].token_ids);
}

TEST(PrefixCaching, IdenticalPromptsInOneBatchAndAfter) {
  auto p = random_tokens(300, 3);
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  LLMEngine e(cfg);
  auto first = run_all(e, {p, p, p}, {greedy(10)});
  auto again = run_all(e, {p}, {greedy(10)});
  EXPECT_EQ(first[0].token_ids, first[1].token_ids);
  EXPECT_EQ(first[0].token_ids, again[0].token_ids);
  EXPECT_EQ(again[0].num_cached_prompt_tokens, 288);  // 18 full blocks before the last token
}

TEST(Preemption, SmallKVPoolGivesTheSameGreedyOutputs) {
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t i = 0; i < 8; ++i) prompts.push_back(random_tokens(20 + 7 * i, 10 + i));
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  LLMEngine ample(cfg);
  auto want = run_all(ample, prompts, {greedy(40)});
  EXPECT_EQ(ample.scheduler().num_preemptions(), 0);

  cfg.num_kvcache_blocks = 10;  // 160 slots for 8 sequences of up to 109 tokens
  cfg.max_model_len = 160;      // what the cache holds: a longer one is refused at start-up
  LLMEngine tight(cfg);
  auto got = run_all(tight, prompts, {greedy(40)});
  EXPECT_GT(tight.scheduler().num_preemptions(), 0);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(got[i].token_ids, want[i].token_ids) << "prompt " << i;
  EXPECT_EQ(tight.block_manager().num_free_blocks(), tight.block_manager().num_blocks());
  EXPECT_EQ(tight.block_manager().check_invariants(tight.live_sequences()), "");
}

TEST(ChunkedPrefill, LongPromptMatchesUnchunkedRun) {
  auto p = random_tokens(700, 4);
  auto q = random_tokens(50, 5);
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  LLMEngine whole(cfg);
  auto want = run_all(whole, {p, q}, {greedy(12)});

  cfg.max_num_batched_tokens = 128;  // the 700-token prompt takes 6 chunks
  cfg.max_num_seqs = 8;
  LLMEngine chunked(cfg);
  auto got = run_all(chunked, {p, q}, {greedy(12)});
  EXPECT_EQ(got[0].token_ids, want[0].token_ids);
  EXPECT_EQ(got[1].token_ids, want[1].token_ids);
  EXPECT_EQ(chunked.num_prefill_tokens_computed(), 750);
}

TEST(Sampling, SameSeedSameOutputAcrossBatches) {
  auto cfg = tiny_cfg();
  LLMEngine e(cfg);
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.top_p = 0.9f;
  sp.top_k = 50;
  sp.seed = 1234;
  sp.max_tokens = 20;
  sp.ignore_eos = true;
  auto p = random_tokens(30, 6);
  auto alone = run_all(e, {p}, {sp});
  auto batched = run_all(e, {random_tokens(9, 7), p, random_tokens(40, 8)}, {sp});
  EXPECT_EQ(alone[0].token_ids, batched[1].token_ids);
  sp.seed = 99;
  auto other = run_all(e, {p}, {sp});
  EXPECT_NE(alone[0].token_ids, other[0].token_ids);
}

TEST(Sampling, StopTokenIdsAndEos) {
  auto cfg = tiny_cfg();
  LLMEngine e(cfg);
  auto p = random_tokens(12, 9);
  auto ref = run_all(e, {p}, {greedy(10)})[0].token_ids;
  auto sp = greedy(10);
  sp.stop_token_ids = {ref[3]};
  auto out = run_all(e, {p}, {sp})[0];
  // Stops at the first occurrence of the stop token, which is included in the output.
  auto first = std::find(ref.begin(), ref.end(), ref[3]) - ref.begin();
  EXPECT_EQ(int64_t(out.token_ids.size()), first + 1);
  EXPECT_EQ(out.finish_reason, FinishReason::Stop);
}

TEST(RequestValidation, BadRequestsAreRejectedWithTheirField) {
  auto cfg = tiny_cfg();
  cfg.max_model_len = 100;
  LLMEngine e(cfg);
  auto expect_param = [&](std::vector<int32_t> prompt, SamplingParams sp, const std::string& param) {
    try {
      e.add_request(std::move(prompt), sp);
      ADD_FAILURE() << "accepted a bad request (" << param << ")";
    } catch (const InvalidRequest& err) {
      EXPECT_EQ(err.param, param) << err.what();
    }
  };
  SamplingParams ok = greedy(5);
  expect_param({}, ok, "prompt");
  expect_param(random_tokens(100, 1), ok, "prompt");  // >= max_model_len
  expect_param({1, 700}, ok, "prompt");               // id >= vocab size
  expect_param({1, -3}, ok, "prompt");
  SamplingParams bad = ok;
  bad.max_tokens = 0;
  expect_param({1, 2}, bad, "max_tokens");
  bad = ok;
  bad.temperature = -0.5f;
  expect_param({1, 2}, bad, "temperature");
  bad = ok;
  bad.top_p = 0.0f;
  expect_param({1, 2}, bad, "top_p");
  bad.top_p = 1.5f;
  expect_param({1, 2}, bad, "top_p");
  bad = ok;
  bad.min_p = 2.0f;
  expect_param({1, 2}, bad, "min_p");
  // The engine keeps working after rejecting.
  EXPECT_EQ(run_all(e, {{1, 2, 3}}, {ok})[0].token_ids.size(), 5u);
}

TEST(RequestValidation, MaxModelLenCapsGeneration) {
  auto cfg = tiny_cfg();
  cfg.max_model_len = 40;
  LLMEngine e(cfg);
  auto out = run_all(e, {random_tokens(30, 2)}, {greedy(100)})[0];
  EXPECT_EQ(out.token_ids.size(), 10u);
  EXPECT_EQ(out.finish_reason, FinishReason::Length);
}

// As vLLM: a max_model_len the KV cache cannot hold in one sequence is refused at start-up,
// with the numbers.
TEST(EngineFeatures, MaxModelLenLargerThanTheKvCacheIsRefused) {
  auto cfg = tiny_cfg();
  cfg.block_size = 16;
  cfg.num_kvcache_blocks = 10;
  cfg.max_model_len = 161;
  try {
    LLMEngine e(cfg);
    FAIL() << "an engine whose cache holds 160 tokens accepted max_model_len 161";
  } catch (const UserError& err) {
    EXPECT_NE(std::string(err.what())
                  .find("max_model_len 161 is larger than the KV cache can hold (10 blocks of 16 tokens = 160 tokens)"),
              std::string::npos)
        << err.what();
  }
}

namespace nanovllm {
namespace {

// A temperature of 1e-30 divides the logits into inf: it is raised to kMinTemperature, as vLLM
// does, so it samples as 0.01 does (same seed, same tokens) with finite logprobs.
TEST(Sampling, TinyTemperaturesAreRaisedToTheMinimum) {
  auto run = [](float temperature) {
    LLMEngine e(test::tiny_cfg());
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 5;
    sp.max_tokens = 12;
    sp.ignore_eos = true;
    sp.logprobs = 1;
    e.add_request(test::random_tokens(9, 3), sp);
    std::vector<int32_t> toks;
    while (e.has_unfinished())
      for (auto& [id, t] : e.step().new_tokens) toks.push_back(t);
    return toks;
  };
  const auto at_min = run(kMinTemperature);
  EXPECT_EQ(run(1e-30f), at_min);
  EXPECT_EQ(run(1e-38f), at_min);
  EXPECT_EQ(at_min.size(), 12u);
}

}  // namespace
}  // namespace nanovllm
