#include "nanovllm/server/metrics.h"

#include <algorithm>
#include <cstdio>

namespace nanovllm::server {

namespace {

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, const std::string& labels, double v) {
  out += name + "{" + labels + "} " + num(v) + "\n";
}

}  // namespace

void Histogram::observe(double v) {
  const size_t i = size_t(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  if (i < counts_.size()) ++counts_[i];
  ++count_;
  sum_ += v;
}

void Histogram::render(const std::string& name, const std::string& help, const std::string& labels,
                       std::string& out) const {
  header(out, name, "histogram", help);
  uint64_t cum = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cum += counts_[i];
    out += name + "_bucket{" + labels + ",le=\"" + num(bounds_[i]) + "\"} " + std::to_string(cum) + "\n";
  }
  out += name + "_bucket{" + labels + ",le=\"+Inf\"} " + std::to_string(count_) + "\n";
  sample(out, name + "_sum", labels, sum_);
  sample(out, name + "_count", labels, double(count_));
}

namespace {

// vLLM's buckets: request lengths 1, 2, 5, 10, 20, 50, ... (build_1_2_5_buckets up to max_model_len,
// here a fixed 1M), phase latencies as its request_latency_buckets, step sizes as its
// iteration_tokens buckets.
std::vector<double> one_two_five_buckets() {
  std::vector<double> b;
  for (double m = 1; m <= 1e6; m *= 10)
    for (double k : {1.0, 2.0, 5.0}) b.push_back(k * m);
  return b;
}
std::vector<double> phase_buckets() {
  return {0.3,  0.5,  0.8,  1.0,  1.5,   2.0,   2.5,   5.0,   10.0,   15.0,  20.0,
          30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};
}

}  // namespace

Metrics::Metrics(std::string model_name, CacheInfo cache)
    : labels_("model_name=\"" + model_name + "\""), cache_(std::move(cache)),
      ttft_(
          {0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}),
      itl_({0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3,
            0.4,   0.5,    0.75,  1,    2.5,   5,    7.5,   10,  20,   40,  80}),
      e2e_({0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920}),
      prompt_len_(one_two_five_buckets()), generation_len_(one_two_five_buckets()), queue_(phase_buckets()),
      prefill_(phase_buckets()), decode_(phase_buckets()),
      iteration_({1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384}), inference_(phase_buckets()),
      tpot_(
          {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0}),
      params_n_({1, 2, 5, 10, 20}), params_max_tokens_(one_two_five_buckets()) {
  gauges_.kv_blocks_total = cache_.num_blocks;  // right from start-up, before any step
}

void Metrics::on_request_added(int64_t n) {
  std::lock_guard lk(mu_);
  prompt_tokens_ += n;
}
void Metrics::on_tokens(int64_t n) {
  std::lock_guard lk(mu_);
  generation_tokens_ += n;
}
void Metrics::on_first_token(double s) {
  std::lock_guard lk(mu_);
  ttft_.observe(s);
}
void Metrics::on_inter_token(double s) {
  std::lock_guard lk(mu_);
  itl_.observe(s);
}
void Metrics::on_iteration(int64_t tokens) {
  std::lock_guard lk(mu_);
  iteration_.observe(double(tokens));
}
void Metrics::on_request_finished(const FinishedRequest& r) {
  std::lock_guard lk(mu_);
  ++finished_[finish_reason_str(r.why)];
  e2e_.observe(r.e2e_s);
  prompt_len_.observe(double(r.prompt_tokens));
  generation_len_.observe(double(r.generation_tokens));
  queue_.observe(r.queue_s);
  prefill_.observe(r.prefill_s);
  decode_.observe(r.decode_s);
  inference_.observe(r.prefill_s + r.decode_s);
  tpot_.observe(r.generation_tokens > 1 ? r.decode_s / double(r.generation_tokens - 1) : 0.0);
  if (r.n > 0) params_n_.observe(double(r.n));
  if (r.max_tokens > 0) params_max_tokens_.observe(double(r.max_tokens));
}
void Metrics::on_http_error(int status) {
  std::lock_guard lk(mu_);
  ++http_errors_[status];
}
void Metrics::set_gauges(const EngineGauges& g) {
  std::lock_guard lk(mu_);
  gauges_ = g;
}
EngineGauges Metrics::gauges() const {
  std::lock_guard lk(mu_);
  return gauges_;
}

