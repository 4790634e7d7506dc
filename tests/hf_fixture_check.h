// Runs the tiny Hugging Face fixtures (tests/fixtures/<name>/reference.json, made by
// scripts/make_fixtures.py and make_family_fixtures.py) through the real engine: all prompts in one
// batch, greedy, the logits of each step that samples a token captured (chunked prefills' earlier
// chunks sample none). Greedy tokens must equal the reference's up to near-ties (tests/near_tie.h:
// wherever its top-1/top-2 margin exceeds 0.05, up to the first divergence). Shared by the CPU test
// (tests/unit/models) and the CUDA one (tests/gpu).
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "nanovllm/engine/llm_engine.h"
#include "near_tie.h"
#include "test_paths.h"

namespace nanovllm::test {

struct FixtureResult {
  int compared = 0;           // greedy tokens compared under the margin rule
  int diverged = 0;           // prompts that left the reference's path at a near-tie
  double max_logit_diff = 0;  // over every compared step and vocabulary entry
  bool all_blocks_free = false;
};

inline FixtureResult run_fixture(const std::string& name, EngineConfig cfg) {
  FixtureResult res;
  const std::string dir = fixture(name);
  std::ifstream in(dir + "/reference.json");
  EXPECT_TRUE(in) << "missing " << dir << "/reference.json";
  if (!in) return res;
  auto ref = nlohmann::json::parse(in);
  cfg.model = dir;
  LLMEngine engine(cfg);
  const int64_t V = engine.model_config().vocab_size;
  std::map<int64_t, size_t> prompt_of;                        // request id -> prompt index
  std::map<int64_t, std::vector<std::vector<float>>> logits;  // request id -> per-step logits
  engine.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    for (size_t i = 0; i < b.seqs.size(); ++i) {
      const Sequence& s = *b.seqs[i];
      if (s.num_cached_tokens + s.num_scheduled_tokens < s.num_tokens()) continue;  // a prefill chunk, not the last
      logits[s.id].emplace_back(l.begin() + int64_t(i) * V, l.begin() + int64_t(i + 1) * V);
    }
  };
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = ref["max_new_tokens"].get<int>();
  sp.ignore_eos = true;
  const auto& prompts = ref["prompts"];
  for (size_t p = 0; p < prompts.size(); ++p)
    prompt_of[engine.add_request(prompts[p]["prompt_token_ids"].get<std::vector<int32_t>>(), sp)] = p;
  std::map<int64_t, RequestOutput> outs;
  while (engine.has_unfinished())
    for (auto& o : engine.step().finished) outs[o.request_id] = o;
  EXPECT_EQ(outs.size(), prompts.size());
  for (auto& [id, out] : outs) {
    const auto& r = prompts[prompt_of[id]];
    auto want = r["greedy_token_ids"].get<std::vector<int32_t>>();
    auto margins = r["margins"].get<std::vector<double>>();
    EXPECT_EQ(out.finish_reason, FinishReason::Length);
    if (out.token_ids.size() != want.size() || logits[id].size() != want.size()) {
      ADD_FAILURE() << name << " prompt " << prompt_of[id] << ": " << out.token_ids.size() << " tokens, "
                    << logits[id].size() << " logit rows, want " << want.size();
      continue;
    }
    const GreedyWalk w = expect_greedy_up_to_near_ties(out.token_ids, want, margins, {},
                                                       name + " prompt " + std::to_string(prompt_of[id]));
    res.compared += w.compared;
    res.diverged += w.diverged;
    for (size_t s = 0; s < w.steps; ++s) {
      const auto ref_logits = r["logits"][s].get<std::vector<double>>();
      for (int64_t v = 0; v < V; ++v)
        res.max_logit_diff = std::max(res.max_logit_diff, std::abs(ref_logits[size_t(v)] - logits[id][s][size_t(v)]));
    }
  }
  res.all_blocks_free = engine.block_manager().num_free_blocks() == engine.block_manager().num_blocks();
  return res;
}

}  // namespace nanovllm::test
