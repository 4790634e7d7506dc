// Comparing two engines' greedy generations on the tiny fixtures (a quantized engine against the
// unquantized one): tokens and the logits of every step, the logits' cosine up to the first
// differing token (later steps see different contexts).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/engine/llm_engine.h"
#include "near_tie.h"
#include "tiny_engine.h"

namespace nanovllm::test {

struct GenRun {
  std::vector<int32_t> tokens;
  std::vector<std::vector<float>> logits;  // per generated token
};

inline GenRun generate(LLMEngine& e, const std::vector<int32_t>& prompt, int n) {
  GenRun r;
  const int64_t V = e.model_config().vocab_size;
  e.model_runner().logits_observer = [&](const ScheduledBatch& b, const std::vector<float>& l) {
    const Sequence* s = b.seqs.at(0);
    if (s->num_cached_tokens + s->num_scheduled_tokens == s->num_tokens())
      r.logits.emplace_back(l.begin(), l.begin() + V);
  };
  const int64_t id = e.add_request(prompt, greedy(n));
  while (e.has_unfinished())
    for (auto& o : e.step().finished)
      if (o.request_id == id) r.tokens = o.token_ids;
  e.model_runner().logits_observer = nullptr;
  return r;
}

inline double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return ab / std::sqrt(aa * bb);
}

// n random token ids in [3, V).
inline std::vector<int32_t> prompt_tokens(size_t n, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(3 + rng() % uint32_t(V - 3));
  return t;
}

struct Agreement {
  size_t same = 0, total = 0, compared = 0;  // greedy tokens equal / generated; logits rows compared
  double worst_cosine = 1;
  std::vector<double> cosines;  // of every compared row
};

// `prompts` prompts of lengths 5, 28, 51, ... (seeded), `n` greedy tokens each, in both engines.
inline Agreement compare_greedy(LLMEngine& ref, LLMEngine& other, uint32_t prompts = 4, int n = 12) {
  Agreement g;
  for (uint32_t seed = 0; seed < prompts; ++seed) {
    const auto prompt = prompt_tokens(5 + 23 * seed, ref.model_config().vocab_size, 100 + seed);
    const GenRun a = generate(ref, prompt, n), b = generate(other, prompt, n);
    for (size_t i = 0; i < a.tokens.size() && i < b.tokens.size(); ++i) g.same += a.tokens[i] == b.tokens[i];
    g.total += a.tokens.size();
    for (size_t i = 0; i < a.logits.size() && i < b.logits.size(); ++i) {
      g.cosines.push_back(cosine(a.logits[i], b.logits[i]));
      g.worst_cosine = std::min(g.worst_cosine, g.cosines.back());
      ++g.compared;
      if (a.tokens[i] != b.tokens[i]) break;
    }
  }
  return g;
}

// `spec`'s greedy tokens against `base`'s on each prompt (n tokens each), up to near-ties
// (near_tie.h: EXPECT_EQ at every decisive step); returns the decisive steps compared.
inline int expect_greedy_prompts_up_to_near_ties(LLMEngine& base, LLMEngine& spec,
                                                 const std::vector<std::vector<int32_t>>& prompts, int n) {
  int compared = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const GenRun want = generate(base, prompts[i], n);
    std::vector<double> margins;
    for (const auto& l : want.logits) margins.push_back(top2_margin(l));
    const GenRun got = generate(spec, prompts[i], n);
    compared +=
        expect_greedy_up_to_near_ties(got.tokens, want.tokens, margins, {}, "prompt " + std::to_string(i)).compared;
  }
  return compared;
}

// One "[gpu]" line of a speculative run against decoding: the greedy tokens compared (as above)
// and the run's draft counters.
inline void print_spec_comparison(const std::string& what, int compared, const SpecDecodeStats& st) {
  std::printf("[gpu] %s: %d greedy tokens compared; %lld drafts, %lld of %lld draft tokens accepted\n", what.c_str(),
              compared, static_cast<long long>(st.num_drafts), static_cast<long long>(st.num_accepted_tokens),
              static_cast<long long>(st.num_draft_tokens));
}

}  // namespace nanovllm::test
