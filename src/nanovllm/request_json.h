// JSON request fields <-> SamplingParams, shared by `generate --input FILE.jsonl` and the server.
// Wrong types or values throw InvalidRequest naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include "nanovllm/sampling_params.h"

namespace nanovllm {

// Reads the OpenAI/vLLM sampling fields present in `j` into `sp` (absent fields keep their
// value): temperature, top_p, top_k, min_p, seed, max_tokens, ignore_eos, stop (string or list),
// stop_token_ids, skip_special_tokens. Then validates.
void read_sampling_fields(const nlohmann::json& j, SamplingParams& sp);

}  // namespace nanovllm
