// Chat requests' tool and reasoning side, as vLLM: the tool-call turn the OpenAI SDKs send back
// (assistant tool_calls with arguments as JSON strings, parsed to objects for the template), and
// which output parsers a request gets (tool_choice, --reasoning-parser, enable_thinking).
#pragma once
#include <optional>
#include <string>

#include "nanovllm/server/openai_protocol.h"

namespace nanovllm::server {

// tool_choice: "none" (no parsing), "auto" (the default with tools; needs --enable-auto-tool-choice
// and --tool-call-parser), "required" (one or more calls) and a named function (exactly one call of
// it, which must be in `tools`): these two need --tool-call-parser hermes or llama3_json (not the
// auto flag), whose parser reads the calls, and constrain the output to them: the grammar goes to
// *forced (when given; kind None otherwise). Reasoning: --reasoning-parser unless enable_thinking is false.
output::OutputParsers chat_output_parsers(const ojson& body, const ModelInfo& m, bool has_tools,
                                          std::optional<bool> enable_thinking, StructuredOutputs* forced = nullptr);

// The grammar of tool calls in the format of `parser` (hermes: <tool_call>{"name", "arguments"}
// </tool_call> blocks; llama3_json: {"name", "parameters"} objects separated by "; ") over the
// request's `tools`: one or more calls of any of them, or exactly one call of `only` when it is
// not empty. JSON whitespace as the server's structured-output default.
StructuredOutputs tool_choice_grammar(const std::string& parser, const ojson& tools, const std::string& only,
                                      const ModelInfo& m);

}  // namespace nanovllm::server
