#include "nanovllm/server/engine_loop.h"

#include <cstdio>

#include "nanovllm/output/step_events.h"

namespace nanovllm::server {

EngineLoop::EngineLoop(LLM& llm, Metrics& metrics, double request_timeout_s)
    : llm_(llm), metrics_(metrics), timeout_(request_timeout_s > 0 ? request_timeout_s : 1e9),
      thread_([this] { run(); }) {}

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
                                                   std::function<void()> notify, const output::OutputParsers& parsers) {
  auto ch = std::make_shared<RequestChannel>(int(prompts.size()), std::move(notify));
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    submits_.push_back({std::move(prompts), sp, parsers, ch, Clock::now()});
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
      if (live_.empty() && !engine.has_unfinished()) cv_.wait(lk, [&] { return stopping_ || !submits_.empty(); });
      if (stopping_) break;
      jobs.swap(submits_);
    }
    for (auto& j : jobs) admit(j);
    drop_cancelled_and_expired();
    if (engine.has_unfinished()) {
      try {
        route(engine.step());
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
      l.out = std::make_unique<output::OutputProcessor>(llm_.tokenizer(), job.params, job.parsers);
      l.arrival = l.last_token = job.arrival;
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
    metrics_.on_request_finished(FinishReason::Abort, std::chrono::duration<double>(now - l.arrival).count());
    if (!cancelled)
      l.channel->fail(
          ApiError(408, "the request took longer than the server's --request-timeout and was aborted", "", "timeout"));
    it = live_.erase(it);
  }
}

void EngineLoop::route(const StepResult& r) {
  const auto now = Clock::now();
  metrics_.on_tokens(int64_t(r.new_tokens.size()));
  for (const output::TokenEvent& e : output::step_events(r)) {
    auto it = live_.find(e.request_id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    ChoiceEvent ev;
    ev.index = l.index;
    if (e.token >= 0) {
      const double gap = std::chrono::duration<double>(now - l.last_token).count();
      if (l.num_tokens == 0)
        metrics_.on_first_token(gap);
      else
        metrics_.on_inter_token(gap);
      l.last_token = now;
      ++l.num_tokens;
      ev.num_tokens = 1;
      ev.token_ids = {e.token};
    }
    output::OutputDelta d;
    try {
      d = l.out->push(e.token, e.finish);
    } catch (const std::exception& ex) {  // this request's text failed; the others go on
      llm_.engine().abort(it->first);
      l.channel->fail(ApiError(500, std::string("detokenization failed: ") + ex.what()));
      live_.erase(it);
      continue;
    }
    ev.text = std::move(d.text);
    ev.reasoning = std::move(d.reasoning);
    ev.tool_calls = std::move(d.tool_calls);
    if (d.finish == FinishReason::None) {
      l.channel->push(std::move(ev));
      continue;
    }
    if (d.stopped_by_string) llm_.engine().abort(it->first);  // the engine does not know stop strings
    ev.finish = d.finish;
    ev.called_tools = l.out->called_tools();
    metrics_.on_request_finished(d.finish, std::chrono::duration<double>(now - l.arrival).count());
    l.channel->push(std::move(ev));
    live_.erase(it);
  }
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
}

}  // namespace nanovllm::server
