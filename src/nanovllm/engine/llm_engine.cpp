#include "nanovllm/engine/llm_engine.h"

#include "nanovllm/structured/compiler.h"

#include <algorithm>
#include <cstdio>

#include "nanovllm/backends/profiling_backend.h"
#include "nanovllm/config/hf_hub.h"
#include "nanovllm/dist/tp_group.h"
#include "nanovllm/engine/draft_model_drafter.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "nanovllm/engine/tensor_parallel.h"
#include "nanovllm/engine/tp_protocol.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

ModelConfig resolve_model_config(const EngineConfig& cfg) {
  if (cfg.model.empty()) throw UserError("no model given (--model DIR or a preset such as qwen3-0.6b)");
  const std::string dir = local_model_dir(cfg);  // a directory, or a Hugging Face id's snapshot
  if (dir.empty()) {
    if (auto p = preset_model_config(cfg.model)) {
      if (!cfg.load_dummy)
        throw UserError("'" + cfg.model + "' is a built-in preset without weights: add --load-format dummy");
      return *p;
    }
  }
  return load_model_config(dir.empty() ? cfg.model : dir);
}

std::unique_ptr<Backend> make_backend(const EngineConfig& cfg) {
  auto be = resolved_device(cfg.device) == DeviceChoice::Cuda
                ? make_cuda_backend(cfg.tensor_parallel_size > 1 ? cfg.local_rank() : 0, cfg.kernels)
                : make_cpu_backend(cfg.num_threads, cfg.cpu_precision);
  if (cfg.profile_ops) return std::make_unique<ProfilingBackend>(std::move(be));
  return be;
}

// Under tensor parallelism the draft keeps rank 0's tp_rank, so make_backend puts it on rank 0's GPU;
// its runner gets no TpGroup, so it holds the whole model.
EngineConfig draft_engine_config(const EngineConfig& cfg) {
  EngineConfig d = cfg;
  d.model = cfg.speculative_config.model;
  d.model_dir.clear();
  d.speculative_config = {};
  d.target_itl_ms = 0;
  d.kv_cache_memory = 0;
  d.max_model_len = 0;                           // the draft's own (rows past it get no drafts)
  d.quantization = EngineConfig{}.quantization;  // the draft checkpoint's own
  d.profile_ops = false;
  settle_model_dir(d);
  return d;
}

ModelConfig check_draft_model(const EngineConfig& cfg, const ModelConfig& target) {
  const EngineConfig d = draft_engine_config(cfg);
  const ModelConfig m = resolve_model_config(d);
  const std::string flag = "--speculative-config: the draft model '" + d.model + "'";
  if (m.vocab_size != target.vocab_size)
    throw UserError(flag + " has a vocabulary of " + std::to_string(m.vocab_size) + " tokens, the target '" +
                    cfg.model + "' " + std::to_string(target.vocab_size) +
                    ": a draft must share the target's tokenizer");
  if (m.eos_token_ids != target.eos_token_ids)
    throw UserError(flag + " has other end-of-sequence ids than the target '" + cfg.model +
                    "': a draft must share the target's tokenizer");
  return m;
}

LLMEngine::LLMEngine(EngineConfig cfg) : LLMEngine(cfg, resolve_model_config(cfg)) {}

