// The n-gram drafter (vLLM's "ngram" method, prompt lookup decoding): for a sequence of N tokens,
// the longest suffix of n tokens (prompt_lookup_min <= n <= prompt_lookup_max) that also occurred
// earlier proposes the tokens that followed that earlier occurrence (its most recent one), up to
// max_drafts of them and never past the end of the tokens; no match: no drafts.
//
// Speed: no scan of the context per step. Each sequence keeps a hash index of its n-grams,
// (n, tokens[i-n+1..i]) -> the latest end position i, extended as tokens are appended: a new
// token adds its (max - min + 1) n-grams, hashed backwards from it in O(prompt_lookup_max). A
// proposal hashes the suffix for each n (longest first) and checks the hit's tokens (hash
// collisions), so it costs O(prompt_lookup_max^2) whatever the context's length: a 100K-token
// prompt is indexed once (O(N * max) at its first proposal), never rescanned (vLLM's KMP over the
// reversed tokens is O(N) every step).
#pragma once
#include <unordered_map>

#include "nanovllm/spec/drafter.h"

namespace nanovllm {

class NgramDrafter : public Drafter {
 public:
  NgramDrafter(int64_t num_speculative_tokens, int64_t lookup_min, int64_t lookup_max);
  void propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) override;
  void release(int64_t seq_id) override { index_.erase(seq_id); }
  int64_t num_speculative_tokens() const override { return k_; }
  // One sequence's drafts (propose for one query).
  std::vector<int32_t> propose_one(const DraftQuery& q);
  int64_t num_indexed_sequences() const { return int64_t(index_.size()); }

 private:
  struct Index {
    int64_t indexed = 0;                           // n-grams ending at positions < indexed are in `latest`
    std::unordered_map<uint64_t, int64_t> latest;  // hash of (n, n-gram) -> its latest end position
  };
  // Adds the n-grams ending at positions [ix.indexed, upto) of tokens.
  void extend(Index& ix, std::span<const int32_t> tokens, int64_t upto) const;

  int64_t k_, min_, max_;
  std::unordered_map<int64_t, Index> index_;  // by sequence id
};

}  // namespace nanovllm
