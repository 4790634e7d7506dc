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

#include "nanovllm/llm.h"
#include "nanovllm/output/output_processor.h"
#include "nanovllm/server/metrics.h"
#include "nanovllm/server/request_channel.h"

namespace nanovllm::server {

class EngineLoop {
 public:
  using Clock = std::chrono::steady_clock;

  // `llm` must outlive the loop; its engine is used only by the loop's thread from now on.
  EngineLoop(LLM& llm, Metrics& metrics, double request_timeout_s);
  ~EngineLoop();  // stops and joins; open requests fail with 503
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues one request with one choice per prompt (all token ids, already validated against
  // max_model_len by the caller). Outputs and errors arrive on the returned channel, which calls
  // `notify` (on this loop's thread) after each change. `parsers`: reasoning/tool-call parsing of
  // the text (chat).
  std::shared_ptr<RequestChannel> submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& sp,
                                         std::function<void()> notify, const output::OutputParsers& parsers = {});
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
  };
  // A choice of n > 1 waiting for its first sibling's prompt to be in the prefix cache.
  struct Sibling {
    std::vector<int32_t> prompt;
    SamplingParams params;
    int index = 0;
    output::OutputParsers parsers;
  };
  // One choice of a request, living in the engine.
  struct Live {
    std::shared_ptr<RequestChannel> channel;
    int index = 0;
    std::unique_ptr<output::OutputProcessor> out;
    Clock::time_point arrival, last_token, deadline;
    int num_tokens = 0;
    // n > 1: the other choices of this prompt, added to the engine once this one has its first
    // token, so that they find the prompt's KV blocks in the prefix cache.
    std::vector<Sibling> siblings;
    bool wants_logprobs = false;
  };

  void run();
  void admit(Job& job);
  int64_t add_choice(const std::shared_ptr<RequestChannel>& ch, std::vector<int32_t> prompt, const SamplingParams& sp,
                     int index, Clock::time_point arrival, const output::OutputParsers& parsers);
  void add_siblings(Live& first);
  void drop_cancelled_and_expired();
  void route(const StepResult& r);
  void fail_all(const ApiError& err);
  void publish();

  LLM& llm_;
  Metrics& metrics_;
  std::chrono::duration<double> timeout_;

  std::mutex mu_;  // guards submits_ and stopping_
  std::condition_variable cv_;
  std::deque<Job> submits_;
  bool stopping_ = false;

  std::map<int64_t, Live> live_;  // engine request id -> choice; engine thread only
  std::thread thread_;            // last member: starts after everything above exists
};

}  // namespace nanovllm::server
