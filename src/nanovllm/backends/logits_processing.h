// Logits processing before temperature, with vLLM V1's formulas (vllm/v1/sample/sampler.py:
// min_tokens, then logit_bias, then apply_penalties), and the logprobs a request may ask for.
// Per row of logits l [V], in this order:
//   min_tokens: l[t] = -inf for the stop ids (EOS unless ignore_eos, stop_token_ids) while fewer
//               than min_tokens tokens have been generated;
//   logit_bias: l[t] += bias[t];
//   repetition: for t in prompt or output tokens: l[t] = l[t] > 0 ? l[t] * (1 / r) : l[t] * r;
//   frequency:  l[t] -= f * count of t in the output;
//   presence:   l[t] -= p * (t in the output).
// Every adjustment touches only the tokens a row names, so a row is described by its distinct
// tokens (LogitAdjust): the backends apply the entries (each token once, no order between them)
// and never look at a row without any.
#pragma once
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "nanovllm/backends/sampling_noise.h"  // NANOVLLM_HD
#include "nanovllm/config/sampling_params.h"

namespace nanovllm {

// What happens to one token's logit (flags: kSeen = in the prompt or output, kBanned = min_tokens).
struct LogitAdjust {
  int32_t token = 0;
  int32_t output_count = 0;  // occurrences in the output
  int32_t flags = 0;
  float bias = 0;
};
inline constexpr int32_t kAdjustSeen = 1, kAdjustBanned = 2;

// One token's logit after its adjustments, in vLLM's order (the CPU and the CUDA kernel both use it).
NANOVLLM_HD float adjust_logit(float l, const LogitAdjust& a, float rep, float inv_rep, float freq, float pres) {
  if (a.flags & kAdjustBanned) l = -INFINITY;
  l += a.bias;
  if (a.flags & kAdjustSeen) l = l > 0 ? l * inv_rep : l * rep;
  l -= freq * float(a.output_count);
  if (a.output_count > 0) l -= pres;
  return l;
}

struct LogitsProcessing {
  float repetition_penalty = 1, frequency_penalty = 0, presence_penalty = 0;
  std::vector<LogitAdjust> entries;  // distinct tokens
};

// Builds a row's entries from a sequence's tokens. `stamp` and `slot` are scratch of the
// vocabulary's size that callers reuse across rows (no allocation per step; O(tokens) per row).
class LogitsProcessingBuilder {
 public:
  explicit LogitsProcessingBuilder(int64_t vocab) : stamp_(size_t(vocab), 0), slot_(size_t(vocab), 0) {}
  // tokens: the sequence's prompt (its first num_prompt tokens) then its output; eos_ids: the
  // model's EOS ids (masked with the stop ids until min_tokens unless ignore_eos). Throws when
  // tokens hold less than the prompt (a prompt chunk: it samples no token to process).
  LogitsProcessing build(const SamplingParams& p, const std::vector<int32_t>& tokens, int64_t num_prompt,
                         const std::vector<int32_t>& eos_ids);

 private:
  LogitAdjust& entry(LogitsProcessing& lp, int32_t token);
  std::vector<uint32_t> stamp_;  // row generation that last touched a token
  std::vector<int32_t> slot_;    // its entry index in that row
  uint32_t gen_ = 0;
};

// In place on one row of F32 logits [V] (the CPU backend; the CUDA kernel does the same per entry).
void apply_logits_processing(float* logits, int64_t V, const LogitsProcessing& p);

// Structured output's mask (SamplingRow::allowed): whether token t may be sampled.
NANOVLLM_HD bool token_allowed(const uint32_t* allowed, int64_t t) { return (allowed[t >> 5] >> (t & 31)) & 1u; }
// In place on one row of F32 logits [V]: the tokens `allowed` does not have become -inf (before
// apply_logits_processing, whose adjustments keep -inf at -inf).
void apply_allowed_mask(float* logits, int64_t V, const uint32_t* allowed);

// Logprobs of one sampled token: its log-softmax value and the top N (token id, logprob), highest
// first (lower id first on ties).
struct TokenLogprobs {
  float logprob = 0;
  int32_t rank = 0;  // 1 + how many entries are larger (vLLM's rank)
  std::vector<std::pair<int32_t, float>> top;
};

// log_softmax(logits * scale) (double sums) for `token` and the top `n`: the CPU reference.
TokenLogprobs row_logprobs(const float* logits, int64_t V, float scale, int32_t token, int n);

}  // namespace nanovllm
