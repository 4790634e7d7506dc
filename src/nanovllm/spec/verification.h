// Lossless verification of drafts: which proposed tokens stand, and the token that follows them.
//
// The target scores a row's k drafts d_0..d_{k-1} in one step: position j's distribution p_j is the
// target's given the sequence plus d_0..d_{j-1} (penalties, logit_bias, min_tokens, temperature and
// the top-k/top-p/min-p filters applied per position, as for any sampled token).
//
// rejection_sample(): Leviathan et al. / Chen et al. (vLLM's rejection_sampler): draft d_j, drawn
// from the drafter's q_j, stands with probability min(1, p_j(d_j) / q_j(d_j)); the first that does
// not is replaced by a draw from the residual max(0, p_j - q_j) normalized, and the step ends; when
// all k stand, a bonus token is drawn from p_k. Every emitted token then follows the target's
// distribution exactly, whatever q is. A deterministic drafter (n-gram) has q_j a point mass: d_j
// stands with probability p_j(d_j), else the replacement is drawn from p_j without d_j, renormalized.
//
// The engine's rule for point-mass drafts, accepted_prefix(): t_j is the token the target's own
// sampler draws at position j (greedy: the argmax; sampled: the seeded draw of backends/
// sampling_noise.h, a function of the request's seed, the position and the logits only); the drafts
// stand while d_j == t_j, and the emitted tokens are t_0..t_a (a: the drafts that stood). This is
// the rejection rule above with its randomness coupled to the sampler's: d_j stands with
// probability P(t_j = d_j) = p_j(d_j), and on rejection t_j is a draw from p_j conditioned on not
// being d_j, which is p_j without d_j, renormalized. It is stronger: the emitted tokens are the ones
// non-speculative decoding emits with the same seed, greedy or sampled, and the backends' samplers
// need nothing new (tests/unit/spec/test_verification.cpp checks both rules with chi-square tests).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace nanovllm {

// How many leading drafts equal the target's tokens (targets has one more entry than drafts).
int64_t accepted_prefix(std::span<const int32_t> drafts, std::span<const int32_t> targets);

struct RejectionResult {
  std::vector<int32_t> tokens;  // the drafts that stood, then the replacement or bonus token
  int64_t num_accepted = 0;     // drafts that stood (tokens.size() - 1)
};

// uniform(j, stream): independent uniforms in [0, 1) for position j; stream 0 decides acceptance,
// stream 1 draws the replacement or bonus token.
using UniformSource = std::function<double(int64_t j, int stream)>;

// p: [k + 1, V] target probabilities (rows sum to 1); q: [k, V] the drafter's, or empty for point
// masses at the drafts; drafts: [k]. Throws Error on inconsistent shapes or a draft outside [0, V).
RejectionResult rejection_sample(std::span<const float> p, std::span<const float> q, std::span<const int32_t> drafts,
                                 int64_t V, const UniformSource& uniform);

}  // namespace nanovllm
