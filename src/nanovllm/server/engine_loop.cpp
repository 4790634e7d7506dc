#include "nanovllm/server/engine_loop.h"

#include <algorithm>
#include <cstdio>

namespace nanovllm::server {

EngineLoop::EngineLoop(LLM& llm, Metrics& metrics, double request_timeout_s, EngineLogOptions log)
    : llm_(llm), metrics_(metrics), timeout_(request_timeout_s > 0 ? request_timeout_s : 1e9), log_(log),
      stats_(log.interval_s), thread_([this] { run(); }) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::stop() {
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<RequestChannel> EngineLoop::submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& sp,
                                                   std::function<void()> notify, std::string request_id) {
  auto ch = std::make_shared<RequestChannel>(int(prompts.size()), std::move(notify));
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    submits_.push_back({std::move(prompts), sp, ch, Clock::now(), std::move(request_id)});
  }
  cv_.notify_all();
  return ch;
}

void EngineLoop::cancel(RequestChannel& ch) {
  ch.cancelled = true;  // polled by the loop; when it is idle there is nothing to abort
  cv_.notify_all();
}

void EngineLoop::run() {
  LLMEngine& engine = llm_.engine();
  for (;;) {
    std::deque<Job> jobs;
    {
      std::unique_lock lk(mu_);
      if (live_.empty() && !engine.has_unfinished()) {
        auto woken = [&] { return stopping_ || !submits_.empty(); };
        // Idle: the stats of the last busy interval are still due (then nothing until work comes).
        if (log_.stats && stats_.pending(metrics_.gauges()))
          cv_.wait_for(lk, std::chrono::duration<double>(std::max(0.0, stats_.due_in(Clock::now()))), woken);
        else
          cv_.wait(lk, woken);
      }
      if (stopping_) break;
      jobs.swap(submits_);
    }
    for (auto& j : jobs) admit(j);
    drop_cancelled_and_expired();
    if (engine.has_unfinished()) {
      try {
        const auto step_start = Clock::now();
        const StepResult r = engine.step();
        mark_scheduled(step_start);
        metrics_.on_iteration(r.num_tokens);
        stats_.on_step(r.num_prefill_tokens, int64_t(r.new_tokens.size()));
        route(r);
      } catch (const std::exception& e) {
        // An engine failure ends the requests in flight, not the server.
        std::fprintf(stderr, "engine error: %s\n", e.what());
        fail_all(ApiError(500, std::string("engine error: ") + e.what()));
      }
    }
    publish();
  }
  fail_all(ApiError(503, "the server is shutting down"));
  std::lock_guard lk(mu_);
  for (auto& j : submits_) j.channel->fail(ApiError(503, "the server is shutting down"));
  submits_.clear();
}

void EngineLoop::admit(Job& job) {
  LLMEngine& engine = llm_.engine();
  std::vector<int64_t> added;
  try {
    for (size_t i = 0; i < job.prompts.size(); ++i) {
      const int64_t n = int64_t(job.prompts[i].size());
      const int64_t rid = engine.add_request(std::move(job.prompts[i]), job.params);
      added.push_back(rid);
      Live l;
      l.channel = job.channel;
      l.index = int(i);
      if (const Tokenizer* tok = llm_.tokenizer())
        l.text = std::make_unique<TextStream>(*tok, job.params.stop, job.params.skip_special_tokens);
      l.arrival = l.last_token = job.arrival;
      l.prompt_tokens = n;
      l.id = job.prompts.size() > 1 ? job.id + "-" + std::to_string(i) : job.id;
      if (log_.requests) log_.logger.info(request_received_line(l.id, n, job.params));
      l.deadline = job.arrival + std::chrono::duration_cast<Clock::duration>(timeout_);
      live_.emplace(rid, std::move(l));
      metrics_.on_request_added(n);
    }
    job.channel->admit();
  } catch (const std::exception& e) {
    // This request alone fails; the choices already queued for it are withdrawn.
    for (int64_t rid : added) {
      engine.abort(rid);
      live_.erase(rid);
    }
    if (auto* ue = dynamic_cast<const UserError*>(&e))
      job.channel->fail(ApiError::from(*ue));
    else
      job.channel->fail(ApiError(500, std::string("could not add the request: ") + e.what()));
  }
}

void EngineLoop::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  for (auto it = live_.begin(); it != live_.end();) {
    Live& l = it->second;
    const bool cancelled = l.channel->cancelled.load();
    if (!cancelled && now < l.deadline) {
      ++it;
      continue;
    }
    llm_.engine().abort(it->first);  // frees its KV blocks
    record_finished(l, FinishReason::Abort, now);
    if (!cancelled)
      l.channel->fail(
          ApiError(408, "the request took longer than the server's --request-timeout and was aborted", "", "timeout"));
    it = live_.erase(it);
  }
}

