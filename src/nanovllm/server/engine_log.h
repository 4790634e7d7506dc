// What the engine thread logs, in vLLM's words: a line per request received and finished
// (--enable-log-requests), and every `interval` seconds while busy a stats line (unless
// --disable-log-stats): "Engine 000: Avg prompt throughput: 123.4 tokens/s, Avg generation
// throughput: ..., Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, Prefix cache hit rate: 50.0%".
#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/config/sampling_params.h"
#include "nanovllm/server/metrics.h"
#include "nanovllm/utils/log.h"

namespace nanovllm::server {

struct EngineLogOptions {
  Logger logger;
  bool requests = false;  // --enable-log-requests
  bool stats = false;     // on unless --disable-log-stats (ServerOptions)
  double interval_s = 10;
};

// A client's strings in these lines (the request id, stop strings) have their control characters
// escaped and are cut to kMaxLoggedBytes; at most kMaxLoggedStops stop strings are shown (and
// their count): a request cannot forge or flood log lines.
inline constexpr size_t kMaxLoggedBytes = 256;
inline constexpr size_t kMaxLoggedStops = 8;

// "Received request ID: prompt tokens N, params: {...}"
// A client's string (a request id) as it may appear in a log line: escaped and cut as above.
std::string logged_client_string(const std::string& s);
std::string request_received_line(const std::string& id, int64_t prompt_tokens, const SamplingParams& sp);
// "Finished request ID: finish_reason stop, prompt tokens N, generation tokens M, queue ... s, ..."
std::string request_finished_line(const std::string& id, const FinishedRequest& r);

class StatsLog {
 public:
  using Clock = std::chrono::steady_clock;
  explicit StatsLog(double interval_s) : interval_(interval_s), last_(Clock::now()) {}

  void on_step(int64_t prompt_tokens, int64_t generation_tokens) {
    prompt_tokens_ += prompt_tokens;
    generation_tokens_ += generation_tokens;
  }
  // Something to report: tokens since the last line, or requests in the engine.
  bool pending(const EngineGauges& g) const {
    return prompt_tokens_ + generation_tokens_ > 0 || g.running + g.waiting > 0;
  }
  // Seconds until the next line is due (<= 0: due now).
  double due_in(Clock::time_point now) const;
  // The line when one is due and there is something to report, else "" (and nothing changes).
  std::string maybe_line(Clock::time_point now, const EngineGauges& g);

 private:
  double interval_;
  Clock::time_point last_;
  int64_t prompt_tokens_ = 0, generation_tokens_ = 0;
  int64_t last_queries_ = 0, last_hits_ = 0;
  int64_t last_draft_tokens_ = 0, last_accepted_tokens_ = 0;
};

}  // namespace nanovllm::server
