// DraftBackoff (spec/draft_backoff.h): drafting stops for exponentially longer stretches while
// drafts keep being rejected, and stays on where they mostly stand.
#include <gtest/gtest.h>

#include <random>

#include "nanovllm/spec/draft_backoff.h"

using namespace nanovllm;

namespace {

// Steps in which a sequence drafts over `steps` decode steps, each verify accepting a prefix of k
// drafts with per-token acceptance alpha.
int64_t drafted_steps(double alpha, int64_t steps, int64_t k = 4, uint32_t seed = 1) {
  DraftBackoff b;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  int64_t drafted = 0;
  for (int64_t s = 0; s < steps; ++s) {
    if (!b.should_draft()) continue;
    ++drafted;
    int64_t a = 0;
    while (a < k && u(rng) < alpha) ++a;
    b.observe(a, k);
  }
  return drafted;
}

}  // namespace

TEST(DraftBackoff, AcceptanceZeroDraftsRarely) {
  const int64_t n = drafted_steps(0.0, 2000);
  // Four rejected verifies, then skips of 1, 2, 4, ... 64 between probes: about 4 + 7 + 1870 / 65.
  EXPECT_LE(n, 50) << "at acceptance 0 a sequence should verify about once per 64 steps";
  EXPECT_GE(n, 20) << "it still probes";
}

TEST(DraftBackoff, HighAcceptanceKeepsDrafting) {
  EXPECT_GE(drafted_steps(0.6, 2000), 1850);
  for (double alpha : {0.7, 0.9}) EXPECT_GE(drafted_steps(alpha, 2000), 1930) << "alpha " << alpha;
}

TEST(DraftBackoff, RecoversWhenDraftsStartStanding) {
  DraftBackoff b;
  for (int i = 0; i < 40; ++i)
    if (b.should_draft()) b.observe(0, 4);
  EXPECT_GT(b.next_skip, 1) << "backed off";
  int64_t probes = 0;
  for (int i = 0; i < 400 && b.next_skip > 1; ++i)
    if (b.should_draft()) {
      ++probes;
      b.observe(4, 4);
    }
  EXPECT_EQ(b.next_skip, 1) << "every draft standing lifts the average over the floor";
  EXPECT_LE(probes, 3);
  EXPECT_TRUE(b.should_draft());
  b.observe(0, 0);  // no drafts: nothing learnt
  EXPECT_TRUE(b.should_draft());
}
