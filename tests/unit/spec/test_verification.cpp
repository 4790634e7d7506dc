// The verification rules are lossless: chi-square tests (~10^5 draws, two temperatures) that the
// first emitted token follows the target distribution p, for the engine's coupled rule (the CPU
// sampler's seeded draws, accepted while they equal the drafts) and for the rejection sampler with
// point-mass and with sampled drafts; a deliberately wrong acceptance rule (always accept: the
// rejection sampler told q = p for a point-mass draft) fails the same test.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/spec/verification.h"

namespace nanovllm {
namespace {

constexpr int64_t kV = 8;
constexpr int kDraws = 100000;
// chi-square, 7 degrees of freedom: P(X > 29.9) = 1e-4 (a fixed-seed test: deterministic anyway).
constexpr double kCritical = 29.9;

std::vector<float> logits_row() { return {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -1.5f, 0.7f, 1.3f}; }

std::vector<float> softmax(const std::vector<float>& l, float t) {
  std::vector<float> p(l.size());
  double mx = *std::max_element(l.begin(), l.end()), s = 0;
  for (size_t i = 0; i < l.size(); ++i) s += (p[i] = float(std::exp((l[i] - mx) / t)));
  for (auto& x : p) x = float(x / s);
  return p;
}

double chi_square(const std::vector<int64_t>& counts, const std::vector<float>& p) {
  double n = 0, chi = 0;
  for (int64_t c : counts) n += double(c);
  for (size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    chi += (double(counts[i]) - e) * (double(counts[i]) - e) / e;
  }
  return chi;
}

TEST(Verification, AcceptedPrefix) {
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 2, 4, 9}), 2);
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1, 2, 7}), 2);
  EXPECT_EQ(accepted_prefix(std::vector<int32_t>{}, std::vector<int32_t>{5}), 0);
  EXPECT_THROW(accepted_prefix(std::vector<int32_t>{1}, std::vector<int32_t>{1}), std::exception);
}

// The engine's rule: the first token emitted is the sampler's draw t_0 whether d stands or not;
// acceptance happens with probability p(d).
TEST(Verification, CoupledRuleFollowsTheTarget) {
  for (float temp : {0.7f, 1.3f}) {
    const std::vector<float> l = logits_row(), p = softmax(l, temp);
    const int32_t draft = 0;  // not the mode: rejections are common
    std::vector<int64_t> counts(kV, 0);
    int64_t accepted = 0;
    for (int s = 0; s < kDraws; ++s) {
      SamplingRow row;
      row.temperature = temp;
      row.seed = uint64_t(s);
      row.position = 11;
      const int32_t t0 = sample_row_cpu(l.data(), kV, row);
      accepted += accepted_prefix(std::vector<int32_t>{draft}, std::vector<int32_t>{t0, 0});
      ++counts[size_t(t0)];
    }
    EXPECT_LT(chi_square(counts, p), kCritical) << "temperature " << temp;
    EXPECT_NEAR(double(accepted) / kDraws, p[draft], 0.01) << "acceptance is p(d)";
  }
}

// Draws the first emitted token of rejection_sample over kDraws seeds.
template <class DraftOf>
std::vector<int64_t> first_tokens(const std::vector<float>& p1, bool point_mass, bool claim_q_is_p, DraftOf draft_of) {
  std::mt19937_64 rng(1234);
  std::uniform_real_distribution<double> U(0.0, 1.0);
  std::vector<float> p2(p1);  // [2, V]: the bonus position reuses the row
  p2.insert(p2.end(), p1.begin(), p1.end());
  std::vector<int64_t> counts(kV, 0);
  for (int s = 0; s < kDraws; ++s) {
    const int32_t d = draft_of(rng);
    std::vector<float> q;
    if (claim_q_is_p) q = p1;
    const RejectionResult r =
        rejection_sample(p2, point_mass && !claim_q_is_p ? std::span<const float>() : std::span<const float>(q),
                         std::vector<int32_t>{d}, kV, [&](int64_t, int) { return U(rng); });
    ++counts[size_t(r.tokens.at(0))];
  }
  return counts;
}

TEST(Verification, RejectionSamplerWithPointMassDraftsFollowsTheTarget) {
  for (float temp : {0.7f, 1.3f}) {
    const std::vector<float> p = softmax(logits_row(), temp);
    auto fixed = [](std::mt19937_64&) { return int32_t(3); };  // the mode: acceptances are common
    EXPECT_LT(chi_square(first_tokens(p, true, false, fixed), p), kCritical) << "temperature " << temp;
    // The wrong rule: a deterministic draft declared as drawn from p is always accepted.
    EXPECT_GT(chi_square(first_tokens(p, true, true, fixed), p), 100 * kCritical) << "temperature " << temp;
  }
}

TEST(Verification, RejectionSamplerWithSampledDraftsFollowsTheTarget) {
  for (float temp : {0.7f, 1.3f}) {
    const std::vector<float> p = softmax(logits_row(), temp);
    // Drafts drawn from a q unlike p (uniform): the residual max(0, p - q) must correct them.
    std::vector<float> q(kV, 1.0f / kV);
    std::mt19937_64 draft_rng(99);
    auto from_q = [&](std::mt19937_64&) { return int32_t(draft_rng() % kV); };
    std::mt19937_64 rng(4321);
    std::uniform_real_distribution<double> U(0.0, 1.0);
    std::vector<float> p2(p);
    p2.insert(p2.end(), p.begin(), p.end());
    std::vector<int64_t> counts(kV, 0), wrong(kV, 0);
    for (int s = 0; s < kDraws; ++s) {
      const int32_t d = from_q(rng);
      ++counts[size_t(
          rejection_sample(p2, q, std::vector<int32_t>{d}, kV, [&](int64_t, int) { return U(rng); }).tokens.at(0))];
      ++wrong[size_t(d)];  // accepting every draft emits q
    }
    EXPECT_LT(chi_square(counts, p), kCritical) << "temperature " << temp;
    EXPECT_GT(chi_square(wrong, p), 100 * kCritical) << "temperature " << temp;
  }
}

TEST(Verification, AllAcceptedDraftsGetABonusToken) {
  const std::vector<float> p = {0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1};  // [3, 4]: certain tokens 1, 0, 3
  const RejectionResult r = rejection_sample(p, {}, std::vector<int32_t>{1, 0}, 4, [](int64_t, int) { return 0.5; });
  EXPECT_EQ(r.num_accepted, 2);
  EXPECT_EQ(r.tokens, (std::vector<int32_t>{1, 0, 3}));
  EXPECT_THROW(rejection_sample(p, {}, std::vector<int32_t>{1}, 4, [](int64_t, int) { return 0.5; }), std::exception);
  EXPECT_THROW(rejection_sample(std::span<const float>(p.data(), 8), {}, std::vector<int32_t>{7}, 4,
                                [](int64_t, int) { return 0.5; }),
               std::exception);
}

}  // namespace
}  // namespace nanovllm
