#include "nanovllm/engine/model_runner.h"

#include "nanovllm/dist/tp_group.h"
#include "nanovllm/engine/cuda_graph_runner.h"
#include "nanovllm/engine/eagle3_drafter.h"
#include "nanovllm/engine/kv_cache_scales.h"
#include "nanovllm/engine/tp_protocol.h"
#include "nanovllm/models/fp8_checkpoint.h"
#include "nanovllm/models/int_checkpoint.h"
#include "nanovllm/models/quantize_weights.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

namespace {

// Whether a scheduled sequence's sampled row is a token it keeps: its scheduled tokens reach the
// end of the tokens it holds, and it holds its whole prompt (a draft model's shadow reads a prompt
// chunk by chunk, ModelRunner never seeing the rest: its row's token is not wanted).
bool gets_token(const Sequence& s) {
  return s.num_cached_tokens + s.num_scheduled_tokens >= s.num_tokens() && s.num_tokens() >= s.num_prompt_tokens;
}

}  // namespace

ModelRunner::ModelRunner(const EngineConfig& cfg, const ModelConfig& mcfg, std::unique_ptr<Backend> backend,
                         TpGroup* tp, SharedKvBudget shared, KvCacheAt kv_at)
    : cfg_(cfg), shared_(std::move(shared)), auto_max_model_len_(cfg.max_model_len_is_auto()), mcfg_(mcfg),
      backend_(std::move(backend)), tp_(tp && tp->world() > 1 ? tp : nullptr) {
  const int64_t free_at_start = backend_->free_memory_bytes();  // -1 off a GPU
  validate_tensor_parallel(mcfg_, tp_ ? tp_->world() : 1);
  cfg_.max_model_len = settle_max_model_len(cfg, mcfg_);  // the model's; the KV cache may lower it below
  kv_heads_ = mcfg_.num_key_value_heads / (tp_ ? tp_->world() : 1);
  kv_dtype_ = resolve_kv_cache_dtype(cfg_.kv_cache_dtype, backend_->act_dtype(), backend_->name());
  quantization_ = resolve_quantization(cfg_.quantization, mcfg_.checkpoint_quantization);
  if (!backend_->supports_quantization(quantization_))
    throw UserError(std::string("--quantization ") + quantization_name(quantization_) + ": not implemented on the " +
                    backend_->name() + " backend" +
                    (mcfg_.checkpoint_quantization != Quantization::None ? " (the checkpoint's quantization_config)"
                                                                         : " (use none)"));
  kv_scales_.assign(size_t(mcfg_.num_hidden_layers), KVScales{});
  const char* tr = std::getenv("NANOVLLM_TP_TRACE");
  trace_ = tr && std::string(tr) == "1";
  trace("communicator");
  if (tp_) comm_ = tp_->make_communicator(*backend_);  // NCCL: the first collective of start-up
  trace("weights");
  // The checkpoint's files are opened and validated before any parameter is allocated.
  std::unique_ptr<SafetensorsCheckpoint> ckpt;
  if (!cfg_.load_dummy) ckpt = std::make_unique<SafetensorsCheckpoint>(cfg_.model_path());
  try {
    model_ = create_model(mcfg_, *backend_, comm_.get());
  } catch (const ResourceError& e) {
    // Out of memory for a config.json that claims a bigger model than its weights: say so (where
    // the allocation succeeds, load_weights names the first tensor that does not match).
    const int64_t need = mcfg_.checked_num_parameters().value_or(INT64_MAX);
    if (ckpt && ckpt->num_elements() < need)
      throw LoadError(cfg_.model_path() + "/config.json describes a model of " + std::to_string(need) +
                      " parameters, but the checkpoint holds " + std::to_string(ckpt->num_elements()) +
                      " elements in all (" + e.what() + ")");
    throw;
  }
  auto specs = model_->weight_specs();
  pooling_ = resolve_pooling_model(cfg_, mcfg_, cfg_.model_path());
  if (pooling_) adapt_weight_specs(*pooling_, ckpt.get(), specs);
  // An FP8 checkpoint loads its codes and block scales as they are (dummy weights: quantized below).
  const bool fp8_checkpoint = mcfg_.checkpoint_quantization == Quantization::FP8 && !cfg_.load_dummy;
  if (fp8_checkpoint && mcfg_.int_checkpoint.float8)  // compressed-tensors float-quantized: per-channel scales
    add_float8_checkpoint_specs(*backend_, *model_, mcfg_.int_checkpoint, mcfg_.architecture, specs);
  else if (fp8_checkpoint)
    add_fp8_checkpoint_specs(*backend_, *model_, mcfg_.architecture, specs);
  // AWQ / GPTQ / compressed-tensors: the quantized layers are read and repacked first
  // (int_checkpoint.h), load_weights then loads the rest.
  const bool int_checkpoint = is_int_weight_only(mcfg_.checkpoint_quantization) && !cfg_.load_dummy;
  if (int_checkpoint) load_int_checkpoint(*backend_, *model_, mcfg_.int_checkpoint, mcfg_.architecture, *ckpt, specs);
  // --quantization: each layer is quantized as soon as it is loaded (quantize_weights.h).
  std::optional<WeightQuantizer> quantizer;
  if (quantization_ != Quantization::None && !fp8_checkpoint && !int_checkpoint)
    quantizer.emplace(*backend_, *model_, quantization_, mcfg_.architecture, specs);
  const WeightLoaded loaded = quantizer ? WeightLoaded([&](const WeightSpec& s) { quantizer->loaded(s); }) : nullptr;
  if (cfg_.load_dummy)
    load_dummy_weights(*backend_, specs, loaded);
  else
    load_weights(*backend_, *ckpt, specs, loaded);
  if (ckpt && kv_dtype_ == DType::F8E4M3) kv_scales_ = load_kv_cache_scales(*ckpt, mcfg_.num_hidden_layers);
  model_->finalize_weights();
  if (quantizer) quantizer->finish();
  // KernelOptions::norm_fold: the layers' norm weights into the projections after them, where the
  // backend takes the folded form (models/norm_fold.h).
  if (backend_->folds_rms_norms()) {
    const int64_t folded = model_->fold_rms_norms();
    trace("norm weights folded: " + std::to_string(folded));
  }
  if (pooling_) load_pooling_head(*pooling_, cfg_, ckpt.get(), *backend_, *model_);
  ckpt.reset();
  // EAGLE-3: the target copies out the hidden states its head fuses (before the warm-up and any
  // CUDA graph: the buffer is static and the graphs record the copies). Under tensor parallelism
  // on rank 0 only, where the head runs: the residual stream is whole on every rank once each
  // layer's all-reduce has added the partial sums, so rank 0's copy is the stream (device copies,
  // no collective: the ranks' graphs still pair up).
  if (cfg_.speculative_config.method == "eagle3" && (!tp_ || tp_->rank() == 0))
    model_->capture_aux_hidden(eagle3_config_for(cfg_, mcfg_).aux_layer_ids, eagle3_aux_rows(cfg_));

  if (kv_at == KvCacheAt::Later) {
    // Another runner sizes this cache (create_kv_cache) from a budget that must already count
    // these weights and this model's peak activations: the warm-up runs now.
    if (backend_->total_memory_bytes() > 0) warm_up_peak_step();
    // What this backend allocated, where it counts that (other processes on the device may
    // allocate or free meanwhile); else what the device lost since start-up.
    if (const int64_t held = backend_->held_device_bytes(); held >= 0)
      resident_bytes_ = held;
    else if (free_at_start >= 0)
      resident_bytes_ = free_at_start - backend_->free_memory_bytes();
    trace("ready (KV cache later)");
    return;
  }
  // KV cache budget: an explicit block count, else bytes (CPU default: 4 GiB, at least one
  // sequence of an explicit max_model_len), else on a GPU what gpu_memory_utilization leaves after
  // weights and the peak activations of a warm-up step at full batch. A shared cache (a draft's)
  // is paid from the same bytes: its extra blocks first, then a block of each per block.
  const int64_t per_block = kv_bytes_per_block();
  if (cfg_.num_kvcache_blocks > 0) {
    num_kv_blocks_ = cfg_.num_kvcache_blocks;
  } else if (backend_->total_memory_bytes() > 0 && cfg_.kv_cache_memory == 0) {
    trace("warm-up");
    num_kv_blocks_ = gpu_kv_blocks_after_warmup();
  } else {
    int64_t bytes = cfg_.kv_cache_memory > 0 ? cfg_.kv_cache_memory : (int64_t(4) << 30);
    num_kv_blocks_ = (bytes - shared_extra_bytes()) / per_block;
    if (cfg_.kv_cache_memory == 0 && !auto_max_model_len_)
      num_kv_blocks_ = std::max(num_kv_blocks_, (cfg_.max_model_len + cfg_.block_size - 1) / cfg_.block_size);
  }
  // Every rank must hold the same blocks (rank 0's block manager hands them out for all).
  trace("kv blocks " + std::to_string(num_kv_blocks_));
  if (tp_) num_kv_blocks_ = tp_->all_min(num_kv_blocks_);
  if (num_kv_blocks_ <= 0)
    throw ResourceError("KV cache budget of " + std::to_string(cfg_.kv_cache_memory) + " bytes holds no block of " +
                        std::to_string(per_block) + " bytes" + shared_note() +
                        "; raise --kv-cache-memory or lower --block-size");
  finish_kv_cache(cfg);
}

