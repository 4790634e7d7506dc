// JSON in and out for the OpenAI / vLLM endpoints, independent of the HTTP library: request
// bodies -> validated GenerationRequests (token ids + SamplingParams), outputs -> response and
// stream-chunk objects. Every problem throws ApiError naming the field at fault.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/llm.h"
#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

using ojson = nlohmann::ordered_json;  // keeps the client's key order (chat templates render it)

// The text of a response body or stream event: compact, invalid UTF-8 replaced (never a throw).
inline std::string json_text(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// What the protocol layer needs to know about the served model. Read-only after start-up, so
// HTTP threads may use it concurrently (tokenizer and chat template are thread-safe for reads).
struct ModelInfo {
  const LLM* llm = nullptr;
  std::string name;  // served model name
  std::string root;  // --model as given
  int64_t max_model_len = 0;
  // No tokenizer (serve --skip-tokenizer-init): prompts must be token ids, and every choice and
  // stream chunk carries the generated "token_ids" (its text stays empty).
  bool token_ids_only = false;
};

enum class Endpoint { Completions, ChatCompletions };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts;  // one choice per prompt
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: the prompt before each choice's text (openai_logprobs.h)
};

// Body -> JSON object. Invalid UTF-8 and malformed JSON are 400s naming the byte offset.
ojson parse_body(const std::string& body);
// 404 when "model" names another model (absent is fine, as in vLLM).
void check_model(const ojson& body, const ModelInfo& m);

GenerationRequest parse_completion_request(const ojson& body, const ModelInfo& m);
GenerationRequest parse_chat_request(const ojson& body, const ModelInfo& m);
ojson tokenize_response(const ojson& body, const ModelInfo& m);    // POST /tokenize
ojson detokenize_response(const ojson& body, const ModelInfo& m);  // POST /detokenize
ojson models_response(const ModelInfo& m, int64_t created);        // GET /v1/models

// Identity shared by the response and all chunks of one request.
struct ResponseMeta {
  Endpoint endpoint;
  std::string id;
  int64_t created;
  std::string model;
  bool with_token_ids = false;  // add "token_ids" to choices and chunks (ModelInfo::token_ids_only)
};

struct ChoiceResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  ojson logprobs;         // null unless the request asked (openai_logprobs.h)
  ojson prompt_logprobs;  // shown only when the request asked
};

ojson usage_json(int64_t prompt_tokens, int64_t completion_tokens);
ojson full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices, const ojson& usage);
// A stream chunk for one choice. Chat: `delta` is {"role"} / {"content"} / {}; completions use
// delta["content"] as "text". finish_reason empty = null. `token_ids`: the chunk's new tokens,
// shown when meta.with_token_ids.
ojson stream_chunk(const ResponseMeta& meta, int index, const ojson& delta, const std::string& finish_reason,
                   const std::vector<int32_t>& token_ids = {}, const ojson& logprobs = nullptr);
ojson usage_chunk(const ResponseMeta& meta, const ojson& usage);

}  // namespace nanovllm::server
