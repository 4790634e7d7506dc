// The near-tie rule of the tests that hold the engine's greedy tokens to a reference's (the Hugging
// Face fixtures, the quantized checkpoints of scripts/make_quantized_checkpoint.py): a reference
// token binds only where it beats its runner-up by more than kNearTieMargin and by more than the
// reference's own noise on those two logits (a BF16 reference: how far float32 moves them); a
// near-tie may go either way, and after the first token that differs the contexts differ, so the
// walk stops there.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm::test {

inline constexpr double kNearTieMargin = 0.05;

inline bool decisive(double margin, double noise = 0) { return margin > std::max(kNearTieMargin, noise); }

// The gap between a row of logits' largest and second largest values (the margin above).
inline double top2_margin(const std::vector<float>& l) {
  float a = -1e30f, b = -1e30f;
  for (float v : l) {
    if (v > a)
      b = a, a = v;
    else if (v > b)
      b = v;
  }
  return double(a) - double(b);
}

struct GreedyWalk {
  size_t steps = 0;       // steps walked: up to and including the first differing token
  int compared = 0;       // decisive steps, each asserted equal
  bool diverged = false;  // left the reference's path (at a near-tie, or failing an assertion)
};

// got against want (margins[s], noise[s]: the reference's at step s; noise empty: none) up to the
// first difference, EXPECT_EQ at every decisive step; `where` names the sequence in failures.
inline GreedyWalk expect_greedy_up_to_near_ties(const std::vector<int32_t>& got, const std::vector<int32_t>& want,
                                                const std::vector<double>& margins, const std::vector<double>& noise,
                                                const std::string& where) {
  GreedyWalk w;
  EXPECT_EQ(got.size(), want.size()) << where;
  EXPECT_EQ(margins.size(), want.size()) << where;
  for (size_t s = 0; s < want.size() && s < got.size() && s < margins.size(); ++s) {
    ++w.steps;
    if (decisive(margins[s], s < noise.size() ? noise[s] : 0)) {
      EXPECT_EQ(got[s], want[s]) << where << " step " << s << " (reference margin " << margins[s] << ")";
      ++w.compared;
    }
    if (got[s] != want[s]) {
      w.diverged = true;
      break;
    }
  }
  return w;
}

}  // namespace nanovllm::test
