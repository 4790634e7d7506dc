// JSON requests, shared by `generate --input FILE.jsonl` and the server: parsing with a nesting
// limit, integer fields that cannot wrap, and the request fields <-> SamplingParams. Problems
// throw InvalidRequest naming the field.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nanovllm/config/sampling_params.h"

namespace nanovllm {

// Deepest nesting of arrays and objects a request may have. Deeper documents are refused before
// they are parsed (utils/json_depth.h): copying, dumping or comparing them recurses once per
// level, and a body of 100 KB could otherwise nest 50,000 levels and overflow the stack.
inline constexpr size_t kMaxRequestJsonDepth = 256;

// `text` as JSON (nlohmann::json or nlohmann::ordered_json). Malformed JSON (a NUL byte
// included), numbers out of a double's range (1e400) and nesting deeper than
// kMaxRequestJsonDepth throw InvalidRequest("", ...).
template <class Json>
Json parse_request_json(std::string_view text);

// `v` as a 64-bit integer: not an integer (2.5, "3") or out of range (>= 2^63) throws
// InvalidRequest naming `param`.
template <class Json>
int64_t request_integer(const Json& v, const std::string& param);

// Reads the OpenAI/vLLM sampling fields present in `j` into `sp` (absent fields keep their
// value): temperature, top_p, top_k, min_p, seed, max_tokens (or max_completion_tokens), ignore_eos, stop (string or
// list), stop_token_ids, skip_special_tokens, include_stop_str_in_output, presence_penalty, frequency_penalty,
// repetition_penalty, logit_bias ({"id": bias}, clamped to [-100, 100]), min_tokens. Then validates. (`n` and
// `logprobs`, whose shapes differ between the endpoints, are the server's.)
template <class Json>
void read_sampling_fields(const Json& j, SamplingParams& sp);

}  // namespace nanovllm
