// Penalties, logit_bias, min_tokens and logprobs on the CPU engine (tiny fixtures), against a
// reference written here from vLLM V1's formulas (vllm/model_executor/layers/utils.py
// apply_penalties, the min_tokens and logit_bias processors) over the engine's own raw logits,
// and logprobs against log_softmax of the Hugging Face reference logits.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "tiny_engine.h"

using namespace nanovllm;

namespace {

// vLLM's order on a dense row: min_tokens mask, logit_bias, repetition (prompt or output tokens),
// frequency and presence (output tokens).
std::vector<float> reference_process(std::vector<float> l, const SamplingParams& p, const std::vector<int32_t>& prompt,
                                     const std::vector<int32_t>& output, const std::vector<int32_t>& eos) {
  const size_t V = l.size();
  if (int(output.size()) < p.min_tokens) {
    if (!p.ignore_eos)
      for (int32_t t : eos) l[size_t(t)] = -INFINITY;
    for (int32_t t : p.stop_token_ids) l[size_t(t)] = -INFINITY;
  }
  for (auto& [t, b] : p.logit_bias) l[size_t(t)] += b;
  std::vector<float> count(V, 0.f);
  std::vector<bool> prompt_mask(V, false);
  for (int32_t t : prompt) prompt_mask[size_t(t)] = true;
  for (int32_t t : output) count[size_t(t)] += 1;
  for (size_t v = 0; v < V; ++v) {
    const float pen = (prompt_mask[v] || count[v] > 0) ? p.repetition_penalty : 1.0f;
    l[v] *= l[v] > 0 ? 1.0f / pen : pen;
    l[v] -= p.frequency_penalty * count[v];
    l[v] -= p.presence_penalty * (count[v] > 0 ? 1.f : 0.f);
  }
  return l;
}

int32_t argmax(const std::vector<float>& l) { return int32_t(std::max_element(l.begin(), l.end()) - l.begin()); }

std::vector<double> log_softmax(const std::vector<double>& x) {
  const double mx = *std::max_element(x.begin(), x.end());
  double s = 0;
  for (double v : x) s += std::exp(v - mx);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] - mx - std::log(s);
  return out;
}

// Runs one request, capturing the raw logits of each step that gave it a token.
struct Traced {
  RequestOutput out;
  std::vector<std::vector<float>> logits;
};

Traced run_one(LLMEngine& engine, const std::vector<int32_t>& prompt, const SamplingParams& sp) {
  const int64_t V = engine.model_config().vocab_size;
  Traced r;
  engine.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    for (size_t i = 0; i < b.seqs.size(); ++i)
      if (b.seqs[i]->num_cached_tokens + b.seqs[i]->num_scheduled_tokens >= b.seqs[i]->num_tokens())
        r.logits.emplace_back(l.begin() + int64_t(i) * V, l.begin() + int64_t(i + 1) * V);
  };
  engine.add_request(prompt, sp);
  while (engine.has_unfinished())
    for (auto& o : engine.step().finished) r.out = o;
  engine.model_runner().logits_observer = nullptr;
  return r;
}

}  // namespace

TEST(LogitsProcessing, PenaltiesChangeGreedyOutputAsVllmFormulasSay) {
  LLMEngine engine(test::tiny_cfg());
  const auto prompt = test::random_tokens(40, 7);
  const auto& eos = engine.model_config().eos_token_ids;
  const Traced plain = run_one(engine, prompt, test::greedy(32));
  struct Case {
    float rep, freq, pres;
  };
  for (const Case c :
       {Case{1.8f, 0, 0}, Case{0.6f, 0, 0}, Case{1, 1.5f, 0}, Case{1, 0, 2.0f}, Case{1.3f, -0.7f, 0.9f}}) {
    SamplingParams sp = test::greedy(32);
    sp.repetition_penalty = c.rep;
    sp.frequency_penalty = c.freq;
    sp.presence_penalty = c.pres;
    sp.logit_bias = {{5, 0.4f}, {17, -0.3f}};
    const Traced r = run_one(engine, prompt, sp);
    ASSERT_EQ(r.out.token_ids.size(), 32u);
    ASSERT_EQ(r.logits.size(), 32u);
    std::vector<int32_t> output;
    for (size_t s = 0; s < 32; ++s) {
      const auto processed = reference_process(r.logits[s], sp, prompt, output, eos);
      EXPECT_EQ(r.out.token_ids[s], argmax(processed)) << "rep " << c.rep << " freq " << c.freq << " step " << s;
      output.push_back(r.out.token_ids[s]);
    }
    EXPECT_NE(r.out.token_ids, plain.out.token_ids) << "rep " << c.rep << " freq " << c.freq << " pres " << c.pres;
  }
}

