// The n-gram drafter: longest suffix match in [min, max], the tokens after its latest occurrence,
// at most max_drafts, none without a match; incremental indexing gives what a fresh index gives.
#include <gtest/gtest.h>

#include <random>

#include "nanovllm/spec/ngram_drafter.h"

namespace nanovllm {
namespace {

std::vector<int32_t> propose(NgramDrafter& d, const std::vector<int32_t>& toks, int64_t max_drafts, int64_t id = 0) {
  return d.propose_one({id, toks, max_drafts});
}

// The same rule by brute force: for n from max down to min, the latest earlier end of the suffix.
std::vector<int32_t> brute(const std::vector<int32_t>& t, int64_t lo, int64_t hi, int64_t want) {
  const int64_t N = int64_t(t.size());
  for (int64_t n = std::min(hi, N - 1); n >= lo; --n)
    for (int64_t end = N - 2; end >= n - 1; --end) {
      bool eq = true;
      for (int64_t i = 0; i < n && eq; ++i) eq = t[size_t(end - i)] == t[size_t(N - 1 - i)];
      if (eq) return {t.begin() + end + 1, t.begin() + std::min(N, end + 1 + want)};
    }
  return {};
}

TEST(NgramDrafter, ProposesWhatFollowedTheLongestSuffixMatch) {
  NgramDrafter d(3, 1, 3);
  // Suffix "1 2 3" occurred at the start, followed by 4 5 6.
  EXPECT_EQ(propose(d, {1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 3), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(propose(d, {1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 2, 1), (std::vector<int32_t>{4, 5}));
  // No earlier occurrence of the last token: nothing.
  EXPECT_TRUE(propose(d, {1, 2, 3, 4}, 3, 2).empty());
  // The longest match wins over a more recent shorter one: "7 8" -> 1, while "8" alone -> 2 later.
  EXPECT_EQ(propose(d, {7, 8, 1, 8, 2, 7, 8}, 1, 3), (std::vector<int32_t>{1}));
  // Drafts stop at the end of the tokens (an overlapping match).
  EXPECT_EQ(propose(d, {5, 5, 5}, 3, 4), (std::vector<int32_t>{5}));
}

TEST(NgramDrafter, MinimumLengthIsRespected) {
  NgramDrafter d(4, 2, 4);
  EXPECT_TRUE(propose(d, {1, 2, 3, 2}, 4).empty());  // only a 1-gram matches
  EXPECT_EQ(propose(d, {1, 2, 3, 1, 2}, 4, 1), (std::vector<int32_t>{3, 1, 2}));
}

TEST(NgramDrafter, IncrementalIndexMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int64_t lo : {1, 2}) {
    NgramDrafter d(4, lo, 4);
    std::vector<int32_t> toks;
    for (int i = 0; i < 400; ++i) {
      toks.push_back(int32_t(rng() % 6));  // a small alphabet: many matches of every length
      EXPECT_EQ(propose(d, toks, 4), brute(toks, lo, 4, 4)) << "after " << toks.size() << " tokens";
    }
    d.release(0);
    EXPECT_EQ(d.num_indexed_sequences(), 0);
  }
}

TEST(NgramDrafter, BadSettingsAreRefused) {
  EXPECT_THROW(NgramDrafter(0, 1, 2), std::exception);
  EXPECT_THROW(NgramDrafter(2, 3, 2), std::exception);
}

}  // namespace
}  // namespace nanovllm
