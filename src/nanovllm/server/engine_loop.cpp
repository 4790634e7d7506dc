#include "nanovllm/server/engine_loop.h"

#include <cstdio>

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
                                                   std::function<void()> notify) {
  auto ch = std::make_shared<RequestChannel>(int(prompts.size()) * sp.n, std::move(notify));
  {
    std::lock_guard lk(mu_);
    if (stopping_) throw ApiError(503, "the server is shutting down");
    submits_.push_back({std::move(prompts), sp, ch, Clock::now()});
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
    const int n = job.params.n;
    for (size_t i = 0; i < job.prompts.size(); ++i) {
      // n > 1: choice i * n + j of seed + j (vLLM's parallel sampling); the first goes in now.
      std::vector<Sibling> siblings;
      for (int j = 1; j < n; ++j) siblings.push_back({job.prompts[i], child_params(job.params, j), int(i) * n + j});
      const int64_t rid =
          add_choice(job.channel, std::move(job.prompts[i]), child_params(job.params, 0), int(i) * n, job.arrival);
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
                               const SamplingParams& sp, int index, Clock::time_point arrival) {
  const int64_t n = int64_t(prompt.size());
  const int64_t rid = llm_.engine().add_request(std::move(prompt), sp);
  Live l;
  l.channel = ch;
  l.index = index;
  l.wants_logprobs = sp.logprobs.has_value();
  if (const Tokenizer* tok = llm_.tokenizer())
    l.text = std::make_unique<TextStream>(*tok, sp.stop, sp.skip_special_tokens);
  l.arrival = l.last_token = arrival;
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
    for (auto& s : siblings) add_choice(ch, std::move(s.prompt), s.params, s.index, arrival);
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
  for (size_t k = 0; k < r.new_tokens.size(); ++k) {
    const auto [rid, tok] = r.new_tokens[k];
    auto it = live_.find(rid);
    if (it == live_.end()) continue;
    Live& l = it->second;
    std::vector<TokenLogprobs> lps, prompt_lps;
    if (k < r.new_logprobs.size() && l.wants_logprobs) lps.push_back(r.new_logprobs[k]);
    for (auto& [prid, plps] : r.prompt_logprobs)
      if (prid == rid) prompt_lps = plps;
    if (!l.siblings.empty()) add_siblings(l);  // map insertions keep `it` and `l` valid
    const double gap = std::chrono::duration<double>(now - l.last_token).count();
    if (l.num_tokens == 0)
      metrics_.on_first_token(gap);
    else
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
      l.channel->push({l.index, std::move(delta), 1, {tok}, std::move(lps), std::move(prompt_lps), FinishReason::None});
      finish(it, FinishReason::Stop, "");
      continue;
    }
    l.channel->push({l.index, std::move(delta), 1, {tok}, std::move(lps), std::move(prompt_lps), FinishReason::None});
  }
  for (auto& f : r.finished) {
    auto it = live_.find(f.request_id);
    if (it == live_.end()) continue;
    finish(it, f.finish_reason, it->second.text ? it->second.text->finish() : std::string());
  }
}

void EngineLoop::finish(std::map<int64_t, Live>::iterator it, FinishReason why, std::string tail) {
  Live& l = it->second;
  metrics_.on_request_finished(why, std::chrono::duration<double>(Clock::now() - l.arrival).count());
  l.channel->push({l.index, std::move(tail), 0, {}, {}, {}, why});
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
}

}  // namespace nanovllm::server
