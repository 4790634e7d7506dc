// Structured output's token mask in the CPU sampler (SamplingRow::allowed, the reference of the
// CUDA sampler): greedy is the argmax over the allowed tokens, sampling only ever picks allowed
// ones and follows the softmax renormalised over them, a one-token mask forces that token, and
// logprobs keep their meaning (raw: the model's logits, processed: after the mask).
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"

using namespace nanovllm;

namespace {

std::vector<uint32_t> mask_of(int64_t V, const std::vector<int32_t>& allowed) {
  std::vector<uint32_t> m(size_t((V + 31) / 32), 0);
  for (int32_t t : allowed) m[size_t(t / 32)] |= 1u << (t % 32);
  return m;
}

// About `fraction` of [0, V) allowed, at least one token.
std::vector<int32_t> random_allowed(int64_t V, double fraction, std::mt19937& rng) {
  std::vector<int32_t> ids;
  std::bernoulli_distribution keep(fraction);
  for (int32_t t = 0; t < V; ++t)
    if (keep(rng)) ids.push_back(t);
  if (ids.empty()) ids.push_back(int32_t(rng() % V));
  return ids;
}

bool is_allowed(const std::vector<uint32_t>& m, int32_t t) { return (m[size_t(t / 32)] >> (t % 32)) & 1u; }

struct Batch {
  int64_t B, V;
  std::vector<float> logits;
  Tensor tensor(CpuBackend& cpu) const {
    Tensor t = cpu.empty({B, V}, DType::F32);
    cpu.upload(logits.data(), DType::F32, t);
    return t;
  }
};

Batch random_batch(int64_t B, int64_t V, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  Batch b{B, V, std::vector<float>(size_t(B * V))};
  for (auto& x : b.logits) x = nd(rng);
  return b;
}

SamplingRow sampled_row(float t, uint64_t seed, int64_t pos, int top_k = 0, float top_p = 1, float min_p = 0) {
  SamplingRow r;
  r.temperature = t;
  r.top_k = top_k;
  r.top_p = top_p;
  r.min_p = min_p;
  r.seed = seed;
  r.position = pos;
  return r;
}

}  // namespace

TEST(SamplerMask, GreedyIsTheArgmaxOverTheAllowedTokens) {
  CpuBackend cpu(1);
  for (int64_t V : {int64_t(1003), int64_t(4096)}) {  // a vocabulary that is not a multiple of 32, and one that is
    const int64_t B = 9;
    const Batch batch = random_batch(B, V, uint32_t(V));
    std::mt19937 rng(7);
    std::vector<std::vector<uint32_t>> masks;
    std::vector<SamplingRow> rows;
    for (int64_t b = 0; b < B; ++b) masks.push_back(mask_of(V, random_allowed(V, b % 2 ? 0.01 : 0.3, rng)));
    for (int64_t b = 0; b < B; ++b) {
      rows.push_back(sampled_row(0.f, 1, 0));
      if (b != 4) rows.back().allowed = masks[size_t(b)].data();  // row 4 is unconstrained
    }
    const auto got = cpu.sample(batch.tensor(cpu), rows);
    for (int64_t b = 0; b < B; ++b) {
      const float* l = batch.logits.data() + b * V;
      int32_t want = -1;
      for (int32_t t = 0; t < V; ++t)
        if ((b == 4 || is_allowed(masks[size_t(b)], t)) && (want < 0 || l[t] > l[want])) want = t;
      EXPECT_EQ(got[size_t(b)], want) << "V " << V << " row " << b;
    }
    // The argmax of the whole row is disallowed somewhere, or the test would show nothing.
    int differs = 0;
    for (int64_t b = 0; b < B; ++b)
      differs += !is_allowed(
          masks[size_t(b)], int32_t(std::max_element(batch.logits.begin() + b * V, batch.logits.begin() + (b + 1) * V) -
                                    (batch.logits.begin() + b * V)));
    EXPECT_GT(differs, 3);
  }
}

