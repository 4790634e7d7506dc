#include "nanovllm/output/llama3_json_tool_parser.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/output/text_match.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {
constexpr std::string_view kPythonTag = "<|python_tag|>";
}

BracketedToolParser::Start Llama3JsonToolParser::find_start(std::string_view text, bool at_start,
                                                            bool after_call) const {
  const size_t ws = std::min(text.find_first_not_of(" \t\r\n"), text.size());
  const std::string_view after_ws = text.substr(ws);
  if (at_start || after_call) {
    // At the start leading whitespace belongs to the region (dropped with a call); after a call the
    // sink holds it already, so the region starts after it.
    const size_t at = at_start ? 0 : ws;
    if (after_ws.empty()) return {std::string_view::npos, 0, at_start ? text.size() : 0};
    if (after_ws.front() == '{') return {at, ws - at};
    if (after_call && after_ws.front() == ';') return {at, ws - at + 1};
    if (after_ws.substr(0, kPythonTag.size()) == kPythonTag) return {at, ws - at + kPythonTag.size()};
    if (after_ws.size() < kPythonTag.size() && kPythonTag.substr(0, after_ws.size()) == after_ws)
      return {std::string_view::npos, 0, text.size() - at};
  }
  const size_t tag = text.find(kPythonTag);
  if (tag != std::string_view::npos) return {tag, kPythonTag.size()};
  return {std::string_view::npos, 0, partial_marker_suffix(text, kPythonTag)};
}

std::optional<std::vector<ToolCall>> Llama3JsonToolParser::calls_of(std::string_view head, std::string_view value) {
  if (!head.empty()) return std::nullopt;
  ToolCall call;
  try {  // with the requests' nesting limit: model output is as untrusted as a request
    if (!json_tool_call(parse_request_json<nlohmann::ordered_json>(value), "parameters", "arguments", call))
      return std::nullopt;
  } catch (const InvalidRequest&) {
    return std::nullopt;
  }
  call.id = sink().hex_id();
  return std::vector<ToolCall>{std::move(call)};
}

}  // namespace nanovllm::output
