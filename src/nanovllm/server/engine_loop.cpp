#include "nanovllm/server/engine_loop.h"

#include <algorithm>
#include <cstdio>
#include <thread>

#include "nanovllm/server/structured_fields.h"

namespace nanovllm::server {

namespace {
// Steps that throw one after another before the engine counts as failed for good (a device error
// that every step meets); one failed step only ends the requests it carried.
constexpr int kFatalFailedSteps = 3;
}  // namespace

EngineLoop::EngineLoop(LLM& llm, Metrics& metrics, EngineLoopLimits limits, EngineLogOptions log)
    : llm_(llm), metrics_(metrics), timeout_(limits.request_timeout_s > 0 ? limits.request_timeout_s : 1e9),
      limits_(limits), log_(log), stats_(log.interval_s), thread_([this] { run(); }),
      compiler_([this] { compile_run(); }) {}

EngineLoop::~EngineLoop() { stop(); }

void EngineLoop::stop() {
  std::lock_guard stop_lk(stop_mu_);
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  compile_cv_.notify_all();
  if (compiler_.joinable()) compiler_.join();
  if (thread_.joinable()) thread_.join();
}

void EngineLoop::compile_run() {
  for (;;) {
    Job job;
    {
      std::unique_lock lk(mu_);
      compile_cv_.wait(lk, [&] { return stopping_ || !compiles_.empty(); });
      if (stopping_) break;
      job = std::move(compiles_.front());
      compiles_.pop_front();
    }
    try {
      llm_.precompile_structured(job.params.structured_outputs);
    } catch (const std::exception&) {
      // Refused: admission compiles it again and answers the error with the request's field.
    }
    {
      std::lock_guard lk(mu_);
      if (stopping_) {
        job.channel->fail(ApiError(503, "the server is shutting down"));
        break;
      }
      submits_.push_back(std::move(job));
    }
    cv_.notify_all();
  }
  std::lock_guard lk(mu_);
  for (auto& j : compiles_) j.channel->fail(ApiError(503, "the server is shutting down"));
  compiles_.clear();
}

std::shared_ptr<RequestChannel> EngineLoop::submit(std::vector<std::vector<int32_t>> prompts, const SamplingParams& sp,
                                                   std::function<void()> notify, const output::OutputParsers& parsers,
                                                   std::string request_id, std::string structured_field) {
  auto ch =
      std::make_shared<RequestChannel>(int(prompts.size()) * sp.n, std::move(notify), limits_.max_pending_output_bytes);
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    if (std::lock_guard f(fatal_mu_); !fatal_.empty()) throw ApiError(503, "the engine has failed: " + fatal_);
    if (idle_) note_progress();  // the watchdog counts from now, not from when the loop fell idle
    ++queued_;
    (sp.structured_outputs.active() ? compiles_ : submits_)
        .push_back(
            {std::move(prompts), sp, parsers, ch, Clock::now(), std::move(request_id), std::move(structured_field)});
  }
  (sp.structured_outputs.active() ? compile_cv_ : cv_).notify_all();
  return ch;
}

void EngineLoop::cancel(RequestChannel& ch) {
  ch.cancelled = true;  // polled by the loop; when it is idle there is nothing to abort
  cv_.notify_all();
}

void EngineLoop::run() {
  RequestTracker& tracker = llm_.tracker();
  ApiError last_words(503, "the server is shutting down");
  try {
    for (;;) {
      std::deque<Job> jobs;
      {
        std::unique_lock lk(mu_);
        if (open_.empty() && !tracker.has_unfinished()) {
          auto woken = [&] { return stopping_ || !submits_.empty(); };
          note_progress();
          idle_ = true;
          // Idle: the stats of the last busy interval are still due (then nothing until work comes).
          if (log_.stats && stats_.pending(metrics_.gauges()))
            cv_.wait_for(lk, std::chrono::duration<double>(std::max(0.0, stats_.due_in(Clock::now()))), woken);
          else
            cv_.wait(lk, woken);
          idle_ = false;
        }
        if (stopping_) break;
        jobs.swap(submits_);
        queued_ -= int64_t(jobs.size());
      }
      for (auto& j : jobs) admit(j);
      drop_cancelled_and_expired();
      open_count_ = int64_t(open_.size());
      if (tracker.has_unfinished()) step_once();
      publish();
      open_count_ = int64_t(open_.size());
      note_progress();
    }
  } catch (const std::exception& e) {
    // Outside a step (admission, routing, metrics): the loop's state is not to be trusted.
    set_fatal(std::string("the engine loop failed: ") + e.what());
    last_words = ApiError(500, "the engine has failed: " + std::string(e.what()));
  }
  ended_ = true;
  try {
    fail_all(last_words);
  } catch (const std::exception&) {
    open_.clear();  // the tracker is broken too: the channels still get their answer below
  }
  std::lock_guard lk(mu_);
  for (auto& j : submits_) j.channel->fail(last_words);
  submits_.clear();
}