TEST(LogitsProcessing, LogitBiasForcesAToken) {
  LLMEngine engine(test::tiny_cfg());
  SamplingParams sp = test::greedy(12);
  sp.temperature = 0.8f;  // sampled, not greedy: +100 still leaves no other choice
  sp.seed = 3;
  sp.logit_bias = {{123, 100.0f}};
  const Traced r = run_one(engine, test::random_tokens(9, 2), sp);
  EXPECT_EQ(r.out.token_ids, std::vector<int32_t>(12, 123));
}

TEST(LogitsProcessing, MinTokensMasksStopTokensUntilReached) {
  LLMEngine engine(test::tiny_cfg());
  const auto prompt = test::random_tokens(20, 11);
  const Traced plain = run_one(engine, prompt, test::greedy(8));
  const int32_t first = plain.out.token_ids[0];
  SamplingParams sp = test::greedy(8);
  sp.stop_token_ids = {first};  // greedy would stop at once
  EXPECT_EQ(run_one(engine, prompt, sp).out.token_ids.size(), 1u);
  sp.min_tokens = 4;
  sp.logit_bias = {{first, 50.0f}};  // and afterwards it is the only choice
  const Traced r = run_one(engine, prompt, sp);
  ASSERT_EQ(r.out.token_ids.size(), 5u);
  for (size_t s = 0; s < 4; ++s) EXPECT_NE(r.out.token_ids[s], first) << s;
  EXPECT_EQ(r.out.token_ids[4], first);
  EXPECT_EQ(r.out.finish_reason, FinishReason::Stop);
  // EOS too (unless ignore_eos): bias every EOS up; min_tokens still holds them back.
  SamplingParams e = test::greedy(6);
  e.ignore_eos = false;
  e.min_tokens = 3;
  std::vector<std::pair<int32_t, float>> eos_bias;
  for (int32_t t : engine.model_config().eos_token_ids) eos_bias.emplace_back(t, 100.0f);
  e.logit_bias = std::move(eos_bias);
  const Traced re = run_one(engine, prompt, e);
  ASSERT_EQ(re.out.token_ids.size(), 4u);
  EXPECT_EQ(re.out.finish_reason, FinishReason::Stop);
}