void ModelRunner::create_kv_cache(int64_t blocks) {
  if (kv_created_) throw Error("model runner: create_kv_cache called twice");
  if (blocks <= 0) throw ResourceError("model runner: a KV cache of " + std::to_string(blocks) + " blocks");
  num_kv_blocks_ = blocks;
  EngineConfig given = cfg_;  // the length as the user gave it (0: unset)
  if (auto_max_model_len_) given.max_model_len = 0;
  finish_kv_cache(given);
}

void ModelRunner::finish_kv_cache(const EngineConfig& given) {
  kv_created_ = true;
  std::string lowered;
  cfg_.max_model_len = settle_max_model_len(given, mcfg_, num_kv_blocks_, &lowered);
  if (!lowered.empty()) note(lowered);
  allocate_kv_cache();
  if (backend_->supports_graphs() && !cfg_.enforce_eager && !pooling_) {  // pooling: prompts only, no decode
    graphs_ = std::make_unique<CudaGraphRunner>(*backend_, *model_, layers_kv_, cfg_);
    trace("graph capture");
    graphs_->capture();
  }
  if (cfg_.target_itl_ms > 0) warm_up_mixed_steps();
  trace("ready");
}

void ModelRunner::note(const std::string& what) const {
  if (!tp_ || tp_->rank() == 0) std::fprintf(stderr, "%s\n", what.c_str());
}

