// RequestPool: the few threads that do the CPU-heavy part of reading a request (JSON parsing,
// chat-template rendering, tokenizing), so that the HTTP I/O threads stay free for /health,
// /metrics and running streams however costly the requests that arrive. A connection's coroutine
// hands its job over and awaits the result without blocking its thread: the job runs on a pool
// thread, and its result (or exception) comes back on the connection's executor. The queue is
// bounded: past `max_queued` jobs waiting for a thread, run() throws a 503, as an overloaded
// server answers, instead of letting work pile up without limit.
#pragma once
#include <atomic>
#include <cstdint>
#include <type_traits>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/thread_pool.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace nanovllm::server {

namespace net = boost::asio;

class RequestPool {
 public:
  // threads: 0 = min(4, hardware threads).
  RequestPool(int threads, int max_queued);
  ~RequestPool() { join(); }
  RequestPool(const RequestPool&) = delete;
  RequestPool& operator=(const RequestPool&) = delete;

  // Runs work() on a pool thread; returns its result, or rethrows what it threw. Throws ApiError
  // 503 at once when max_queued jobs are already waiting.
  template <class F>
  net::awaitable<std::invoke_result_t<F&>> run(F work) {
    Ticket ticket = admit();
    co_return co_await net::co_spawn(pool_.get_executor(), invoke(std::move(work), std::move(ticket)),
                                     net::use_awaitable);
  }

  int threads() const { return threads_; }
  int64_t in_flight() const { return in_flight_.load(); }  // jobs waiting or running
  // Finishes the running jobs and stops the threads (the server calls it before its I/O context
  // goes, so that no result is delivered to a destroyed executor).
  void join() { pool_.join(); }

 private:
  // A job's place in the bound: held by the job until it has run.
  class Ticket {
   public:
    explicit Ticket(std::atomic<int64_t>* n) : n_(n) {}
    Ticket(Ticket&& o) noexcept : n_(std::exchange(o.n_, nullptr)) {}
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket() {
      if (n_) n_->fetch_sub(1);
    }

   private:
    std::atomic<int64_t>* n_;
  };

  Ticket admit();

  // Parameters live in the coroutine frame, so the work and the ticket stay until it ends.
  template <class F>
  static net::awaitable<std::invoke_result_t<F&>> invoke(F work, Ticket ticket) {
    (void)ticket;
    co_return work();
  }

  int threads_;
  int max_queued_;
  std::atomic<int64_t> in_flight_{0};
  net::thread_pool pool_;
};

}  // namespace nanovllm::server
