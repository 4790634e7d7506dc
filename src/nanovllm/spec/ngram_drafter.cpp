// The n-gram drafter (ngram_drafter.h): an incremental hash index of each sequence's n-grams.
#include "nanovllm/spec/ngram_drafter.h"

#include <algorithm>
#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

// The hash of an n-gram ending at `end` (inclusive) for each n in [1, most], built backwards:
// h(n) = mix(h(n - 1), tokens[end - n + 1]), each salted with n at lookup.
uint64_t keyed(uint64_t h, int64_t n) { return mix(h, uint64_t(n) * 0x100000001b3ull); }

}  // namespace

NgramDrafter::NgramDrafter(int64_t k, int64_t lookup_min, int64_t lookup_max)
    : k_(k), min_(lookup_min), max_(lookup_max) {
  if (k < 1 || lookup_min < 1 || lookup_min > lookup_max)
    throw Error(
        "ngram drafter: needs num_speculative_tokens >= 1 and 1 <= prompt_lookup_min <= prompt_lookup_max "
        "(got " +
        std::to_string(k) + ", " + std::to_string(lookup_min) + ", " + std::to_string(lookup_max) + ")");
}

void NgramDrafter::extend(Index& ix, std::span<const int32_t> tokens, int64_t upto) const {
  for (int64_t end = ix.indexed; end < upto; ++end) {
    uint64_t h = 0;
    for (int64_t n = 1; n <= std::min(max_, end + 1); ++n) {
      h = mix(h, uint64_t(uint32_t(tokens[size_t(end - n + 1)])));
      if (n >= min_) ix.latest[keyed(h, n)] = end;
    }
  }
  ix.indexed = std::max(ix.indexed, upto);
}

std::vector<int32_t> NgramDrafter::propose_one(const DraftQuery& q) {
  const int64_t N = int64_t(q.tokens.size());
  const int64_t want = std::min(q.max_drafts, k_);
  if (want <= 0 || N < min_ + 1) return {};
  Index& ix = index_[q.seq_id];
  if (ix.indexed > N) ix = Index{};  // not the tokens it indexed (a caller's bug): start over
  // Earlier occurrences end at most at N - 2 (a token must follow them).
  extend(ix, q.tokens, N - 1);
  // The suffix's hashes, longest match first.
  std::vector<uint64_t> suffix(size_t(std::min(max_, N - 1) + 1), 0);
  uint64_t h = 0;
  for (int64_t n = 1; n < int64_t(suffix.size()); ++n) {
    h = mix(h, uint64_t(uint32_t(q.tokens[size_t(N - n)])));
    suffix[size_t(n)] = keyed(h, n);
  }
  for (int64_t n = int64_t(suffix.size()) - 1; n >= min_; --n) {
    auto it = ix.latest.find(suffix[size_t(n)]);
    if (it == ix.latest.end()) continue;
    const int64_t end = it->second;
    if (!std::equal(q.tokens.begin() + (end - n + 1), q.tokens.begin() + (end + 1), q.tokens.begin() + (N - n)))
      continue;  // a hash collision
    const int64_t from = end + 1, to = std::min(N, from + want);
    return {q.tokens.begin() + from, q.tokens.begin() + to};
  }
  return {};
}

void NgramDrafter::propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) {
  out.resize(queries.size());
  for (size_t i = 0; i < queries.size(); ++i) out[i] = propose_one(queries[i]);
}

}  // namespace nanovllm
