// The CPU sampler (reference for the GPU one): greedy, filters, seeds, and that temperature
// sampling follows softmax(logits / T).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"

using namespace nanovllm;

static SamplingRow row(float t, int k = 0, float p = 1, float min_p = 0, uint64_t seed = 1, int64_t pos = 0) {
  return SamplingRow{t, k, p, min_p, seed, pos};
}

TEST(Sampler, GreedyIsArgmax) {
  std::vector<float> l{0.1f, 3.0f, -1.0f, 2.9f};
  EXPECT_EQ(sample_row_cpu(l.data(), 4, row(0)), 1);
}

TEST(Sampler, FiltersThatLeaveOneTokenAreGreedy) {
  std::vector<float> l{0.1f, 3.0f, -1.0f, 2.9f, 1.0f};
  for (uint64_t s = 0; s < 50; ++s) {
    EXPECT_EQ(sample_row_cpu(l.data(), 5, row(1.0f, 1, 1, 0, s)), 1);
    EXPECT_EQ(sample_row_cpu(l.data(), 5, row(1.0f, 0, 0.01f, 0, s)), 1);
    EXPECT_EQ(sample_row_cpu(l.data(), 5, row(1.0f, 0, 1, 1.0f, s)), 1);
  }
}

TEST(Sampler, TopKKeepsOnlyTheKLargest) {
  std::vector<float> l{0.0f, 1.0f, 2.0f, 3.0f, 4.0f};
  for (uint64_t s = 0; s < 200; ++s) EXPECT_GE(sample_row_cpu(l.data(), 5, row(5.0f, 2, 1, 0, s)), 3);
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingP) {
  // probs ~ [0.05, 0.1, 0.25, 0.6]: top_p 0.8 keeps {3, 2}.
  std::vector<float> l{std::log(0.05f), std::log(0.1f), std::log(0.25f), std::log(0.6f)};
  for (uint64_t s = 0; s < 300; ++s) EXPECT_GE(sample_row_cpu(l.data(), 4, row(1.0f, 0, 0.8f, 0, s)), 2);
}

TEST(Sampler, MinPDropsUnlikelyTokens) {
  std::vector<float> l{std::log(0.05f), std::log(0.15f), std::log(0.2f), std::log(0.6f)};
  // min_p 0.3 keeps tokens with p >= 0.18: {2, 3}
  for (uint64_t s = 0; s < 300; ++s) EXPECT_GE(sample_row_cpu(l.data(), 4, row(1.0f, 0, 1, 0.3f, s)), 2);
}

TEST(Sampler, SameSeedAndPositionSameToken) {
  std::vector<float> l(1000);
  for (size_t i = 0; i < l.size(); ++i) l[i] = std::sin(float(i));
  const int32_t a = sample_row_cpu(l.data(), 1000, row(1.0f, 0, 1, 0, 42, 7));
  EXPECT_EQ(a, sample_row_cpu(l.data(), 1000, row(1.0f, 0, 1, 0, 42, 7)));
  int differ = 0;
  for (uint64_t s = 0; s < 20; ++s) differ += sample_row_cpu(l.data(), 1000, row(1.0f, 0, 1, 0, s, 7)) != a;
  EXPECT_GT(differ, 10);
}

TEST(Sampler, FrequenciesFollowSoftmaxOverTemperature) {
  std::vector<float> l{1.0f, 2.0f, 0.0f};
  const float T = 0.7f;
  double z = 0;
  for (float x : l) z += std::exp(x / T);
  std::vector<int> counts(3);
  const int n = 20000;
  for (int i = 0; i < n; ++i) ++counts[size_t(sample_row_cpu(l.data(), 3, row(T, 0, 1, 0, 5, i)))];
  for (size_t i = 0; i < 3; ++i) {
    const double want = std::exp(l[i] / T) / z, got = double(counts[i]) / n;
    EXPECT_NEAR(got, want, 0.015) << "token " << i;
  }
}