LLMEngine::LLMEngine(EngineConfig cfg, ModelConfig mcfg) : cfg_(std::move(cfg)), mcfg_(std::move(mcfg)) {
  settle_model_dir(cfg_);  // the weights load from model_path(): an id's snapshot
  cfg_.validate();
  settle_max_model_len(cfg_, mcfg_);   // refuses a bad --max-model-len before any work
  check_tensor_parallel(cfg_, mcfg_);  // before any GPU work
  seed_rng_.seed(cfg_.seed);
  if (cfg_.tensor_parallel_size > 1) {
    if (cfg_.tp_rank != 0) throw Error("LLMEngine is rank 0; tensor-parallel workers run run_tp_worker()");
    cfg_.device = resolved_device(cfg_.device);
    tp_ = std::make_unique<TpGroup>(rendezvous_options(cfg_), true);
    tp_->broadcast(encode_settings(cfg_, mcfg_));
    tp_->start_watchdog(cfg_.on_tp_peer_lost);
  }
  // A draft model is loaded (and on a GPU warmed up) before the target's KV cache is sized, so the
  // target's budget sees its weights and activations; the two caches are then paid from that one
  // budget (SharedKvBudget: the draft's blocks beside each of the target's, plus its lookahead).
  // Under tensor parallelism the drafter (a draft model, an EAGLE-3 head) runs un-sharded on rank 0
  // only, as vLLM's draft_tensor_parallel_size 1: its own runner and backend on rank 0's device, no
  // communicator. Only rank 0's budget pays for it, and the ranks' KV blocks are agreed as the
  // minimum over ranks (ModelRunner), so rank 0's smaller count holds on every rank.
  std::unique_ptr<ModelRunner> draft;
  SharedKvBudget shared;
  if (cfg_.speculative_config.enabled() && cfg_.speculative_config.method == "draft_model") {
    draft_mcfg_ = std::make_unique<ModelConfig>(check_draft_model(cfg_, mcfg_));
    if (speculation_unavailable().empty()) {
      const EngineConfig dcfg = draft_engine_config(cfg_);
      draft = std::make_unique<ModelRunner>(dcfg, *draft_mcfg_, make_backend(dcfg), nullptr, SharedKvBudget{},
                                            ModelRunner::KvCacheAt::Later);
      shared = {kv_elements_per_block(*draft_mcfg_, cfg_.block_size), draft_lookahead_blocks(cfg_),
                draft->resident_bytes(), "the draft model '" + dcfg.model + "'"};
    }
  } else if (cfg_.speculative_config.enabled() && cfg_.speculative_config.method == "eagle3" &&
             speculation_unavailable().empty()) {
    // The head's one-layer cache: a block beside each of the target's, plus the lookahead (its
    // weights load after the target's KV cache is sized: outside the budget, ~0.8 GB at 8B).
    shared = {eagle3_kv_elements_per_block(eagle3_config_for(cfg_, mcfg_), cfg_.block_size),
              draft_lookahead_blocks(cfg_), 0, "the EAGLE-3 head"};
  }
  // The workers get max_model_len as given (0: unset) and settle it as rank 0's runner does.
  runner_ = std::make_unique<ModelRunner>(cfg_, mcfg_, make_backend(cfg_), tp_.get(), shared);
  cfg_.max_model_len = runner_->max_model_len();  // settled: the scheduler, requests and server use it
  if (runner_->pooling_model()) {
    cfg_.enable_prefix_caching = false;  // pooling requests run once: nothing to share
  }
  block_manager_ =
      std::make_unique<BlockManager>(runner_->num_kv_blocks(), cfg_.block_size, cfg_.enable_prefix_caching);
  settle_target_itl(cfg_, false, false);  // unset: off offline (serve settles its own before)
  scheduler_ = std::make_unique<Scheduler>(cfg_, *block_manager_, mcfg_.eos_token_ids,
                                           StepCostModel::prior_for(mcfg_, runner_->warmup_seconds_per_token()));
  async_ = async_without_drafter_ = cfg_.async_scheduling.value_or(runner_->backend().runs_asynchronously());
  settle_speculation(std::move(draft));
}

// Independent of the target's runner: the engine asks before it loads a draft model. Every method
// runs with tensor parallelism (the drafter on rank 0); draft_tensor_parallel_size other than 1 is
// refused where the config is parsed.
std::string LLMEngine::speculation_unavailable() const {
  if (cfg_.async_scheduling.value_or(false))
    return "does not combine with async scheduling yet (--no-async-scheduling turns that off)";
  return "";
}

void LLMEngine::set_drafter(std::unique_ptr<Drafter> drafter) {
  if (drafter) {
    const std::string why = speculation_unavailable();
    if (!why.empty()) throw UserError("speculative decoding " + why);
    async_ = false;
  } else {
    async_ = async_without_drafter_;
  }
  for (auto& [id, s] : seqs_) s->draft_ids.clear();
  drafter_ = std::move(drafter);
}

std::unique_ptr<Drafter> LLMEngine::take_drafter() {
  for (auto& [id, s] : seqs_) s->draft_ids.clear();
  async_ = async_without_drafter_;
  return std::move(drafter_);
}

