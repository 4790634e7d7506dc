// Runs one scheduled batch through the model (nano-vllm's ModelRunner): builds input ids,
// positions and AttentionMetadata from the sequences, runs forward + LM head on each sequence's
// last token, and samples one token per sequence.
// It also settles max_model_len (settle_max_model_len, config.h): an unset one becomes the model's
// length, lowered to what the KV cache holds once its size is known.
// Tensor parallelism: every rank builds its ModelRunner identically (weights of its shard, the
// same warm-up, KV-cache sizing agreed as the minimum over ranks, hence the same max_model_len,
// the same CUDA graphs), so that their collectives pair up. Rank 0 runs the engine; before each
// forward it sends the step's StepInputs to the workers, which run the same forward
// (run_worker_step) and do not sample.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/config/config.h"
#include "nanovllm/engine/scheduler.h"
#include "nanovllm/engine/sequence_grammar.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/pooling_model.h"

namespace nanovllm {

class CudaGraphRunner;
class TpGroup;

struct StepInputs {
  std::vector<int32_t> input_ids, positions;  // [T]
  // [R] the rows whose logits are sampled: each sequence's last token (a verify row: its last
  // 1 + drafts tokens), in batch order.
  std::vector<int32_t> last_rows;
  AttentionMetadata md;
  // Multi-token rows (verify, a draft's catch-up) laid out as decode rows, a row per position.
  bool rows_as_decodes = false;
  // Prefix caching's partial hits (block_manager.h): KV-cache copies run before the forward.
  std::vector<KVBlockCopy> kv_copies;
};

// Another KV cache paid from a runner's KV budget: a draft model's (draft_model_drafter.h), which
// holds a block for each of the runner's blocks (same block size and KV dtype) plus extra_blocks.
struct SharedKvBudget {
  int64_t elements_per_block = 0;  // its K/V elements per block
  int64_t extra_blocks = 0;        // its blocks beyond the runner's count (drafts past verified tokens)
  int64_t resident_bytes = 0;      // its weights and peak activations, already on the device (errors)
  std::string owner;               // names it in errors: "the draft model 'X'"
};

class ModelRunner {
 public:
  // Start: the KV cache is sized and allocated (and CUDA graphs captured) by the constructor.
  // Later: the constructor loads the weights and, on a GPU, runs the warm-up step (its peak
  // activations stay reserved in the step arena); create_kv_cache() sizes the cache afterwards.
  enum class KvCacheAt { Start, Later };
  // Loads the model (weights from cfg.model, or dummy ones) and allocates the KV cache.
  // tp: this rank's tensor-parallel group (outlives the runner), nullptr for one rank.
  // shared: another cache paid from the same KV budget (none by default).
  ModelRunner(const EngineConfig& cfg, const ModelConfig& mcfg, std::unique_ptr<Backend> backend, TpGroup* tp = nullptr,
              SharedKvBudget shared = {}, KvCacheAt kv_at = KvCacheAt::Start);
  ~ModelRunner();
  // A KvCacheAt::Later runner's cache of `blocks` blocks, then its CUDA graphs; once.
  void create_kv_cache(int64_t blocks);
  // A KvCacheAt::Later runner's device bytes before its KV cache: weights, runtime and the
  // warm-up's peak activations (a GPU; 0 elsewhere).
  int64_t resident_bytes() const { return resident_bytes_; }

  // Rank 0 (or the only rank): one step, Sequence::num_sampled_rows() tokens per sequence in
  // batch order: one, or for a verify row the target's token at each of its 1 + drafts positions
  // (each sampled as non-speculative decoding would sample it there: logits processing with the
  // drafts before it as context, the noise of its position).
  std::vector<int32_t> run(const ScheduledBatch& batch);
  // The logprobs of the last run's tokens, one entry per token it returned (filled for those
  // whose request asked and that got a token); empty when none asked.
  const std::vector<TokenLogprobs>& last_logprobs() const { return logprobs_; }
  // Prompt logprobs the last run computed: (index in its batch, logprobs of the next prompt
  // positions of that sequence), for the sequences that need them.
  const std::vector<std::pair<size_t, std::vector<TokenLogprobs>>>& last_prompt_logprobs() const {
    return prompt_logprobs_;
  }
  // Tensor-parallel workers: the forward of a step rank 0 sent (logits stay on the device).
  void run_worker_step(StepInputs& in);

