// The engine thread (llama.cpp server's design): ONE thread owns the LLM (its engine and request
// tracker). HTTP handlers only submit jobs through a locked queue and read outputs from their
// RequestChannel (which wakes them); cancellation is a flag on the channel that this thread polls.
// Each loop iteration: admit new jobs into the tracker, abort cancelled or timed-out requests,
// step the tracker (it turns tokens into text deltas, ends requests on stop strings and adds the
// n > 1 choices), push its events to the channels, and feed metrics and logs from them.
// A request with structured outputs first goes through a second thread that compiles its grammar
// into the engine's cache (LLM::precompile_structured): a new schema's compile (milliseconds to
// seconds) never stalls the engine thread, whose admission then finds it compiled.
// Health (/health's watchdog): the loop notes when it last made progress, how much work waits and
// whether it has failed for good, all in atomics, so the I/O threads judge it without waiting for
// the engine thread.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/server/engine_log.h"
#include "nanovllm/server/metrics.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

// The loop's bounds (ServerOptions).
struct EngineLoopLimits {
  double request_timeout_s = 600;        // a request running longer is aborted (0 = never)
  int64_t max_pending_output_bytes = 0;  // output waiting for a reader, per request (0 = no bound)
  double testing_stall_s = 0;            // test hook: the first step with work sleeps this long first
};

class EngineLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `llm` must outlive the loop; its engine is used only by the loop's thread from now on.
  EngineLoop(LLM& llm, Metrics& metrics, EngineLoopLimits limits, EngineLogOptions log = {});
  ~EngineLoop();  // stops and joins; open requests fail with 503
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues one request with one choice per prompt (all token ids, already validated against
  // max_model_len by the caller). Outputs and errors arrive on the returned channel, which calls
  // `notify` (on this loop's thread) after each change. `parsers`: reasoning/tool-call parsing of
  // the text (chat). `request_id` names the request in the logs. `structured_field`: the request
  // field that asked for sp.structured_outputs, the param of the 400 when the engine refuses it.
  std::shared_ptr<RequestChannel> submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& sp,
                                         std::function<void()> notify, const output::OutputParsers& parsers = {},
                                         std::string request_id = "", std::string structured_field = "");
  // The client went away: the loop aborts the request in the engine (freeing its KV blocks).
  void cancel(RequestChannel& ch);
  void stop();  // thread-safe, idempotent

  // Why the engine cannot serve, or nullopt: a fatal error (sticky), the loop stopped, or no
  // progress for more than `stall_bound_s` (0: not checked) while work is pending (clears once it
  // moves again). Any thread; never waits for the engine thread.
  std::optional<std::string> unhealthy(double stall_bound_s) const;

 private:
  struct Job {
    std::vector<std::vector<int32_t>> prompts;
    SamplingParams params;
    output::OutputParsers parsers;
    std::shared_ptr<RequestChannel> channel;
    Clock::time_point arrival;
    std::string id;
    std::string structured_field;
  };
  // One prompt of a request: its sp.n choices, tracked under the id the tracker gave it.
  struct Open {
    std::shared_ptr<RequestChannel> channel;
    int first_index = 0;  // its choice j is the response's choice first_index + j
    int remaining = 0;    // choices not ended
    SamplingParams params;
    Clock::time_point deadline;
    std::string id;        // the HTTP request's id, for the logs
    bool indexed = false;  // the request has several choices: the logs name each with its index
  };

  void run();
  void compile_run();
  void admit(Job& job);
  static std::string choice_id(const Open& o, int choice);
  void choice_added(const Open& o, int choice, int64_t prompt_tokens);
  void drop_cancelled_and_expired();
  void route(TrackerStep& s);
  void fail_all(const ApiError& err);
  void publish();
  void record_finished(const Open& o, const ChoiceSummary& s, FinishReason why, Clock::time_point now);
  void step_once();
  void note_progress() { progress_at_ = Clock::now().time_since_epoch().count(); }
  void set_fatal(const std::string& why);

  LLM& llm_;
  Metrics& metrics_;
  std::chrono::duration<double> timeout_;
  EngineLoopLimits limits_;
  EngineLogOptions log_;
  StatsLog stats_;

  std::mutex mu_;  // guards submits_, compiles_ and stopping_
  std::condition_variable cv_;
  std::condition_variable compile_cv_;
  std::deque<Job> submits_;
  std::deque<Job> compiles_;  // structured requests whose grammar compiles before they are submitted
  bool stopping_ = false;
  std::mutex stop_mu_;  // one stop() at a time (the signal thread and the server may both call it)

  // Health, written by the loop's threads, read by any.
  std::atomic<Clock::rep> progress_at_{Clock::now().time_since_epoch().count()};
  std::atomic<bool> idle_{true};        // waiting for work
  std::atomic<int64_t> queued_{0};      // submitted, not admitted yet
  std::atomic<int64_t> open_count_{0};  // prompts in the engine
  std::atomic<bool> ended_{false};      // the engine thread has returned
  int failed_steps_ = 0;                // consecutive steps that threw; engine thread only
  bool stalled_once_ = false;           // the test hook has run; engine thread only
  mutable std::mutex fatal_mu_;
  std::string fatal_;  // why the engine failed for good ("" = it did not)

  std::map<int64_t, Open> open_;  // tracker request id -> prompt of a request; engine thread only
  std::thread thread_;            // the engine thread: starts after everything above exists
  std::thread compiler_;          // the grammar thread
};

}  // namespace nanovllm::server
