// Tool-call parsers (vLLM's --tool-call-parser): find the tool calls in a model's streamed
// content and hand them out as structured calls; the rest stays content. A call is handed out
// once complete, whatever the split of the text into deltas (the server streams it as SDK
// fragments); what is not a well-formed call stays content. The formats:
//   hermes       <tool_call>{"name", "arguments"}</tool_call> (Qwen), this file
//   llama3_json  {"name", "parameters"} objects separated by ";" (Llama 3.x), llama3_json_tool_parser.h
//   mistral      [TOOL_CALLS][{"name", "arguments"}, ...] (Mistral), mistral_tool_parser.h
//   pythonic     [f(a=1), g()] (Llama 3.2/4, ToolACE), pythonic_tool_parser.h
//
// hermes (vLLM's Hermes2ProToolParser, the format of Qwen3's chat template): each
// <tool_call>{"name": ..., "arguments": {...}}</tool_call> block is one call; its arguments come
// out as a JSON string (Python's json.dumps layout, non-ASCII kept, as vLLM writes them). A block
// is handed out once complete (or at the end of the output, unterminated, as vLLM also accepts);
// a block that is not such an object stays text. Whitespace after a call (the newline between
// blocks) is dropped unless more text follows it.
#pragma once
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace nanovllm::output {

struct ToolCall {
  std::string id;         // chatcmpl-tool-<32 hex digits>, as vLLM's random_tool_call_id
  std::string name;       // function name
  std::string arguments;  // JSON text of the arguments object
};

struct ToolDelta {
  std::string content;
  std::vector<ToolCall> calls;
};

class ToolParser {
 public:
  virtual ~ToolParser() = default;
  virtual ToolDelta push(std::string_view text) = 0;
  virtual ToolDelta finish() = 0;
};

class ToolCallSink;

class HermesToolParser : public ToolParser {
 public:
  HermesToolParser();
  ~HermesToolParser() override;
  ToolDelta push(std::string_view text) override;
  ToolDelta finish() override;

 private:
  void close_block(ToolDelta& d, bool terminated);

  bool in_block_ = false;
  std::string held_;  // possible partial tag, or the block's text while in_block_
  std::unique_ptr<ToolCallSink> out_;
};

// The parsers `--tool-call-parser` accepts (tool_parser_names()); others throw UserError naming them.
std::unique_ptr<ToolParser> make_tool_parser(const std::string& name);
bool is_tool_parser(const std::string& name);
std::string tool_parser_names();  // "hermes, llama3_json, mistral, pythonic"

// Whether the parser's marker is a special token that detokenization must keep (mistral's
// [TOOL_CALLS]): its requests are detokenized with skip_special_tokens off, as vLLM's
// MistralToolParser.adjust_request does.
bool tool_parser_keeps_special_tokens(const std::string& name);

// chatcmpl-tool-<32 hex digits>, as vLLM's random_tool_call_id.
std::string random_tool_call_id(std::mt19937_64& rng);

// `v` as Python's json.dumps(v, ensure_ascii=False) writes it (", " and ": " separators).
std::string python_json_dumps(const nlohmann::ordered_json& v);

}  // namespace nanovllm::output
