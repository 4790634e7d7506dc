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

#include "nanovllm/config/sampling_params.h"

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
  // Speculative decoding (shown when it is configured): SpecDecodeStats's counters.
  bool speculative = false;
  int64_t spec_drafts = 0, spec_draft_tokens = 0, spec_accepted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_pos;
};

// The KV cache as vllm:cache_config_info describes it (known from start-up).
struct CacheInfo {
  int64_t block_size = 0, num_blocks = 0;
  bool enable_prefix_caching = true;
  double gpu_memory_utilization = 0;
  std::string cache_dtype = "auto";
};

// One request (one choice) at its end. Phases as vLLM splits them: queued (arrival -> first
// scheduled), prefill (-> first token), decode (-> last token); 0 for a phase never reached.
// Inference is prefill + decode, the time per output token decode / (generation tokens - 1).
struct FinishedRequest {
  FinishReason why = FinishReason::None;
  int64_t prompt_tokens = 0, generation_tokens = 0;
  double e2e_s = 0, queue_s = 0, prefill_s = 0, decode_s = 0;
  // The request's n and max_tokens parameters, recorded once per request (its choice 0); 0: not this one.
  int n = 0;
  int64_t max_tokens = 0;
};

class Metrics {
 public:
  explicit Metrics(std::string model_name, CacheInfo cache = {});

  void on_request_added(int64_t prompt_tokens);
  void on_tokens(int64_t n);  // generation tokens
  void on_first_token(double seconds_since_arrival);
  void on_inter_token(double seconds);
  void on_iteration(int64_t tokens);  // tokens computed by one engine step
  void on_request_finished(const FinishedRequest& r);
  void on_http_error(int status);
  void set_gauges(const EngineGauges& g);
  EngineGauges gauges() const;

  std::string render() const;

 private:
  std::string labels_;  // model_name="..."
  CacheInfo cache_;
  mutable std::mutex mu_;
  EngineGauges gauges_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  std::map<std::string, int64_t> finished_;  // finish reason -> count
  std::map<int, int64_t> http_errors_;       // status -> count
  Histogram ttft_, itl_, e2e_;
  Histogram prompt_len_, generation_len_, queue_, prefill_, decode_, iteration_;
  Histogram inference_, tpot_, params_n_, params_max_tokens_;
};

}  // namespace nanovllm::server
