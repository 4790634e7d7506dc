// The one path from engine tokens to text, for every front end (LLM::generate and so the CLI,
// the server's engine loop): per request, in this order
//   1. incremental detokenization (never splitting a UTF-8 character); the token that ended the
//      request in the engine (EOS or a stop_token_id) is not turned into text, as in vLLM, unless
//      include_stop_str_in_output;
//   2. stop strings (output/stop_filter.h, one pass over the new text whatever their number): the
//      text is cut before the earliest one (after it with include_stop_str_in_output) and the
//      request ends with finish reason "stop"; a partial stop string at the end is held back
//      until it is known;
//   3. optionally (chat), the reasoning parser (<think>...</think> -> reasoning) and then the
//      tool-call parser on the content (<tool_call> blocks, [TOOL_CALLS] arrays... -> structured
//      calls; a parser whose marker is a special token detokenizes with special tokens kept).
// Each push returns what is new; the last delta of a request carries its finish reason.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/config/sampling_params.h"
#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/output/stop_filter.h"
#include "nanovllm/output/tool_parser.h"
#include "nanovllm/tokenizer/tokenizer.h"

namespace nanovllm::output {

// Which parsers run on a request's text (empty: none). Names as vLLM's flags: "qwen3", "hermes"...
struct OutputParsers {
  std::string reasoning;
  std::string tool;
};

struct OutputDelta {
  std::string text;                          // new content (all of the new text without parsers)
  std::string reasoning;                     // new reasoning text (reasoning parser)
  std::vector<ToolCall> tool_calls;          // calls completed by this delta (tool parser)
  FinishReason finish = FinishReason::None;  // set on the request's last delta
  // The request ended on a stop string: the engine does not know, the caller must abort it there.
  bool stopped_by_string = false;

  bool empty() const { return text.empty() && reasoning.empty() && tool_calls.empty(); }
};

class OutputProcessor {
 public:
  // `tok` null: no text at all (token ids only); stop strings then need none (validated earlier).
  OutputProcessor(const Tokenizer* tok, const SamplingParams& sp, const OutputParsers& parsers = {});

  // One token of this request; `engine_finish`: the engine ended the request with this token
  // (its finish reason), None otherwise. After the delta that carries a finish reason, pushes
  // return nothing.
  OutputDelta push(int32_t id, FinishReason engine_finish);
  bool finished() const { return finished_; }
  bool called_tools() const { return called_tools_; }
  const std::string& text() const { return text_; }  // the visible text so far, before the parsers
  // The stop string that ended the request (vLLM's stop_reason), empty while none has.
  const std::string& matched_stop() const { return stops_.matched(); }

 private:
  void parse(OutputDelta& d, const std::string& text, bool final);

  const Tokenizer* tok_;
  std::unique_ptr<IncrementalDetokenizer> detok_;
  StopFilter stops_;
  bool include_stop_;
  std::unique_ptr<ReasoningParser> reasoning_;
  std::unique_ptr<ToolParser> tools_;
  std::string text_;  // emitted by the stop filter
  bool finished_ = false;
  bool called_tools_ = false;
};

}  // namespace nanovllm::output