void ModelRunner::trace(const std::string& what) const {
  if (trace_) std::fprintf(stderr, "[rank %d] %s\n", tp_ ? tp_->rank() : 0, what.c_str());
}

ModelRunner::~ModelRunner() = default;

void ModelRunner::allocate_kv_cache() {
  const int64_t L = mcfg_.num_hidden_layers;
  layers_kv_.clear();
  kv_cache_ = Tensor();
  kv_cache_ = backend_->empty({2, L, num_kv_blocks_, cfg_.block_size, kv_heads_, mcfg_.head_dim}, kv_dtype_);
  const int64_t layer_elems = num_kv_blocks_ * cfg_.block_size * kv_heads_ * mcfg_.head_dim;
  Tensor flat = kv_cache_.view({2 * L, layer_elems});
  for (int64_t l = 0; l < L; ++l) {
    Shape s{num_kv_blocks_, cfg_.block_size, kv_heads_, mcfg_.head_dim};
    layers_kv_.push_back({flat.rows(l, l + 1).view(s), flat.rows(L + l, L + l + 1).view(s), kv_scales_[size_t(l)]});
  }
}

// nano-vllm's warm-up, for the largest step the scheduler can make: max_num_batched_tokens tokens
// (activations) over as many sequences as a step holds (max_num_seqs rows of logits, as a mixed
// step of decodes and a chunk has), none longer than max_model_len, with a KV cache just big
// enough for the longest (the sequences share its blocks: the values do not matter). Then read
// the peak activation memory and give gpu_memory_utilization * total - used
// (weights, runtime, the arena at its peak) to the KV cache.
void ModelRunner::warm_up_peak_step() {
  const int64_t bs = cfg_.block_size, tokens = cfg_.max_num_batched_tokens;
  const int64_t nseq = std::max<int64_t>(1, std::min(cfg_.max_num_seqs, tokens));
  const int64_t len = std::min(cfg_.max_model_len, tokens / nseq);  // the first tokens % nseq get one more
  std::vector<int64_t> lens(size_t(nseq), len);
  for (int64_t i = 0; i < nseq && len < cfg_.max_model_len && i < tokens % nseq; ++i) ++lens[size_t(i)];
  num_kv_blocks_ = (lens[0] + bs - 1) / bs;
  allocate_kv_cache();
  {
    std::vector<std::unique_ptr<Sequence>> seqs;
    ScheduledBatch batch;
    batch.is_prefill = true;
    // The sampler's largest path too: logits processing (an F32 copy of the logits) and logprobs.
    SamplingParams warm;
    warm.repetition_penalty = 1.1f;
    warm.logprobs = 1;
    for (int64_t i = 0; i < nseq; ++i) {
      const int64_t n = lens[size_t(i)];
      seqs.push_back(std::make_unique<Sequence>(-1 - i, std::vector<int32_t>(size_t(n), 0), warm, bs, 0));
      for (int64_t b = 0; b < (n + bs - 1) / bs; ++b) seqs.back()->block_table.push_back(int32_t(b));
      seqs.back()->num_scheduled_tokens = n;
      batch.seqs.push_back(seqs.back().get());
      batch.num_tokens += n;
      batch.num_prefill_tokens += n;
    }
    const auto t0 = std::chrono::steady_clock::now();
    StepInputs in = prepare(batch, bs);
    forward_and_sample(batch, in);  // on every rank alike (not sent: the workers warm up themselves)
    backend_->synchronize();
    warmup_seconds_per_token_ =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / double(batch.num_tokens);
  }
  layers_kv_.clear();
  kv_cache_ = Tensor();
}

