// The acceptance-controlled drafter (issue 46's benchmark mode, `nanovllm bench --spec-acceptance`):
// it proposes the target's own continuation, recorded from a run without speculation, with each
// proposed token corrupted (replaced by another token id) with probability 1 - alpha. Since the
// target emits exactly the recorded tokens (greedy, or sampled with the same seeds: outputs do not
// depend on speculation), a draft stands iff it was not corrupted and none before it was: the
// per-token acceptance probability is alpha, whatever the model's weights. So the verification
// machinery's speed-up can be measured at a chosen acceptance rate on random-weight models (real
// acceptance rates need real weights). A sequence whose tokens leave the recorded ones (numerical
// noise on a GPU) gets no drafts from then on (counted: num_diverged(); set_stop_on_divergence).
//
// Corruption is a function of (seed, sequence id, position) only, so a run is reproducible
// whatever shares its steps. With a `cost_of` drafter (a draft model), that one runs every step as
// it would (its passes, its KV cache kept in step) and its proposals are replaced: the speed-up of
// a draft model at a chosen acceptance rate.
#pragma once
#include <unordered_map>

#include "nanovllm/spec/drafter.h"

namespace nanovllm {

class AcceptanceControlledDrafter : public Drafter {
 public:
  // alpha in [0, 1]; vocab_size >= 2 (a corrupted token is another id in [0, vocab_size)).
  AcceptanceControlledDrafter(int64_t num_speculative_tokens, double alpha, int64_t vocab_size, uint64_t seed,
                              std::unique_ptr<Drafter> cost_of = nullptr);
  // The recorded tokens of sequence seq_id: its prompt then the target's output without speculation.
  void expect(int64_t seq_id, std::vector<int32_t> reference);
  void propose(std::span<const DraftQuery> queries, std::vector<std::vector<int32_t>>& out) override;
  void observe_prefill(std::span<const DraftQuery> queries) override {
    if (cost_of_) cost_of_->observe_prefill(queries);
  }
  void release(int64_t seq_id) override {
    refs_.erase(seq_id);
    if (cost_of_) cost_of_->release(seq_id);
  }
  int64_t num_speculative_tokens() const override { return k_; }
  int64_t num_diverged() const { return diverged_; }
  // Off: a sequence that left its record still gets its drafts (from the record, corrupted as
  // always). The pass that records the continuation of a GPU run uses it with alpha 0: every step
  // then verifies the same number of drafts as the measured pass will (each verify position a
  // decode row: the same arithmetic for a position whatever row it takes), so the measured pass
  // emits the recorded tokens exactly, where a record of plain decoding (other kernels' rounding)
  // is left within a few tokens on random weights.
  void set_stop_on_divergence(bool stop) { stop_on_divergence_ = stop; }
  double alpha() const { return alpha_; }

 private:
  struct Ref {
    std::vector<int32_t> tokens;
    bool diverged = false;
  };
  int64_t k_;
  double alpha_;
  int64_t vocab_;
  uint64_t seed_;
  int64_t diverged_ = 0;
  bool stop_on_divergence_ = true;
  std::unordered_map<int64_t, Ref> refs_;  // by sequence id
  std::unique_ptr<Drafter> cost_of_;
  std::vector<std::vector<int32_t>> discarded_;  // cost_of_'s proposals
};

}  // namespace nanovllm