TEST(SamplerMask, SamplingPicksOnlyAllowedTokensWithEveryFilter) {
  CpuBackend cpu(1);
  const int64_t V = 517, B = 4;
  const Batch batch = random_batch(B, V, 11);
  std::mt19937 rng(3);
  std::vector<std::vector<uint32_t>> masks;
  for (int64_t b = 0; b < B; ++b) masks.push_back(mask_of(V, random_allowed(V, 0.05, rng)));
  std::map<int32_t, int> seen;
  for (uint64_t seed = 0; seed < 300; ++seed) {
    std::vector<SamplingRow> rows = {sampled_row(1.0f, seed, 5), sampled_row(0.7f, seed, 6, 40),
                                     sampled_row(1.3f, seed, 7, 0, 0.9f), sampled_row(1.0f, seed, 8, 0, 1, 0.05f)};
    for (int64_t b = 0; b < B; ++b) rows[size_t(b)].allowed = masks[size_t(b)].data();
    const auto got = cpu.sample(batch.tensor(cpu), rows);
    for (int64_t b = 0; b < B; ++b) {
      ASSERT_TRUE(is_allowed(masks[size_t(b)], got[size_t(b)])) << "row " << b << " seed " << seed;
      if (b == 0) ++seen[got[0]];
    }
  }
  EXPECT_GT(seen.size(), 3u);  // sampling, not a greedy pick
}

TEST(SamplerMask, SamplingFollowsTheSoftmaxRenormalisedOverTheAllowedTokens) {
  CpuBackend cpu(1);
  const int64_t V = 70;
  std::vector<float> l(size_t(V), 5.0f);  // the disallowed tokens are the likely ones
  l[3] = std::log(0.2f), l[40] = std::log(0.3f), l[69] = std::log(0.5f);
  const auto mask = mask_of(V, {3, 40, 69});
  Tensor t = cpu.empty({1, V}, DType::F32);
  cpu.upload(l.data(), DType::F32, t);
  std::map<int32_t, int> n;
  const int draws = 6000;
  for (int i = 0; i < draws; ++i) {
    SamplingRow r = sampled_row(1.0f, uint64_t(i), i);
    r.allowed = mask.data();
    ++n[cpu.sample(t, {r})[0]];
  }
  ASSERT_EQ(n.size(), 3u);
  EXPECT_NEAR(n[3] / double(draws), 0.2, 0.02);
  EXPECT_NEAR(n[40] / double(draws), 0.3, 0.02);
  EXPECT_NEAR(n[69] / double(draws), 0.5, 0.02);
}

TEST(SamplerMask, AOneTokenMaskForcesThatToken) {
  CpuBackend cpu(1);
  const int64_t V = 300;
  const Batch batch = random_batch(1, V, 5);
  const int32_t forced = int32_t(std::min_element(batch.logits.begin(), batch.logits.end()) - batch.logits.begin());
  const auto mask = mask_of(V, {forced});
  LogitsProcessing pen;  // a bias against it does not matter: it is the only candidate
  pen.entries.push_back({forced, 0, 0, -100.0f});
  for (uint64_t seed = 0; seed < 20; ++seed)
    for (float temp : {0.0f, 0.5f, 2.0f}) {
      SamplingRow r = sampled_row(temp, seed, 3, seed % 3 == 0 ? 5 : 0, seed % 3 == 1 ? 0.5f : 1.0f);
      r.allowed = mask.data();
      if (seed % 2) r.processing = &pen;
      EXPECT_EQ(cpu.sample(batch.tensor(cpu), {r})[0], forced) << "seed " << seed << " T " << temp;
    }
  // The one allowed token banned as well (min_tokens): every candidate is -inf, token 0.
  LogitsProcessing ban;
  ban.entries.push_back({forced, 0, kAdjustBanned, 0.0f});
  SamplingRow r = sampled_row(1.0f, 1, 3);
  r.allowed = mask.data();
  r.processing = &ban;
  EXPECT_EQ(cpu.sample(batch.tensor(cpu), {r})[0], 0);
}