  // Async scheduling (llm_engine.h): steps whose tokens stay on the device until wait().
  // can_run_async: decodes only, on one rank, no row asking for logprobs or logits processing
  // (penalties read the tokens so far, which a step ahead does not have on the host), no observer.
  // Constrained rows (structured outputs) may: their masks are filled with the tokens on the host.
  bool can_run_async(const ScheduledBatch& batch) const;
  Backend::SampledTokens run_async(const ScheduledBatch& batch);
  // A draft model's passes (draft_model_drafter.h): any batch whose rows each sample one token at
  // the end of their tokens (prompt tails and catch-ups too, eager), on one rank, without logits
  // processing, logprobs or an observer; the tokens stay on the device for run_ahead.
  bool can_sample_on_device(const ScheduledBatch& batch) const;
  Backend::SampledTokens run_to_device(const ScheduledBatch& batch);
  // The decode step after `batch` (run, not yet postprocessed; Scheduler::reserve_ahead made its
  // slots): row i's input is the token `prev` holds for batch.seqs[i], at position num_tokens().
  Backend::SampledTokens run_ahead(const ScheduledBatch& batch, const Backend::SampledTokens& prev);
  // run_ahead in two halves, for batches with constrained rows (whose masks need the previous
  // tokens): the forward now, the sampling once the previous tokens are on the host and appended.
  // rows_of: the batch's sequences, row by row, null where one ended on the previous token.
  Tensor forward_ahead(const ScheduledBatch& batch, const Backend::SampledTokens& prev);
  Backend::SampledTokens sample_ahead(const std::vector<Sequence*>& rows_of, const Tensor& logits);
  std::vector<int32_t> wait(Backend::SampledTokens& t) { return backend_->wait_tokens(t); }
  const ModelConfig& model_config() const { return mcfg_; }

  // ahead: each sequence decodes the token after its last (its id unknown: 0 in input_ids).
  // The sequences' pending KV copies (Sequence::kv_copy) go into kv_copies (not ahead: a step
  // ahead follows the one that ran them).
  static StepInputs prepare(const ScheduledBatch& batch, int64_t block_size, bool ahead = false);
  // Optional: sees the logits [R, V] (host floats; R: sampled rows) of every step before sampling (tests,
  // debugging). Costs a device->host copy of the logits when set.
  std::function<void(const ScheduledBatch&, const std::vector<float>&)> logits_observer;

  // Pooling runner (models/pooling_model.h): set when the model runs as a pooling model. Its steps
  // compute prompts only; run() then pools each sequence's final hidden states (Sequence::pool_sum,
  // Sequence::pooled once its prompt is complete) and returns a placeholder token per sequence.
  const std::optional<PoolingModel>& pooling_model() const { return pooling_; }
  // Optional (tests): sees the final hidden states [T, H] (host floats) of every pooling step.
  std::function<void(const ScheduledBatch&, const std::vector<float>&)> hidden_observer;
  // Async pooling steps (llm_engine.h): run() of a pooling step in two halves. launch_pool runs the
  // forward and enqueues the copy of the pooled rows; finish_pool waits for it and pools them into
  // the sequences (seqs: the launch's sequences in its order, null where one was aborted since).
  // The batch's bookkeeping (Scheduler::postprocess with the placeholder tokens) may run between
  // the two: it does not depend on the pooled values. No hidden_observer (it needs every row now).
  struct PoolLaunch {
    std::vector<int64_t> ids;                     // the batch's sequences, in order
    std::vector<std::pair<size_t, size_t>> span;  // per sequence: its rows [first, end)
    std::vector<char> ends;                       // per sequence: its prompt completes
    Backend::HostCopy rows;                       // [rows, H]
  };
  PoolLaunch launch_pool(const ScheduledBatch& batch);
  void finish_pool(PoolLaunch& p, const std::vector<Sequence*>& seqs);

  // EAGLE-3 (engine/eagle3_drafter.h): where each sequence's token rows of the last run() lie in the
  // model's aux hidden states (CausalLM::aux_hidden_states: positions first_position.. at rows
  // first_row..); empty when the step captured none (EAGLE-3 off, or a step too large).
  struct StepRows {
    int64_t seq_id = 0, first_position = 0, first_row = 0, num_rows = 0;
  };
  const std::vector<StepRows>& last_step_rows() const { return step_rows_; }

  int64_t num_kv_blocks() const { return num_kv_blocks_; }
  // The start-up warm-up step's seconds per token (a cold first step: an overestimate); 0 when
  // none ran (the CPU, an explicit KV cache size). Seeds the scheduler's step cost model.
  double warmup_seconds_per_token() const { return warmup_seconds_per_token_; }
  int64_t max_model_len() const { return cfg_.max_model_len; }  // settled (never 0)
  int64_t kv_bytes_per_block() const;                           // this cache's, plus the shared elements' of another
  int64_t shared_extra_bytes() const;                           // the shared cache's extra blocks

  DType kv_cache_dtype() const { return kv_dtype_; }           // the act dtype or F8E4M3 (--kv-cache-dtype)
  Quantization quantization() const { return quantization_; }  // --quantization or the checkpoint's
  Backend& backend() { return *backend_; }
  CausalLM& model() { return *model_; }
  bool uses_cuda_graphs() const { return graphs_ != nullptr; }
  int64_t num_cuda_graphs() const;  // decode graphs captured (0: eager)
  // The most decode rows a draft model's catch-up pass is laid out as (ScheduledBatch::
  // num_catch_up_rows): the largest CUDA graph's batch; max_num_seqs without graphs. Past it the
  // pass runs as prefill rows (each context read once per row, not once per position).
  int64_t max_catch_up_decode_rows() const;
  // The forwards so far, by how they ran (tests, benchmarks): the prefill layout (eager), one new
  // token per sequence, multi-token rows laid out as decode rows; and those of the last two that
  // replayed a CUDA graph.
  struct ForwardCounts {
    int64_t prefill = 0, decode = 0, rows_as_decodes = 0, graph_replays = 0;
  };
  const ForwardCounts& forward_counts() const { return forward_counts_; }

