// The request tracker over the tiny Qwen3 model on the CPU, with the real Qwen3 tokenizer: n > 1
// choices (added once choice 0's prompt is cached, seed + j), stop strings (the engine's blocks
// freed), timings in order, aborts, and the same text for LLM::generate (text at the end) and a
// streaming consumer (the server's way: deltas).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <variant>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/utils/error.h"
#include "test_paths.h"
#include "tiny_engine.h"
#include "tiny_llm.h"

using namespace nanovllm;
using nanovllm::test::greedy;
using nanovllm::test::random_tokens;

namespace {

SamplingParams sampled(int max_tokens, uint64_t seed) {
  SamplingParams sp;
  sp.temperature = 0.8f;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  sp.seed = seed;
  return sp;
}

// What a streaming consumer of the tracker sees of each (request, choice): deltas concatenated.
struct Streamed {
  std::string text;
  std::vector<int32_t> token_ids;
  FinishReason finish = FinishReason::None;
  StopReason stop_reason;
  ChoiceSummary summary;
  RequestOutput output;
};
using StreamKey = std::pair<int64_t, int>;

std::map<StreamKey, Streamed> run_streaming(RequestTracker& t, std::vector<ChoiceSummary>* added = nullptr) {
  std::map<StreamKey, Streamed> got;
  while (t.has_unfinished()) {
    TrackerStep s = t.step();
    if (added) added->insert(added->end(), s.added.begin(), s.added.end());
    for (RequestEvent& ev : s.events) {
      EXPECT_TRUE(ev.error.empty()) << ev.error;
      Streamed& g = got[{ev.request_id, ev.choice}];
      EXPECT_EQ(g.finish, FinishReason::None) << "an event after the choice's end";
      g.text += ev.text;
      g.token_ids.insert(g.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      if (ev.finish != FinishReason::None) {
        g.finish = ev.finish;
        g.stop_reason = ev.stop_reason;
        g.summary = ev.summary;
        g.output = ev.output;
      }
    }
  }
  return got;
}

RequestTracker::Options streaming() { return {}; }

}  // namespace

TEST(RequestTracker, ParallelChoicesJoinOnceTheFirstPromptIsCachedWithSeedPlusJ) {
  LLM llm = test::tiny_qwen3_llm();
  RequestTracker& t = llm.tracker();
  const std::vector<int32_t> prompt = random_tokens(40, 1);  // two full blocks of 16
  SamplingParams sp = sampled(6, 100);
  sp.n = 3;
  const int64_t id = t.add(prompt, sp, streaming());
  EXPECT_EQ(t.num_live_choices(), 1u);  // choices 1 and 2 wait for choice 0's prompt
  std::vector<ChoiceSummary> added;
  auto got = run_streaming(t, &added);
  ASSERT_EQ(added.size(), 2u);
  EXPECT_EQ(added[0].choice, 1);
  EXPECT_EQ(added[1].choice, 2);
  ASSERT_EQ(got.size(), 3u);
  for (int j = 0; j < 3; ++j) {
    const Streamed& g = got.at({id, j});
    EXPECT_EQ(g.finish, FinishReason::Length);
    EXPECT_EQ(g.token_ids.size(), 6u);
    EXPECT_EQ(g.output.token_ids, g.token_ids);
    EXPECT_EQ(g.output.prompt_token_ids, prompt);
    // The siblings read choice 0's full blocks from the prefix cache.
    if (j > 0) EXPECT_EQ(g.output.num_cached_prompt_tokens, 32) << "choice " << j;
  }
  // Choice j samples as a request of its own with seed 100 + j.
  for (int j = 0; j < 3; ++j) {
    const int64_t alone = t.add(prompt, sampled(6, 100 + uint64_t(j)), streaming());
    auto one = run_streaming(t);
    EXPECT_EQ(one.at({alone, 0}).token_ids, got.at({id, j}).token_ids) << "choice " << j;
  }
}

TEST(RequestTracker, StopStringEndsTheRequestAndFreesItsBlocks) {
  LLM llm = test::tiny_qwen3_llm();
  const std::vector<int32_t> prompt = random_tokens(30, 2);
  // The text without a stop string, then a stop string taken from its middle.
  const RequestOutput plain = llm.generate({Prompt::of_ids(prompt)}, {greedy(24)})[0];
  ASSERT_GE(plain.text.size(), 8u);
  const std::string stop = plain.text.substr(plain.text.size() / 2, 3);
  const std::string expected = plain.text.substr(0, plain.text.find(stop));

  SamplingParams sp = greedy(24);
  sp.stop = {stop};
  RequestTracker& t = llm.tracker();
  const int64_t id = t.add(prompt, sp, streaming());
  auto got = run_streaming(t);
  const Streamed& g = got.at({id, 0});
  EXPECT_EQ(g.finish, FinishReason::Stop);
  EXPECT_EQ(g.text, expected);
  EXPECT_LT(g.token_ids.size(), 24u);
  EXPECT_FALSE(llm.has_unfinished());
  EXPECT_EQ(t.num_live_choices(), 0u);
  EXPECT_EQ(llm.scheduler_stats().kv_blocks_used, 0);  // aborted in the engine on the stop string
  ASSERT_TRUE(std::holds_alternative<std::string>(g.stop_reason));
  EXPECT_EQ(std::get<std::string>(g.stop_reason), stop);
  EXPECT_EQ(g.output.stop_reason, g.stop_reason);
  // LLM::generate (one event at the end) reports it too.
  const RequestOutput cut = llm.generate({Prompt::of_ids(prompt)}, {sp})[0];
  EXPECT_EQ(cut.stop_reason, StopReason(stop));
}

// vLLM's stop_reason: the token of stop_token_ids that ended the choice; none for a length; none
// for EOS (tested before stop_token_ids) unless ignore_eos let it through to them.
TEST(RequestTracker, StopReasonNamesTheStopTokenButNeverEos) {
  LLM llm = test::tiny_qwen3_llm();
  const std::vector<int32_t> prompt = random_tokens(30, 7);
  const RequestOutput plain = llm.generate({Prompt::of_ids(prompt)}, {greedy(12)})[0];
  EXPECT_EQ(plain.finish_reason, FinishReason::Length);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(plain.stop_reason));
  const int32_t stop_tok = plain.token_ids.at(5);
  const size_t first =
      size_t(std::find(plain.token_ids.begin(), plain.token_ids.end(), stop_tok) - plain.token_ids.begin());

