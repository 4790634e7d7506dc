#include "nanovllm/output/tool_parser.h"

#include "nanovllm/config/request_json.h"
#include "nanovllm/output/llama3_json_tool_parser.h"
#include "nanovllm/output/mistral_tool_parser.h"
#include "nanovllm/output/pythonic_tool_parser.h"
#include "nanovllm/output/text_match.h"
#include "nanovllm/output/tool_call_sink.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::output {

namespace {

using ojson = nlohmann::ordered_json;
constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";

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

HermesToolParser::HermesToolParser() : out_(std::make_unique<ToolCallSink>()) {}
HermesToolParser::~HermesToolParser() = default;

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
  ToolCall call;
  if (!json_tool_call(j, "arguments", "", call)) {  // malformed: it stays text
    out_->text(d, std::string(kOpen) + block + (terminated ? std::string(kClose) : ""));
    return;
  }
  call.id = out_->hex_id();
  out_->call(d, std::move(call));
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
        out_->text(d, std::string_view(buf).substr(0, buf.size() - hold));
        held_ = buf.substr(buf.size() - hold);
      }
      return d;
    }
    if (in_block_) {
      held_ = buf.substr(0, at);
      close_block(d, true);
    } else {
      out_->text(d, std::string_view(buf).substr(0, at));
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
    out_->text(d, held_);
  held_.clear();
  out_->finish();
  return d;
}

std::string tool_parser_names() { return "hermes, llama3_json, mistral, pythonic"; }

bool is_tool_parser(const std::string& name) {
  return name == "hermes" || name == "llama3_json" || name == "mistral" || name == "pythonic";
}

bool tool_parser_keeps_special_tokens(const std::string& name) { return name == "mistral"; }

std::unique_ptr<ToolParser> make_tool_parser(const std::string& name) {
  if (name == "hermes") return std::make_unique<HermesToolParser>();
  if (name == "llama3_json") return std::make_unique<Llama3JsonToolParser>();
  if (name == "mistral") return std::make_unique<MistralToolParser>();
  if (name == "pythonic") return std::make_unique<PythonicToolParser>();
  throw UserError("unknown tool-call parser '" + name + "' (available: " + tool_parser_names() + ")");
}

}  // namespace nanovllm::output