TEST(SamplerMask, NoMaskOrAFullMaskChangesNothing) {
  CpuBackend cpu(1);
  const int64_t V = 1003, B = 6;
  const Batch batch = random_batch(B, V, 21);
  std::vector<int32_t> all(static_cast<size_t>(V));
  for (int32_t t = 0; t < V; ++t) all[size_t(t)] = t;
  const auto full = mask_of(V, all);
  std::vector<SamplingRow> plain, masked;
  for (int64_t b = 0; b < B; ++b)
    plain.push_back(sampled_row(b % 3 == 0 ? 0.f : 0.9f, 40 + uint64_t(b), b, 0, b % 2 ? 0.8f : 1.0f));
  masked = plain;
  for (auto& r : masked) r.allowed = full.data();
  EXPECT_EQ(cpu.sample(batch.tensor(cpu), plain), cpu.sample(batch.tensor(cpu), masked));
}

TEST(SamplerMask, RawLogprobsSeeTheModelsLogitsProcessedOnesTheMask) {
  CpuBackend cpu(1);
  const int64_t V = 333, B = 3;
  const Batch batch = random_batch(B, V, 8);
  std::mt19937 rng(9);
  const auto allowed = random_allowed(V, 0.1, rng);
  const auto mask = mask_of(V, allowed);
  std::vector<SamplingRow> rows;
  for (int64_t b = 0; b < B; ++b) {
    rows.push_back(sampled_row(b == 2 ? 0.f : 0.8f, 5, b));
    rows.back().num_logprobs = 4;
    rows.back().processed_logprobs = b == 1;
  }
  std::vector<SamplingRow> masked = rows;
  masked[0].allowed = masked[1].allowed = mask.data();  // row 2 stays unmasked in the masked batch
  std::vector<TokenLogprobs> lp_plain, lp_masked;
  const auto plain_tokens = cpu.sample(batch.tensor(cpu), rows, &lp_plain);
  const auto tokens = cpu.sample(batch.tensor(cpu), masked, &lp_masked);
  // Row 0, raw logprobs: the model's distribution, whatever the mask; the top 4 are the model's.
  const TokenLogprobs want0 = row_logprobs(batch.logits.data(), V, 1.0f, tokens[0], 4);
  EXPECT_FLOAT_EQ(lp_masked[0].logprob, want0.logprob);
  EXPECT_EQ(lp_masked[0].rank, want0.rank);
  EXPECT_EQ(lp_masked[0].top, lp_plain[0].top);
  // Row 1, processed logprobs: the softmax over the allowed tokens (at temperature 0.8).
  const float* l1 = batch.logits.data() + V;
  double sum = 0, mx = -INFINITY;
  for (int32_t t : allowed) mx = std::max(mx, double(l1[t]) / 0.8);
  for (int32_t t : allowed) sum += std::exp(double(l1[t]) / 0.8 - mx);
  ASSERT_TRUE(is_allowed(mask, tokens[1]));
  EXPECT_NEAR(lp_masked[1].logprob, double(l1[tokens[1]]) / 0.8 - mx - std::log(sum), 1e-4);
  for (auto& [id, logprob] : lp_masked[1].top)
    if (!is_allowed(mask, id)) EXPECT_EQ(logprob, -INFINITY) << id;
  EXPECT_TRUE(is_allowed(mask, lp_masked[1].top[0].first));
  // Row 2 (no mask): the same token and logprobs as in the batch without masks.
  EXPECT_EQ(tokens[2], plain_tokens[2]);
  EXPECT_EQ(lp_masked[2].logprob, lp_plain[2].logprob);
  EXPECT_EQ(lp_masked[2].top, lp_plain[2].top);
}
