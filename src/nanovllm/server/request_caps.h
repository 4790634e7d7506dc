// Bounds on what one request may ask, checked while it is parsed (before anything is copied per
// choice or sent to the engine; the stop strings before their automaton is built), so that a
// request's cost stays in proportion to its size: stop strings (count and bytes), logit_bias
// entries (at most the vocabulary), the request id's length, prompt logprobs (prompt tokens x (k + 1) entries), and the
// text that gets tokenized (prompt strings and rendered chat templates: kMaxBytesPerToken x max_model_len). Each
// refusal is a 400 naming the field and the limit (and the setting that raises it).
#pragma once
#include <cstdint>
#include <string>

#include "nanovllm/config/config.h"
#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// Text longer than this many bytes per token of max_model_len is refused before tokenizing. A
// prompt must fit max_model_len tokens to be served; English and code average ~4 bytes per token,
// and the longest tokens of common vocabularies (runs of spaces, '=' or '-') are 16-64 bytes,
// so only text made mostly of such runs averages more than 32 per token. Refusing past it bounds
// tokenizing (and template output) at 32 x max_model_len bytes: ~4 MB for a 128K context.
inline constexpr int64_t kMaxBytesPerToken = 32;

RequestCaps request_caps(const EngineConfig& cfg, int64_t vocab_size);

// The most bytes of text one prompt (or one rendered chat) may have.
int64_t max_text_bytes(const ModelInfo& m);
// 400 naming `param` when `bytes` exceeds max_text_bytes(m).
void check_text_bytes(int64_t bytes, const std::string& param, const ModelInfo& m);
// 400 naming request_id when the id is longer than --max-request-id-length.
void check_request_id(const std::string& id, const ModelInfo& m);
// The request's `stop` field (string or list), before it is read: the stop strings' automaton is
// built as they are read, so their count and bytes are bounded first.
void check_stop_caps(const ojson* stop, const ModelInfo& m);
// logit_bias and prompt logprobs of a parsed request (prompts tokenized).
void check_request_caps(const GenerationRequest& r, const ModelInfo& m);

}  // namespace nanovllm::server
