// The op interface every backend implements (CPU: the reference; CUDA: the fast one).
// Model code calls only these; activations use the backend's act_dtype (F32 on CPU, BF16 on
// CUDA), weights its weight dtype. Shapes: T tokens, H hidden, V vocab, B sequences,
// Hq/Hkv heads, D head_dim, I intermediate size, E experts. Shapes are checked in backends/checks.cpp.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "nanovllm/backends/attention_metadata.h"
#include "nanovllm/backends/kv_block_copy.h"
#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/backends/rope_params.h"
#include "nanovllm/backends/weight_scales.h"
#include "nanovllm/config/engine_choices.h"
#include "nanovllm/config/kernel_options.h"
#include "nanovllm/config/kv_cache_dtype.h"
#include "nanovllm/config/quantization.h"
#include "nanovllm/utils/tensor.h"

namespace nanovllm {

// Per-sequence sampling inputs for one step.
struct SamplingRow {
  float temperature = 0;  // 0 = greedy
  int top_k = 0;          // <= 0: off
  float top_p = 1;
  float min_p = 0;
  uint64_t seed = 0;     // noise = f(seed, position, vocab index): same seed, same output
  int64_t position = 0;  // position of the token being sampled
  // Penalties, logit_bias, min_tokens (backends/logits_processing.h), applied to the logits before
  // temperature; null for a row without any (it costs nothing then).
  const LogitsProcessing* processing = nullptr;
  // -1: no logprobs. N >= 0: the sampled token's logprob and the top N, from the raw logits, or
  // with processed_logprobs from the processed logits divided by the temperature (1 when greedy).
  int num_logprobs = -1;
  bool processed_logprobs = false;
  // Structured output: the tokens this row may sample, a packed bitmask of (V + 31) / 32 words
  // (bit t % 32 of word t / 32 set: token t allowed), owned by the caller until sample() returns;
  // null: no constraint. The others' logits become -inf before penalties, temperature and the
  // filters (greedy: the argmax over the allowed tokens). Raw logprobs still see the model's logits;
  // processed logprobs see the mask. A row whose allowed logits are all -inf gets token 0.
  const uint32_t* allowed = nullptr;
};

// What a layer reads right after its attention (o_proj's and the MLP's weights, the next layer's
// qkv_proj), in that order: a hint a backend may use to start loading them while the attention's
// last reads finish. Results never depend on it.
struct ReadAhead {
  std::array<const Tensor*, 4> tensors{};
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;
  virtual DType act_dtype() const = 0;
  virtual DType weight_dtype() const = 0;

  // Memory.
  virtual Tensor empty(const Shape& shape, DType dtype) = 0;
  // Copies n host values of src_dtype into `dst` (converting to dst's dtype, float types only
  // or equal types).
  virtual void upload(const void* src, DType src_dtype, Tensor& dst) = 0;
  virtual void download(const Tensor& src, void* dst) = 0;  // raw bytes, same dtype
  virtual void synchronize() {}
  // Activations live from begin_step() to the next begin_step(): a backend may hand them out
  // from an arena that begin_step() rewinds (CUDA: no cudaMalloc on the hot path, and the same
  // addresses for the same sequence of allocations, which CUDA graphs rely on).
  virtual void begin_step() {}
  // Device memory accounting for KV-cache sizing (GPU backends); -1 = unknown (CPU).
  virtual int64_t free_memory_bytes() { return -1; }
  virtual int64_t total_memory_bytes() { return -1; }
  virtual int64_t peak_step_bytes() { return 0; }  // largest arena use of any step so far
  // Device bytes this backend holds itself (its tensors and its activation arena; not the CUDA
  // context or libraries' workspaces): unlike a difference of free_memory_bytes, blind to other
  // processes allocating or freeing on the same device meanwhile. -1 = unknown (CPU).
  virtual int64_t held_device_bytes() { return -1; }
  // Row counts (tokens of a step) at which this backend's per-shape plans change, up to max_rows,
  // one per class (CUDA: the top of each cuBLASLt heuristic bucket, kernel_plan.h gemm_heuristic_rows).
  // A plan met first mid-serving costs its step milliseconds; ModelRunner::warm_up_mixed_steps runs a
  // step at each. Default: none (nothing is planned per shape).
  virtual std::vector<int64_t> plan_row_counts(int64_t max_rows) const {
    (void)max_rows;
    return {};
  }
  // CUDA graphs (decode): work enqueued between capture_begin and capture_end is recorded, not
  // run; replay runs it again on the same buffers. Unsupported by default.
  virtual bool supports_graphs() const { return false; }
  virtual void graph_capture_begin() { throw_no_graphs(); }
  virtual int64_t graph_capture_end() { throw_no_graphs(); }
  virtual void graph_replay(int64_t handle) {
    (void)handle;
    throw_no_graphs();
  }
  // Frees a captured graph (after the work in flight). Graphs must go before the communicator
  // whose collectives they captured: NCCL holds the communicator's resources until then.
  virtual void graph_destroy(int64_t handle) { (void)handle; }
  // The context lengths at which a decode of `batch` sequences changes its kernels' launch shapes
  // (ascending): a graph captured for the range [break_i, break_i+1) of the batch's longest
  // context replays correctly for any context in it. None: one graph serves every context.
  virtual std::vector<int64_t> decode_context_breaks(int64_t batch) const {
    (void)batch;
    return {};
  }

