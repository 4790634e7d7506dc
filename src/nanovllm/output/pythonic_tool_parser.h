// pythonic (vLLM's PythonicToolParser: Llama 3.2 and 4, ToolACE): an answer that starts with "["
// (leading whitespace allowed) is a Python list of calls, [get_weather(city="Paris"), f()], each
// with literal keyword arguments (python_calls.h), which become JSON arguments. An answer that
// does not start so is all content; a list that is not literal calls stays content, and so does
// text after the list.
#pragma once
#include "nanovllm/output/bracketed_tool_parser.h"

namespace nanovllm::output {

class PythonicToolParser : public BracketedToolParser {
 public:
  PythonicToolParser() : BracketedToolParser(true) {}

 protected:
  Start find_start(std::string_view text, bool at_start, bool after_call) const override;
  bool opens_value(char c) const override { return c == '['; }
  std::optional<std::vector<ToolCall>> calls_of(std::string_view head, std::string_view value) override;
};

}  // namespace nanovllm::output