// Raw logprobs against log_softmax of transformers' logits (reference.json), within 1e-4, while the
// engine follows the reference's greedy path.
TEST(LogitsProcessing, LogprobsMatchLogSoftmaxOfReferenceLogits) {
  const std::string dir = test::fixture("tiny-qwen3-untied");
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in);
  const auto ref = nlohmann::json::parse(in);
  LLMEngine engine(test::tiny_cfg(dir));
  int compared = 0;
  for (const auto& pr : ref["prompts"]) {
    SamplingParams sp = test::greedy(ref["max_new_tokens"].get<int>());
    sp.logprobs = 5;
    const Traced r = run_one(engine, pr["prompt_token_ids"].get<std::vector<int32_t>>(), sp);
    const auto want = pr["greedy_token_ids"].get<std::vector<int32_t>>();
    ASSERT_EQ(r.out.logprobs.size(), r.out.token_ids.size());
    for (size_t s = 0; s < want.size() && r.out.token_ids[s] == want[s]; ++s) {
      const auto lsm = log_softmax(pr["logits"][s].get<std::vector<double>>());
      const TokenLogprobs& lp = r.out.logprobs[s];
      EXPECT_NEAR(lp.logprob, lsm[size_t(want[s])], 1e-4) << s;
      ASSERT_EQ(lp.top.size(), 5u);
      EXPECT_EQ(lp.top[0].first, want[s]);  // greedy: the chosen token is the top one
      EXPECT_FLOAT_EQ(lp.top[0].second, lp.logprob);
      for (size_t k = 0; k < 5; ++k) {
        EXPECT_NEAR(lp.top[k].second, lsm[size_t(lp.top[k].first)], 1e-4) << s << " rank " << k;
        if (k) EXPECT_LE(lp.top[k].second, lp.top[k - 1].second);
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 100);
}

// processed_logprobs: log_softmax of the processed logits over the temperature.
TEST(LogitsProcessing, ProcessedLogprobsSeePenaltiesAndTemperature) {
  EngineConfig cfg = test::tiny_cfg();
  cfg.logprobs_mode = LogprobsMode::ProcessedLogprobs;
  LLMEngine engine(cfg);
  const auto prompt = test::random_tokens(15, 5);
  SamplingParams sp = test::greedy(6);
  sp.temperature = 0.7f;
  sp.seed = 9;
  sp.repetition_penalty = 1.5f;
  sp.logprobs = 3;
  const Traced r = run_one(engine, prompt, sp);
  ASSERT_EQ(r.out.logprobs.size(), 6u);
  std::vector<int32_t> output;
  for (size_t s = 0; s < 6; ++s) {
    const auto p = reference_process(r.logits[s], sp, prompt, output, engine.model_config().eos_token_ids);
    std::vector<double> scaled(p.begin(), p.end());
    for (auto& x : scaled) x = float(x * (1.0f / 0.7f));
    const auto lsm = log_softmax(scaled);
    EXPECT_NEAR(r.out.logprobs[s].logprob, lsm[size_t(r.out.token_ids[s])], 1e-5) << s;
    EXPECT_NEAR(r.out.logprobs[s].top[0].second, *std::max_element(lsm.begin(), lsm.end()), 1e-5) << s;
    output.push_back(r.out.token_ids[s]);
  }
  EXPECT_THROW(parse_logprobs_mode("raw_logits"), UserError);  // vLLM's, not implemented
}

TEST(LogitsProcessing, LimitsAreRefusedNamingTheField) {
  auto field_of = [](const SamplingParams& p) {
    try {
      p.validate();
    } catch (const InvalidRequest& e) {
      return e.param;
    }
    return std::string();
  };
  SamplingParams p;
  p.presence_penalty = 2.5f;
  EXPECT_EQ(field_of(p), "presence_penalty");
  p = {};
  p.frequency_penalty = -2.01f;
  EXPECT_EQ(field_of(p), "frequency_penalty");
  p = {};
  p.repetition_penalty = 0;
  EXPECT_EQ(field_of(p), "repetition_penalty");
  p = {};
  p.min_tokens = 20;
  p.max_tokens = 10;
  EXPECT_EQ(field_of(p), "min_tokens");
  p = {};
  p.logprobs = -1;
  EXPECT_EQ(field_of(p), "logprobs");
  p = {};
  p.n = 0;
  EXPECT_EQ(field_of(p), "n");

  LLMEngine engine(test::tiny_cfg());
  auto engine_field = [&](const SamplingParams& sp) {
    try {
      engine.add_request({5, 6, 7}, sp);
    } catch (const InvalidRequest& e) {
      return std::string(e.param) + ": " + e.what();
    }
    return std::string();
  };
  SamplingParams sp;
  sp.logprobs = 21;  // max_logprobs 20
  EXPECT_EQ(engine_field(sp).rfind("logprobs: Requested sample logprobs of 21", 0), 0u) << engine_field(sp);
  sp = {};
  sp.logit_bias = {{3, 1.f}, {700, 1.f}, {9999, 2.f}};  // vocabulary 700
  EXPECT_NE(engine_field(sp).find("700, 9999"), std::string::npos) << engine_field(sp);
}

// Prompt logprobs: a prompt made of a reference prompt and its greedy continuation; the logprob of
// continuation token s (at position P + s) must be log_softmax(reference logits[s]) of it, through
// chunked prefill (small budget) and again on a second run (the prompt is not read from the cache).
TEST(LogitsProcessing, PromptLogprobsMatchReferenceThroughChunks) {
  const std::string dir = test::fixture("tiny-qwen3-untied");
  std::ifstream in(dir + "/reference.json");
  ASSERT_TRUE(in);
  const auto ref = nlohmann::json::parse(in);
  EngineConfig cfg = test::tiny_cfg(dir);
  cfg.block_size = 16;
  cfg.max_num_batched_tokens = 64;
  cfg.max_num_seqs = 8;
  LLMEngine engine(cfg);
  int compared = 0;
  for (int round = 0; round < 2; ++round)
    for (const auto& pr : ref["prompts"]) {
      auto prompt = pr["prompt_token_ids"].get<std::vector<int32_t>>();
      const size_t P = prompt.size();
      const auto greedy = pr["greedy_token_ids"].get<std::vector<int32_t>>();
      prompt.insert(prompt.end(), greedy.begin(), greedy.end());
      SamplingParams sp = test::greedy(1);
      sp.prompt_logprobs = 2;
      const Traced r = run_one(engine, prompt, sp);
      ASSERT_EQ(r.out.prompt_logprobs.size(), prompt.size() - 1);
      for (size_t s = 0; s < greedy.size(); ++s) {
        const auto lsm = log_softmax(pr["logits"][s].get<std::vector<double>>());
        const TokenLogprobs& lp = r.out.prompt_logprobs[P + s - 1];
        EXPECT_NEAR(lp.logprob, lsm[size_t(greedy[s])], 1e-4) << "prompt len " << P << " step " << s;
        ASSERT_EQ(lp.top.size(), 2u);
        const int32_t best = int32_t(std::max_element(lsm.begin(), lsm.end()) - lsm.begin());
        if (pr["margins"][s].get<double>() > 1e-3) {
          EXPECT_EQ(lp.top[0].first, best);
          if (greedy[s] == best) EXPECT_EQ(lp.rank, 1);
        }
        ++compared;
      }
      if (round == 1) EXPECT_EQ(engine.block_manager().num_free_blocks(), engine.block_manager().num_blocks());
    }
  EXPECT_GT(compared, 200);
}
