// Tool-call parsers (vLLM's --tool-call-parser): find the tool calls in a model's streamed
// content and hand them out as structured calls; the rest stays content.
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

class HermesToolParser : public ToolParser {
 public:
  HermesToolParser();
  ToolDelta push(std::string_view text) override;
  ToolDelta finish() override;

 private:
  void emit_text(ToolDelta& d, std::string_view text);
  void close_block(ToolDelta& d, bool terminated);

  bool in_block_ = false;
  bool called_ = false;     // a call was handed out: trailing whitespace is held
  std::string held_;        // possible partial tag, or the block's text while in_block_
  std::string whitespace_;  // whitespace after a call, dropped if nothing else follows
  std::mt19937_64 rng_;
};

// The parsers `--tool-call-parser` accepts ("hermes"); others throw UserError naming them.
std::unique_ptr<ToolParser> make_tool_parser(const std::string& name);
bool is_tool_parser(const std::string& name);

// `v` as Python's json.dumps(v, ensure_ascii=False) writes it (", " and ": " separators).
std::string python_json_dumps(const nlohmann::ordered_json& v);

}  // namespace nanovllm::output