void EngineLoop::step_once() {
  if (limits_.testing_stall_s > 0 && !stalled_once_) {  // test hook (--testing-stall-engine)
    stalled_once_ = true;
    std::this_thread::sleep_for(std::chrono::duration<double>(limits_.testing_stall_s));
  }
  try {
    TrackerStep s = llm_.tracker().step();
    failed_steps_ = 0;
    metrics_.on_iteration(s.engine.num_tokens);
    stats_.on_step(s.engine.num_prefill_tokens, int64_t(s.engine.new_tokens.size()));
    route(s);
  } catch (const std::exception& e) {
    // An engine failure ends the requests in flight, not the server; one that every step meets
    // (a device error) is fatal, and /health says so.
    log_.logger.log(LogLevel::Error, std::string("engine error: ") + e.what());
    if (++failed_steps_ >= kFatalFailedSteps)
      set_fatal(std::to_string(failed_steps_) + " steps in a row failed, the last with: " + e.what());
    fail_all(ApiError(500, std::string("engine error: ") + e.what()));
  }
}

void EngineLoop::set_fatal(const std::string& why) {
  std::lock_guard lk(fatal_mu_);
  if (!fatal_.empty()) return;
  fatal_ = why;
  log_.logger.log(LogLevel::Error, "the engine has failed; /health answers 503 from now on: " + why);
}

std::optional<std::string> EngineLoop::unhealthy(double stall_bound_s) const {
  {
    std::lock_guard lk(fatal_mu_);
    if (!fatal_.empty()) return "the engine has failed: " + fatal_;
  }
  if (ended_) return std::string("the engine loop has stopped");
  const int64_t work = queued_.load() + open_count_.load();
  if (stall_bound_s <= 0 || idle_ || work <= 0) return std::nullopt;
  const auto since = Clock::now() - Clock::time_point(Clock::duration(progress_at_.load()));
  const double s = std::chrono::duration<double>(since).count();
  if (s <= stall_bound_s) return std::nullopt;
  char buf[160];
  std::snprintf(buf, sizeof buf, "the engine has made no progress for %.1f s with %lld request(s) pending", s,
                static_cast<long long>(work));
  return std::string(buf) + " (--engine-stall-timeout " + std::to_string(stall_bound_s) + ")";
}

// The id of a choice in the logs: the request's, with the choice's index when it has several.
std::string EngineLoop::choice_id(const Open& o, int choice) {
  return o.indexed ? o.id + "-" + std::to_string(o.first_index + choice) : o.id;
}

void EngineLoop::choice_added(const Open& o, int choice, int64_t prompt_tokens) {
  if (log_.requests)
    log_.logger.info(
        request_received_line(choice_id(o, choice), prompt_tokens, RequestTracker::choice_params(o.params, choice)));
  metrics_.on_request_added(prompt_tokens);
}

void EngineLoop::admit(Job& job) {
  RequestTracker& tracker = llm_.tracker();
  std::vector<int64_t> added;
  try {
    const int n = job.params.n;
    const auto deadline = job.arrival + std::chrono::duration_cast<Clock::duration>(timeout_);
    const bool indexed = job.prompts.size() * size_t(n) > 1;
    for (size_t i = 0; i < job.prompts.size(); ++i) {
      // n > 1: choice i * n + j of seed + j (vLLM's parallel sampling); the tracker adds choice 0
      // now and the others once its prompt is computed.
      const int64_t prompt_tokens = int64_t(job.prompts[i].size());
      const int64_t rid = tracker.add(std::move(job.prompts[i]), job.params, {true, job.parsers, job.arrival});
      added.push_back(rid);
      const Open& o = open_[rid] = {job.channel, int(i) * n, n, job.params, deadline, job.id, indexed};
      choice_added(o, 0, prompt_tokens);
    }
    job.channel->admit();
  } catch (const std::exception& e) {
    // This request alone fails; the choices already queued for it are withdrawn.
    for (int64_t rid : added) {
      tracker.abort(rid);
      open_.erase(rid);
    }
    if (auto* ue = dynamic_cast<const UserError*>(&e))
      job.channel->fail(engine_refusal(*ue, job.structured_field));
    else
      job.channel->fail(ApiError(500, std::string("could not add the request: ") + e.what()));
  }
}

