// JSON in and out for the OpenAI / vLLM endpoints, independent of the HTTP library: request
// bodies -> validated GenerationRequests (token ids + SamplingParams), outputs -> response and
// stream-chunk objects. Every problem throws ApiError naming the field at fault.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/config/generation_defaults.h"
#include "nanovllm/config/structured_outputs_config.h"
#include "nanovllm/frontend/llm.h"
#include "nanovllm/output/output_processor.h"
#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

using ojson = nlohmann::ordered_json;  // keeps the client's key order (chat templates render it)

// The text of a response body or stream event: compact, invalid UTF-8 replaced (never a throw).
inline std::string json_text(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

// What one request may ask, so that its cost stays in proportion to its size (the settings
// --max-stop-strings ...; request_caps.h checks them).
struct RequestCaps {
  int64_t max_stop_strings = 128;
  int64_t max_stop_bytes = 16 << 10;
  int64_t max_request_id_length = 512;
  int64_t max_prompt_logprob_entries = 1 << 20;
  int64_t vocab_size = 0;  // logit_bias entries at most (0: unchecked)
};

// What the protocol layer needs to know about the served model. Read-only after start-up, so
// HTTP threads may use it concurrently (tokenizer and chat template are thread-safe for reads).
struct ModelInfo {
  const LLM* llm = nullptr;
  std::string name;                // served model name (the first --served-model-name): responses report it
  std::vector<std::string> names;  // every served name (name first): requests may use any
  std::string root;                // --model as given
  int64_t max_model_len = 0;
  // No tokenizer (serve --skip-tokenizer-init): prompts must be token ids, and every choice and
  // stream chunk carries the generated "token_ids" (its text stays empty).
  bool token_ids_only = false;
  // Output parsing for chat (vLLM's flags): --reasoning-parser, --tool-call-parser (used for
  // tool_choice "auto" only with --enable-auto-tool-choice). Empty: none.
  std::string reasoning_parser;
  std::string tool_call_parser;
  bool enable_auto_tool_choice = false;
  GenerationDefaults defaults;              // the generation config's sampling defaults
  StructuredOutputsConfig structured;       // --structured-outputs-config (request defaults, reasoning)
  std::string response_role = "assistant";  // --response-role
  bool force_include_usage = false;         // --enable-force-include-usage: streams end with usage
  bool has_chat_template = true;            // the tokenizer's or --chat-template (else chat needs the request's)
  ojson default_chat_template_kwargs = ojson::object();  // --default-chat-template-kwargs
  RequestCaps caps;                                      // bounds on one request (request_caps.h)
};

enum class Endpoint { Completions, ChatCompletions };

struct GenerationRequest {
  Endpoint endpoint = Endpoint::Completions;
  std::vector<std::vector<int32_t>> prompts;  // one choice per prompt
  SamplingParams params;
  bool stream = false;
  bool include_usage = false;     // stream_options.include_usage
  bool continuous_usage = false;  // stream_options.continuous_usage_stats: usage in every chunk
  bool echo = false;              // completions: the prompt before each choice's text (openai_logprobs.h)
  // Chat with echo: the last message's content, put before each choice's content (vLLM echoes it
  // when that message has the role of the answer: an assistant turn being continued).
  std::string chat_echo;
  output::OutputParsers parsers;  // reasoning / tool-call parsing of the answer (chat)
  std::string request_id;         // the client's (request_id, X-Request-Id): the response id's suffix
  // The field that asked for params.structured_outputs (response_format, guided_json, tool_choice,
  // ...): the param of a 400 for a grammar the engine cannot compile. Empty: none.
  std::string structured_field;
};

// Body -> JSON object. Invalid UTF-8 and malformed JSON are 400s naming the byte offset.
ojson parse_body(const std::string& body);
// `name` is one of the served model names (--served-model-name, all of them).
bool serves(const ModelInfo& m, const std::string& name);
// 404 when "model" names another model (absent is fine, as in vLLM).
void check_model(const ojson& body, const ModelInfo& m);

GenerationRequest parse_completion_request(const ojson& body, const ModelInfo& m);
GenerationRequest parse_chat_request(const ojson& body, const ModelInfo& m);
ojson tokenize_response(const ojson& body, const ModelInfo& m);                // POST /tokenize
ojson detokenize_response(const ojson& body, const ModelInfo& m);              // POST /detokenize
ojson models_response(const ModelInfo& m, int64_t created);                    // GET /v1/models: every served name
ojson model_card(const ModelInfo& m, const std::string& id, int64_t created);  // GET /v1/models/{id}

// Identity shared by the response and all chunks of one request.
struct ResponseMeta {
  Endpoint endpoint;
  std::string id;
  int64_t created;
  std::string model;
  bool with_token_ids = false;     // add "token_ids" to choices and chunks (ModelInfo::token_ids_only)
  output::OutputParsers parsers;   // chat messages get reasoning_content / tool_calls
  std::string role = "assistant";  // chat: the message's role (--response-role)
};

struct ChoiceResult {
  std::string text;
  std::string reasoning;
  std::vector<output::ToolCall> tool_calls;
  std::vector<int32_t> token_ids;
  std::string finish_reason;
  ojson stop_reason;      // null, a stop token id or a stop string (vLLM's)
  ojson logprobs;         // null unless the request asked (openai_logprobs.h)
  ojson prompt_logprobs;  // shown only when the request asked
};

// The finish_reason of a choice: "tool_calls" when its answer called tools, as vLLM.
std::string finish_reason_of(FinishReason r, bool called_tools);
// vLLM's stop_reason: null, the stop token id, or the stop string.
ojson stop_reason_json(const StopReason& r);
// A chat delta: {"reasoning_content"?, "content"?} (empty parts left out).
ojson chat_delta(const std::string& content, const std::string& reasoning);
// The delta.tool_calls fragments of one call, as the OpenAI SDKs accumulate them: the first
// carries index, id, type and the name (arguments ""), the second the arguments.
std::vector<ojson> tool_call_fragments(const output::ToolCall& call, int index);

ojson usage_json(int64_t prompt_tokens, int64_t completion_tokens);
ojson full_response(const ResponseMeta& meta, const std::vector<ChoiceResult>& choices, const ojson& usage);
// A stream chunk for one choice. Chat: `delta` is {"role"} / {"content"} / {}; completions use
// delta["content"] as "text". finish_reason empty = null. `token_ids`: the chunk's new tokens,
// shown when meta.with_token_ids. `stop_reason` as vLLM streams it: in every completions chunk
// (null until the last), in a chat choice's last chunk only (pass it there).
ojson stream_chunk(const ResponseMeta& meta, int index, const ojson& delta, const std::string& finish_reason,
                   const std::vector<int32_t>& token_ids = {}, const ojson& logprobs = nullptr,
                   const std::optional<ojson>& stop_reason = std::nullopt);
ojson usage_chunk(const ResponseMeta& meta, const ojson& usage);

}  // namespace nanovllm::server
