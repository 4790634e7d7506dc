// The per-request output channel between the engine thread (producer) and the HTTP connection
// that serves the request (consumer). Neither side blocks on it: the engine thread pushes events
// and calls the consumer's `notify` callback (which wakes the connection's coroutine on its own
// executor); the connection drains the queue whenever it wakes. One channel covers all choices of
// a request (one per prompt).
// What waits for a slow reader is bounded twice over: events queue per choice (a choice's new
// output merges into its pending event, so n choices never hold more than n events, whatever the
// number of tokens), and the bytes they hold are capped (--max-pending-output-bytes): past the cap
// the client is too slow, the request ends with an error and `too_slow()` tells the connection
// to close.
#pragma once
#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/config/sampling_params.h"
#include "nanovllm/output/tool_parser.h"
#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

// New output of one choice: visible text and how many completion tokens it came from. The last
// event of a choice carries its finish reason.
struct ChoiceEvent {
  int index = 0;
  std::string text;                          // content
  std::string reasoning;                     // reasoning content (--reasoning-parser)
  std::vector<output::ToolCall> tool_calls;  // complete tool calls (--tool-call-parser)
  int num_tokens = 0;
  std::vector<int32_t> token_ids;              // the new tokens (returned by a server without a tokenizer)
  std::vector<TokenLogprobs> logprobs;         // of token_ids, when the request asked
  std::vector<TokenLogprobs> prompt_logprobs;  // with a choice's first token, when the request asked
  FinishReason finish = FinishReason::None;
  StopReason stop_reason;     // with `finish`: the stop string or stop token id (vLLM's stop_reason)
  bool called_tools = false;  // with `finish`: the choice produced tool calls (finish_reason "tool_calls")
  std::vector<float> pooled;  // with `finish` of a pooling request: its embedding or scores
};

class RequestChannel {
 public:
  // `notify` runs on the engine thread after every change (it must not block; it may run after
  // the consumer has gone, so it must hold what it touches).
  // `max_pending_bytes`: the most output bytes (text, token ids, logprobs) waiting for the reader
  // (0 = no bound).
  RequestChannel(int num_choices, std::function<void()> notify, int64_t max_pending_bytes = 0);

  // Producer side (engine thread).
  void admit();  // every choice is in the engine: the request can no longer be refused
  void push(ChoiceEvent ev);
  void fail(const ApiError& err);  // ends the request; events already queued are dropped

  // Consumer side: moves the queued events into `out` (one per choice that has output, in the
  // order the choices first had some; a choice's deltas that queued up are merged). Returns true
  // once the request has ended and nothing is left to read.
  bool take(std::vector<ChoiceEvent>& out);
  bool admitted_or_ended() const;
  std::optional<ApiError> error() const;
  // The reader fell more than max_pending_bytes behind: the request has failed (cancelled is set,
  // so the engine aborts it) and the connection should close.
  bool too_slow() const;
  int64_t pending_bytes() const;

  // Set by the HTTP side when the client went away; the engine thread then aborts the request.
  std::atomic<bool> cancelled{false};

 private:
  bool ended_locked() const { return remaining_ == 0 || error_.has_value(); }
  void fail_locked(const ApiError& err);

  mutable std::mutex mu_;
  std::vector<std::optional<ChoiceEvent>> pending_;  // by choice index: its output not yet taken
  std::vector<int> order_;                           // choices with pending output, first come first
  int64_t pending_bytes_ = 0;
  const int64_t max_pending_bytes_;
  bool too_slow_ = false;
  int remaining_;  // choices not finished yet
  bool admitted_ = false;
  std::optional<ApiError> error_;
  std::function<void()> notify_;
};

}  // namespace nanovllm::server
