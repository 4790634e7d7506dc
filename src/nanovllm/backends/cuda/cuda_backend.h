// The CUDA backend: BF16 weights, activations and KV cache with FP32 accumulation, every op on one
// stream owned by the backend (so a step can be captured into a CUDA graph), GEMMs through
// cuBLASLt, paged attention and sampling written here.
//
// Memory: empty() outside a step (weights, KV cache, anything allocated before the first
// begin_step() or after a step ended) is a zero-filled cudaMalloc. Between begin_step() and the end
// of the step (sample() or synchronize()), empty() hands out 256-byte aligned blocks of the step
// arena (utils/step_arena.h), each back on the free list when its tensor is gone, all of them at
// the next begin_step(): the same sequence of allocations gets the same addresses every step, which
// CUDA graphs rely on. The arena grows (a new chunk) only when a step needs more; the next
// begin_step() merges the chunks into one (unless a graph was captured: then chunks stay put).
//
// Kernel choice: the ops ask the plan functions of kernel_plan.h, with the KernelOptions given at
// construction (cfg.kernels; the backend reads no environment variables).
//
// This header uses no CUDA types, so plain C++ (tests, the model runner) can include it.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/tma_desc.h"
#include "nanovllm/config/kernel_options.h"
#include "nanovllm/utils/step_arena.h"

namespace nanovllm {

namespace cuda {
struct Stream;    // cuda_common.cuh
struct GemvNorm;  // cuda_common.cuh
}

class CudaBackend final : public Backend {
 public:
  // Throws UserError for invalid options (KernelOptions::validate) or an unusable GPU.
  explicit CudaBackend(int device_index, const KernelOptions& options = {});
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "cuda"; }
  DType act_dtype() const override { return DType::BF16; }
  DType weight_dtype() const override { return DType::BF16; }

