#include "nanovllm/server/engine_log.h"

#include <cstdio>

#include <nlohmann/json.hpp>

namespace nanovllm::server {

namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

// A client's string in a log line: control characters (a newline would forge a line) as \xNN,
// at most `max` bytes of it, the rest counted.
// `escape` false: cut only (for text the JSON dump escapes anyway).
std::string loggable(const std::string& s, bool escape = true, size_t max = kMaxLoggedBytes) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < max; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (escape && (c < 0x20 || c == 0x7f)) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  if (s.size() > max) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

}  // namespace

std::string logged_client_string(const std::string& s) { return loggable(s); }

std::string request_received_line(const std::string& id, int64_t prompt_tokens, const SamplingParams& sp) {
  nlohmann::json p = {{"temperature", sp.temperature},
                      {"top_k", sp.top_k},
                      {"top_p", sp.top_p},
                      {"min_p", sp.min_p},
                      {"max_tokens", sp.max_tokens},
                      {"ignore_eos", sp.ignore_eos},
                      {"stop", nlohmann::json::array()},
                      {"stop_token_ids", sp.stop_token_ids.size()}};
  // Bounded whatever the request holds: the first stop strings, each cut (the JSON escapes them).
  for (size_t i = 0; i < sp.stop.size() && i < kMaxLoggedStops; ++i) p["stop"].push_back(loggable(sp.stop[i], false));
  if (sp.stop.size() > kMaxLoggedStops) p["stop_count"] = sp.stop.size();
  p["seed"] = sp.seed ? nlohmann::json(*sp.seed) : nlohmann::json(nullptr);
  return "Received request " + loggable(id) + ": prompt tokens " + std::to_string(prompt_tokens) +
         ", params: " + p.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string request_finished_line(const std::string& id, const FinishedRequest& r) {
  return "Finished request " + loggable(id) + ": finish_reason " + finish_reason_str(r.why) + ", prompt tokens " +
         std::to_string(r.prompt_tokens) + ", generation tokens " + std::to_string(r.generation_tokens) + ", queue " +
         fixed(r.queue_s, 3) + " s, prefill " + fixed(r.prefill_s, 3) + " s, decode " + fixed(r.decode_s, 3) +
         " s, e2e " + fixed(r.e2e_s, 3) + " s";
}

double StatsLog::due_in(Clock::time_point now) const {
  return interval_ - std::chrono::duration<double>(now - last_).count();
}

std::string StatsLog::maybe_line(Clock::time_point now, const EngineGauges& g) {
  if (due_in(now) > 0 || !pending(g)) return "";
  const double secs = std::chrono::duration<double>(now - last_).count();
  const int64_t dq = g.prefix_queries - last_queries_, dh = g.prefix_hits - last_hits_;
  const double usage = g.kv_blocks_total ? 100.0 * double(g.kv_blocks_used) / double(g.kv_blocks_total) : 0.0;
  std::string line = "Engine 000: Avg prompt throughput: " + fixed(double(prompt_tokens_) / secs, 1) +
                     " tokens/s, Avg generation throughput: " + fixed(double(generation_tokens_) / secs, 1) +
                     " tokens/s, Running: " + std::to_string(g.running) +
                     " reqs, Waiting: " + std::to_string(g.waiting) + " reqs, GPU KV cache usage: " + fixed(usage, 1) +
                     "%, Prefix cache hit rate: " + fixed(dq ? 100.0 * double(dh) / double(dq) : 0.0, 1) + "%";
  if (g.speculative) {  // vLLM's SpecDecoding line, over the same interval
    const int64_t drafted = g.spec_draft_tokens - last_draft_tokens_,
                  accepted = g.spec_accepted_tokens - last_accepted_tokens_;
    line +=
        ", Spec decode draft acceptance rate: " + fixed(drafted ? 100.0 * double(accepted) / double(drafted) : 0.0, 1) +
        "%, Drafted: " + std::to_string(drafted) + " tokens, Accepted: " + std::to_string(accepted) + " tokens";
    last_draft_tokens_ = g.spec_draft_tokens;
    last_accepted_tokens_ = g.spec_accepted_tokens;
  }
  last_ = now;
  prompt_tokens_ = generation_tokens_ = 0;
  last_queries_ = g.prefix_queries;
  last_hits_ = g.prefix_hits;
  return line;
}

}  // namespace nanovllm::server