  // The host vectors of `md` -> its device tensors (no-op on CPU).
  virtual void prepare_metadata(AttentionMetadata& md) { (void)md; }

  // out[t] = table[ids[t] - vocab_start], or a zero row when ids[t] is outside
  // [vocab_start, vocab_start + V) (tensor parallelism: the table is this rank's vocabulary shard).
  // ids: [T] I32 (host on CPU); table: [V, H]; out: [T, H].
  virtual void embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) = 0;
  // out = x / rms(x) * w. x, out: [T, H]; w: [H].
  virtual void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) = 0;
  // residual += x; x = rms_norm(residual) * w. x, residual: [T, H]. (fused add + norm)
  virtual void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) = 0;
  // out = x @ w^T. x: [T, K]; w: [N, K]; out: [T, N] in the act dtype or F32 (tensor
  // parallelism keeps row-parallel partial sums in F32 until they are all-reduced).
  virtual void linear(const Tensor& x, const Tensor& w, Tensor& out) = 0;
  // The same with a quantized w (F8E4M3 or I8 codes [N, K]) and its scales (backends/weight_scales.h);
  // unquantized (scales undefined): linear above. A backend without kernels for w's scheme throws.
  void linear(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
    if (scales.defined())
      linear_quantized(x, w, scales, out);
    else
      linear(x, w, out);
  }
  virtual void linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  // Weight quantization (--quantization, quantization.h): whether this backend has kernels for q,
  // and w [N, K] (weight dtype) -> codes [N, K] with their scales, as linear_quantized reads them.
  virtual bool supports_quantization(Quantization q) const { return q == Quantization::None; }
  virtual void quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales);
  // Group-quantized integer weights (backends/int_weights.h): once every checkpoint tensor of one
  // linear layer is in place in the canonical layout (codes U4/U8 [N, K] row-major, F32 scale and
  // zero [N, K / block_k], optional I32 perm [K]), the backend may rewrite codes and scales in
  // place into its kernels' private layout; afterwards only linear_quantized and
  // linear_silu_mul_quantized read them. Default: the canonical layout is the kernels' layout.
  virtual void prepare_int_weight(Tensor& codes, WeightScales& scales) {
    (void)codes;
    (void)scales;
  }
  // x[t, :] += bias for every row t. x: [T, N] (act dtype); bias: [N] (weight dtype). (Qwen2's
  // q/k/v biases.)
  virtual void add_bias(Tensor& x, const Tensor& bias) = 0;
  // In place on qkv: [T, (Hq + 2 Hkv) * D]: RMSNorm each q and k head over D (weights [D]; both
  // undefined: no norm, as in Llama, Qwen2, Mistral), then rotary embedding (rotate-half) at
  // positions [T] (I32) with rope.inv_freq [D/2] and rope.attention_scaling.
  virtual void qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                            int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps,
                            const RopeParams& rope) = 0;
  // The same with plain RoPE of base rope_theta (the op tests' form).
  void qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                    int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps, float rope_theta) {
    qk_norm_rope(qkv, q_norm_w, k_norm_w, positions, num_heads, num_kv_heads, head_dim, eps,
                 RopeParams::plain(head_dim, rope_theta));
  }
  // Writes the k and v parts of qkv into the caches at md.slot_mapping (slot -1 skipped).
  // k_cache, v_cache: [num_blocks, block_size, Hkv, D], in the act dtype or F8E4M3 (the FP8 KV
  // cache: k / kv_scales.k and v / kv_scales.v, rounded and saturated; kv_cache_dtype.h).
  virtual void store_kvcache(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int64_t num_heads,
                             int64_t num_kv_heads, int64_t head_dim, const AttentionMetadata& md,
                             KVScales kv_scales = {}) = 0;
  // Causal paged attention of the q part of qkv against the cached keys/values of each sequence
  // (prefix hits and earlier chunks included). out: [T, Hq * D]. sliding_window > 0: the query at
  // position p reads only keys p - sliding_window + 1 .. p (transformers' sliding window).
  // F8E4M3 caches are read as code x kv_scales.k (keys) and code x kv_scales.v (values).
  virtual void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out,
                         int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float scale,
                         const AttentionMetadata& md, int64_t sliding_window = 0, KVScales kv_scales = {},
                         const ReadAhead& then = {}) = 0;
  // Prefix caching's partial hits (engine/block_manager.h): for each copy c and each plane p of
  // cache [P, num_blocks, block_size, R] (P = 2 x layers: every layer's keys, then values; R =
  // Hkv * D), cache[p, c.dst_block, :c.num_slots] = cache[p, c.src_block, :c.num_slots]. Any dtype:
  // FP8 codes are copied as they are (their scales are per layer, not per block). The blocks of a
  // copy differ; no copy writes a block another copy of the list reads. Enqueued in stream order.
  virtual void copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) = 0;
  // dst = src converted to dst's dtype (same shape; F32 <-> the act dtype), or copied (equal dtypes).
  virtual void cast(const Tensor& src, Tensor& dst) = 0;
  // out = silu(x[:, :I]) * x[:, I:]. x: [T, 2I]; out: [T, I].
  virtual void silu_and_mul(const Tensor& x, Tensor& out) = 0;

  // Mixture of experts (Qwen3-MoE's sparse block, transformers' Qwen3MoeTopKRouter and experts).
  // The router: p = softmax(logits[t]) in F32, the top_k largest of p (descending; of equal
  // values the lower expert index first), divided by their sum when renormalize. logits: [T, E]
  // (F32 or the act dtype); weights: [T, top_k] F32; ids: [T, top_k] I32.
  virtual void moe_topk(const Tensor& logits, int64_t top_k, bool renormalize, Tensor& weights, Tensor& ids) = 0;
  // The experts and their combine: out[t] = sum_j weights[t, j] * down_e(silu(gate_e(x[t])) * up_e(x[t]))
  // with e = ids[t, j]. x: [T, H]; w13: [E, 2I, H] (expert e's gate rows, then its up rows);
  // w2: [E, H, I]; weights, ids: [T, k] as moe_topk writes them; out: [T, H] in the act dtype or F32
  // (tensor parallelism: each rank holds a slice of every expert's I, and out is its partial sums).
  virtual void moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights,
                           const Tensor& ids, Tensor& out) = 0;

  // Fused pairs (the defaults run the two ops; a backend overrides where one pass is faster,
  // e.g. CUDA at decode batch sizes, where each kernel launch costs more than its work).
  // qk_norm_rope, then store_kvcache of the result.
  virtual void qk_norm_rope_store(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                                  Tensor& k_cache, Tensor& v_cache, int64_t num_heads, int64_t num_kv_heads,
                                  int64_t head_dim, float eps, const RopeParams& rope, const AttentionMetadata& md,
                                  KVScales kv_scales = {});
  // The arguments of qk_norm_rope_store after qkv, for add_rms_norm_linear_rope.
  struct QkNormRopeStore {
    const Tensor& q_norm_w;
    const Tensor& k_norm_w;
    const Tensor& positions;
    Tensor& k_cache;
    Tensor& v_cache;
    int64_t num_heads, num_kv_heads, head_dim;
    float eps;
    const RopeParams& rope;
    const AttentionMetadata& md;
    KVScales kv_scales;
  };
  // qk_norm_rope_store on qkv with r's arguments.
  void qk_norm_rope_store(Tensor& qkv, const QkNormRopeStore& r) {
    qk_norm_rope_store(qkv, r.q_norm_w, r.k_norm_w, r.positions, r.k_cache, r.v_cache, r.num_heads, r.num_kv_heads,
                       r.head_dim, r.eps, r.rope, r.md, r.kv_scales);
  }
  // add_rms_norm_linear (no SiLU), then qk_norm_rope_store on out: the attention's input projection
  // (w without bias). The default runs the two; CUDA fuses the product with the norm + RoPE + store
  // in its Hopper GEMM's epilogue where the plan says (kernel_plan.h: linear_rope_fuses). Afterwards
  // only out's q columns and the caches are defined: the fused form writes k and v into the caches
  // alone (the attention reads them from there).
  virtual void add_rms_norm_linear_rope(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                        Tensor& out, const QkNormRopeStore& r);
  // linear, then qk_norm_rope_store on out: add_rms_norm_linear_rope for an input that is already
  // normed (linear_add_rms_norm wrote it), with the same contract on out. The default runs the two.
  virtual void linear_rope(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r);
  // A row-parallel projection and the decoder layer's norm after it: residual += linear(x, w);
  // out = rms_norm(residual) * norm_w. x: [T, K]; w: [H, K]; residual, out: [T, H]; norm_w: [H].
  // A backend that folds the add and the norm into the GEMM's epilogue (CUDA at prefill sizes) does
  // so and returns true; otherwise nothing happens and it returns false (the default), and the
  // caller runs the product, then the norm (layernorm.h: its Deferred forms).
  virtual bool linear_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& residual, const Tensor& norm_w, float eps,
                                   Tensor& out) {
    (void)x, (void)w, (void)residual, (void)norm_w, (void)eps, (void)out;
    return false;
  }
  // KernelOptions::norm_fold: whether this backend would take linear_residual_rms_linear below, so
  // that the model folds its decoder layers' norm weights into the projections after them at load
  // (models/norm_fold.h). Default: no.
  virtual bool folds_rms_norms() const { return false; }
  // A row-parallel projection, the residual add and an RMSNorm whose weight was folded into w (one
  // rank, unquantized weights): residual += x @ wo^T; then with r = 1 / sqrt(mean(residual^2) + eps)
  // per row, out = r * (residual @ w^T), or silu_and_mul of that ([T, I] for w [2I, K]) with
  // silu_mul, or with rope that product into out as add_rms_norm_linear_rope leaves it (q columns,
  // k and v into the caches). x: [T, Ko]; wo: [K, Ko]; residual: [T, K]; w: [N, K]. A backend that
  // scales the product's rows in its epilogue (CUDA, our Hopper GEMM) does so and returns true;
  // otherwise nothing happens and it returns false (the default: the caller runs the usual forms,
  // whose unit norm weight gives the same).
  virtual bool linear_residual_rms_linear(const Tensor& x, const Tensor& wo, Tensor& residual, float eps,
                                          const Tensor& w, Tensor& out, bool silu_mul, const QkNormRopeStore* rope) {
    (void)x, (void)wo, (void)residual, (void)eps, (void)w, (void)out, (void)silu_mul, (void)rope;
    return false;
  }
  // out = silu_and_mul(x @ w^T): the gated MLP's first half. x: [T, K]; w: [2I, K] (gate rows, then
  // up rows); out: [T, I].
  virtual void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out);
  // The same with a quantized w (F8E4M3 or I8 codes [2I, K] and their scales); unquantized
  // (scales undefined): linear_silu_mul above.
  void linear_silu_mul(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
    if (scales.defined())
      linear_silu_mul_quantized(x, w, scales, out);
    else
      linear_silu_mul(x, w, out);
  }
  // Default: linear_quantized into a [T, 2I] temporary, then silu_and_mul.
  virtual void linear_silu_mul_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  // A decoder layer's norm and the projection after it: residual += x; then
  // out = linear(rms_norm(residual) * norm_w, w), or linear_silu_mul with silu_mul. x, residual:
  // [T, K]; norm_w: [K]; w: [N, K] ([2I, K] with silu_mul); out: [T, N] ([T, I]). The sum may land
  // in a new buffer that `residual` is rebound to (a kernel whose CTAs all read the residual cannot
  // overwrite it); x's contents are unspecified afterwards (the default normalizes it in place).
  virtual void add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                   Tensor& out, bool silu_mul);
  // The same with a quantized w (codes [N, K] or [2I, K] and their scales; layernorm.h calls it
  // without tensor parallelism). Default: add_rms_norm, then linear_quantized or
  // linear_silu_mul_quantized. The CUDA backend folds the norm into its INT GEMV at decode sizes.
  virtual void add_rms_norm_linear_quantized(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps,
                                             const Tensor& w, const WeightScales& scales, Tensor& out, bool silu_mul);
  // Tensor parallelism's LM head: out[b, r * Vl + j] = parts[r, b, j]. parts: [N, B, Vl] (the
  // all-gathered vocabulary shards); out: [B, N * Vl]. Same dtype; no host sync (graph-safe).
  virtual void merge_vocab_shards(const Tensor& parts, Tensor& out) = 0;
  // out[b] = x[rows[b]]. rows: host indices; x: [T, H]; out: [B, H].
  virtual void gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) = 0;
  // One token per row of logits [B, V] (act dtype or F32). The step's only device->host sync.
  // `logprobs` (needed when a row has num_logprobs >= 0) gets B entries, filled for those rows.
  virtual std::vector<int32_t> sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                      std::vector<TokenLogprobs>* logprobs = nullptr) = 0;
  // Async scheduling (engine/llm_engine.h): sample() without waiting. The tokens stay on the device
  // ([B] I32, valid in stream order: the next step's input ids may be copied from them) until
  // wait_tokens() brings them to the host. No row may ask for logprobs. At most two samplings may
  // be outstanding. The default samples synchronously (the CPU, whose work never runs ahead).
  struct SampledTokens {
    Tensor device;              // [B] I32
    std::vector<int32_t> host;  // filled by wait_tokens (at once by a synchronous backend)
    int64_t ticket = -1;        // the backend's pending copy; -1: host is filled
  };
  // device_out: where the device tokens go ([B] I32, e.g. the next step's input ids); else the
  // backend's own buffer.
  virtual SampledTokens sample_async(const Tensor& logits, const std::vector<SamplingRow>& rows,
                                     const Tensor* device_out = nullptr);
  virtual std::vector<int32_t> wait_tokens(SampledTokens& t);
  // Whether enqueued work runs while the host goes on (then sampling ahead pays: async scheduling's
  // default). False: every op has finished when it returns.
  virtual bool runs_asynchronously() const { return false; }
  // Raw logprobs of given tokens (prompt logprobs): for each row b of logits [B, V] (act dtype or
  // F32), log_softmax(logits[b])[tokens[b]], its rank and the top n. Synchronizes.
  virtual std::vector<TokenLogprobs> token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens,
                                                    int n) = 0;
  // Logits to host as float (tests and fixtures).
  virtual std::vector<float> to_host_f32(const Tensor& t) = 0;
  // Async pooling steps (engine/llm_engine.h): to_host_f32 of a float tensor without waiting. The
  // copy is enqueued now, so t may be reused by later work in stream order; wait_host_f32 brings
  // it to the host. At most two copies may be outstanding. The default copies synchronously.
  struct HostCopy {
    std::vector<float> host;  // filled by wait_host_f32 (at once by a synchronous backend)
    int64_t ticket = -1;      // the backend's pending copy; -1: host is filled
    DType dtype = DType::F32;
    int64_t n = 0;
  };
  virtual HostCopy to_host_f32_async(const Tensor& t);
  virtual std::vector<float> wait_host_f32(HostCopy& c);

 private:
  [[noreturn]] void throw_no_graphs() const;
};

// num_threads 0: all cores. The default precision is the exact reference (the oracle of tests);
// the engine passes its EngineConfig::cpu_precision.
std::unique_ptr<Backend> make_cpu_backend(int num_threads, CpuPrecision precision = CpuPrecision::Exact);
// Throws UserError when CUDA is not compiled in or no GPU is present. The kernels launch as
// `options` say (validated here); nothing is read from the environment.
std::unique_ptr<Backend> make_cuda_backend(int device_index, const KernelOptions& options);
bool cuda_available();
int cuda_device_count();  // visible GPUs (0 without CUDA)
// The device --device names: Auto is CUDA where a GPU is present, else the CPU.
DeviceChoice resolved_device(DeviceChoice device);

}  // namespace nanovllm