std::string Metrics::render() const {
  std::lock_guard lk(mu_);
  const auto& g = gauges_;
  std::string o;
  auto gauge = [&](const std::string& name, const std::string& help, double v) {
    header(o, name, "gauge", help);
    sample(o, name, labels_, v);
  };
  auto counter = [&](const std::string& name, const std::string& help, double v) {
    header(o, name, "counter", help);
    sample(o, name, labels_, v);
  };
  gauge("vllm:num_requests_running", "Number of requests in model execution batches.", double(g.running));
  gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", double(g.waiting));
  gauge("nanovllm:num_requests_open", "Requests the HTTP server is serving (queued, running or streaming).",
        double(g.open_requests));
  const double usage = g.kv_blocks_total ? double(g.kv_blocks_used) / double(g.kv_blocks_total) : 0.0;
  gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", usage);
  gauge("nanovllm:kv_cache_blocks_used", "KV-cache blocks held by live sequences.", double(g.kv_blocks_used));
  gauge("nanovllm:kv_cache_blocks_total", "KV-cache blocks in the pool.", double(g.kv_blocks_total));
  counter("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.", double(g.prefix_queries));
  counter("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.", double(g.prefix_hits));
  gauge("nanovllm:prefix_cache_hit_rate", "Prefix-cache hits / queries over the server's life.",
        g.prefix_queries ? double(g.prefix_hits) / double(g.prefix_queries) : 0.0);
  counter("vllm:num_preemptions_total", "Cumulative number of preemptions.", double(g.preemptions));
  if (g.speculative) {  // vLLM's spec-decode counters
    counter("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", double(g.spec_drafts));
    counter("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", double(g.spec_draft_tokens));
    counter("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", double(g.spec_accepted_tokens));
    header(o, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter", "Accepted tokens per draft position.");
    for (size_t j = 0; j < g.spec_accepted_per_pos.size(); ++j)
      sample(o, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
             labels_ + ",position=\"" + std::to_string(j) + "\"", double(g.spec_accepted_per_pos[j]));
  }
  counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.", double(prompt_tokens_));
  counter("vllm:generation_tokens_total", "Number of generation tokens processed.", double(generation_tokens_));
  header(o, "vllm:request_success_total", "counter", "Count of finished requests by finish reason.");
  for (const char* r : {"stop", "length", "abort"}) {
    auto it = finished_.find(r);
    sample(o, "vllm:request_success_total", labels_ + ",finished_reason=\"" + r + "\"",
           it == finished_.end() ? 0.0 : double(it->second));
  }
  header(o, "nanovllm:http_errors_total", "counter", "Error responses by HTTP status.");
  for (auto& [status, n] : http_errors_)
    sample(o, "nanovllm:http_errors_total", labels_ + ",status=\"" + std::to_string(status) + "\"", double(n));
  ttft_.render("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels_, o);
  itl_.render("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", labels_, o);
  e2e_.render("vllm:e2e_request_latency_seconds", "Histogram of end to end request latency in seconds.", labels_, o);
  prompt_len_.render("vllm:request_prompt_tokens", "Number of prefill tokens processed.", labels_, o);
  generation_len_.render("vllm:request_generation_tokens", "Number of generation tokens processed.", labels_, o);
  queue_.render("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", labels_, o);
  prefill_.render("vllm:request_prefill_time_seconds", "Histogram of time spent in PREFILL phase for request.", labels_,
                  o);
  decode_.render("vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", labels_,
                 o);
  inference_.render("vllm:request_inference_time_seconds", "Histogram of time spent in RUNNING phase for request.",
                    labels_, o);
  tpot_.render("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
               labels_, o);
  params_n_.render("vllm:request_params_n", "Histogram of the n request parameter.", labels_, o);
  params_max_tokens_.render("vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", labels_,
                            o);
  iteration_.render("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", labels_, o);
  header(o, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig.");
  sample(o, "vllm:cache_config_info",
         labels_ + ",block_size=\"" + std::to_string(cache_.block_size) + "\",cache_dtype=\"" + cache_.cache_dtype +
             "\",enable_prefix_caching=\"" + (cache_.enable_prefix_caching ? "True" : "False") +
             "\",gpu_memory_utilization=\"" + num(cache_.gpu_memory_utilization) + "\",num_gpu_blocks=\"" +
             std::to_string(cache_.num_blocks) + "\"",
         1.0);
  return o;
}

}  // namespace nanovllm::server
