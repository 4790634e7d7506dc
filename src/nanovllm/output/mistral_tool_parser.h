// mistral (vLLM's MistralToolParser): [TOOL_CALLS] then a JSON array of {"name", "arguments"}
// objects (Mistral 7B v0.3, Mistral Nemo/Small), or, with the v11 tokenizers, [TOOL_CALLS]name{...}
// (one call per marker). Text before the marker is content; a marker not followed by such calls
// stays content. Ids are 9 letters and digits, as vLLM's MistralToolCall (mistral-common refuses
// others when the call comes back in the next turn). [TOOL_CALLS] is a special token: requests
// with this parser are detokenized with skip_special_tokens off (tool_parser_keeps_special_tokens).
#pragma once
#include "nanovllm/output/bracketed_tool_parser.h"

namespace nanovllm::output {

class MistralToolParser : public BracketedToolParser {
 public:
  MistralToolParser() : BracketedToolParser(false) {}

 protected:
  Start find_start(std::string_view text, bool at_start, bool after_call) const override;
  bool opens_value(char c) const override { return c == '[' || c == '{'; }
  bool head_char(char c) const override;
  std::optional<std::vector<ToolCall>> calls_of(std::string_view head, std::string_view value) override;
};

}  // namespace nanovllm::output
