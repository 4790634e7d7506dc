// What a request handler waits with (POST /v1/completions, /v1/chat/completions, /v1/responses):
// a Wakeup that the engine thread rings through the request's channel, and the guard that aborts
// the request in the engine when the handler leaves for any reason.
#pragma once
#include <chrono>
#include <functional>
#include <memory>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "nanovllm/server/engine_loop.h"
#include "nanovllm/server/http_connection.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

// How often a waiting request looks at its socket for a client that has gone (streams also
// notice on their next write).
inline constexpr auto kPeerCheck = std::chrono::milliseconds(200);
// Prompt tokens of all of a request's prompts.
inline int64_t total_prompt_tokens(const GenerationRequest& r) {
  int64_t n = 0;
  for (auto& p : r.prompts) n += int64_t(p.size());
  return n;
}

// Wakes the connection's coroutine from the engine thread: the channel's notify callback posts a
// cancel of this timer onto the connection's strand. The coroutine always drains the channel
// before it waits, and the cancel runs on the same strand after the wait has begun, so no event
// is missed. A client too slow to read (RequestChannel::too_slow) has its socket's pending write
// cancelled the same way, so the connection closes at once instead of after the write timeout.
class Wakeup {
  using Clock = std::chrono::steady_clock;

 public:
  explicit Wakeup(const net::any_io_executor& ex) : s_(std::make_shared<State>(ex)) {}

  std::function<void()> notifier() const {
    return [ex = s_->timer.get_executor(), w = std::weak_ptr<State>(s_)] {
      net::post(ex, [w] {
        auto s = w.lock();
        if (!s) return;
        s->timer.cancel();
        if (s->conn && s->channel && s->channel->too_slow()) s->conn->close();
      });
    };
  }
  // The connection to close, and the channel that says when (once the request is submitted).
  void watch(Connection& c, const RequestChannel& ch) {
    s_->conn = &c;
    s_->channel = &ch;
  }

  // Returns after a notification or `max`, whichever comes first; false if the client is gone.
  net::awaitable<bool> wait(Connection& c, Clock::duration max) {
    s_->timer.expires_after(max);
    co_await s_->timer.async_wait(net::as_tuple(net::use_awaitable));
    if (Clock::now() - last_check_ < kPeerCheck) co_return c.open();
    last_check_ = Clock::now();
    co_return !c.peer_closed();
  }

 private:
  struct State {
    explicit State(const net::any_io_executor& ex) : timer(ex) {}
    net::steady_timer timer;
    Connection* conn = nullptr;
    const RequestChannel* channel = nullptr;
  };
  std::shared_ptr<State> s_;
  Clock::time_point last_check_ = Clock::now();
};

// Aborts the request in the engine when the handler leaves for any reason; for a request that
// already ended this does nothing.
struct CancelOnExit {
  EngineLoop& loop;
  RequestChannel& ch;
  ~CancelOnExit() { loop.cancel(ch); }
};

}  // namespace nanovllm::server