void LLMEngine::settle_speculation(std::unique_ptr<ModelRunner> draft) {
  if (!cfg_.speculative_config.enabled()) return;
  const std::string why = speculation_unavailable();
  if (!why.empty()) {
    std::fprintf(stderr, "--speculative-config: speculative decoding %s; decoding without it\n", why.c_str());
    return;
  }
  draft_backoff_ = cfg_.speculative_config.backoff;
  async_ = false;  // async scheduling by default (CUDA) gives way: a step's drafts need the tokens before
  if (cfg_.speculative_config.method == "eagle3") {  // the head's cache: as the draft model's below
    drafter_ =
        std::make_unique<Eagle3Drafter>(*runner_, mcfg_, cfg_, runner_->num_kv_blocks() + draft_lookahead_blocks(cfg_));
    return;
  }
  if (cfg_.speculative_config.method != "draft_model") {
    drafter_ = make_drafter(cfg_.speculative_config);
    return;
  }
  // The target's blocks, and room for every running sequence's drafts beyond its verified tokens:
  // the draft holds every token the target does, a draft never evicts, and the target's budget
  // already paid for both (SharedKvBudget in the constructor).
  if (!draft)
    throw Error("speculative decoding: the draft model was not loaded (" + cfg_.speculative_config.model + ")");
  const int64_t blocks = runner_->num_kv_blocks() + draft_lookahead_blocks(cfg_);
  draft->create_kv_cache(blocks);
  const std::string resident = draft->resident_bytes() > 0
                                   ? std::to_string(draft->resident_bytes() >> 20) + " MiB of weights and activations, "
                                   : "";
  std::fprintf(stderr,
               "--speculative-config: draft model '%s': KV cache of %lld blocks beside the target's %lld (one "
               "budget), %s%s\n",
               cfg_.speculative_config.model.c_str(), static_cast<long long>(blocks),
               static_cast<long long>(runner_->num_kv_blocks()), resident.c_str(),
               draft->uses_cuda_graphs() ? "CUDA graphs" : "eager");
  drafter_ = std::make_unique<DraftModelDrafter>(std::move(draft), cfg_.speculative_config.num_speculative_tokens,
                                                 cfg_.block_size);
}

int64_t draft_lookahead_blocks(const EngineConfig& cfg) {
  const int64_t k = cfg.speculative_config.num_speculative_tokens, bs = cfg.block_size;
  return cfg.max_num_seqs * ((k + bs - 1) / bs);
}

LLMEngine::~LLMEngine() {
  if (!tp_) return;
  try {
    tp_->goodbye();  // workers leave their loop and exit
  } catch (const std::exception&) {
    // a worker already gone: nothing left to tell it
  }
}

