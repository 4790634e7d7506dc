// llama3_json (vLLM's Llama3JsonToolParser, the format of Llama 3.1-3.3's JSON tool calling):
// the answer is one or more JSON objects {"name": ..., "parameters": {...}} ("arguments" is taken
// too), separated by ";", optionally after <|python_tag|>. Calls are recognised where vLLM's
// streaming looks for them: at the start of the answer (leading whitespace allowed) or after
// <|python_tag|> (text before it is content), then after each call ("; {...}"). An object that is
// not such a call stays content, and so does what follows the calls.
#pragma once
#include "nanovllm/output/bracketed_tool_parser.h"

namespace nanovllm::output {

class Llama3JsonToolParser : public BracketedToolParser {
 public:
  Llama3JsonToolParser() : BracketedToolParser(false) {}

 protected:
  Start find_start(std::string_view text, bool at_start, bool after_call) const override;
  bool opens_value(char c) const override { return c == '{'; }
  std::optional<std::vector<ToolCall>> calls_of(std::string_view head, std::string_view value) override;
};

}  // namespace nanovllm::output
