// Per-request sampling parameters (vLLM's names and defaults). The lists a request may make large
// (stop strings, logit_bias, token id lists, bad words) are Shared: immutable once set, and every
// copy (the n choices, the engine's sequences, the server's records) reads one allocation, so
// copying SamplingParams is cheap whatever the request's size. Set such a list whole
// (`sp.stop = {"\n"};`, `sp.logit_bias = std::move(pairs);`) and read it as a const container.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "nanovllm/config/pooling_config.h"
#include "nanovllm/config/shared_value.h"
#include "nanovllm/config/stop_strings.h"
#include "nanovllm/config/structured_outputs.h"

namespace nanovllm {

// Temperatures in (0, kMinTemperature) are raised to it, as vLLM does (its _MAX_TEMP): dividing the
// logits by ~1e-38 turns them into inf and the sample into garbage.
inline constexpr float kMinTemperature = 1e-2f;

struct SamplingParams {
  float temperature = 1.0f;      // 0 = greedy
  int top_k = 0;                 // 0 or -1 = off
  float top_p = 1.0f;            // (0, 1]
  float min_p = 0.0f;            // [0, 1]
  std::optional<uint64_t> seed;  // same seed, same output
  int max_tokens = 16;
  bool ignore_eos = false;
  Shared<std::vector<int32_t>> stop_token_ids;
  Shared<StopStrings> stop;  // stop strings (need a tokenizer), with their automaton
  bool skip_special_tokens = true;
  bool include_stop_str_in_output = false;  // keep the stop string (or stop token's text) in the text
  // Logits processing before temperature, as vLLM V1 (backends/logits_processing.h has the formulas).
  float presence_penalty = 0.0f;                              // [-2, 2], over the output tokens
  float frequency_penalty = 0.0f;                             // [-2, 2], over the output tokens
  float repetition_penalty = 1.0f;                            // > 0, over prompt and output tokens
  Shared<std::vector<std::pair<int32_t, float>>> logit_bias;  // (token id, bias in [-100, 100])
  int min_tokens = 0;  // EOS and stop_token_ids are masked until this many tokens are generated
  // Logprobs of each generated token and of the top `logprobs` candidates (0: the chosen token
  // only); none when unset. The engine refuses more than its max_logprobs.
  std::optional<int> logprobs;
  // Logprobs of each prompt token after the first (given the tokens before it) and the top
  // `prompt_logprobs` candidates, from the raw logits; such a prompt is computed, not read from
  // the prefix cache.
  std::optional<int> prompt_logprobs;
  int n = 1;  // parallel samples of one prompt (the request tracker expands them into n sequences)
  // vLLM's request priority: with --scheduling-policy priority, lower values are served first
  // (then arrival) and preempted last; with fcfs, only 0 is accepted (as vLLM).
  int priority = 0;
  // Only these tokens may be sampled (vLLM's allowed_token_ids); empty: all. Ids are checked
  // against the vocabulary by the engine.
  Shared<std::vector<int32_t>> allowed_token_ids;
  // Words that must not be generated (vLLM's bad_words): the front end tokenizes each, with and
  // without a leading space, into bad_words_token_ids; the engine bans a sequence's last token
  // whenever the tokens before it were just generated.
  Shared<std::vector<std::string>> bad_words;
  Shared<std::vector<std::vector<int32_t>>> bad_words_token_ids;
  bool detokenize = true;  // false: token ids only, no text (stop strings then refused)
  // The output conforms to a JSON schema, regex, choice or grammar (each step's tokens masked).
  StructuredOutputs structured_outputs;
  // Set: a pooling request (embed / classify / score) to a pooling engine: its prompt is computed and
  // pooled, nothing is generated (the sampling fields above are not read).
  std::optional<PoolingParams> pooling;

  // Throws InvalidRequest naming the field.
  void validate() const;
  bool greedy() const { return temperature == 0.0f; }
  // Any of the logits processors above is active (else sampling takes the plain path).
  bool processes_logits() const {
    return presence_penalty != 0.0f || frequency_penalty != 0.0f || repetition_penalty != 1.0f || !logit_bias.empty() ||
           min_tokens > 0;
  }
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

// Why a choice that finished with "stop" stopped, as vLLM reports it: the stop string that matched,
// or the token of the request's stop_token_ids that ended it; none for EOS, a length or an abort.
using StopReason =
    std::variant<std::monostate, int32_t, std::string>;  // vLLM's stop_reason: none, a stop token id, a stop string

}  // namespace nanovllm