int64_t LLMEngine::add_request(std::vector<int32_t> prompt, const SamplingParams& request_params) {
  const auto& pooling = runner_->pooling_model();
  if (pooling && !request_params.pooling)
    throw InvalidRequest("model",
                         "the model runs as a pooling model (--runner pooling): it makes embeddings or "
                         "scores, not text (generate is only supported for generative models)");
  if (!pooling && request_params.pooling)
    throw InvalidRequest("model", std::string("the model does not support ") +
                                      pooling_task_name(request_params.pooling->task) +
                                      " (a generative model: serve it with --runner pooling, or use a pooling model)");
  SamplingParams pooled_params;
  if (pooling) {
    check_pooling_params(*pooling, *request_params.pooling);
    pooled_params.pooling = request_params.pooling;  // one placeholder token ends it (model_runner_pooling.cpp)
    pooled_params.max_tokens = 1;
    pooled_params.temperature = 0;
    pooled_params.ignore_eos = true;
    pooled_params.detokenize = false;
    pooled_params.priority = request_params.priority;
  }
  const SamplingParams& params = pooling ? pooled_params : request_params;
  params.validate();
  if (prompt.empty()) throw InvalidRequest("prompt", "the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    if (prompt[i] < 0 || prompt[i] >= mcfg_.vocab_size)
      throw InvalidRequest("prompt", "token id " + std::to_string(prompt[i]) + " at position " + std::to_string(i) +
                                         " is outside the vocabulary [0, " + std::to_string(mcfg_.vocab_size) + ")");
  check_sampling_limits(params);
  if (params.priority != 0 && cfg_.scheduling_policy != SchedulingPolicy::Priority)
    throw InvalidRequest("priority", "Got priority " + std::to_string(params.priority) +
                                         " but Priority scheduling is not enabled (--scheduling-policy priority)");
  const int64_t n = int64_t(prompt.size());
  if (pooling && n > cfg_.max_model_len)
    throw InvalidRequest("prompt", "the prompt has " + std::to_string(n) + " tokens but max_model_len is " +
                                       std::to_string(cfg_.max_model_len));
  if (!pooling && n >= cfg_.max_model_len)
    throw InvalidRequest("prompt", "the prompt has " + std::to_string(n) + " tokens but max_model_len is " +
                                       std::to_string(cfg_.max_model_len) +
                                       " (prompt plus at least one generated token)");
  // A sequence must fit the KV pool on its own, else preemption could never make room for it.
  const int64_t total = std::min<int64_t>(n + params.max_tokens, cfg_.max_model_len);
  const int64_t need = (total + cfg_.block_size - 1) / cfg_.block_size;
  if (need > block_manager_->num_blocks())
    throw InvalidRequest(
        "max_tokens", "prompt plus max_tokens needs " + std::to_string(need) + " KV blocks but the cache holds " +
                          std::to_string(block_manager_->num_blocks()) + "; lower max_tokens or enlarge the KV cache");
  std::unique_ptr<TokenRestrictions> restrictions = TokenRestrictions::of(params, mcfg_.vocab_size);
  std::unique_ptr<SequenceGrammar> grammar = compile_grammar(params);
  const int64_t id = next_id_++;
  const uint64_t seed = params.seed ? *params.seed : seed_rng_();
  auto seq = std::make_unique<Sequence>(id, std::move(prompt), params, cfg_.block_size, seed);
  if (seq->params.temperature > 0.0f) seq->params.temperature = std::max(seq->params.temperature, kMinTemperature);
  seq->grammar = std::move(grammar);
  seq->restrictions = std::move(restrictions);
  scheduler_->add(seq.get());
  seqs_[id] = std::move(seq);
  return id;
}

structured::GrammarCompiler& LLMEngine::grammar_compiler() {
  std::lock_guard<std::mutex> lock(compiler_mu_);
  if (!structured_tokenizer_)
    throw InvalidRequest("structured_outputs",
                         "structured outputs need the model's tokenizer, and this engine has none");
  if (!grammar_compiler_)
    grammar_compiler_ = std::make_unique<structured::GrammarCompiler>(std::make_shared<const structured::Vocabulary>(
        structured::vocabulary_from_tokenizer(*structured_tokenizer_, int32_t(mcfg_.vocab_size), mcfg_.eos_token_ids)));
  return *grammar_compiler_;
}

void LLMEngine::precompile_grammar(const StructuredOutputs& so) {
  if (so.active()) grammar_compiler().compile(so);
}

std::unique_ptr<SequenceGrammar> LLMEngine::compile_grammar(const SamplingParams& params) {
  const StructuredOutputs& so = params.structured_outputs;
  if (!so.active()) return nullptr;
  if (so.start_after_token >= mcfg_.vocab_size)
    throw InvalidRequest("structured_outputs", "the reasoning end token " + std::to_string(so.start_after_token) +
                                                   " is outside the vocabulary");
  return std::make_unique<SequenceGrammar>(grammar_compiler().compile(so), so.start_after_token);
}

// What only the engine knows: its vocabulary and max_logprobs (vLLM's messages).
void LLMEngine::check_sampling_limits(const SamplingParams& params) const {
  if (params.n != 1)
    throw InvalidRequest("n", "the engine takes one sequence per request (n=" + std::to_string(params.n) +
                                  "): add n requests with seeds seed + i, as the server does");
  const int64_t vocab = mcfg_.vocab_size;
  const int64_t max_lp = cfg_.max_logprobs < 0 ? vocab : cfg_.max_logprobs;
  if (params.logprobs && *params.logprobs > max_lp)
    throw InvalidRequest("logprobs", "Requested sample logprobs of " + std::to_string(*params.logprobs) +
                                         ", which is greater than max allowed: " + std::to_string(max_lp));
  if (params.prompt_logprobs && *params.prompt_logprobs > max_lp)
    throw InvalidRequest("prompt_logprobs", "Requested prompt logprobs of " + std::to_string(*params.prompt_logprobs) +
                                                ", which is greater than max allowed: " + std::to_string(max_lp));
  if (params.prompt_logprobs && cfg_.tensor_parallel_size > 1)
    throw InvalidRequest("prompt_logprobs", "prompt_logprobs is not implemented with tensor parallelism");
  std::string bad;
  for (auto& [id, bias] : params.logit_bias)
    if (id >= vocab) bad += (bad.empty() ? "" : ", ") + std::to_string(id);
  if (!bad.empty())
    throw InvalidRequest(
        "logit_bias", "token_id(s) [" + bad + "]" +
                          " in logit_bias contain out-of-vocab token ids. Vocabulary size: " + std::to_string(vocab));
  for (int32_t id : params.stop_token_ids)
    if (params.min_tokens > 0 && id >= vocab)
      throw InvalidRequest("stop_token_ids", "stop_token_ids: token id " + std::to_string(id) +
                                                 " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
}

// As vLLM's check_stop: EOS is tested first (unless ignore_eos) and is no stop_reason; a token of
// the request's stop_token_ids is, even when it is an EOS id that ignore_eos let through.
StopReason LLMEngine::stop_reason_of(const Sequence& s) const {
  if (s.finish_reason != FinishReason::Stop || s.num_tokens() <= s.num_prompt_tokens) return {};
  const int32_t last = s.token_ids.back();
  const auto& eos = mcfg_.eos_token_ids;
  if (!s.params.ignore_eos && std::find(eos.begin(), eos.end(), last) != eos.end()) return {};
  const auto& stops = s.params.stop_token_ids;
  if (std::find(stops.begin(), stops.end(), last) != stops.end()) return last;
  return {};
}

RequestOutput LLMEngine::output_of(const Sequence& s) const {
  RequestOutput o;
  o.request_id = s.id;
  o.prompt_token_ids.assign(s.token_ids.begin(), s.token_ids.begin() + s.num_prompt_tokens);
  o.token_ids = s.completion_token_ids();
  o.finish_reason = s.finish_reason;
  o.stop_reason = stop_reason_of(s);
  o.logprobs = s.logprobs;
  o.prompt_logprobs = s.prompt_logprobs;
  if (s.params.pooling) {
    o.token_ids.clear();  // the placeholder that ended it
    o.pooled = s.pooled;
  }
  auto it = cached_prompt_tokens_.find(s.id);
  o.num_cached_prompt_tokens = it == cached_prompt_tokens_.end() ? 0 : it->second;
  return o;
}

StepResult LLMEngine::step() {
  StepResult r = run_step();
  r.stats = scheduler_stats();
  return r;
}

SchedulerStats LLMEngine::scheduler_stats() const {
  SchedulerStats s;
  s.running = int64_t(scheduler_->running().size());
  s.waiting = int64_t(scheduler_->waiting().size());
  s.kv_blocks_total = block_manager_->num_blocks();
  s.kv_blocks_used = block_manager_->num_blocks() - block_manager_->num_free_blocks();
  s.prefix_query_tokens = block_manager_->num_query_tokens();
  s.prefix_hit_tokens = block_manager_->num_hit_tokens();
  s.preemptions = scheduler_->num_preemptions();
  s.spec = scheduler_->spec_stats();
  return s;
}

StepResult LLMEngine::run_step() {
  const auto t0 = std::chrono::steady_clock::now();
  if (runner_->pooling_model() && async_ && !tp_ && !runner_->hidden_observer) return pooling_step_async(t0);
  if (pool_in_flight_) {  // async pooling turned off meanwhile (an observer attached): its outputs first
    StepResult r;
    complete_pool(*pool_in_flight_, nullptr, r);
    pool_in_flight_.reset();
    return r;
  }
  if (in_flight_) {
    InFlight cur = std::move(*in_flight_);
    in_flight_.reset();
    if (!running_of(cur.ids).empty()) return step_async(std::move(cur));
    runner_->wait(cur.tokens);  // every row finished or was aborted: nothing of it is wanted
  }
  StepResult r;
  ScheduledBatch batch = scheduler_->schedule();
  if (batch.seqs.empty()) return r;
  if (async_ && runner_->can_run_async(batch)) {
    std::vector<int64_t> ids;
    for (auto* s : batch.seqs) ids.push_back(s->id);
    Backend::SampledTokens tokens = runner_->run_async(batch);
    return step_async({std::move(batch), std::move(ids), std::move(tokens), t0});
  }
  std::vector<int32_t> tokens = runner_->run(batch);
  finish_step(batch, tokens, r);
  last_step_end_ = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(last_step_end_ - t0).count();
  scheduler_->observe_step(batch, r.seconds);
  return r;
}

// Async pooling: step N is launched and its bookkeeping done before step N - 1's pooled rows are
// waited for, so the GPU runs N while the host pools N - 1 and schedules N + 1 (the steps of an
// embedding run no longer wait on the host in between). step() returns N - 1's finished outputs.
StepResult LLMEngine::pooling_step_async(std::chrono::steady_clock::time_point t0) {
  StepResult r;
  ScheduledBatch batch = scheduler_->schedule();
  std::optional<PoolInFlight> launched;
  if (!batch.seqs.empty()) {
    launched.emplace();
    launched->launch = runner_->launch_pool(batch);
    finish_step(batch, std::vector<int32_t>(batch.seqs.size(), 0), r, &launched->finished);
  }
  if (pool_in_flight_) {
    complete_pool(*pool_in_flight_, launched ? &*launched : nullptr, r);
    pool_in_flight_.reset();
  }
  pool_in_flight_ = std::move(launched);
  last_step_end_ = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(last_step_end_ - t0).count();
  if (!batch.seqs.empty()) scheduler_->observe_step(batch, r.seconds);
  return r;
}

void LLMEngine::complete_pool(PoolInFlight& p, PoolInFlight* newer, StepResult& r) {
  auto find = [&](int64_t id) -> Sequence* {
    if (auto it = seqs_.find(id); it != seqs_.end()) return it->second.get();
    for (auto* list : {&p.finished, newer ? &newer->finished : nullptr})
      if (list)
        for (auto& s : *list)
          if (s->id == id) return s.get();
    return nullptr;  // aborted since the launch
  };
  std::vector<Sequence*> seqs;
  for (int64_t id : p.launch.ids) seqs.push_back(find(id));
  runner_->finish_pool(p.launch, seqs);
  for (auto& s : p.finished) {
    r.finished.push_back(output_of(*s));
    cached_prompt_tokens_.erase(s->id);
  }
}

std::vector<Sequence*> LLMEngine::running_of(const std::vector<int64_t>& ids, std::vector<size_t>* rows) {
  std::vector<Sequence*> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto it = seqs_.find(ids[i]);
    if (it == seqs_.end() || it->second->status != SequenceStatus::Running) continue;
    out.push_back(it->second.get());
    if (rows) rows->push_back(i);
  }
  return out;
}

// `cur` runs on the device, some of its rows live. Rows whose sequences were aborted since it was
// launched, or finished on the step before it, are dropped. When every row is live and the
// scheduler can tell the next step, that one is launched before cur's tokens are waited for.
StepResult LLMEngine::step_async(InFlight cur) {
  StepResult r;
  std::vector<size_t> rows;
  const std::vector<Sequence*> live = running_of(cur.ids, &rows);
  const bool all_live = live.size() == cur.ids.size();  // then cur.batch's pointers are valid
  std::optional<InFlight> next;
  // A constrained row's mask needs cur's token: its step ahead runs the forward now and samples
  // once cur's tokens have advanced the matchers (the forward still overlaps the host's work).
  std::optional<Tensor> ahead_logits;
  auto ahead_started = std::chrono::steady_clock::now();
  if (all_live && scheduler_->reserve_ahead(cur.batch)) {
    const bool constrained = std::any_of(cur.batch.seqs.begin(), cur.batch.seqs.end(), [](const Sequence* s) {
      return (s->grammar && !s->grammar->matcher.is_terminated()) || s->restrictions;
    });
    if (constrained)
      ahead_logits = runner_->forward_ahead(cur.batch, cur.tokens);
    else
      next = InFlight{cur.batch, cur.ids, runner_->run_ahead(cur.batch, cur.tokens), ahead_started};
    ++steps_ahead_;
  }
  const std::vector<int32_t> all = runner_->wait(cur.tokens);
  std::vector<int32_t> tokens;
  for (size_t i : rows) tokens.push_back(all[i]);
  // The same one-token decodes, of the live rows only.
  const ScheduledBatch batch = all_live ? cur.batch : scheduler_->resume_ahead(live);
  finish_step(batch, tokens, r);
  if (ahead_logits) {
    std::vector<Sequence*> rows_of;  // null where cur's token ended the sequence
    for (int64_t id : cur.ids) {
      auto it = seqs_.find(id);
      rows_of.push_back(it != seqs_.end() && it->second->status == SequenceStatus::Running ? it->second.get()
                                                                                           : nullptr);
    }
    next = InFlight{cur.batch, cur.ids, runner_->sample_ahead(rows_of, *ahead_logits), ahead_started};
  }
  if (next) {
    // The step ahead goes on with the sequences that did not finish on cur's tokens (its rows of
    // the others are dropped when it completes).
    scheduler_->resume_ahead(running_of(next->ids));
    in_flight_ = std::move(next);
  }
  // The step's own share of the wall clock: from its launch, or from the end of the step before
  // when it was launched ahead of that one's end (so the seconds of steps add up to the run's).
  const auto now = std::chrono::steady_clock::now();
  r.seconds = std::chrono::duration<double>(now - std::max(cur.started, last_step_end_)).count();
  last_step_end_ = now;
  scheduler_->observe_step(batch, r.seconds);
  return r;
}

void LLMEngine::finish_step(const ScheduledBatch& batch, const std::vector<int32_t>& tokens, StepResult& r,
                            std::vector<std::unique_ptr<Sequence>>* keep) {
  r.is_prefill = batch.num_prefill_tokens > 0;
  r.num_tokens = batch.num_tokens;
  r.num_prefill_tokens = batch.num_prefill_tokens;
  if (batch.num_prefill_tokens > 0) {
    prefill_tokens_ += batch.num_prefill_tokens;
    for (auto* s : batch.seqs)
      if (s->num_completion_tokens() == 0 && !cached_prompt_tokens_.count(s->id)) {
        cached_prompt_tokens_[s->id] = s->num_cached_tokens;
        r.first_scheduled.push_back(s->id);
      }
  }
  // Remember which sequences complete their prefill (or decode) this step: they get tokens, from
  // their first sampled row on (a verify row has 1 + drafts).
  std::vector<bool> gets_token;
  std::vector<size_t> first_row;
  size_t rows = 0;
  for (auto* s : batch.seqs) {
    gets_token.push_back(s->num_cached_tokens + s->num_scheduled_tokens >= s->num_tokens());
    first_row.push_back(rows);
    rows += size_t(s->num_sampled_rows());
  }
  for (auto& [i, plps] : runner_->last_prompt_logprobs()) {
    auto& dst = batch.seqs[i]->prompt_logprobs;
    dst.insert(dst.end(), plps.begin(), plps.end());
  }
  for (size_t i = 0; i < batch.seqs.size(); ++i)  // the first token: the prompt's logprobs are complete
    if (gets_token[i] && batch.seqs[i]->params.prompt_logprobs && batch.seqs[i]->num_completion_tokens() == 0)
      r.prompt_logprobs.emplace_back(batch.seqs[i]->id, batch.seqs[i]->prompt_logprobs);
  const std::vector<TokenLogprobs>& lps = runner_->last_logprobs();
  std::vector<int64_t> emitted;
  auto finished = scheduler_->postprocess(batch, tokens, &emitted);
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    if (!gets_token[i] || batch.seqs[i]->params.pooling) continue;
    Sequence* s = batch.seqs[i];
    for (size_t j = first_row[i]; j < first_row[i] + size_t(emitted[i]); ++j) {
      r.new_tokens.emplace_back(s->id, tokens[j]);
      if (lps.empty()) continue;
      r.new_logprobs.push_back(lps[j]);
      if (s->params.logprobs) s->logprobs.push_back(lps[j]);
    }
  }
  if (drafter_) propose_drafts(batch);
  for (auto* s : finished) {
    if (keep) {  // its output once the rows it waits for have landed (complete_pool)
      auto it = seqs_.find(s->id);
      keep->push_back(std::move(it->second));
      seqs_.erase(it);
      continue;
    }
    r.finished.push_back(output_of(*s));
    cached_prompt_tokens_.erase(s->id);
    if (drafter_) drafter_->release(s->id);
    seqs_.erase(s->id);
  }
}