  SamplingParams sp = greedy(12);
  sp.stop_token_ids = {stop_tok};
  RequestTracker& t = llm.tracker();
  const int64_t id = t.add(prompt, sp, streaming());
  auto got = run_streaming(t);
  const Streamed& g = got.at({id, 0});
  EXPECT_EQ(g.finish, FinishReason::Stop);
  EXPECT_EQ(g.token_ids.size(), first + 1);
  EXPECT_EQ(g.stop_reason, StopReason(stop_tok));
  EXPECT_EQ(g.output.stop_reason, StopReason(stop_tok));
  EXPECT_EQ(llm.generate({Prompt::of_ids(prompt)}, {sp})[0].stop_reason, StopReason(stop_tok));

  // EOS forced as the first token (logit_bias), and listed in stop_token_ids too.
  const int32_t eos = llm.model_config().eos_token_ids.at(0);
  SamplingParams to_eos = greedy(12);
  to_eos.logit_bias = {{eos, 100.0f}};
  to_eos.stop_token_ids = {eos};
  to_eos.ignore_eos = false;
  const RequestOutput at_eos = llm.generate({Prompt::of_ids(prompt)}, {to_eos})[0];
  EXPECT_EQ(at_eos.finish_reason, FinishReason::Stop);
  EXPECT_EQ(at_eos.token_ids, std::vector<int32_t>{eos});
  EXPECT_TRUE(std::holds_alternative<std::monostate>(at_eos.stop_reason));
  to_eos.ignore_eos = true;  // now only stop_token_ids ends it, and names it
  const RequestOutput listed = llm.generate({Prompt::of_ids(prompt)}, {to_eos})[0];
  EXPECT_EQ(listed.finish_reason, FinishReason::Stop);
  EXPECT_EQ(listed.stop_reason, StopReason(eos));
}

TEST(RequestTracker, TimingsComeInOrder) {
  LLM llm = test::tiny_qwen3_llm();
  RequestTracker& t = llm.tracker();
  const auto before = TrackerClock::now();
  const int64_t a = t.add(random_tokens(50, 3), greedy(5), streaming());
  const int64_t b = t.add(random_tokens(20, 4), greedy(1), streaming());
  auto got = run_streaming(t);
  for (int64_t id : {a, b}) {
    const RequestTimes& tm = got.at({id, 0}).summary.times;
    EXPECT_LE(before, tm.arrival);
    EXPECT_LE(tm.arrival, tm.scheduled) << id;
    EXPECT_LE(tm.scheduled, tm.first_token) << id;
    EXPECT_LE(tm.first_token, tm.last_token) << id;
    EXPECT_NE(tm.scheduled, TrackerClock::time_point{}) << id;
    EXPECT_NE(tm.first_token, TrackerClock::time_point{}) << id;
  }
  EXPECT_EQ(got.at({a, 0}).summary.generated_tokens, 5);
  EXPECT_EQ(got.at({a, 0}).summary.prompt_tokens, 50);
  EXPECT_EQ(got.at({b, 0}).summary.times.first_token, got.at({b, 0}).summary.times.last_token);
}

