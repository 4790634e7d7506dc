// The acceptance-controlled drafter (controlled_drafter.h): recorded continuations, corrupted at
// rate 1 - alpha by a counter-based hash of (seed, sequence, position).
#include "nanovllm/spec/controlled_drafter.h"

#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

AcceptanceControlledDrafter::AcceptanceControlledDrafter(int64_t k, double alpha, int64_t vocab_size, uint64_t seed,
                                                         std::unique_ptr<Drafter> cost_of)
    : k_(k), alpha_(alpha), vocab_(vocab_size), seed_(seed), cost_of_(std::move(cost_of)) {
  if (k < 1 || !(alpha >= 0.0 && alpha <= 1.0) || vocab_size < 2)
    throw UserError(
        "acceptance-controlled drafter: needs num_speculative_tokens >= 1, alpha in [0, 1] and a "
        "vocabulary of at least 2 tokens (got " +
        std::to_string(k) + ", " + std::to_string(alpha) + ", " + std::to_string(vocab_size) + ")");
}

void AcceptanceControlledDrafter::expect(int64_t seq_id, std::vector<int32_t> reference) {
  refs_[seq_id] = Ref{std::move(reference), false};
}

void AcceptanceControlledDrafter::propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) {
  if (cost_of_) cost_of_->propose(queries, discarded_);
  out.assign(queries.size(), {});
  for (size_t i = 0; i < queries.size(); ++i) {
    const DraftQuery& q = queries[i];
    auto it = refs_.find(q.seq_id);
    if (it == refs_.end() || (it->second.diverged && stop_on_divergence_)) continue;
    Ref& ref = it->second;
    const int64_t n = int64_t(q.tokens.size());
    // The verified tokens grow by what was accepted: checking the newest one suffices while they
    // follow the record (every earlier one was checked when it was newest).
    if (n == 0 || n > int64_t(ref.tokens.size())) continue;
    if (!ref.diverged && q.tokens[size_t(n - 1)] != ref.tokens[size_t(n - 1)]) {
      ref.diverged = true;
      ++diverged_;
      if (stop_on_divergence_) continue;
    }
    const int64_t end = std::min<int64_t>(int64_t(ref.tokens.size()), n + std::min(q.max_drafts, k_));
    for (int64_t pos = n; pos < end; ++pos) {
      const uint64_t h = splitmix(seed_ ^ splitmix(uint64_t(q.seq_id) * 0x100000001b3ull + uint64_t(pos)));
      const double u = double(h >> 11) * 0x1.0p-53;  // uniform in [0, 1)
      int32_t tok = ref.tokens[size_t(pos)];
      if (u >= alpha_)  // corrupted: any other id, uniformly
        tok = int32_t((int64_t(tok) + 1 + int64_t(splitmix(h) % uint64_t(vocab_ - 1))) % vocab_);
      out[i].push_back(tok);
    }
  }
}

}  // namespace nanovllm
