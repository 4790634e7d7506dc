// A model of one engine step's wall time, learnt online, for the latency-target scheduler
// (scheduler.h, EngineConfig::target_itl_ms).
//
// A step's time is modelled as linear in six features of its batch:
//   seconds = c0                                   (launch, sampling, host work: every step)
//           + c1 * [the step computes prompt tokens] (an eager forward instead of a graph replay)
//           + c2 * decode rows                      (one token each)
//           + c3 * prompt tokens                    (the GEMMs: 2 x parameters flops each)
//           + c4 * context of the decode rows       (decode attention reads each row's KV once)
//           + c5 * query-key pairs of the prompt chunks (prefill attention: a chunk of n tokens
//                                                    starting at position s has n*s + n(n+1)/2)
// The GEMMs' time is flat (weight reads) at small batches and linear past it; the fit is local
// (older steps are forgotten: each step's weight decays by `forgetting`, about a 100-step
// memory), and the steps the scheduler makes under a target are the ones near the target, which
// is where the model is asked. Fitting is ridge regression towards a prior (the seed): the
// exponentially weighted normal equations (X'WX + L) c = X'Wy + L c_prior, re-solved after each
// observation (6 x 6), coefficients clamped at zero. The prior matters only until a few steps of
// each kind are seen: it comes from the start-up warm-up's time per token (ModelRunner) and the
// model's shape (the ratio of attention flops per pair to linear flops per token).
#pragma once
#include <array>
#include <cstdint>

#include "nanovllm/config/config.h"

namespace nanovllm {

struct StepShape {
  int64_t decode_rows = 0;
  int64_t prefill_tokens = 0;
  double decode_context = 0;  // sum of the decode rows' context lengths (tokens)
  double prefill_pairs = 0;   // sum over prompt chunks of query-key pairs

  // Adds a prompt chunk of n tokens whose first token sits at position `start`.
  void add_chunk(int64_t n, int64_t start);
  void add_decode(int64_t context_len);
};

class StepCostModel {
 public:
  static constexpr int kFeatures = 6;
  using Vec = std::array<double, kFeatures>;

  // prior: the coefficients before any step is seen, in seconds per unit of each feature.
  explicit StepCostModel(const Vec& prior, double forgetting = 0.99);

  // A prior from a timed prompt step of `tokens` tokens (seconds) and the ratio of one
  // query-key pair's cost to one token's linear cost (attention_flops_per_pair / linear flops).
  static Vec prior_from(double seconds_per_token, double pair_to_token_ratio);
  // The prior for model `m`: the ratio from its shape; seconds per token as measured (the
  // warm-up's, > 0), else from its flops at a nominal 1e12 flop/s.
  static Vec prior_for(const ModelConfig& m, double measured_seconds_per_token);

  double predict(const StepShape& s) const;
  void observe(const StepShape& s, double seconds);
  // The most prompt tokens of one chunk starting at position `start` that `base` (the step so
  // far) can take with its predicted time at most `target_s`; 0 when none fit.
  int64_t max_chunk(const StepShape& base, int64_t start, double target_s, int64_t limit) const;

  const Vec& coefficients() const { return coef_; }
  int64_t num_observed() const { return observed_; }

 private:
  static Vec features(const StepShape& s);
  void solve();

  Vec prior_, coef_;
  double forgetting_;
  std::array<std::array<double, kFeatures>, kFeatures> xtx_{};  // weighted, in scaled units
  Vec xty_{};
  int64_t observed_ = 0;
};

}  // namespace nanovllm