TEST(RequestTracker, AbortEndsEveryChoiceOfALiveRequest) {
  LLM llm = test::tiny_qwen3_llm();
  RequestTracker& t = llm.tracker();
  SamplingParams two = sampled(50, 5);
  two.n = 2;
  const int64_t doomed = t.add(random_tokens(20, 5), two, streaming());
  const int64_t kept = t.add(random_tokens(20, 6), greedy(8), streaming());
  for (int i = 0; i < 3; ++i) t.step();  // both choices of `doomed` are in and decoding
  ASSERT_EQ(t.num_live_choices(), 3u);
  const int64_t used = llm.scheduler_stats().kv_blocks_used;
  const std::vector<ChoiceSummary> ended = t.abort(doomed);
  ASSERT_EQ(ended.size(), 2u);
  for (const ChoiceSummary& s : ended) {
    EXPECT_EQ(s.request_id, doomed);
    EXPECT_GT(s.generated_tokens, 0);
  }
  EXPECT_EQ(t.num_live_choices(), 1u);
  EXPECT_LT(llm.scheduler_stats().kv_blocks_used, used);
  auto got = run_streaming(t);
  for (auto& [key, g] : got) EXPECT_EQ(key.first, kept) << "an event of the aborted request";
  EXPECT_EQ(got.at({kept, 0}).finish, FinishReason::Length);
  EXPECT_EQ(llm.scheduler_stats().kv_blocks_used, 0);
  EXPECT_TRUE(t.abort(doomed).empty());  // already gone: nothing to end
}

TEST(RequestTracker, LlmAndAStreamingConsumerGetTheSameText) {
  LLM llm = test::tiny_qwen3_llm();
  std::vector<Prompt> prompts;
  std::vector<SamplingParams> params;
  for (uint32_t i = 0; i < 4; ++i) {
    prompts.push_back(Prompt::of_ids(random_tokens(10 + 7 * i, 10 + i)));
    SamplingParams sp = i % 2 ? sampled(12, i) : greedy(12);
    sp.ignore_eos = false;
    params.push_back(sp);
  }
  // A stop string that occurs in one of the texts (else: none of the texts is cut, still a check).
  const std::vector<RequestOutput> plain = llm.generate(prompts, params);
  if (plain[0].text.size() > 4) params[0].stop = {plain[0].text.substr(plain[0].text.size() / 2, 2)};
  params[2].stop = {"zq-never-zq"};
  const std::vector<RequestOutput> outs = llm.generate(prompts, params);

  RequestTracker& t = llm.tracker();
  std::vector<int64_t> ids;
  for (size_t i = 0; i < prompts.size(); ++i) ids.push_back(t.add(prompts[i].token_ids, params[i], streaming()));
  auto got = run_streaming(t);
  for (size_t i = 0; i < prompts.size(); ++i) {
    const Streamed& g = got.at({ids[i], 0});
    EXPECT_EQ(g.text, outs[i].text) << "request " << i;
    EXPECT_EQ(g.output.text, outs[i].text) << "request " << i;
    EXPECT_EQ(g.finish, outs[i].finish_reason) << "request " << i;
    EXPECT_EQ(g.output.token_ids, outs[i].token_ids) << "request " << i;
  }
  if (!params[0].stop.empty()) EXPECT_EQ(outs[0].finish_reason, FinishReason::Stop);
}

// LLM::generate gives a request of n samples n outputs in a row (index 0..n-1, sample j with seed
// + j), between the outputs of the other prompts; logprobs come with them when asked.
TEST(RequestTracker, LlmGeneratesParallelSamplesInOrder) {
  LLM llm = test::tiny_qwen3_llm();
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 11;
  sp.max_tokens = 6;
  sp.ignore_eos = true;
  sp.n = 3;
  sp.logprobs = 2;
  SamplingParams one = greedy(4);
  const auto p0 = random_tokens(8, 1), p1 = random_tokens(9, 2);
  auto outs = llm.generate({Prompt::of_ids(p0), Prompt::of_ids(p1)}, {sp, one});
  ASSERT_EQ(outs.size(), 4u);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(outs[size_t(j)].index, j);
    EXPECT_EQ(outs[size_t(j)].request_id, outs[0].request_id);
    EXPECT_EQ(outs[size_t(j)].prompt_token_ids, p0);
    ASSERT_EQ(outs[size_t(j)].logprobs.size(), 6u);
    EXPECT_EQ(outs[size_t(j)].logprobs[0].top.size(), 2u);
    SamplingParams alone = sp;
    alone.n = 1;
    alone.seed = 11 + uint64_t(j);
    EXPECT_EQ(llm.generate({Prompt::of_ids(p0)}, {alone})[0].token_ids, outs[size_t(j)].token_ids) << j;
  }
  EXPECT_EQ(outs[3].index, 0);
  EXPECT_EQ(outs[3].prompt_token_ids, p1);
  EXPECT_TRUE(outs[3].logprobs.empty());
  EXPECT_FALSE(llm.has_unfinished());
}
