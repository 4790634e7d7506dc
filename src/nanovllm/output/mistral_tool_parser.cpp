#include "nanovllm/output/mistral_tool_parser.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/output/text_match.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {
constexpr std::string_view kToolCalls = "[TOOL_CALLS]";
constexpr size_t kIdLength = 9;
}  // namespace

BracketedToolParser::Start MistralToolParser::find_start(std::string_view text, bool, bool) const {
  const size_t at = text.find(kToolCalls);
  if (at != std::string_view::npos) return {at, kToolCalls.size()};
  return {std::string_view::npos, 0, partial_marker_suffix(text, kToolCalls)};
}

bool MistralToolParser::head_char(char c) const {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

std::optional<std::vector<ToolCall>> MistralToolParser::calls_of(std::string_view head, std::string_view value) {
  using ojson = nlohmann::ordered_json;
  ojson j;
  try {  // with the requests' nesting limit: model output is as untrusted as a request
    j = parse_request_json<ojson>(value);
  } catch (const InvalidRequest&) {
    return std::nullopt;
  }
  ojson items;          // the {"name", "arguments"} objects
  if (!head.empty()) {  // v11: name{arguments}
    if (!j.is_object()) return std::nullopt;
    items = ojson::array({ojson{{"name", std::string(head)}, {"arguments", std::move(j)}}});
  } else if (j.is_array()) {
    items = std::move(j);
  } else {
    items = ojson::array({std::move(j)});
  }
  std::vector<ToolCall> calls;
  for (const ojson& item : items) {
    ToolCall call;
    if (!json_tool_call(item, "arguments", "", call)) return std::nullopt;  // one bad call: all content
    call.id = sink().alnum_id(kIdLength);
    calls.push_back(std::move(call));
  }
  return calls;
}

}  // namespace nanovllm::output