int64_t ModelRunner::gpu_kv_blocks_after_warmup() {
  warm_up_peak_step();
  const int64_t bs = cfg_.block_size;
  const int64_t peak = backend_->peak_step_bytes();
  const int64_t total = backend_->total_memory_bytes(), free = backend_->free_memory_bytes();
  // Used: weights, runtime, and the step arena, which stays allocated at its peak size (so the
  // peak is already in `used`); the warm-up KV cache was freed above.
  // A shared cache (a draft model's): its weights and peak activations are in `used` already (it
  // was loaded and warmed up first); its extra blocks come off the budget, and each block of this
  // cache costs this model's K/V plus the draft's (kv_bytes_per_block): both caches fit the one
  // budget and hold the same number of tokens, as the draft has to hold each sequence the target does
  // (vLLM gets the same split by putting the draft's layers in the KV cache spec: one block id covers
  // both models' layers). Our draft keeps its own block manager, so its lookahead is separate.
  const int64_t used = total - free;
  const int64_t budget = int64_t(double(total) * cfg_.gpu_memory_utilization) - used - shared_extra_bytes();
  const int64_t blocks = std::max<int64_t>(budget, 0) / kv_bytes_per_block();
  // Too little for one max_model_len sequence: refused, unless the length is unset (it is lowered
  // to what fits, settle_max_model_len) and at least a block fits.
  if (blocks < (cfg_.max_model_len + bs - 1) / bs && !(auto_max_model_len_ && blocks > 0))
    throw ResourceError("not enough GPU memory for the KV cache: " + std::to_string(total >> 20) + " MiB total, " +
                        std::to_string(used >> 20) + " MiB used by weights, runtime and " + std::to_string(peak >> 20) +
                        " MiB peak activations" + shared_note() + "; one max_model_len sequence needs " +
                        std::to_string(((cfg_.max_model_len + bs - 1) / bs * kv_bytes_per_block()) >> 20) +
                        " MiB. Raise --gpu-memory-utilization, or lower --max-model-len, --max-num-seqs or "
                        "--max-num-batched-tokens");
  return blocks;
}

std::string ModelRunner::shared_note() const {
  if (shared_.elements_per_block == 0) return "";
  const int64_t own = kv_bytes_per_block() - shared_.elements_per_block * int64_t(dtype_size(kv_dtype_));
  const std::string resident = shared_.resident_bytes > 0 ? "of which " + shared_.owner + " holds " +
                                                                std::to_string(shared_.resident_bytes >> 20) +
                                                                " MiB of weights and activations; "
                                                          : "";
  return " (" + resident + "a KV block costs " + std::to_string(own) + " bytes for '" + cfg_.model + "' and " +
         std::to_string(kv_bytes_per_block() - own) + " for " + shared_.owner + ", which needs " +
         std::to_string(shared_extra_bytes() >> 20) + " MiB more for drafts past the verified tokens)";
}

int64_t ModelRunner::num_cuda_graphs() const { return graphs_ ? graphs_->num_graphs() : 0; }

int64_t ModelRunner::max_catch_up_decode_rows() const { return graphs_ ? graphs_->max_batch() : cfg_.max_num_seqs; }

