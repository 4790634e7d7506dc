// The per-request output channel between the engine thread (producer) and the HTTP thread that
// serves the request (consumer). The engine thread never blocks on it; the HTTP thread waits on
// a condition variable. One channel covers all choices of a request (one per prompt).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/sampling_params.h"
#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

// New output of one choice: visible text and how many completion tokens it came from. The last
// event of a choice carries its finish reason.
struct ChoiceEvent {
  int index = 0;
  std::string text;
  int num_tokens = 0;
  FinishReason finish = FinishReason::None;
};

class RequestChannel {
 public:
  explicit RequestChannel(int num_choices) : remaining_(num_choices) {}

  // Producer side (engine thread).
  void push(ChoiceEvent ev);
  void fail(const ApiError& err);  // ends the request; events already queued are dropped

  // Consumer side: waits up to `timeout` for events and moves them into `out` (text deltas of
  // one choice that queued up are merged). Returns true once the request has ended and nothing
  // is left to read.
  bool wait(std::vector<ChoiceEvent>& out, std::chrono::milliseconds timeout);
  std::optional<ApiError> error() const;

  // Set by the HTTP side when the client went away; the engine thread then aborts the request.
  std::atomic<bool> cancelled{false};

 private:
  bool ended_locked() const { return remaining_ == 0 || error_.has_value(); }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ChoiceEvent> queue_;
  int remaining_;  // choices not finished yet
  std::optional<ApiError> error_;
};

}  // namespace nanovllm::server
