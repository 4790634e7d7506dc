// What every tool-call parser does around its calls: text before, between and after the calls is
// content, except whitespace after a call (the newline between two calls, the one before EOS),
// which is dropped unless more text follows it; calls get ids as vLLM makes them.
#pragma once
#include <random>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nanovllm/output/tool_parser.h"

namespace nanovllm::output {

class ToolCallSink {
 public:
  void text(ToolDelta& d, std::string_view s);
  void call(ToolDelta& d, ToolCall c);
  void finish() { whitespace_.clear(); }           // at the end: whitespace after a call is dropped
  bool after_call() const { return after_call_; }  // nothing but whitespace since the last call
  std::string hex_id() { return random_tool_call_id(rng_); }
  std::string alnum_id(size_t n);  // mistral's: n letters and digits

 private:
  bool after_call_ = false;
  std::string whitespace_;
  std::mt19937_64 rng_{std::random_device{}()};
};

bool all_whitespace(std::string_view s);

// A JSON object {"name": "<string>", `args_key`: {...}} as a call (arguments in json.dumps' layout),
// or false when it is not one. `alt_key`, when not empty, may stand for `args_key` (not both).
bool json_tool_call(const nlohmann::ordered_json& j, std::string_view args_key, std::string_view alt_key,
                    ToolCall& out);

}  // namespace nanovllm::output