void EngineLoop::route(const StepResult& r) {
  const auto now = Clock::now();
  metrics_.on_tokens(int64_t(r.new_tokens.size()));
  for (auto& [rid, tok] : r.new_tokens) {
    auto it = live_.find(rid);
    if (it == live_.end()) continue;
    Live& l = it->second;
    const double gap = std::chrono::duration<double>(now - l.last_token).count();
    if (l.num_tokens == 0) {
      metrics_.on_first_token(gap);
      l.first_token = now;
    } else
      metrics_.on_inter_token(gap);
    l.last_token = now;
    ++l.num_tokens;
    std::string delta;
    try {
      // Ids past the tokenizer's vocabulary (the model's embedding is padded: 151936 rows vs
      // 151669 tokens for Qwen3) have no text; Hugging Face decodes them to "" too.
      if (l.text && tok < llm_.tokenizer()->vocab_size()) delta = l.text->push(tok);
    } catch (const std::exception& e) {  // this request's text failed; the others go on
      llm_.engine().abort(rid);
      l.channel->fail(ApiError(500, std::string("detokenization failed: ") + e.what()));
      live_.erase(it);
      continue;
    }
    if (l.text && l.text->stopped()) {  // a stop string: end it here, the engine forgets it
      llm_.engine().abort(rid);
      l.channel->push({l.index, std::move(delta), 1, {tok}, FinishReason::None});
      finish(it, FinishReason::Stop, "");
      continue;
    }
    l.channel->push({l.index, std::move(delta), 1, {tok}, FinishReason::None});
  }
  for (auto& f : r.finished) {
    auto it = live_.find(f.request_id);
    if (it == live_.end()) continue;
    finish(it, f.finish_reason, it->second.text ? it->second.text->finish() : std::string());
  }
}

void EngineLoop::finish(std::map<int64_t, Live>::iterator it, FinishReason why, std::string tail) {
  Live& l = it->second;
  record_finished(l, why, Clock::now());
  l.channel->push({l.index, std::move(tail), 0, {}, why});
  live_.erase(it);
}

void EngineLoop::fail_all(const ApiError& err) {
  for (auto& [rid, l] : live_) {
    llm_.engine().abort(rid);
    l.channel->fail(err);
  }
  live_.clear();
}

void EngineLoop::publish() {
  const LLMEngine& engine = llm_.engine();
  const BlockManager& bm = engine.block_manager();
  EngineGauges g;
  g.running = int64_t(engine.scheduler().running().size());
  g.waiting = int64_t(engine.scheduler().waiting().size());
  g.open_requests = int64_t(live_.size());
  g.kv_blocks_total = bm.num_blocks();
  g.kv_blocks_used = bm.num_blocks() - bm.num_free_blocks();
  g.prefix_queries = bm.num_query_tokens();
  g.prefix_hits = bm.num_hit_tokens();
  g.preemptions = engine.scheduler().num_preemptions();
  metrics_.set_gauges(g);
  if (log_.stats)
    if (const std::string line = stats_.maybe_line(Clock::now(), g); !line.empty()) log_.logger.info(line);
}

// The step just run scheduled its sequences: those seen for the first time end their queueing.
// A prompt being chunked sits at the front of waiting with its blocks allocated.
void EngineLoop::mark_scheduled(Clock::time_point step_start) {
  const Scheduler& sch = llm_.engine().scheduler();
  auto mark = [&](const Sequence* s) {
    auto it = live_.find(s->id);
    if (it != live_.end() && it->second.scheduled == Clock::time_point{}) it->second.scheduled = step_start;
  };
  for (const Sequence* s : sch.running()) mark(s);
  if (!sch.waiting().empty() && !sch.waiting().front()->block_table.empty()) mark(sch.waiting().front());
}

void EngineLoop::record_finished(const Live& l, FinishReason why, Clock::time_point now) {
  auto secs = [](Clock::time_point a, Clock::time_point b) {
    return a == Clock::time_point{} || b == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(b - a).count();
  };
  FinishedRequest r;
  r.why = why;
  r.prompt_tokens = l.prompt_tokens;
  r.generation_tokens = l.num_tokens;
  r.e2e_s = secs(l.arrival, now);
  r.queue_s = secs(l.arrival, l.scheduled);
  r.prefill_s = secs(l.scheduled, l.first_token);
  r.decode_s = secs(l.first_token, l.last_token);
  metrics_.on_request_finished(r);
  if (log_.requests) log_.logger.info(request_finished_line(l.id, r));
}

}  // namespace nanovllm::server
