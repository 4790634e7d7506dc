#include "nanovllm/output/pythonic_tool_parser.h"

#include "nanovllm/output/python_calls.h"

namespace nanovllm::output {

BracketedToolParser::Start PythonicToolParser::find_start(std::string_view text, bool at_start, bool) const {
  if (!at_start) return {std::string_view::npos, 0, 0};
  const size_t ws = text.find_first_not_of(" \t\r\n");
  if (ws == std::string_view::npos) return {std::string_view::npos, 0, text.size()};  // undecided yet
  if (text[ws] == '[') return {0, ws};
  return {std::string_view::npos, 0, 0};
}

std::optional<std::vector<ToolCall>> PythonicToolParser::calls_of(std::string_view head, std::string_view value) {
  if (!head.empty()) return std::nullopt;
  auto parsed = parse_python_calls(value);
  if (!parsed) return std::nullopt;
  std::vector<ToolCall> calls;
  for (PythonCall& c : *parsed) calls.push_back({sink().hex_id(), std::move(c.name), python_json_dumps(c.arguments)});
  return calls;
}

}  // namespace nanovllm::output
