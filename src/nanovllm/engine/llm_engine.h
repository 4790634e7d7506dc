// The engine loop (nano-vllm's LLMEngine): add requests, step() = schedule -> run -> postprocess.
// Token-level only; text (tokenizer, stop strings) is layered on top in llm.cpp / the server.
#pragma once
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"
#include "nanovllm/engine/block_manager.h"
#include "nanovllm/engine/model_runner.h"
#include "nanovllm/engine/scheduler.h"
#include "nanovllm/engine/sequence.h"
#include "nanovllm/spec/drafter.h"

namespace nanovllm {

class TpGroup;
class Tokenizer;
namespace structured {
class GrammarCompiler;
}

struct RequestOutput {
  int64_t request_id = 0;
  int index = 0;  // the choice of a request of n parallel samples (0..n-1)
  std::vector<int32_t> prompt_token_ids;
  std::vector<int32_t> token_ids;
  std::string text;
  FinishReason finish_reason = FinishReason::None;
  StopReason stop_reason;                      // the stop_token_id that ended it (stop strings: output/ sets them)
  int64_t num_cached_prompt_tokens = 0;        // prompt tokens served from the prefix cache
  std::vector<TokenLogprobs> logprobs;         // one per token of token_ids when the request asked
  std::vector<TokenLogprobs> prompt_logprobs;  // of prompt tokens 1.. when the request asked
  // A pooling request (SamplingParams::pooling): its embedding or class scores (token_ids empty).
  std::vector<float> pooled;
};

// The scheduler's and KV cache's state, as a server's metrics and logs show it (counters are
// cumulative since start-up).
struct SchedulerStats {
  int64_t running = 0, waiting = 0;  // sequences
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t prefix_query_tokens = 0, prefix_hit_tokens = 0;  // prompt tokens looked up / found in the prefix cache
  int64_t preemptions = 0;
  SpecDecodeStats spec;  // speculative decoding's counters (zero when it is off)
};

// What one step did: which sequences got a new token, which finished, and the scheduler's state
// after it (so that nobody above the engine reads the scheduler or the block manager).
struct StepResult {
  bool is_prefill = false;         // some prompt tokens were computed (a prefill or mixed step)
  int64_t num_tokens = 0;          // tokens computed
  int64_t num_prefill_tokens = 0;  // of which prompt tokens (the rest are decodes)
  double seconds = 0;
  std::vector<std::pair<int64_t, int32_t>> new_tokens;  // (request id, token)
  // Parallel to new_tokens when some request of the step asked for logprobs (else empty); the
  // entries of requests that did not ask are empty.
  std::vector<TokenLogprobs> new_logprobs;
  // Requests that asked for prompt logprobs and got their first token: those of prompt tokens 1..
  std::vector<std::pair<int64_t, std::vector<TokenLogprobs>>> prompt_logprobs;
  std::vector<RequestOutput> finished;
  // Requests whose computation began in this step (their first prefill chunk): their queueing ends.
  std::vector<int64_t> first_scheduled;
  SchedulerStats stats;
};

// Speculative decoding (EngineConfig::speculative_config; spec/): after each step the drafter
// proposes tokens to follow every decoding sequence (constrained ones too: each position is
// sampled under the mask after the drafts before it, GrammarMasks::fill), the scheduler schedules
// them with the sequence's last token (a verify row, Scheduler::schedule_decode), the model runner
// samples the target's token at each
// position, and the scheduler keeps the drafts that equal them (Scheduler::postprocess). Outputs
// are those of decoding without it, greedy or seeded (spec/verification.h). A step lists each
// token a request got (several per request in a verify step) in new_tokens, in order. Rank 0
// drafts and samples; tensor-parallel workers run the verify rows' forward from the step message
// (StepInputs carries the drafts as input ids). A draft model or EAGLE-3 head runs on rank 0 only,
// un-sharded (vLLM's draft_tensor_parallel_size 1); EAGLE-3 reads rank 0's copy of the target's
// hidden states (the residual stream is whole on every rank after each all-reduce).
// Not with async scheduling (on by default for CUDA, it gives way; asked for explicitly,
// speculation is turned off with a note). A step of decodes and verify rows lays each verify
// position out as a decode row (ModelRunner::prepare), so it runs the decode kernels and CUDA
// graphs; a verify row in a step with prompt tokens is a short prefill row of the mixed step.
//
// Async scheduling (EngineConfig::async_scheduling, on for CUDA by default). A decode step that
// can (ModelRunner::can_run_async) is launched without waiting for its tokens; before waiting, the
// engine launches the step after it where the scheduler can tell that step already
// (Scheduler::reserve_ahead: the same sequences, room for their next slots), its input ids read
// from the device. So the GPU runs step N+1 while the host takes step N's tokens, and step() still
// returns one step's result per call: N's, with N+1 left in flight for the next call. Tokens are
// the same as without it (a row's sampling depends on its seed and position only); a sequence that
// stops on step N's token wastes its row of step N+1. A step in flight never blocks the others:
// aborted or finished sequences are dropped from it when it completes. A pooling model's steps
// (prompts only; their bookkeeping does not depend on the pooled values) are launched before the
// step before them has its rows on the host: pooling_step_async.
class LLMEngine {
 public:
  // Loads the model; the backend is chosen by cfg.device.
  // With tensor_parallel_size > 1 this is rank 0: it waits for the other ranks (started by the
  // CLI's launcher or by hand, running run_tp_worker) and drives them every step.
  explicit LLMEngine(EngineConfig cfg);
  LLMEngine(EngineConfig cfg, ModelConfig mcfg);
  ~LLMEngine();