int64_t ModelRunner::kv_bytes_per_block() const {
  return (2 * mcfg_.num_hidden_layers * cfg_.block_size * kv_heads_ * mcfg_.head_dim + shared_.elements_per_block) *
         int64_t(dtype_size(kv_dtype_));
}

int64_t ModelRunner::shared_extra_bytes() const {
  return shared_.extra_blocks * shared_.elements_per_block * int64_t(dtype_size(kv_dtype_));
}

StepInputs ModelRunner::prepare(const ScheduledBatch& batch, int64_t bs, bool ahead) {
  StepInputs in;
  auto& md = in.md;
  // A step of decodes and short multi-token rows only (verify rows; a draft model's catch-up rows)
  // lays out each of their positions as a decode row of its own (context: the keys up to it; the
  // sequence's block table repeated): decode attention, the decode GEMVs and the decode CUDA
  // graphs score the drafts, with the arithmetic of decoding (a position's logits do not depend on
  // how many drafts follow it). Only a row's sampled positions (last_rows) reach the sampler. With
  // a prompt chunk in the step, such a row is a short prefill row of the mixed step instead.
  const bool rows_as_decodes =
      !ahead && batch.num_verify_rows + batch.num_catch_up_rows > 0 && batch.num_prefill_tokens == 0;
  in.rows_as_decodes = rows_as_decodes;
  md.is_prefill = batch.is_prefill && !rows_as_decodes;
  md.num_seqs = int64_t(batch.seqs.size());  // rows_as_decodes: a row per token, set below
  md.cu_seqlens_q.push_back(0);
  md.cu_seqlens_k.push_back(0);
  for (auto* s : batch.seqs) md.max_blocks = std::max<int64_t>(md.max_blocks, int64_t(s->block_table.size()));
  for (auto* s : batch.seqs) {
    if (s->kv_copy && !ahead) in.kv_copies.push_back(*s->kv_copy);
    // New tokens: [num_cached, num_cached + num_scheduled) (decode: just the last token; ahead:
    // the one after it, not sampled yet).
    // A verify step: the last token then its drafts (positions num_tokens()..).
    const int64_t begin = ahead ? s->num_tokens() : s->num_cached_tokens;
    const int64_t end = ahead ? begin + 1 : begin + s->num_scheduled_tokens;
    const int64_t drafts = ahead ? 0 : int64_t(s->draft_ids.size());
    if (end > s->num_tokens() + (ahead ? 1 : drafts) || int64_t(s->block_table.size()) * bs < end ||
        s->num_sampled_rows() > end - begin)
      throw Error("model runner: sequence " + std::to_string(s->id) + " is scheduled past its tokens or blocks");
    // One attention row: new tokens [first, last), keys [0, last).
    auto add_row = [&](int64_t first, int64_t last) {
      md.cu_seqlens_q.push_back(md.cu_seqlens_q.back() + int32_t(last - first));
      md.cu_seqlens_k.push_back(md.cu_seqlens_k.back() + int32_t(last));
      md.max_seqlen_q = std::max(md.max_seqlen_q, int32_t(last - first));
      md.max_seqlen_k = std::max(md.max_seqlen_k, int32_t(last));
      md.context_lens.push_back(int32_t(last));
      for (int64_t i = 0; i < md.max_blocks; ++i)
        md.block_tables.push_back(i < int64_t(s->block_table.size()) ? s->block_table[size_t(i)] : -1);
    };
    for (int64_t p = begin; p < end; ++p) {
      const int64_t n = s->num_tokens();
      in.input_ids.push_back(ahead ? 0 : p < n ? s->token_ids[size_t(p)] : s->draft_ids[size_t(p - n)]);
      in.positions.push_back(int32_t(p));
      md.slot_mapping.push_back(int32_t(s->block_table[size_t(p / bs)] * bs + p % bs));
      if (rows_as_decodes) add_row(p, p + 1);
    }
    if (!rows_as_decodes) add_row(begin, end);
    for (int64_t r = drafts; r >= 0; --r) in.last_rows.push_back(int32_t(in.input_ids.size()) - 1 - int32_t(r));
  }
  md.num_tokens = int64_t(in.input_ids.size());
  if (rows_as_decodes) md.num_seqs = md.num_tokens;
  return in;
}

