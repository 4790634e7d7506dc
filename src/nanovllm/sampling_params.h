// Per-request sampling parameters (vLLM's names and defaults).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace nanovllm {

struct SamplingParams {
  float temperature = 1.0f;      // 0 = greedy
  int top_k = 0;                 // 0 or -1 = off
  float top_p = 1.0f;            // (0, 1]
  float min_p = 0.0f;            // [0, 1]
  std::optional<uint64_t> seed;  // same seed, same output
  int max_tokens = 16;
  bool ignore_eos = false;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop;  // stop strings (need a tokenizer)
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;  // keep the stop string (or stop token's text) in the text

  // Throws InvalidRequest naming the field.
  void validate() const;
  bool greedy() const { return temperature == 0.0f; }
};

enum class FinishReason : uint8_t { None, Stop, Length, Abort };
inline const char* finish_reason_str(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Abort: return "abort";
    default: return "";
  }
}

}  // namespace nanovllm
