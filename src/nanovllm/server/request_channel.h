// The per-request output channel between the engine thread (producer) and the HTTP connection
// that serves the request (consumer). Neither side blocks on it: the engine thread pushes events
// and calls the consumer's `notify` callback (which wakes the connection's coroutine on its own
// executor); the connection drains the queue whenever it wakes. One channel covers all choices of
// a request (one per prompt).
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
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
};

class RequestChannel {
 public:
  // `notify` runs on the engine thread after every change (it must not block; it may run after
  // the consumer has gone, so it must hold what it touches).
  RequestChannel(int num_choices, std::function<void()> notify) : remaining_(num_choices), notify_(std::move(notify)) {}

  // Producer side (engine thread).
  void admit();  // every choice is in the engine: the request can no longer be refused
  void push(ChoiceEvent ev);
  void fail(const ApiError& err);  // ends the request; events already queued are dropped

  // Consumer side: moves the queued events into `out` (text deltas of one choice that queued up
  // are merged). Returns true once the request has ended and nothing is left to read.
  bool take(std::vector<ChoiceEvent>& out);
  bool admitted_or_ended() const;
  std::optional<ApiError> error() const;

  // Set by the HTTP side when the client went away; the engine thread then aborts the request.
  std::atomic<bool> cancelled{false};

 private:
  bool ended_locked() const { return remaining_ == 0 || error_.has_value(); }

  mutable std::mutex mu_;
  std::deque<ChoiceEvent> queue_;
  int remaining_;  // choices not finished yet
  bool admitted_ = false;
  std::optional<ApiError> error_;
  std::function<void()> notify_;
};

}  // namespace nanovllm::server
