// What the HTTP handlers share: the served model's description, the metrics, the engine loop and
// the options. Created once by HttpServer; handlers only read it (the loop and metrics are
// thread-safe), so there is no global mutable state.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "nanovllm/server/engine_loop.h"
#include "nanovllm/server/metrics.h"
#include "nanovllm/server/openai_protocol.h"
#include "nanovllm/server/request_pool.h"
#include "nanovllm/server/response_store.h"
#include "nanovllm/server/server_options.h"

namespace nanovllm::server {

struct ServerState {
  ServerState(LLM& llm, const ServerOptions& o, ModelInfo m, CacheInfo cache)
      : opts(o), model(std::move(m)), metrics(model.name, std::move(cache)),
        loop(llm, metrics, {o.request_timeout_s, o.max_pending_output_bytes, o.testing_stall_engine_s},
             {o.logger, o.log_requests, o.log_stats, o.log_stats_interval_s}),
        pool(llm.config().request_threads, llm.config().max_queued_requests),
        responses(llm.config().responses_store_bytes) {}

  ServerOptions opts;
  ModelInfo model;
  Metrics metrics;
  EngineLoop loop;
  // Parsing, chat templates and tokenizing, off the I/O threads. After the members its jobs use;
  // HttpServer joins it before its I/O context goes.
  RequestPool pool;
  ResponseStore responses;  // /v1/responses with store=true (bounded: --responses-store-bytes)
  std::atomic<uint64_t> next_id{1};
  std::atomic<bool> draining{false};            // shutting down: no new requests (503), in-flight ones finish
  std::atomic<int64_t> in_flight{0};            // requests being answered
  std::atomic<int64_t> connections{0};          // open connections (--limit-concurrency)
  std::atomic<bool> reported_unhealthy{false};  // /health's last answer was 503 (its log line is said once)
  int64_t started_at = 0;                       // unix seconds

  std::string new_id(const char* prefix) {
    return prefix + std::to_string(started_at) + "-" + std::to_string(next_id++);
  }
};

}  // namespace nanovllm::server