 private:
  // device_ids: the input ids on the device ([T] I32) instead of in.input_ids.
  Tensor forward_logits(StepInputs& in, Tensor* hidden_out = nullptr, const Tensor* device_ids = nullptr);
  // [T, H], eager; with rows (ascending): [rows.size(), H], those rows' (CausalLM::forward).
  Tensor forward_hidden(StepInputs& in, const Tensor* device_ids = nullptr, const std::vector<int32_t>* rows = nullptr);
  std::vector<int32_t> forward_and_pool(const ScheduledBatch& batch, StepInputs& in);
  PoolLaunch launch_pool(const ScheduledBatch& batch, StepInputs& in);
  // The sampling rows of a batch without logits processing or logprobs (async steps); `ahead`
  // samples the position after num_tokens().
  static SamplingRow plain_row(const Sequence& s, int64_t position);  // sampling settings, no extras
  static std::vector<SamplingRow> plain_rows(const ScheduledBatch& batch, bool ahead);
  Backend::SampledTokens sample_rows_async(const Tensor& logits, std::vector<SamplingRow> rows);
  Backend::SampledTokens run_async_unchecked(const ScheduledBatch& batch);  // run_async after its check
  void compute_prompt_logprobs(const ScheduledBatch& batch, const StepInputs& in, const Tensor& hidden);
  std::vector<int32_t> forward_and_sample(const ScheduledBatch& batch, StepInputs& in);
  void allocate_kv_cache();
  // The KV cache of num_kv_blocks_ blocks: max_model_len settled against it, CUDA graphs captured.
  void finish_kv_cache(const EngineConfig& given);
  // The warm-up step at full batch (a small KV cache, freed after): the step arena keeps its peak.
  void warm_up_peak_step();
  int64_t gpu_kv_blocks_after_warmup();
  std::string shared_note() const;  // what the shared cache costs, for errors ("" without one)
  // Serving (cfg_.target_itl_ms > 0) on a backend with per-shape plans: one mixed step (decode rows +
  // a prompt chunk after cached context) at each of Backend::plan_row_counts, up to the steps the
  // latency target allows (model_runner_warmup.cpp).
  void warm_up_mixed_steps();

  EngineConfig cfg_;       // max_model_len settled (never 0)
  SharedKvBudget shared_;  // another cache paid from this one's budget (a draft's)
  bool kv_created_ = false;
  int64_t resident_bytes_ = 0;
  bool auto_max_model_len_ = false;  // the user left it unset: the KV cache may lower it
  ModelConfig mcfg_;
  std::unique_ptr<Backend> backend_;
  TpGroup* tp_ = nullptr;
  // NANOVLLM_TP_TRACE=1: one stderr line per start-up phase and step (where a rank waits).
  bool trace_ = false;
  int64_t steps_ = 0;
  void trace(const std::string& what) const;
  void note(const std::string& what) const;  // one stderr line, from rank 0 only
  std::unique_ptr<Communicator> comm_;       // before model_, which uses it; after backend_, which it uses
  std::unique_ptr<CausalLM> model_;
  int64_t kv_heads_ = 0;  // this rank's KV heads: Hkv / tensor_parallel_size
  Tensor kv_cache_;       // [2, L, num_blocks, block_size, Hkv, D] of kv_dtype_
  DType kv_dtype_ = DType::F32;
  Quantization quantization_ = Quantization::None;
  std::vector<KVScales> kv_scales_;  // [L]: 1.0, or the checkpoint's (FP8 cache only)
  std::vector<LayerKVCache> layers_kv_;
  int64_t num_kv_blocks_ = 0;
  double warmup_seconds_per_token_ = 0;
  std::unique_ptr<CudaGraphRunner> graphs_;                      // decode graphs (GPU, unless enforce_eager)
  std::unique_ptr<LogitsProcessingBuilder> processing_builder_;  // built on the first row that needs it
  GrammarMasks grammar_masks_;  // structured outputs: the constrained rows' masks, reused per step
  std::vector<TokenLogprobs> logprobs_;
  std::optional<PoolingModel> pooling_;
  std::vector<std::pair<size_t, std::vector<TokenLogprobs>>> prompt_logprobs_;
  std::vector<StepRows> step_rows_;
  ForwardCounts forward_counts_;
  void note_step_rows(const ScheduledBatch& batch, const StepInputs& in);
};

}  // namespace nanovllm
