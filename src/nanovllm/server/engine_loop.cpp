#include "nanovllm/server/engine_loop.h"

#include <algorithm>
#include <cstdio>

#include "nanovllm/output/step_events.h"

namespace nanovllm::server {

namespace {

// Choice j of a request with n parallel samples: one sequence, seed + j when a seed is given
// (vLLM's ParentRequest._get_child_sampling_params).
SamplingParams child_params(const SamplingParams& sp, int j) {
  SamplingParams c = sp;
  c.n = 1;
  if (sp.seed) c.seed = *sp.seed + uint64_t(j);
  if (j > 0) c.prompt_logprobs.reset();  // the same prompt: the response repeats choice 0's
  return c;
}

}  // namespace

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
                                                   std::function<void()> notify, const output::OutputParsers& parsers,
                                                   std::string request_id) {
  auto ch = std::make_shared<RequestChannel>(int(prompts.size()) * sp.n, std::move(notify));
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    submits_.push_back({std::move(prompts), sp, parsers, ch, Clock::now(), std::move(request_id)});
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

// The id of choice `index` in the logs: the request's, with the index when it has several.
std::string EngineLoop::choice_id(const Job& job, int index) {
  return job.prompts.size() * size_t(job.params.n) > 1 ? job.id + "-" + std::to_string(index) : job.id;
}

void EngineLoop::admit(Job& job) {
  LLMEngine& engine = llm_.engine();
  std::vector<int64_t> added;
  try {
    const int n = job.params.n;
    for (size_t i = 0; i < job.prompts.size(); ++i) {
      // n > 1: choice i * n + j of seed + j (vLLM's parallel sampling); the first goes in now.
      std::vector<Sibling> siblings;
      for (int j = 1; j < n; ++j)
        siblings.push_back(
            {job.prompts[i], child_params(job.params, j), int(i) * n + j, job.parsers, choice_id(job, int(i) * n + j)});
      const int64_t rid = add_choice(job.channel, std::move(job.prompts[i]), child_params(job.params, 0), int(i) * n,
                                     job.arrival, job.parsers, choice_id(job, int(i) * n));
      added.push_back(rid);
      live_.at(rid).siblings = std::move(siblings);
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

int64_t EngineLoop::add_choice(const std::shared_ptr<RequestChannel>& ch, std::vector<int32_t> prompt,
                               const SamplingParams& sp, int index, Clock::time_point arrival,
                               const output::OutputParsers& parsers, std::string id) {
  const int64_t n = int64_t(prompt.size());
  const int64_t rid = llm_.engine().add_request(std::move(prompt), sp);
  Live l;
  l.channel = ch;
  l.index = index;
  l.wants_logprobs = sp.logprobs.has_value();
  l.out = std::make_unique<output::OutputProcessor>(llm_.tokenizer(), sp, parsers);
  l.arrival = l.last_token = arrival;
  l.prompt_tokens = n;
  l.id = std::move(id);
  if (log_.requests) log_.logger.info(request_received_line(l.id, n, sp));
  l.deadline = arrival + std::chrono::duration_cast<Clock::duration>(timeout_);
  live_.emplace(rid, std::move(l));
  metrics_.on_request_added(n);
  return rid;
}

// The first choice's prompt has been computed (its full blocks are sealed in the prefix cache):
// its siblings go in now and read those blocks instead of computing them again.
void EngineLoop::add_siblings(Live& first) {
  std::vector<Sibling> siblings = std::move(first.siblings);
  first.siblings.clear();
  const auto ch = first.channel;
  const auto arrival = first.arrival;
  try {
    for (auto& s : siblings) add_choice(ch, std::move(s.prompt), s.params, s.index, arrival, s.parsers, s.id);
  } catch (const std::exception& e) {  // the same prompt and parameters were accepted: not expected
    ch->fail(ApiError(500, std::string("could not add a parallel sample: ") + e.what()));
    ch->cancelled = true;  // the next iteration aborts the choices already in
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
  for (const output::TokenEvent& e : output::step_events(r)) {
    auto it = live_.find(e.request_id);
    if (it == live_.end()) continue;
    Live& l = it->second;
    // n > 1: this choice's prompt is computed, so its siblings go in now (live_ is a map: `l` and
    // `it` stay valid).
    if (!l.siblings.empty()) add_siblings(l);
    ChoiceEvent ev;
    ev.index = l.index;
    if (e.token >= 0) {
      const double gap = std::chrono::duration<double>(now - l.last_token).count();
      if (l.num_tokens == 0) {
        metrics_.on_first_token(gap);
        l.first_token = now;
      } else {
        metrics_.on_inter_token(gap);
      }
      l.last_token = now;
      ++l.num_tokens;
      ev.num_tokens = 1;
      ev.token_ids = {e.token};
      if (l.wants_logprobs && e.logprobs) ev.logprobs.push_back(*e.logprobs);
    }
    if (e.prompt_logprobs) ev.prompt_logprobs = *e.prompt_logprobs;
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
    record_finished(l, d.finish, now);
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
