#include "nanovllm/output/tool_call_sink.h"

namespace nanovllm::output {

bool all_whitespace(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

std::string random_tool_call_id(std::mt19937_64& rng) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id = "chatcmpl-tool-";
  for (int i = 0; i < 2; ++i) {
    const uint64_t r = rng();
    for (int b = 0; b < 16; ++b) id += kHex[(r >> (4 * b)) & 15];
  }
  return id;
}

void ToolCallSink::text(ToolDelta& d, std::string_view s) {
  if (s.empty()) return;
  if (after_call_ && all_whitespace(s)) {
    whitespace_ += s;
    return;
  }
  d.content += whitespace_;
  whitespace_.clear();
  d.content += s;
  after_call_ = false;
}

void ToolCallSink::call(ToolDelta& d, ToolCall c) {
  whitespace_.clear();  // whitespace between calls is not content
  d.calls.push_back(std::move(c));
  after_call_ = true;
}

std::string ToolCallSink::alnum_id(size_t n) {
  static constexpr std::string_view kAlnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::uniform_int_distribution<size_t> pick(0, kAlnum.size() - 1);
  std::string id;
  for (size_t i = 0; i < n; ++i) id += kAlnum[pick(rng_)];
  return id;
}

bool json_tool_call(const nlohmann::ordered_json& j, std::string_view args_key, std::string_view alt_key,
                    ToolCall& out) {
  if (!j.is_object()) return false;
  const auto name = j.find("name");
  auto args = j.find(args_key);
  if (!alt_key.empty()) {
    const auto alt = j.find(alt_key);
    if (args != j.end() && alt != j.end()) return false;  // both: which one is meant is unknown
    if (args == j.end()) args = alt;
  }
  if (name == j.end() || !name->is_string() || args == j.end() || !args->is_object()) return false;
  out.name = name->get<std::string>();
  out.arguments = python_json_dumps(*args);
  return true;
}

}  // namespace nanovllm::output
