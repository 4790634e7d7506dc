#include "nanovllm/output/tool_parser.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/output/text_match.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

bool all_whitespace(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::string python_json_dumps(const ojson& v) {
  if (v.is_object()) {
    std::string out = "{";
    bool first = true;
    for (auto& [k, x] : v.items()) {
      out += first ? "" : ", ";
      first = false;
      out += ojson(k).dump(-1, ' ', false, ojson::error_handler_t::replace) + ": " + python_json_dumps(x);
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + python_json_dumps(v[i]);
    return out + "]";
  }
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

HermesToolParser::HermesToolParser() : rng_(std::random_device{}()) {}

void HermesToolParser::emit_text(ToolDelta& d, std::string_view text) {
  if (text.empty()) return;
  if (called_ && all_whitespace(text)) {
    whitespace_ += text;
    return;
  }
  d.content += whitespace_;
  whitespace_.clear();
  d.content += text;
}

void HermesToolParser::close_block(ToolDelta& d, bool terminated) {
  std::string block = std::move(held_);
  held_.clear();
  in_block_ = false;
  ojson j;
  try {  // with the requests' nesting limit: model output is as untrusted as a request
    j = parse_request_json<ojson>(block);
  } catch (const InvalidRequest&) {
    j = nullptr;
  }
  const ojson* name = j.is_object() && j.contains("name") ? &j["name"] : nullptr;
  const ojson* args = j.is_object() && j.contains("arguments") ? &j["arguments"] : nullptr;
  if (!name || !name->is_string() || !args || !args->is_object()) {  // malformed: it stays text
    emit_text(d, std::string(kOpen) + block + (terminated ? std::string(kClose) : ""));
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "chatcmpl-tool-";
  for (int i = 0; i < 2; ++i) {
    const uint64_t r = rng_();
    for (int b = 0; b < 16; ++b) id += kHex[(r >> (4 * b)) & 15];
  }
  whitespace_.clear();  // whitespace between blocks is not content
  d.calls.push_back({std::move(id), name->get<std::string>(), python_json_dumps(*args)});
  called_ = true;
}

ToolDelta HermesToolParser::push(std::string_view text) {
  ToolDelta d;
  std::string buf = std::move(held_) + std::string(text);
  held_.clear();
  for (;;) {
    const std::string_view tag = in_block_ ? kClose : kOpen;
    const size_t at = buf.find(tag);
    if (at == std::string::npos) {
      if (in_block_) {
        held_ = std::move(buf);
      } else {
        const size_t hold = partial_marker_suffix(buf, tag);
        emit_text(d, std::string_view(buf).substr(0, buf.size() - hold));
        held_ = buf.substr(buf.size() - hold);
      }
      return d;
    }
    if (in_block_) {
      held_ = buf.substr(0, at);
      close_block(d, true);
    } else {
      emit_text(d, std::string_view(buf).substr(0, at));
      in_block_ = true;
    }
    buf.erase(0, at + tag.size());
  }
}

ToolDelta HermesToolParser::finish() {
  ToolDelta d;
  if (in_block_)
    close_block(d, false);
  else
    emit_text(d, held_);
  held_.clear();
  whitespace_.clear();
  return d;
}

bool is_tool_parser(const std::string& name) { return name == "hermes"; }

std::unique_ptr<ToolParser> make_tool_parser(const std::string& name) {
  if (name == "hermes") return std::make_unique<HermesToolParser>();
  throw UserError("unknown tool-call parser '" + name + "' (available: hermes)");
}

}  // namespace nanovllm::output