void EngineLoop::drop_cancelled_and_expired() {
  const auto now = Clock::now();
  for (auto it = open_.begin(); it != open_.end();) {
    const Open& o = it->second;
    const bool cancelled = o.channel->cancelled.load();
    if (!cancelled && now < o.deadline) {
      ++it;
      continue;
    }
    if (cancelled && o.channel->too_slow())
      log_.logger.warning("request " + logged_client_string(o.id) +
                          " aborted: its client read too slowly (--max-pending-output-bytes " +
                          std::to_string(limits_.max_pending_output_bytes) + ")");
    for (const ChoiceSummary& s : llm_.tracker().abort(it->first))  // frees their KV blocks
      record_finished(o, s, FinishReason::Abort, now);
    if (!cancelled)
      o.channel->fail(
          ApiError(408, "the request took longer than the server's --request-timeout and was aborted", "", "timeout"));
    it = open_.erase(it);
  }
}

void EngineLoop::route(TrackerStep& s) {
  const auto now = Clock::now();
  metrics_.on_tokens(int64_t(s.engine.new_tokens.size()));
  for (const ChoiceSummary& a : s.added)
    if (auto it = open_.find(a.request_id); it != open_.end()) choice_added(it->second, a.choice, a.prompt_tokens);
  for (RequestEvent& ev : s.events) {
    auto it = open_.find(ev.request_id);
    if (it == open_.end()) continue;
    Open& o = it->second;
    if (!ev.error.empty()) {  // this request failed; its other choices are aborted on the next iteration
      o.channel->fail(ApiError(500, ev.error));
      o.channel->cancelled = true;
    } else {
      ChoiceEvent ce;
      ce.index = o.first_index + ev.choice;
      if (!ev.token_ids.empty()) {
        if (ev.summary.generated_tokens == 1)
          metrics_.on_first_token(ev.token_gap_s);
        else
          metrics_.on_inter_token(ev.token_gap_s);
        ce.num_tokens = 1;
      }
      ce.text = std::move(ev.text);
      ce.reasoning = std::move(ev.reasoning);
      ce.tool_calls = std::move(ev.tool_calls);
      ce.token_ids = std::move(ev.token_ids);
      ce.logprobs = std::move(ev.logprobs);
      ce.prompt_logprobs = std::move(ev.prompt_logprobs);
      ce.finish = ev.finish;
      ce.stop_reason = std::move(ev.stop_reason);
      ce.called_tools = ev.called_tools;
      ce.pooled = std::move(ev.output.pooled);
      if (ev.finish != FinishReason::None) record_finished(o, ev.summary, ev.finish, now);
      o.channel->push(std::move(ce));
      if (ev.finish == FinishReason::None) continue;
    }
    if (--o.remaining == 0) open_.erase(it);
  }
}

void EngineLoop::fail_all(const ApiError& err) {
  for (auto& [rid, o] : open_) {
    llm_.tracker().abort(rid);
    o.channel->fail(err);
  }
  open_.clear();
}

void EngineLoop::publish() {
  const SchedulerStats s = llm_.scheduler_stats();
  EngineGauges g;
  g.running = s.running;
  g.waiting = s.waiting;
  g.open_requests = int64_t(llm_.tracker().num_live_choices());
  g.kv_blocks_total = s.kv_blocks_total;
  g.kv_blocks_used = s.kv_blocks_used;
  g.prefix_queries = s.prefix_query_tokens;
  g.prefix_hits = s.prefix_hit_tokens;
  g.preemptions = s.preemptions;
  g.speculative = llm_.config().speculative_config.enabled();
  g.spec_drafts = s.spec.num_drafts;
  g.spec_draft_tokens = s.spec.num_draft_tokens;
  g.spec_accepted_tokens = s.spec.num_accepted_tokens;
  g.spec_accepted_per_pos = s.spec.accepted_per_pos;
  metrics_.set_gauges(g);
  if (log_.stats)
    if (const std::string line = stats_.maybe_line(Clock::now(), g); !line.empty()) log_.logger.info(line);
}

void EngineLoop::record_finished(const Open& o, const ChoiceSummary& s, FinishReason why, Clock::time_point now) {
  auto secs = [](Clock::time_point a, Clock::time_point b) {
    return a == Clock::time_point{} || b == Clock::time_point{} ? 0.0 : std::chrono::duration<double>(b - a).count();
  };
  FinishedRequest r;
  r.why = why;
  r.prompt_tokens = s.prompt_tokens;
  r.generation_tokens = s.generated_tokens;
  r.e2e_s = secs(s.times.arrival, now);
  r.queue_s = secs(s.times.arrival, s.times.scheduled);
  r.prefill_s = secs(s.times.scheduled, s.times.first_token);
  r.decode_s = secs(s.times.first_token, s.times.last_token);
  if (s.choice == 0) {  // the request's parameters, once per request
    r.n = o.params.n;
    r.max_tokens = o.params.max_tokens;
  }
  metrics_.on_request_finished(r);
  if (log_.requests) log_.logger.info(request_finished_line(choice_id(o, s.choice), r));
}

}  // namespace nanovllm::server