  // Structured outputs match the tokens of `tok` (which must outlive the engine); without it a
  // request asking for them is refused. The vocabulary and its index are built on first use.
  void enable_structured_outputs(const Tokenizer* tok) { structured_tokenizer_ = tok; }
  // Compiles `so` into the grammar cache (thread-safe; the compile of add_request then hits it).
  void precompile_grammar(const StructuredOutputs& so);
  // Validates and queues a request; returns its id. Throws InvalidRequest naming the problem
  // (structured outputs: a grammar that does not compile, compiled here or read from the cache).
  int64_t add_request(std::vector<int32_t> prompt_token_ids, const SamplingParams& params);
  StepResult step();
  SchedulerStats scheduler_stats() const;  // now (StepResult::stats is this after the step)
  bool has_unfinished() const { return !scheduler_->is_finished() || pool_in_flight_.has_value(); }
  bool async_scheduling() const { return async_; }          // as settled for this backend
  int64_t num_steps_ahead() const { return steps_ahead_; }  // steps launched before the last one's tokens came
  bool abort(int64_t request_id);
  bool speculating() const { return drafter_ != nullptr; }  // as settled for this backend
  // Replaces the drafter (null: speculation off) from the next step on; drafts already proposed
  // are dropped. Throws UserError where speculation cannot run (speculation_unavailable()); async
  // scheduling by default gives way, and comes back with a null drafter (as the engine would run
  // without speculation). For the benchmark's passes with and without speculation.
  void set_drafter(std::unique_ptr<Drafter> drafter);
  const Drafter* drafter() const { return drafter_.get(); }  // null: no speculation
  // Takes the engine's drafter out (speculation off from the next step on, async scheduling back
  // where it is the default); null when none.
  std::unique_ptr<Drafter> take_drafter();
  // Drafting backoff (spec/draft_backoff.h; the speculative config's "backoff", default on): off
  // makes every decoding row ask for drafts every step (the acceptance-controlled benchmark).
  void set_draft_backoff(bool on) { draft_backoff_ = on; }
  bool draft_backoff() const { return draft_backoff_; }
  // Why speculative decoding cannot run on this engine ("" when it can): async scheduling asked
  // for. (Every method runs under tensor parallelism: the drafter on rank 0, un-sharded.)
  std::string speculation_unavailable() const;
  // Set for a pooling model (--runner pooling, or detected): requests must then carry
  // SamplingParams::pooling; their prompts are computed in prefill-only steps (the prefix cache
  // off) and each finishes with RequestOutput::pooled, its blocks freed at once.
  const std::optional<PoolingModel>& pooling_model() const { return runner_->pooling_model(); }

  // The engine's settings, max_model_len settled (the model's, or lowered to the KV cache).
  const EngineConfig& config() const { return cfg_; }
  const ModelConfig& model_config() const { return mcfg_; }
  const BlockManager& block_manager() const { return *block_manager_; }
  const Scheduler& scheduler() const { return *scheduler_; }
  ModelRunner& model_runner() { return *runner_; }
  // Live sequences (waiting or running), for invariant checks.
  std::vector<const Sequence*> live_sequences() const;
  int64_t num_prefill_tokens_computed() const { return prefill_tokens_; }

