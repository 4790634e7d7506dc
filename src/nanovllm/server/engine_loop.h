// The engine thread (llama.cpp server's design): ONE thread owns the LLMEngine and every piece of
// per-request engine state. HTTP handlers only submit jobs through a locked queue and read
// outputs from their RequestChannel (which wakes them); cancellation is a flag on the channel that this thread
// polls. Each loop iteration: admit new jobs, abort cancelled or timed-out requests, step the
// engine, turn new tokens into text (output::OutputProcessor: detokenization, stop strings,
// reasoning and tool-call parsing) and push deltas
// to the channels, then publish gauges to the metrics.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nanovllm/frontend/llm.h"
#include "nanovllm/output/output_processor.h"
#include "nanovllm/server/engine_log.h"
#include "nanovllm/server/metrics.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

class EngineLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `llm` must outlive the loop; its engine is used only by the loop's thread from now on.
  EngineLoop(LLM& llm, Metrics& metrics, double request_timeout_s, EngineLogOptions log = {});
  ~EngineLoop();  // stops and joins; open requests fail with 503
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues one request with one choice per prompt (all token ids, already validated against
  // max_model_len by the caller). Outputs and errors arrive on the returned channel, which calls
  // `notify` (on this loop's thread) after each change. `parsers`: reasoning/tool-call parsing of
  // the text (chat). `request_id` names the request in the logs.
  std::shared_ptr<RequestChannel> submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& sp,
                                         std::function<void()> notify, const output::OutputParsers& parsers = {},
                                         std::string request_id = "");
  // The client went away: the loop aborts the request in the engine (freeing its KV blocks).
  void cancel(RequestChannel& ch);
  void stop();

 private:
  struct Job {
    std::vector<std::vector<int32_t>> prompts;
    SamplingParams params;
    output::OutputParsers parsers;
    std::shared_ptr<RequestChannel> channel;
    Clock::time_point arrival;
    std::string id;
  };
  // A choice of n > 1 waiting for its first sibling's prompt to be in the prefix cache.
  struct Sibling {
    std::vector<int32_t> prompt;
    SamplingParams params;
    int index = 0;
    output::OutputParsers parsers;
    std::string id;  // for the logs
  };
  // One choice of a request, living in the engine.
  struct Live {
    std::shared_ptr<RequestChannel> channel;
    int index = 0;
    std::unique_ptr<output::OutputProcessor> out;
    Clock::time_point arrival, last_token, deadline;
    Clock::time_point scheduled{}, first_token{};  // unset (epoch) until reached
    int num_tokens = 0;
    // n > 1: the other choices of this prompt, added to the engine once this one has its first
    // token, so that they find the prompt's KV blocks in the prefix cache.
    std::vector<Sibling> siblings;
    bool wants_logprobs = false;
    int64_t prompt_tokens = 0;
    std::string id;  // for the logs: the HTTP request's id, with the choice index when n > 1
  };

  void run();
  void admit(Job& job);
  int64_t add_choice(const std::shared_ptr<RequestChannel>& ch, std::vector<int32_t> prompt, const SamplingParams& sp,
                     int index, Clock::time_point arrival, const output::OutputParsers& parsers, std::string id);
  static std::string choice_id(const Job& job, int index);
  void add_siblings(Live& first);
  void drop_cancelled_and_expired();
  void route(const StepResult& r);
  void fail_all(const ApiError& err);
  void publish();
  void mark_scheduled(Clock::time_point step_start);
  void record_finished(const Live& l, FinishReason why, Clock::time_point now);

  LLM& llm_;
  Metrics& metrics_;
  std::chrono::duration<double> timeout_;
  EngineLogOptions log_;
  StatsLog stats_;

  std::mutex mu_;  // guards submits_ and stopping_
  std::condition_variable cv_;
  std::deque<Job> submits_;
  bool stopping_ = false;

  std::map<int64_t, Live> live_;  // engine request id -> choice; engine thread only
  std::thread thread_;            // last member: starts after everything above exists
};

}  // namespace nanovllm::server
