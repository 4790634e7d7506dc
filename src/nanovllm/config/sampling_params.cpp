#include "nanovllm/config/sampling_params.h"

#include <cmath>
#include <cstdio>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {
std::string num(float v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", double(v));
  return buf;
}
}  // namespace

void SamplingParams::validate() const {
  if (!(temperature >= 0.0f) || std::isinf(temperature))
    throw InvalidRequest("temperature",
                         "temperature must be a finite number >= 0 (got " + std::to_string(temperature) + ")");
  if (!(top_p > 0.0f && top_p <= 1.0f))
    throw InvalidRequest("top_p", "top_p must be in (0, 1] (got " + std::to_string(top_p) + ")");
  if (!(min_p >= 0.0f && min_p <= 1.0f))
    throw InvalidRequest("min_p", "min_p must be in [0, 1] (got " + std::to_string(min_p) + ")");
  if (top_k < -1)
    throw InvalidRequest("top_k", "top_k must be -1, 0 (off) or positive (got " + std::to_string(top_k) + ")");
  if (max_tokens <= 0)
    throw InvalidRequest("max_tokens", "max_tokens must be at least 1 (got " + std::to_string(max_tokens) + ")");
  // vLLM's ranges and messages (vllm/sampling_params.py _verify_args).
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    throw InvalidRequest("presence_penalty", "presence_penalty must be in [-2, 2], got " + num(presence_penalty) + ".");
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    throw InvalidRequest("frequency_penalty",
                         "frequency_penalty must be in [-2, 2], got " + num(frequency_penalty) + ".");
  if (!(repetition_penalty > 0.0f) || std::isinf(repetition_penalty))
    throw InvalidRequest("repetition_penalty",
                         "repetition_penalty must be greater than zero, got " + num(repetition_penalty) + ".");
  if (min_tokens < 0)
    throw InvalidRequest("min_tokens",
                         "min_tokens must be greater than or equal to 0, got " + std::to_string(min_tokens) + ".");
  if (min_tokens > max_tokens)
    throw InvalidRequest("min_tokens", "min_tokens must be less than or equal to max_tokens=" +
                                           std::to_string(max_tokens) + ", got " + std::to_string(min_tokens) + ".");
  for (auto& [id, bias] : logit_bias) {
    if (id < 0) throw InvalidRequest("logit_bias", "logit_bias: token id " + std::to_string(id) + " is negative");
    if (!std::isfinite(bias))
      throw InvalidRequest("logit_bias", "logit_bias: the bias of token " + std::to_string(id) + " is not finite");
  }
  if (logprobs && *logprobs < 0)
    throw InvalidRequest("logprobs", "logprobs must be non-negative, got " + std::to_string(*logprobs) + ".");
  if (prompt_logprobs && *prompt_logprobs < 0)
    throw InvalidRequest("prompt_logprobs",
                         "prompt_logprobs must be non-negative, got " + std::to_string(*prompt_logprobs) + ".");
  if (n < 1) throw InvalidRequest("n", "n must be at least 1, got " + std::to_string(n) + ".");
  for (int32_t id : allowed_token_ids)
    if (id < 0) throw InvalidRequest("allowed_token_ids", "allowed_token_ids contains out-of-vocab token id!");
  for (auto& w : bad_words)
    if (w.empty()) throw InvalidRequest("bad_words", "bad_words must not contain empty words");
  if (!detokenize && !stop.empty())
    throw InvalidRequest("stop",
                         "stop strings are only supported when detokenize is True. Set detokenize=True "
                         "to use stop.");
  structured_outputs.validate();
}

}  // namespace nanovllm