  Tensor empty(const Shape& shape, DType dtype) override;
  void upload(const void* src, DType src_dtype, Tensor& dst) override;
  void download(const Tensor& src, void* dst) override;
  void synchronize() override;
  std::vector<int64_t> plan_row_counts(int64_t max_rows) const override;
  void begin_step() override;
  int64_t free_memory_bytes() override;
  int64_t total_memory_bytes() override;
  int64_t peak_step_bytes() override { return int64_t(arena_->peak()); }
  int64_t held_device_bytes() override { return *tensor_bytes_ + int64_t(arena_->capacity()); }
  void prepare_metadata(AttentionMetadata& md) override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  // FP8 weights (fp8_linear.cu; backends/fp8_weights.h): sm_89+ (FP8 conversions in hardware).
  // Group-quantized U4/U8 weights (AWQ, GPTQ, compressed-tensors; backends/int_weights.h): sm_80+,
  // prepared at load into int_layout.cuh's layout (int_prepare.cu), multiplied by int_linear.cu.
  void linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) override;
  void linear_silu_mul_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) override;
  bool supports_quantization(Quantization q) const override;
  void quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) override;
  void prepare_int_weight(Tensor& codes, WeightScales& scales) override;
  // Whether codes and scales are in the layout prepare_int_weight writes (its scales are F16
  // [NB, NG, 16, 2]; canonical ones F32 [N, NG]).
  static bool int_weight_prepared(const Tensor& codes, const WeightScales& scales);
  void add_bias(Tensor& x, const Tensor& bias) override;
  void qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                    int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps,
                    const RopeParams& rope) override;
  using Backend::qk_norm_rope;  // the plain-RoPE form
  void store_kvcache(const Tensor& qkv, Tensor& k_cache, Tensor& v_cache, int64_t num_heads, int64_t num_kv_heads,
                     int64_t head_dim, const AttentionMetadata& md, KVScales kv_scales = {}) override;
  void attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache, Tensor& out, int64_t num_heads,
                 int64_t num_kv_heads, int64_t head_dim, float scale, const AttentionMetadata& md,
                 int64_t sliding_window = 0, KVScales kv_scales = {}, const ReadAhead& then = {}) override;
  void cast(const Tensor& src, Tensor& dst) override;
  void copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) override;  // kv_block_copy.cu
  void silu_and_mul(const Tensor& x, Tensor& out) override;
  void qk_norm_rope_store(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                          Tensor& k_cache, Tensor& v_cache, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim,
                          float eps, const RopeParams& rope, const AttentionMetadata& md,
                          KVScales kv_scales = {}) override;
  void linear_silu_mul(const Tensor& x, const Tensor& w, Tensor& out) override;
  void add_rms_norm_linear(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w, Tensor& out,
                           bool silu_mul) override;
  // INT codes at decode sizes: the norm as the INT GEMV's prologue (int_linear.cu).
  void add_rms_norm_linear_rope(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                Tensor& out, const QkNormRopeStore& r) override;
  void linear_rope(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r) override;
  // The Hopper GEMM with the add + RMSNorm in its epilogue (gemm_wgmma_norm.cu) where the plan says
  // (kernel_plan.h: linear_add_norm_fuses); else false.
  bool linear_add_rms_norm(const Tensor& x, const Tensor& w, Tensor& residual, const Tensor& norm_w, float eps,
                           Tensor& out) override;
  void add_rms_norm_linear_quantized(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps, const Tensor& w,
                                     const WeightScales& scales, Tensor& out, bool silu_mul) override;
  // KernelOptions::norm_fold on a GPU where our Hopper GEMM runs (norm_fold.cu).
  bool folds_rms_norms() const override;
  // cuBLASLt's product accumulated into the residual, the rows' 1 / rms, then our Hopper GEMM with
  // the rows scaled (the gated MLP's SiLU or the qkv form's epilogue) where plan_linear /
  // linear_rope_fused take it; else false (norm_fold.cu).
  bool linear_residual_rms_linear(const Tensor& x, const Tensor& wo, Tensor& residual, float eps, const Tensor& w,
                                  Tensor& out, bool silu_mul, const QkNormRopeStore* rope) override;
  void moe_topk(const Tensor& logits, int64_t top_k, bool renormalize, Tensor& weights, Tensor& ids) override;
  void moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights, const Tensor& ids,
                   Tensor& out) override;  // moe_gemm.cu (routing: moe_routing.cu)
  void merge_vocab_shards(const Tensor& parts, Tensor& out) override;
  void gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) override;
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                              std::vector<TokenLogprobs>* logprobs = nullptr) override;
  SampledTokens sample_async(const Tensor& logits, const std::vector<SamplingRow>& rows,
                             const Tensor* device_out = nullptr) override;
  std::vector<int32_t> wait_tokens(SampledTokens& t) override;
  bool runs_asynchronously() const override { return true; }
  std::vector<TokenLogprobs> token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens, int n) override;
  std::vector<float> to_host_f32(const Tensor& t) override;
  HostCopy to_host_f32_async(const Tensor& t) override;
  std::vector<float> wait_host_f32(HostCopy& c) override;

  // ---- CUDA graphs ----
  // graph_capture_begin() starts capturing everything issued on the backend's stream. Between
  // begin and end nothing may synchronize, allocate beyond the arena's existing capacity, or upload
  // from the host: capture after a warm-up step of the same shapes (so the arena is large enough),
  // inside a step whose inputs (ids, positions, prepare_metadata) were uploaded before the capture
  // began; replays then read those same device buffers, refilled by the caller.
  bool supports_graphs() const override { return true; }
  std::vector<int64_t> decode_context_breaks(int64_t batch) const override;
  void graph_capture_begin() override;
  // Ends the capture and instantiates it; the handle is a cudaGraphExec_t.
  int64_t graph_capture_end() override;
  // Launches a captured graph on the backend's stream (asynchronous).
  void graph_replay(int64_t handle) override;
  void graph_destroy(int64_t handle) override;
  // The cudaStream_t every op runs on.
  void* stream() const { return stream_; }
  int device_index() const { return device_; }
  const KernelOptions& kernel_options() const { return options_; }
  // Kernels are launched with programmatic dependent launch (sm_90+ and options.pdl).
  bool pdl() const { return pdl_; }
  // The plans of the ops (kernel_plan.h) with this device's facts.
  cuda::LinearPlan plan_linear(const cuda::LinearProblem& p);
  cuda::DecodeAttentionPlan plan_decode_attention(const cuda::DecodeAttentionProblem& p) const;
  // The sm_90a prefill kernels (wgmma, and wgmma with TMA) run on this device and build.
  bool wgmma() const { return wgmma_; }
  int num_sms() const { return num_sms_; }
  // The CTAs a persistent gemm_wgmma form's grid may hold at once: the SMs, or for the Pair forms
  // twice the clusters of two that fit (gemm_wgmma_max_pairs).
  int gemm_resident(bool pair) const { return pair ? 2 * gemm_pairs_ : num_sms_; }
  // Whether the gemm_wgmma forms run as pairs here (KernelOptions::gemm_pair and pairs fit).
  bool gemm_pairs() const { return options_.gemm_pair && gemm_pairs_ > 0; }
  // Whether cuBLASLt has a VEC128 FP8 algorithm for the first T - T % 4 rows of x [T, K] x 128 x
  // 128-block weights [N, K] (plan_fp8_linear's CublasLtFp8Block, the last rows on the GEMV); where
  // it has none, the codes are dequantized instead.
  bool fp8_block_gemm_runs(int64_t T, int64_t N, int64_t K, bool f32_out);
  // Overrides options.prefill_attention (tests and bench/prefill_bench.cpp force each kernel).
  void set_prefill_attention(PrefillAttention p) { options_.prefill_attention = p; }
  // Overrides options.rope_kernel (tests and bench/rope_bench.cpp run both q/k norm + RoPE kernels).
  void set_rope_kernel(RopeKernel r) { options_.rope_kernel = r; }
  // Overrides options.gemm (tests run both GEMMs on the same backend).
  void set_gemm(Gemm g) { options_.gemm = g; }
  void set_gemm_norm(bool on) { options_.gemm_norm = on; }
  void set_norm_fold(bool on) { options_.norm_fold = on; }
  void set_gemm_pair(bool on) { options_.gemm_pair = on; }
  void set_gemm_pingpong(GemmPingPong p) { options_.gemm_pingpong = p; }
  // The q/k norm + RoPE plan on this device (qk_norm_rope.cu launches what it says).
  cuda::QkNormRopePlan plan_qk_norm_rope(const cuda::QkNormRopeProblem& p) const {
    return cuda::plan_qk_norm_rope(p, num_sms_, options_);
  }
  // Query rows per warp of the mma.sync prefill kernel: 16 or 32 (A/B timing).
  void set_prefill_rows_per_warp(int rows) { prefill_rows_per_warp_ = rows; }
  // The TMA prefill kernel's grid (kernel option prefill_persistent; tests of both).
  void set_prefill_attention_persistent(bool on) { options_.prefill_persistent = on; }

 private:
  struct GemmPlan;  // cuBLASLt descriptors + algorithm for one (M, N, K)

  cuda::Stream on_stream() const;  // where (and how) the ops launch their kernels
  // The two-slot tickets of sample_async / to_host_f32_async: the slot of `ticket` (one of the last
  // two before `next`, else an Error "<what>: ticket T is not one of the last two <of>") once its
  // event done[slot] has fired.
  static size_t wait_ticket_slot(int64_t ticket, int64_t next, void* const (&done)[2], const char* what,
                                 const char* of);
  void init_gemm();
  void destroy_gemm();
  void* persistent_alloc(size_t bytes, const Shape& shape);
  // Copies host bytes into device memory on the stream: through the pinned staging buffer during
  // a step (asynchronous), else synchronously.
  void h2d(void* dst, const void* src, size_t bytes);
  void* staging_alloc(size_t bytes);
  Tensor device_i32(const int32_t* host, int64_t n);  // scratch copy for the step (or persistent)
  // sampler.cu: what sample() and sample_async() share. Enqueues logits processing, the sampler
  // (tokens into dout [B] I32, and into host_out, mapped host memory, where given) and the
  // logprobs rows asked for (into lp).
  struct LogprobLaunch;
  void enqueue_sampling(const Tensor& logits, const std::vector<SamplingRow>& rows, Tensor& dout, LogprobLaunch& lp,
                        int32_t* host_out = nullptr);
  // sampler.cu: the packed masks of a batch's masked rows on the device (one H2D copy); null for none.
  const uint32_t* upload_masks(const std::vector<const uint32_t*>& masks, int64_t V);
  // The TMA descriptor of a paged cache [num_blocks, block_size, Hkv, D] (made on first use).
  const cuda::TmaDesc& cache_tma(const Tensor& cache);

  int device_ = 0;
  KernelOptions options_;
  int num_sms_ = 0;
  int gemm_pairs_ = 0;    // gemm_wgmma_max_pairs() where wgmma_
  int64_t l2_bytes_ = 0;  // the device's L2 cache (the decode read-ahead's budget)
  int sm_ = 0;            // compute capability, major * 10 + minor
  size_t max_smem_optin_ = 0;
  void* stream_ = nullptr;     // cudaStream_t
  void* cublaslt_ = nullptr;   // cublasLtHandle_t
  void* workspace_ = nullptr;  // cuBLASLt workspace (persistent)
  size_t workspace_bytes_ = 0;
  // cuBLASLt GEMMs (gemm_cublaslt.cu): BF16 x BF16, or E4M3 x E4M3 with per-row scales of both
  // operands (FP8 weights x per-token FP8 activations, fp8_gemm_cublaslt.cu).
  // Fp8RowScaled: one scale per row of each operand (per-channel weights x per-token activations);
  // Fp8Block128: one per row and 128-column group of each (128 x 128 block weights x activations
  // quantized per token and 128 columns), cuBLASLt's VEC128 scale mode.
  enum class GemmOperands { BF16, Fp8RowScaled, Fp8Block128 };
  using GemmKey = std::tuple<int64_t, int64_t, int64_t, bool, GemmOperands>;  // (T, N, K, F32 out, operands)
  std::map<GemmKey, GemmPlan*> gemm_plans_;                                   // owned
  // (gemm_heuristic_rows(T), N, K, F32 out, operands) -> the heuristic's algorithm for that bucket, owned
  std::map<GemmKey, GemmPlan*> gemm_bucket_plans_;
  GemmPlan* make_gemm_plan(const GemmKey& k);  // descriptors only
  bool gemm_heuristic(GemmPlan& p);            // sets p.algo; false where cuBLASLt has none
  // The plan of k (cached; the algorithm of its row bucket where cuBLASLt accepts it for this T);
  // nullptr where cuBLASLt has no algorithm (FP8: the caller falls back; BF16 throws).
  const GemmPlan* gemm_plan(const GemmKey& k);
  // out^T = op(w^T)^T x^T with the plan's operands; w_scale / x_scale for Fp8RowScaled.
  // accumulate: out += the product (beta 1: out is also the C input, in place).
  void run_gemm(const GemmPlan& p, const void* w, const void* x, void* out, const void* w_scale = nullptr,
                const void* x_scale = nullptr, bool accumulate = false);
  // FP8 weights x per-token FP8 activations (fp8_gemm_cublaslt.cu): false where cuBLASLt has no
  // algorithm for the shape (the caller dequantizes instead).
  bool linear_fp8_cublaslt(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  // The same for 128 x 128 block-scaled weights (FP8 checkpoints), activations quantized per token
  // and 128-column group.
  bool linear_fp8_block_cublaslt(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  // Group-quantized weights: --load-format dummy's quantization (int_prepare.cu), and the linear
  // (int_linear.cu; silu: out = silu(gate) * up of a [2I, K] weight).
  void quantize_int_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales);
  // norm: the decoder layer's add + RMSNorm as the GEMV's prologue (add_rms_norm_linear_quantized
  // planned it: int_gemv_norm_fuses).
  void linear_int(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out, bool silu,
                  const cuda::GemvNorm* norm = nullptr);
  // The GEMV a decode call of T rows runs (kernel_plan.h: int_gemv_pick under the int_gemv option).
  IntGemv int_gemv_version(int64_t T, int64_t outs, bool silu, int64_t K, int bits) const;
  // Whether the gated MLP at T rows runs as the plain GEMV into [T, 2I], then silu_and_mul (its I
  // not split by the fused epilogue).
  bool int_gemv_splits_silu(int64_t T, int64_t outs, bool silu) const;
  // Whether linear_rope's qkv product x w^T -> out takes the q/k norm + RoPE + KV store into its
  // epilogue (kernel_plan.h: linear_rope_fuses); extra: other operands of the caller's op that must
  // be BF16 and 16-byte aligned as well (qk_norm_rope.cu).
  bool linear_rope_fused(const Tensor& x, const Tensor& w, const Tensor& out, const QkNormRopeStore& r,
                         std::initializer_list<const Tensor*> extra) const;
  // linear_rope's fused form, the product's rows scaled by row_scale (F32 [T], or null) first.
  void linear_rope_wgmma(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r,
                         const float* row_scale);
  // The dequantize path's BF16 weight: persistent, grown by prepare_int_weight to the largest layer
  // (never allocated during a step, so graph-safe), shared by all layers (one stream).
  Tensor int_scratch_;

  std::shared_ptr<StepArena> arena_;  // the step's activations (tensors hold weak references)
  // Bytes of the tensors allocated outside steps and not yet freed (their buffers' release
  // functions share it, so tensors may outlive the backend).
  std::shared_ptr<std::atomic<int64_t>> tensor_bytes_ = std::make_shared<std::atomic<int64_t>>(0);
  std::map<int64_t, std::vector<std::pair<void*, size_t>>> graph_outputs_;  // graph -> arena blocks it writes
  bool in_step_ = false, capturing_ = false, graphs_exist_ = false;

  // Pinned host memory for the steps' uploads: two halves of staging_bytes_, used by alternate steps.
  char* staging_ = nullptr;
  size_t staging_bytes_ = 0, staging_off_ = 0;
  int staging_half_ = 0;                        // this step's half
  void* staging_done_[2] = {nullptr, nullptr};  // cudaEvent_t recorded after each half's last staged copy
  int32_t* pinned_tokens_ = nullptr;            // sampler output
  size_t pinned_tokens_n_ = 0;
  // The split sampler's per-row counters (zero between launches).
  void* sample_tickets_ = nullptr;
  size_t sample_tickets_n_ = 0;
  // sample_async: two slots (alternating tickets) of async_cap_ tokens each, on the device and in
  // pinned host memory mapped into the device (the sampler writes both), and an event after each
  // slot's sampler.
  int32_t* async_dev_ = nullptr;
  int32_t* async_pinned_ = nullptr;
  int32_t* async_mapped_ = nullptr;  // async_pinned_ as the device sees it
  size_t async_cap_ = 0;
  int64_t async_next_ = 0;  // the next ticket
  void* async_done_[2] = {nullptr, nullptr};
  // to_host_f32_async: two pinned slots (alternating tickets), each grown to the largest copy, and
  // an event after each slot's copy.
  char* copy_pinned_[2] = {nullptr, nullptr};
  size_t copy_cap_[2] = {0, 0};
  int64_t copy_next_ = 0;  // the next ticket
  void* copy_done_[2] = {nullptr, nullptr};
  // Structured-output masks (upload_masks): pinned staging and the device copy, mask_cap_words_
  // words each, and an event after the last copy out of the staging.
  uint32_t* mask_pinned_ = nullptr;
  uint32_t* mask_dev_ = nullptr;
  size_t mask_cap_words_ = 0;
  void* mask_copied_ = nullptr;  // cudaEvent_t
  // The largest cluster of decode CTAs this device schedules (1: no clusters, before sm_90).
  int device_cluster_limit_ = 1;
  // One wave of the norm-prologue GEMV per (M, K, silu_mul): occupancy x SMs (plan_linear).
  std::map<std::tuple<int64_t, int64_t, bool>, int64_t> gemv_norm_wave_;
  // gemm_wgmma_add_rms_norm's resident clusters by H (an occupancy query, once per H).
  std::map<int64_t, int> add_norm_clusters_;
  // (head_dim, group, warps) -> resident CTAs per SM of that split decode kernel (plan_decode_attention).
  mutable std::map<std::tuple<int64_t, int64_t, int, bool>, int> decode_resident_;
  // TMA descriptors of the paged caches the TMA prefill kernel read (a layer's K or V cache: base
  // address, slots, row elements, block size), made once each.
  std::map<std::tuple<const void*, int64_t, int64_t, int64_t>, cuda::TmaDesc> cache_tma_;
  bool pdl_ = false;
  bool wgmma_ = false;  // the sm_90a prefill kernel runs here
  int prefill_rows_per_warp_ = 32;
};

}  // namespace nanovllm
