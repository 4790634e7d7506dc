// Forced tool calls (tool_choice "required" or a named function) as a grammar: the model's output
// is one or more Hermes-style blocks, the format output/tool_parser.h (HermesToolParser) reads and
// Qwen3's chat template teaches:
//   <tool_call>\n{"name": "<name>", "arguments": <JSON valid for the tool's parameters>}\n</tool_call>
// with "\n" between blocks.
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

// exactly_one: one block (a named tool_choice, `tools` holding that tool); otherwise one or more
// blocks, each calling any of `tools`. Throws GrammarError when `tools` is empty, a name is empty or
// repeated, or a parameters schema is refused (the message names the tool).
Grammar hermes_tool_calls_grammar(const std::vector<ToolSpec>& tools, bool exactly_one, const JsonSchemaOptions& opt);

}  // namespace nanovllm::structured
