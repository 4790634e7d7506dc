// The OpenAI Responses API (POST /v1/responses) over the chat-completions path, as vLLM serves it:
// a request body becomes a chat request (input items -> chat messages, function tools -> chat
// tools, text.format -> response_format, max_output_tokens -> max_tokens) that parse_chat_request
// validates and tokenizes, so templates, tool and reasoning parsers, structured outputs and
// sampling are the chat path's, never a copy. Fields OpenAI has and this server cannot honour
// (other tool types, background, conversation, include entries, ...) are refused with a 400 naming
// them; fields outside the schema are ignored with a warning, as vLLM does.
// The response side (output items, the response object, stream events) is responses_stream.h.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

struct ResponsesRequest {
  GenerationRequest gen;  // the chat request (one prompt, one choice)
  std::string id;         // resp_<hex>
  int64_t created_at = 0;
  bool store = true;  // OpenAI's default
  std::string previous_response_id;
  // The fields the response object repeats (instructions, metadata, tools, tool_choice, ...),
  // in OpenAI's shapes, with the sampling values in effect.
  ojson echo = ojson::object();
  // The conversation up to this answer in chat form (the previous response's, then this input),
  // without the instructions: what a later previous_response_id continues.
  ojson conversation = ojson::array();
  // The reasoning parser's end tag as a token id (-1: none): output tokens up to it are reasoning.
  int32_t reasoning_end_token = -1;
};

// previous_response_id -> that response's whole conversation (its input and its output as chat
// messages); throws ApiError 404 (vLLM's "Response with id '...' not found.") when unknown.
using ConversationLookup = std::function<ojson(const std::string& id)>;

ResponsesRequest parse_responses_request(const ojson& body, const ModelInfo& m, const ConversationLookup& previous,
                                         std::string id, int64_t created_at);

// `input` (a string or a list of items) -> chat messages appended to `messages`: messages with
// role user / system / developer (as system) / assistant and text content, function_call items as
// the assistant's tool_calls, function_call_output items as tool messages (their call_id must
// name a call before them), reasoning items as the next assistant turn's reasoning_content.
// Anything else is a 400 naming the item ("input[2].type").
void append_input_messages(const ojson& input, ojson& messages);

// A finished response's output items -> chat messages (the assistant's text, reasoning and calls).
ojson output_messages(const ojson& output);

// vLLM's 404 for an unknown, evicted or deleted response id.
ApiError response_not_found(const std::string& id);

// A random id with OpenAI's shape: prefix + 48 hex digits (resp_, msg_, fc_, rs_, call_).
std::string random_item_id(const char* prefix);

}  // namespace nanovllm::server
