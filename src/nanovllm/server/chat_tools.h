// Chat requests' tool and reasoning side, as vLLM: the tool-call turn the OpenAI SDKs send back
// (assistant tool_calls with arguments as JSON strings, parsed to objects for the template), and
// which output parsers a request gets (tool_choice, --reasoning-parser, enable_thinking).
#pragma once
#include <optional>
#include <string>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// An assistant message's tool_calls: checked, and each function.arguments given as a JSON string
// parsed to an object (the chat template writes it with tojson). `where` names the message.
void prepare_tool_calls(ojson& message, const std::string& where);

// tool_choice: "none" (no parsing), "auto" (the default with tools; needs --enable-auto-tool-choice
// and --tool-call-parser), "required" and a named function refused (no structured output yet).
// Reasoning: --reasoning-parser unless chat_template_kwargs.enable_thinking is false.
output::OutputParsers chat_output_parsers(const ojson& body, const ModelInfo& m, bool has_tools,
                                          std::optional<bool> enable_thinking);

}  // namespace nanovllm::server
