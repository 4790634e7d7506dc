#include "nanovllm/sampling_params.h"

#include <cmath>

#include "nanovllm/utils/error.h"

namespace nanovllm {

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
  for (auto& s : stop)
    if (s.empty()) throw InvalidRequest("stop", "stop strings must not be empty");
}

}  // namespace nanovllm