 private:
  // A step whose tokens are still on the device (async scheduling).
  struct InFlight {
    ScheduledBatch batch;           // its sequences as launched (pointers valid while ids live)
    std::vector<int64_t> ids;       // their request ids, row by row
    Backend::SampledTokens tokens;  // one per row
    std::chrono::steady_clock::time_point started;
  };
  // A pooling step launched with async scheduling: its bookkeeping done at launch (it does not
  // depend on the pooled values), its rows still on the way to the host; the sequences it finished
  // wait here for them, and their outputs come with the next step() (pooling_step_async).
  struct PoolInFlight {
    ModelRunner::PoolLaunch launch;
    std::vector<std::unique_ptr<Sequence>> finished;
  };
  StepResult run_step();
  StepResult step_async(InFlight cur);
  StepResult pooling_step_async(std::chrono::steady_clock::time_point t0);
  // Waits for p's rows, pools them into its sequences (live ones, p's finished ones, or those
  // `newer` finished) and adds p's finished outputs to r.
  void complete_pool(PoolInFlight& p, PoolInFlight* newer, StepResult& r);
  // The running sequences among ids (aborted and finished ones are gone), and their rows in ids.
  std::vector<Sequence*> running_of(const std::vector<int64_t>& ids, std::vector<size_t>* rows = nullptr);
  // Applies a computed step's tokens (Sequence::num_sampled_rows() per sequence of batch) and fills r.
  // keep: the sequences the step finished move there instead of into r.finished (async pooling).
  void finish_step(const ScheduledBatch& batch, const std::vector<int32_t>& tokens, StepResult& r,
                   std::vector<std::unique_ptr<Sequence>>* keep = nullptr);
  // The drafts of the batch's sequences that decode next (speculative decoding).
  void propose_drafts(const ScheduledBatch& batch);
  // Settles speculation for this engine: the drafter, or off with a note where it cannot run yet.
  // draft: a draft model's runner, its KV cache not yet created (null for other methods).
  void settle_speculation(std::unique_ptr<ModelRunner> draft);
  RequestOutput output_of(const Sequence& s) const;
  StopReason stop_reason_of(const Sequence& s) const;
  void check_sampling_limits(const SamplingParams& params) const;
  std::unique_ptr<SequenceGrammar> compile_grammar(const SamplingParams& params);

  EngineConfig cfg_;
  ModelConfig mcfg_;
  std::unique_ptr<TpGroup> tp_;  // tensor parallelism (rank 0's side); outlives runner_
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<BlockManager> block_manager_;
  std::unique_ptr<Scheduler> scheduler_;
  std::map<int64_t, std::unique_ptr<Sequence>> seqs_;
  const Tokenizer* structured_tokenizer_ = nullptr;
  structured::GrammarCompiler& grammar_compiler();  // built on first use, under compiler_mu_
  std::mutex compiler_mu_;
  std::unique_ptr<structured::GrammarCompiler> grammar_compiler_;
  std::map<int64_t, int64_t> cached_prompt_tokens_;
  int64_t next_id_ = 0;
  int64_t prefill_tokens_ = 0;
  std::mt19937_64 seed_rng_;
  bool async_ = false;
  bool async_without_drafter_ = false;  // async_ as settled before speculation (set_drafter(nullptr))
  int64_t steps_ahead_ = 0;
  std::optional<InFlight> in_flight_;
  std::optional<PoolInFlight> pool_in_flight_;
  std::unique_ptr<Drafter> drafter_;                       // speculative decoding; null: off
  bool draft_backoff_ = true;                              // set from the speculative config
  std::unique_ptr<ModelConfig> draft_mcfg_;                // draft_model: the draft's config, checked
  int64_t preemptions_seen_ = 0;                           // the drafter releases preempted sequences
  std::chrono::steady_clock::time_point last_step_end_{};  // when the last step's tokens were taken
};

// Resolves cfg.model to a ModelConfig: a directory, a Hugging Face id in the local cache
// (config/hf_hub.h), or a built-in preset with --load-format dummy.
ModelConfig resolve_model_config(const EngineConfig& cfg);
// The settings of a --speculative-config draft model's engine (its model, no speculation).
EngineConfig draft_engine_config(const EngineConfig& cfg);
// The draft model's KV blocks beyond the target's count: each running sequence's drafts past its
// verified tokens (num_speculative_tokens slots, in whole blocks).
int64_t draft_lookahead_blocks(const EngineConfig& cfg);
// The draft model's config; throws UserError when it cannot draft for `target` (another vocabulary).
ModelConfig check_draft_model(const EngineConfig& cfg, const ModelConfig& target);
// The backend of this rank (CUDA: GPU cfg.local_rank()).
std::unique_ptr<Backend> make_backend(const EngineConfig& cfg);

}  // namespace nanovllm
