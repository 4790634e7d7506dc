// Default sampling parameters from the model's generation_config.json, as vLLM applies them
// (`--generation-config auto|vllm|DIR`, `--override-generation-config JSON`): temperature, top_k,
// top_p, min_p, repetition_penalty and max_new_tokens (-> max_tokens) become the defaults of
// requests that do not set them; a field the request sets wins.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/config/sampling_params.h"

namespace nanovllm {

struct GenerationDefaults {
  std::optional<double> temperature, top_p, min_p, repetition_penalty;
  std::optional<int64_t> top_k, max_tokens;

  bool empty() const { return as_json().empty(); }
  // {"temperature": 0.6, "top_k": 20, ...}: the fields set, with vLLM's names (max_tokens).
  nlohmann::json as_json() const;
  // vLLM's start-up line: "Default sampling parameters have been overridden by ...: {...}".
  std::string log_line() const;
  // The defaults as a SamplingParams to read a request into (fields the request sets win).
  // max_tokens is not set here: it also depends on the prompt (default_max_tokens).
  SamplingParams params() const;
  // The max_tokens of a request that gives none: `room` (what the context leaves) capped by
  // max_new_tokens, as vLLM does.
  int64_t default_max_tokens(int64_t room) const { return max_tokens ? std::min(room, *max_tokens) : room; }
};

// `mode`: "auto" (generation_config.json in model_dir, if any), "vllm" (none: vLLM's own
// defaults) or a directory holding generation_config.json. `override_json` (may be empty): a JSON
// object merged on top. Unknown keys are ignored as vLLM does (the file has many); bad values and
// malformed files throw UserError naming the file or flag.
GenerationDefaults load_generation_defaults(const std::string& mode, const std::string& model_dir,
                                            const std::string& override_json);

}  // namespace nanovllm