Tensor ModelRunner::forward_logits(StepInputs& in, Tensor* hidden_out, const Tensor* device_ids) {
  if (trace_)
    trace("step " + std::to_string(steps_++) + (in.md.is_prefill ? " prefill " : " decode ") +
          std::to_string(in.md.num_tokens));
  // Partial prefix hits: the copied slots must hold their K/V before any attention reads them.
  if (!in.kv_copies.empty()) {
    Tensor planes =
        kv_cache_.view({2 * mcfg_.num_hidden_layers, num_kv_blocks_, cfg_.block_size, kv_heads_ * mcfg_.head_dim});
    backend_->copy_kv_blocks(planes, in.kv_copies);
  }
  ++(in.md.is_prefill     ? forward_counts_.prefill
     : in.rows_as_decodes ? forward_counts_.rows_as_decodes
                          : forward_counts_.decode);
  if (graphs_ && !in.md.is_prefill && in.md.num_seqs <= graphs_->max_batch()) {
    ++forward_counts_.graph_replays;
    Tensor all = graphs_->run(in, device_ids);  // [num_seqs, V]: every row's logits
    if (all_rows_in_order(in.last_rows, in.md.num_seqs)) return all;
    // A catch-up row samples its last position only: the sampled rows, in order.
    Tensor sampled = backend_->empty({int64_t(in.last_rows.size()), all.size(1)}, all.dtype());
    backend_->gather_rows(all, in.last_rows, sampled);
    return sampled;
  }
  // Without a caller for every row's hidden state (prompt logprobs), the model's last layer runs on
  // the sampled rows alone (ascending: each sequence's rows lie together, in batch order).
  const bool ascending = std::is_sorted(in.last_rows.begin(), in.last_rows.end()) &&
                         std::adjacent_find(in.last_rows.begin(), in.last_rows.end()) == in.last_rows.end();
  if (hidden_out || !ascending) {
    Tensor hidden = forward_hidden(in, device_ids);
    if (hidden_out) *hidden_out = hidden;
    return model_->compute_logits(hidden, in.last_rows);
  }
  Tensor hidden = forward_hidden(in, device_ids, &in.last_rows);  // [last_rows.size(), H]
  std::vector<int32_t> rows(in.last_rows.size());
  std::iota(rows.begin(), rows.end(), 0);
  return model_->compute_logits(hidden, rows);
}

Tensor ModelRunner::forward_hidden(StepInputs& in, const Tensor* device_ids, const std::vector<int32_t>* rows) {
  backend_->begin_step();
  const int64_t T = int64_t(in.input_ids.size());
  Tensor ids = backend_->empty({T}, DType::I32), pos = backend_->empty({T}, DType::I32);
  if (device_ids)
    backend_->cast(*device_ids, ids);
  else
    backend_->upload(in.input_ids.data(), DType::I32, ids);
  backend_->upload(in.positions.data(), DType::I32, pos);
  backend_->prepare_metadata(in.md);
  return model_->forward(ids, pos, layers_kv_, in.md, rows);
}

// Prompt logprobs: the logits of a prompt position p predict token p + 1; the positions this step
// computes that a sequence still needs go through the LM head in chunks of kPromptLogitRows rows
// (bounded memory: [rows, V] logits at a time), then token_logprobs on the backend.
void ModelRunner::compute_prompt_logprobs(const ScheduledBatch& batch, const StepInputs& in, const Tensor& hidden) {
  constexpr size_t kPromptLogitRows = 32;
  for (size_t i = 0; i < batch.seqs.size(); ++i) {
    const Sequence* s = batch.seqs[i];
    if (!s->needs_prompt_logprobs()) continue;
    const int64_t begin = s->num_cached_tokens, end = begin + s->num_scheduled_tokens;
    const int64_t have = int64_t(s->prompt_logprobs.size());
    if (begin > have)
      throw Error("model runner: sequence " + std::to_string(s->id) + " skipped prompt positions it needs logprobs of");
    std::vector<int32_t> rows, targets;
    for (int64_t p = have; p < std::min(end, s->num_prompt_tokens - 1); ++p) {
      rows.push_back(in.md.cu_seqlens_q[i] + int32_t(p - begin));
      targets.push_back(s->token_ids[size_t(p + 1)]);
    }
    std::vector<TokenLogprobs> out;
    for (size_t c = 0; c < rows.size(); c += kPromptLogitRows) {
      const size_t e = std::min(rows.size(), c + kPromptLogitRows);
      Tensor logits = model_->compute_logits(hidden, {rows.begin() + int64_t(c), rows.begin() + int64_t(e)});
      auto lps = backend_->token_logprobs(logits, {targets.begin() + int64_t(c), targets.begin() + int64_t(e)},
                                          *s->params.prompt_logprobs);
      out.insert(out.end(), lps.begin(), lps.end());
    }
    prompt_logprobs_.emplace_back(i, std::move(out));
  }
}

