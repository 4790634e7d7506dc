// The OpenAI fields of parallel samples and logprobs, both ways: `n`, `best_of`, `logprobs`,
// `top_logprobs`, `prompt_logprobs` of a request -> SamplingParams; the engine's TokenLogprobs ->
// the "logprobs" value of a choice or stream chunk, in vLLM's shapes:
//   completions: {"text_offset": [...], "token_logprobs": [...], "tokens": [...],
//                 "top_logprobs": [{token text: logprob}, ...]}  (sampled token + top N per step)
//   chat:        {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
//                 "bytes"}]}]}  (the first N of sampled token + top N, as vLLM lists them)
// Token texts are each id decoded alone (special tokens kept), as vLLM's detokenizer does for
// logprobs; logprobs are floored at -9999.0 (-inf cannot be JSON), as vLLM does.
#pragma once
#include <vector>

#include "nanovllm/ops/logits_processing.h"
#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// Reads n, best_of (refused unless equal to n), logprobs (completions: an integer; chat: a boolean
// with top_logprobs), prompt_logprobs (refused: not implemented) into r.params.
void read_choice_fields(const ojson& body, GenerationRequest& r);

// The "logprobs" of tokens `ids` with their `lps` (same length): `num_top` is the request's N;
// `text_offset` (completions) is where the first token's text starts in the choice's text.
ojson logprobs_json(const ModelInfo& m, Endpoint ep, int num_top, const std::vector<int32_t>& ids,
                    const std::vector<TokenLogprobs>& lps, int64_t text_offset);

// Characters (code points) of UTF-8 text: Python's len(), which vLLM's text offsets count.
int64_t text_chars(const std::string& s);

}  // namespace nanovllm::server
