// Forced tool calls (tool_choice "required" or a named function) as a grammar: the model's output
// is one or more calls in the format of a tool-call parser (output/tool_parser.h), each with
// arguments valid for the tool's parameters:
//   hermes       <tool_call>\n{"name": "<name>", "arguments": <JSON>}\n</tool_call>, "\n" between
//                blocks (Qwen3's chat template teaches it);
//   llama3_json  {"name": "<name>", "parameters": <JSON>}, "; " between calls (Llama 3.x's).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/json_schema.h"

namespace nanovllm::structured {

struct ToolSpec {
  std::string name;
  // The function's JSON Schema (null or absent: no parameters, the arguments are {}). ordered_json
  // keeps the request's property order, which the grammar imposes on the arguments.
  nlohmann::ordered_json parameters;
};

enum class ToolCallFormat { Hermes, Llama3Json };

// exactly_one: one call (a named tool_choice, `tools` holding that tool); otherwise one or more
// calls, each of any of `tools`. Throws GrammarError when `tools` is empty, a name is empty or
// repeated, or a parameters schema is refused (the message names the tool).
Grammar tool_calls_grammar(ToolCallFormat format, const std::vector<ToolSpec>& tools, bool exactly_one,
                           const JsonSchemaOptions& opt);
inline Grammar hermes_tool_calls_grammar(const std::vector<ToolSpec>& tools, bool exactly_one,
                                         const JsonSchemaOptions& opt) {
  return tool_calls_grammar(ToolCallFormat::Hermes, tools, exactly_one, opt);
}

}  // namespace nanovllm::structured