std::vector<int32_t> ModelRunner::forward_and_sample(const ScheduledBatch& batch, StepInputs& in) {
  prompt_logprobs_.clear();
  const bool any_prompt_logprobs =
      std::any_of(batch.seqs.begin(), batch.seqs.end(), [](const Sequence* s) { return s->needs_prompt_logprobs(); });
  Tensor hidden;
  Tensor logits = forward_logits(in, any_prompt_logprobs ? &hidden : nullptr);
  if (any_prompt_logprobs) compute_prompt_logprobs(batch, in, hidden);
  if (logits_observer) logits_observer(batch, backend_->to_host_f32(logits));
  std::vector<SamplingRow> rows = plain_rows(batch, false);
  std::vector<Sequence*> row_seqs;  // the sequence of each sampled row
  for (Sequence* s : batch.seqs) row_seqs.insert(row_seqs.end(), size_t(s->num_sampled_rows()), s);
  std::vector<LogitsProcessing> processing;  // rows point into it: reserved before the first push
  bool any_logprobs = false;
  const bool processed = cfg_.logprobs_mode == LogprobsMode::ProcessedLogprobs;
  std::vector<int32_t> context;  // a verify row's tokens before position j: the sequence's, then drafts
  for (size_t i = 0, r = 0; i < batch.seqs.size(); r += size_t(batch.seqs[i++]->num_sampled_rows())) {
    const Sequence* s = batch.seqs[i];
    const auto& p = s->params;
    if (!gets_token(*s)) continue;  // nothing to process or report
    for (int64_t j = 0; j < s->num_sampled_rows(); ++j) {
      SamplingRow& row = rows[r + size_t(j)];
      if (p.processes_logits()) {  // penalties, logit_bias, min_tokens as at that position
        if (!processing_builder_) processing_builder_ = std::make_unique<LogitsProcessingBuilder>(mcfg_.vocab_size);
        if (processing.empty()) processing.reserve(rows.size());
        const std::vector<int32_t>* toks = &s->token_ids;
        if (j > 0) {
          context.assign(s->token_ids.begin(), s->token_ids.end());
          context.insert(context.end(), s->draft_ids.begin(), s->draft_ids.begin() + j);
          toks = &context;
        }
        processing.push_back(processing_builder_->build(p, *toks, s->num_prompt_tokens, mcfg_.eos_token_ids));
        row.processing = &processing.back();
      }
      if (p.logprobs) {
        row.num_logprobs = *p.logprobs;
        row.processed_logprobs = processed;
        any_logprobs = true;
      }
    }
  }
  grammar_masks_.fill(row_seqs, rows, false);  // on the host while the device runs the forward
  logprobs_.clear();
  return backend_->sample(logits, rows, any_logprobs ? &logprobs_ : nullptr);
}

std::vector<int32_t> ModelRunner::run(const ScheduledBatch& batch) {
  StepInputs in = prepare(batch, cfg_.block_size);
  if (pooling_) return forward_and_pool(batch, in);
  if (tp_) tp_->broadcast(encode_step(in));
  note_step_rows(batch, in);
  return forward_and_sample(batch, in);
}

// A step's token rows are each sequence's scheduled tokens, in batch order (prepare()).
void ModelRunner::note_step_rows(const ScheduledBatch& batch, const StepInputs& in) {
  step_rows_.clear();
  if (!model_->aux_hidden_states().defined() || int64_t(in.input_ids.size()) > model_->aux_rows_per_layer()) return;
  int64_t row = 0;
  for (const Sequence* s : batch.seqs) {
    step_rows_.push_back({s->id, s->num_cached_tokens, row, s->num_scheduled_tokens});
    row += s->num_scheduled_tokens;
  }
}

void ModelRunner::run_worker_step(StepInputs& in) { forward_logits(in); }

bool ModelRunner::can_run_async(const ScheduledBatch& batch) const {
  if (tp_ || logits_observer || batch.is_prefill || batch.num_decodes != int64_t(batch.seqs.size())) return false;
  return std::none_of(batch.seqs.begin(), batch.seqs.end(), [](const Sequence* s) {
    // Constrained rows run async too: a step's mask is filled when its previous token is on the
    // host (run_async), or after it for a step launched ahead (forward_ahead, then sample_ahead).
    return s->params.processes_logits() || s->params.logprobs || s->needs_prompt_logprobs();
  });
}

