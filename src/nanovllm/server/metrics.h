// Server metrics in the Prometheus text format, with vLLM's names (vllm:num_requests_running,
// vllm:kv_cache_usage_perc, vllm:time_to_first_token_seconds, ...) so that dashboards built for
// vLLM work, plus a few nanovllm: extras. The engine thread records; /metrics renders. All state
// sits behind one mutex (updates are a few per step, far below any contention that matters).
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "nanovllm/sampling_params.h"

namespace nanovllm::server {

// Cumulative histogram with fixed upper bounds (the +Inf bucket is implicit).
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size(), 0) {}
  void observe(double v);
  void render(const std::string& name, const std::string& help, const std::string& labels, std::string& out) const;

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket, not cumulative
  uint64_t count_ = 0;
  double sum_ = 0;
};

// What the engine thread publishes after each loop iteration.
struct EngineGauges {
  int64_t running = 0, waiting = 0;  // sequences in the scheduler
  int64_t open_requests = 0;         // requests the server is serving
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;  // prompt tokens looked up / found in the prefix cache
  int64_t preemptions = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name);

  void on_request_added(int64_t prompt_tokens);
  void on_tokens(int64_t n);  // generation tokens
  void on_first_token(double seconds_since_arrival);
  void on_inter_token(double seconds);
  void on_request_finished(FinishReason why, double e2e_seconds);
  void on_http_error(int status);
  void set_gauges(const EngineGauges& g);
  EngineGauges gauges() const;

  std::string render() const;

 private:
  std::string labels_;  // model_name="..."
  mutable std::mutex mu_;
  EngineGauges gauges_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, int64_t> finished_;  // finish reason -> count
  std::map<int, int64_t> http_errors_;       // status -> count
  Histogram ttft_, itl_, e2e_;
};

}  // namespace nanovllm::server
