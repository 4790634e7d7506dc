// The acceptance-controlled drafter: it proposes the recorded continuation, corrupts each token with
// probability 1 - alpha (never into the recorded token), so that verifying against the record
// accepts drafts at a per-token rate near alpha over a long run; it stops drafting for a sequence
// that leaves its record, and refuses bad settings.
#include <gtest/gtest.h>

#include <random>

#include "nanovllm/spec/controlled_drafter.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace {

std::vector<int32_t> record(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = int32_t(rng() % 50);
  return t;
}

// Walks a sequence along its record as the engine would (the target emits the recorded tokens):
// accepted drafts, then the target's token. Returns (accepted, rejections).
std::pair<int64_t, int64_t> walk(AcceptanceControlledDrafter& d, int64_t id, const std::vector<int32_t>& rec,
                                 int64_t prompt) {
  d.expect(id, rec);
  int64_t accepted = 0, rejections = 0;
  for (int64_t n = prompt; n < int64_t(rec.size()) - 1;) {
    std::vector<DraftQuery> q = {{id, std::span<const int32_t>(rec).first(size_t(n)), 4}};
    std::vector<std::vector<int32_t>> out;
    d.propose(q, out);
    EXPECT_EQ(out[0].size(), std::min<size_t>(4, rec.size() - size_t(n)));
    int64_t a = 0;
    while (a < int64_t(out[0].size()) && out[0][size_t(a)] == rec[size_t(n + a)]) ++a;
    accepted += a;
    rejections += a < int64_t(out[0].size());
    for (int64_t j = a; j < int64_t(out[0].size()); ++j)
      if (j == a) EXPECT_NE(out[0][size_t(j)], rec[size_t(n + j)]) << "a corrupted token differs from the record";
    n += a + 1;
  }
  return {accepted, rejections};
}

TEST(AcceptanceControlledDrafter, AcceptsNearAlphaPerToken) {
  for (double alpha : {0.0, 0.3, 0.7, 0.9, 1.0}) {
    AcceptanceControlledDrafter d(4, alpha, 50, 11);
    int64_t acc = 0, rej = 0;
    for (int64_t id = 0; id < 40; ++id) {
      auto [a, r] = walk(d, id, record(600, uint32_t(id)), 10);
      acc += a;
      rej += r;
    }
    const double rate = double(acc) / double(acc + rej);
    EXPECT_NEAR(rate, alpha, 0.02) << "alpha " << alpha << ": " << acc << " accepted, " << rej << " rejected";
    EXPECT_EQ(d.num_diverged(), 0);
  }
}

TEST(AcceptanceControlledDrafter, KeepsDraftingAfterDivergenceWhenAsked) {
  // The recording pass of the bench: every step gets its k drafts, on or off the record.
  const std::vector<int32_t> rec = record(40, 3);
  AcceptanceControlledDrafter d(3, 0.0, 50, 7);
  d.set_stop_on_divergence(false);
  d.expect(1, rec);
  std::vector<int32_t> off(rec.begin(), rec.begin() + 21);
  off.back() = rec[20] + 1;
  std::vector<std::vector<int32_t>> out;
  for (int step = 0; step < 2; ++step) {
    d.propose(std::vector<DraftQuery>{{1, off, 3}}, out);
    ASSERT_EQ(out[0].size(), 3u) << "step " << step;
    for (size_t j = 0; j < 3; ++j) EXPECT_NE(out[0][j], rec[21 + j]) << "alpha 0 corrupts every draft";
  }
  EXPECT_EQ(d.num_diverged(), 1) << "counted once";
  d.propose(std::vector<DraftQuery>{{1, std::span<const int32_t>(rec).first(39), 3}}, out);
  EXPECT_EQ(out[0].size(), 1u) << "no drafts past the record's end";
}

TEST(AcceptanceControlledDrafter, DeterministicAndStopsOnDivergence) {
  const std::vector<int32_t> rec = record(40, 3);
  AcceptanceControlledDrafter a(3, 0.5, 50, 7), b(3, 0.5, 50, 7);
  a.expect(1, rec);
  b.expect(1, rec);
  std::vector<std::vector<int32_t>> oa, ob;
  const std::vector<DraftQuery> q = {{1, std::span<const int32_t>(rec).first(20), 3}};
  a.propose(q, oa);
  b.propose(q, ob);
  EXPECT_EQ(oa, ob) << "the corruption depends on (seed, sequence, position) only";
  std::vector<int32_t> off(rec.begin(), rec.begin() + 21);
  off.back() = rec[20] + 1;  // the sequence left its record
  a.propose(std::vector<DraftQuery>{{1, off, 3}}, oa);
  EXPECT_TRUE(oa[0].empty());
  EXPECT_EQ(a.num_diverged(), 1);
  a.propose(std::vector<DraftQuery>{{2, off, 3}}, oa);  // no record: no drafts
  EXPECT_TRUE(oa[0].empty());
  EXPECT_THROW(AcceptanceControlledDrafter(0, 0.5, 50, 0), UserError);
  EXPECT_THROW(AcceptanceControlledDrafter(2, 1.5, 50, 0), UserError);
  EXPECT_THROW(AcceptanceControlledDrafter(2, 0.5, 1, 0), UserError);
}

}  // namespace
}  // namespace nanovllm
