// The shared streaming of the tool-call formats whose calls are one bracketed value each, after
// an optional marker: llama3_json ({...}; {...}), mistral ([TOOL_CALLS][...]) and pythonic
// ([f(), g()]). Content passes until the format says a call region starts (find_start); the region
// -- marker, whitespace, an optional head such as mistral's function name, then the value -- is
// held back until the value's closing bracket arrives, then handed to calls_of: calls, or nothing,
// and then the whole region is content. The same calls come out whatever the split into deltas.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/output/bracket_scanner.h"
#include "nanovllm/output/tool_call_sink.h"
#include "nanovllm/output/tool_parser.h"

namespace nanovllm::output {

class BracketedToolParser : public ToolParser {
 public:
  ToolDelta push(std::string_view text) final;
  ToolDelta finish() final;

 protected:
  explicit BracketedToolParser(bool python_strings) : scan_(python_strings) {}

  struct Start {
    size_t at = std::string_view::npos;  // where the region starts in the text given (npos: none)
    size_t len = 0;                      // its marker's length (with whitespace before it, if any)
    size_t hold = 0;                     // with no region: bytes at the end to hold back (a partial marker)
  };
  // Where the next call region starts in `text` (content not yet handed out). at_start: only
  // whitespace came before `text` and no call yet; after_call: only whitespace since the last call.
  virtual Start find_start(std::string_view text, bool at_start, bool after_call) const = 0;
  virtual bool opens_value(char c) const = 0;           // a value's opening bracket
  virtual bool head_char(char) const { return false; }  // what may stand between marker and value
  // The calls of a region, `head` being what stood before the value (whitespace trimmed): empty
  // optional when they are not calls (the region then stays content).
  virtual std::optional<std::vector<ToolCall>> calls_of(std::string_view head, std::string_view value) = 0;

  ToolCallSink& sink() { return out_; }

 private:
  void emit(ToolDelta& d, std::string_view text);
  void end_region() {
    in_region_ = false;
    at_start_ = false;
  }

  ToolCallSink out_;
  BracketScanner scan_;
  bool at_start_ = true;
  bool in_region_ = false;
  size_t head_at_ = 0;                        // in the region: where its head starts
  size_t value_at_ = std::string_view::npos;  // in the region: where its value starts (npos: not yet seen)
  std::string held_;                          // the region so far, or a partial marker
};

}  // namespace nanovllm::output
