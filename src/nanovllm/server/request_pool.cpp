#include "nanovllm/server/request_pool.h"

#include <algorithm>
#include <string>
#include <thread>

#include "nanovllm/server/api_error.h"

namespace nanovllm::server {

namespace {
int pool_threads(int requested) {
  if (requested > 0) return requested;
  return int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 4));
}
}  // namespace

RequestPool::RequestPool(int threads, int max_queued)
    : threads_(pool_threads(threads)), max_queued_(std::max(1, max_queued)), pool_(size_t(threads_)) {}

RequestPool::Ticket RequestPool::admit() {
  // Waiting jobs are those past the ones the threads are running.
  const int64_t limit = int64_t(threads_) + max_queued_;
  if (in_flight_.fetch_add(1) >= limit) {
    in_flight_.fetch_sub(1);
    throw ApiError(503,
                   "the server is overloaded: " + std::to_string(max_queued_) +
                       " requests are already waiting to be parsed and tokenized (--max-queued-requests); retry later",
                   "", "overloaded");
  }
  return Ticket(&in_flight_);
}

}  // namespace nanovllm::server