void LLMEngine::propose_drafts(const ScheduledBatch& batch) {
  // Preempted sequences lost their KV: a drafter with its own cache lets theirs go too.
  if (scheduler_->num_preemptions() != preemptions_seen_) {
    preemptions_seen_ = scheduler_->num_preemptions();
    for (auto& [id, s] : seqs_)
      if (s->status == SequenceStatus::Waiting && s->block_table.empty()) drafter_->release(id);
  }
  auto query = [](const Sequence& s, std::span<const int32_t> tokens, int64_t max_drafts) {
    return DraftQuery{s.id, tokens, max_drafts, &s.params, s.seed, s.num_prompt_tokens};
  };
  // Prompt chunks the target read this step (their sequences are still reading): drafters with a
  // KV cache read them alongside.
  std::vector<DraftQuery> chunks;
  for (Sequence* s : batch.seqs)
    if (s->status == SequenceStatus::Running && s->num_cached_tokens + 1 < s->num_tokens())
      chunks.push_back(query(*s, std::span<const int32_t>(s->token_ids).first(size_t(s->num_cached_tokens)), 0));
  if (!chunks.empty()) drafter_->observe_prefill(chunks);
  // vLLM's disable_by_batch_size: past it, a step is compute-bound and drafts cost more than they save.
  const int64_t off_above = cfg_.speculative_config.disable_by_batch_size;
  if (off_above > 0 && int64_t(scheduler_->running().size()) > off_above) return;
  std::vector<DraftQuery> queries;
  std::vector<Sequence*> of;
  for (Sequence* s : batch.seqs) {
    // Decoding next (its prompt is computed). Constrained ones too: each draft position gets the
    // mask after the drafts before it (GrammarMasks::fill).
    if (s->status != SequenceStatus::Running || s->num_cached_tokens + 1 != s->num_tokens()) continue;
    const int64_t room =
        std::min(s->params.max_tokens - s->num_completion_tokens(), cfg_.max_model_len - s->num_tokens()) - 1;
    if (room <= 0) continue;
    if (draft_backoff_ && !s->draft_backoff.should_draft()) continue;
    queries.push_back(query(*s, s->token_ids, std::min(room, drafter_->num_speculative_tokens())));
    of.push_back(s);
  }
  if (queries.empty()) return;
  std::vector<std::vector<int32_t>> drafts;
  drafter_->propose(queries, drafts);
  for (size_t i = 0; i < of.size(); ++i) {
    for (int32_t d : drafts[i])  // a drafter's bug, caught before the verify step reads it
      if (d < 0 || d >= mcfg_.vocab_size)
        throw Error("speculative decoding: the " + cfg_.speculative_config.method + " drafter proposed token " +
                    std::to_string(d) + " for sequence " + std::to_string(of[i]->id) + ", outside the vocabulary [0, " +
                    std::to_string(mcfg_.vocab_size) + ")");
    of[i]->draft_ids = std::move(drafts[i]);
  }
}

bool LLMEngine::abort(int64_t id) {
  if (!scheduler_->abort(id)) return false;
  if (drafter_) drafter_->release(id);
  seqs_.erase(id);
  cached_prompt_tokens_.erase(id);
  return true;
}

std::vector<const Sequence*> LLMEngine::live_sequences() const {
  std::vector<const Sequence*> out;
  for (auto& [id, s] : seqs_)
    if (!s->block_table.empty()) out.push_back(s.get());
  return out;
}

}  // namespace nanovllm