SamplingRow ModelRunner::plain_row(const Sequence& s, int64_t position) {
  const auto& p = s.params;
  return {p.temperature, p.top_k, p.top_p, p.min_p, s.seed, position};
}

std::vector<SamplingRow> ModelRunner::plain_rows(const ScheduledBatch& batch, bool ahead) {
  std::vector<SamplingRow> rows;
  for (const Sequence* s : batch.seqs) {
    rows.push_back(plain_row(*s, s->num_tokens() + (ahead ? 1 : 0)));
    // A verify row samples the target's token after the last token and after each draft.
    for (int64_t j = 1; !ahead && j < s->num_sampled_rows(); ++j) rows.push_back(plain_row(*s, s->num_tokens() + j));
  }
  return rows;
}

bool ModelRunner::can_sample_on_device(const ScheduledBatch& batch) const {
  if (tp_ || logits_observer || pooling_) return false;
  return std::all_of(batch.seqs.begin(), batch.seqs.end(), [](const Sequence* s) {
    if (!s->draft_ids.empty() || s->num_cached_tokens + s->num_scheduled_tokens != s->num_tokens()) return false;
    // A row whose token is not wanted (a drafter's prompt chunk) needs no processing either.
    return !gets_token(*s) || (!s->params.processes_logits() && !s->params.logprobs && !s->needs_prompt_logprobs());
  });
}

Backend::SampledTokens ModelRunner::run_to_device(const ScheduledBatch& batch) {
  if (!can_sample_on_device(batch)) throw Error("model runner: run_to_device on a batch that must sample on the host");
  return run_async_unchecked(batch);
}

Backend::SampledTokens ModelRunner::run_async(const ScheduledBatch& batch) {
  if (!can_run_async(batch)) throw Error("model runner: run_async on a batch that must run synchronously");
  return run_async_unchecked(batch);
}

Backend::SampledTokens ModelRunner::run_async_unchecked(const ScheduledBatch& batch) {
  StepInputs in = prepare(batch, cfg_.block_size);
  Tensor logits = forward_logits(in);
  std::vector<SamplingRow> rows = plain_rows(batch, false);
  grammar_masks_.fill(batch, rows);  // the previous tokens are on the host
  return sample_rows_async(logits, std::move(rows));
}

// The tokens go where a decode graph of the next step reads its input ids (when one will run it).
// An async step has no logprobs: last_logprobs() and last_prompt_logprobs() are empty after it.
Backend::SampledTokens ModelRunner::sample_rows_async(const Tensor& logits, std::vector<SamplingRow> rows) {
  logprobs_.clear();
  prompt_logprobs_.clear();
  const int64_t B = int64_t(rows.size());
  if (graphs_ && B <= graphs_->max_batch()) {
    const Tensor ids = graphs_->input_ids(B);
    return backend_->sample_async(logits, rows, &ids);
  }
  return backend_->sample_async(logits, rows);
}

Backend::SampledTokens ModelRunner::run_ahead(const ScheduledBatch& batch, const Backend::SampledTokens& prev) {
  return sample_rows_async(forward_ahead(batch, prev), plain_rows(batch, true));
}

Tensor ModelRunner::forward_ahead(const ScheduledBatch& batch, const Backend::SampledTokens& prev) {
  if (!can_run_async(batch) || prev.device.numel() != int64_t(batch.seqs.size()))
    throw Error("model runner: forward_ahead needs an async batch and its " + std::to_string(batch.seqs.size()) +
                " pending tokens");
  StepInputs in = prepare(batch, cfg_.block_size, /*ahead=*/true);
  return forward_logits(in, nullptr, &prev.device);
}

Backend::SampledTokens ModelRunner::sample_ahead(const std::vector<Sequence*>& rows_of, const Tensor& logits) {
  std::vector<SamplingRow> rows;
  // A sequence that ended on the previous token keeps a default row, dropped when the step completes;
  // the others' previous token is appended: they sample at num_tokens().
  for (const Sequence* s : rows_of) rows.push_back(s ? plain_row(*s, s->num_tokens()) : SamplingRow{});
  grammar_masks_.fill(rows_of, rows, /*all_rows_sample=*/true);
  return sample_rows_async(logits, std::move(rows));
}

}  // namespace nanovllm
