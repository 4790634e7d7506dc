#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

void RequestChannel::admit() {
  {
    std::lock_guard lk(mu_);
    admitted_ = true;
  }
  notify_();
}

void RequestChannel::push(ChoiceEvent ev) {
  {
    std::lock_guard lk(mu_);
    if (error_) return;
    if (ev.finish != FinishReason::None) --remaining_;
    // Merge with a pending delta of the same choice: a slow reader gets fewer, larger chunks.
    if (!queue_.empty() && queue_.back().index == ev.index && queue_.back().finish == FinishReason::None) {
      auto& b = queue_.back();
      b.text += ev.text;
      b.reasoning += ev.reasoning;
      for (auto& c : ev.tool_calls) b.tool_calls.push_back(std::move(c));
      b.called_tools = ev.called_tools;
      b.num_tokens += ev.num_tokens;
      b.token_ids.insert(b.token_ids.end(), ev.token_ids.begin(), ev.token_ids.end());
      b.logprobs.insert(b.logprobs.end(), ev.logprobs.begin(), ev.logprobs.end());
      if (b.prompt_logprobs.empty()) b.prompt_logprobs = std::move(ev.prompt_logprobs);
      b.finish = ev.finish;
      b.stop_reason = std::move(ev.stop_reason);
    } else {
      queue_.push_back(std::move(ev));
    }
  }
  notify_();
}

void RequestChannel::fail(const ApiError& err) {
  {
    std::lock_guard lk(mu_);
    if (!error_) error_ = err;
    queue_.clear();
  }
  notify_();
}

bool RequestChannel::take(std::vector<ChoiceEvent>& out) {
  std::lock_guard lk(mu_);
  for (auto& e : queue_) out.push_back(std::move(e));
  queue_.clear();
  return ended_locked();
}

bool RequestChannel::admitted_or_ended() const {
  std::lock_guard lk(mu_);
  return admitted_ || ended_locked();
}

std::optional<ApiError> RequestChannel::error() const {
  std::lock_guard lk(mu_);
  return error_;
}

}  // namespace nanovllm::server
