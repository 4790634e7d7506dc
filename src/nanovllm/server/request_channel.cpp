#include "nanovllm/server/request_channel.h"

#include <stdexcept>
#include <string>

namespace nanovllm::server {

namespace {

// What an event holds for the reader, roughly as the bytes it will take on the wire.
int64_t event_bytes(const ChoiceEvent& e) {
  int64_t n = int64_t(e.text.size() + e.reasoning.size() + e.token_ids.size() * sizeof(int32_t) +
                      e.pooled.size() * sizeof(float));
  for (auto& c : e.tool_calls) n += int64_t(c.name.size() + c.arguments.size() + c.id.size());
  for (auto* lps : {&e.logprobs, &e.prompt_logprobs})
    for (auto& lp : *lps) n += int64_t(sizeof(TokenLogprobs) + lp.top.size() * sizeof(lp.top[0]));
  return n;
}

// `b` followed by `ev`, of one choice: a slow reader gets fewer, larger chunks.
void merge_into(ChoiceEvent& b, ChoiceEvent&& ev) {
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
  if (!ev.pooled.empty()) b.pooled = std::move(ev.pooled);
}

}  // namespace

RequestChannel::RequestChannel(int num_choices, std::function<void()> notify, int64_t max_pending_bytes)
    : pending_(size_t(std::max(num_choices, 0))), max_pending_bytes_(max_pending_bytes), remaining_(num_choices),
      notify_(std::move(notify)) {}

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
    if (ev.index < 0 || size_t(ev.index) >= pending_.size())
      throw std::out_of_range("RequestChannel: choice " + std::to_string(ev.index) + " of a request with " +
                              std::to_string(pending_.size()) + " choices");
    if (ev.finish != FinishReason::None) --remaining_;
    pending_bytes_ += event_bytes(ev);
    auto& slot = pending_[size_t(ev.index)];
    if (slot) {
      merge_into(*slot, std::move(ev));
    } else {
      order_.push_back(ev.index);
      slot = std::move(ev);
    }
    if (max_pending_bytes_ > 0 && pending_bytes_ > max_pending_bytes_) {
      too_slow_ = true;
      cancelled = true;  // the engine thread aborts it on its next iteration, freeing its KV blocks
      fail_locked(
          ApiError(503,
                   "the client read too slowly: more than " + std::to_string(max_pending_bytes_) +
                       " bytes of output were waiting for it (--max-pending-output-bytes); the request was aborted",
                   "", "client_too_slow"));
    }
  }
  notify_();
}

void RequestChannel::fail_locked(const ApiError& err) {
  if (!error_) error_ = err;
  for (int i : order_) pending_[size_t(i)].reset();
  order_.clear();
  pending_bytes_ = 0;
}

void RequestChannel::fail(const ApiError& err) {
  {
    std::lock_guard lk(mu_);
    fail_locked(err);
  }
  notify_();
}

bool RequestChannel::take(std::vector<ChoiceEvent>& out) {
  std::lock_guard lk(mu_);
  for (int i : order_) {
    out.push_back(std::move(*pending_[size_t(i)]));
    pending_[size_t(i)].reset();
  }
  order_.clear();
  pending_bytes_ = 0;
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

bool RequestChannel::too_slow() const {
  std::lock_guard lk(mu_);
  return too_slow_;
}

int64_t RequestChannel::pending_bytes() const {
  std::lock_guard lk(mu_);
  return pending_bytes_;
}

}  // namespace nanovllm::server
