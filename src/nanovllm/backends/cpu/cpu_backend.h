// The CPU backend: the numerical reference for every op. FP32 activations and KV cache, math in
// FP32 (attention softmax in FP32 with online rescaling). Weights: FP32 with CpuPrecision::Exact
// (BF16/F16 checkpoints are widened at load; GEMMs through OpenBLAS sgemm), BF16 with
// CpuPrecision::Fast (kernels in cpu_bf16_kernels.h widen them as they read). Every op is
// threaded by one OpenMP pool (OpenBLAS runs single-threaded inside it: cpu_linear.cpp).
#pragma once
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/cpu/cpu_buffer_pool.h"

namespace nanovllm {

class CpuBackend final : public Backend {
 public:
  // The exact path (FP32 weights) unless asked otherwise: the oracle of the CUDA tests.
  explicit CpuBackend(int num_threads, CpuPrecision precision = CpuPrecision::Exact);
  Device device() const override { return Device::CPU; }
  std::string name() const override { return "cpu"; }
  DType act_dtype() const override { return DType::F32; }
  DType weight_dtype() const override { return precision_ == CpuPrecision::Fast ? DType::BF16 : DType::F32; }

  // Zeroed host memory; buffers of 1-64 MiB are reused (cpu_buffer_pool.h).
  Tensor empty(const Shape& shape, DType dtype) override { return pool_->take(shape, dtype); }
  void upload(const void* src, DType src_dtype, Tensor& dst) override;
  void begin_step() override { pool_->start_caching(); }  // load is over: keep step buffers
  void download(const Tensor& src, void* dst) override;

  void embedding(const Tensor& ids, const Tensor& table, Tensor& out, int64_t vocab_start) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(Tensor& x, Tensor& residual, const Tensor& w, float eps) override;
  void linear(const Tensor& x, const Tensor& w, Tensor& out) override;
  // Quantized weights (--quantization): F8E4M3 codes (backends/fp8_weights.h: the F32 GEMM of the dequantized
  // weights, weight-only; cpu_linear.cpp), I8 codes (cpu_int8.cpp: Q8_0-like codes and dynamic INT8
  // activations) or U4 / U8 group-quantized codes (cpu_int_weights.cpp: the F32 GEMM of the dequantized
  // weights); dispatched by cpu_quantize.cpp.
  void linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) override;
  bool supports_quantization(Quantization q) const override;
  void quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) override;
  // --cpu-precision fast: U4 zero points the INT4 kernel takes become its U8 bytes (cpu_int_weights.cpp).
  void prepare_int_weight(Tensor& codes, WeightScales& scales) override;
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
  void copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) override;
  void silu_and_mul(const Tensor& x, Tensor& out) override;
  void moe_topk(const Tensor& logits, int64_t top_k, bool renormalize, Tensor& weights, Tensor& ids) override;
  void moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights, const Tensor& ids,
                   Tensor& out) override;
  void merge_vocab_shards(const Tensor& parts, Tensor& out) override;
  void gather_rows(const Tensor& x, const std::vector<int32_t>& rows, Tensor& out) override;
  std::vector<int32_t> sample(const Tensor& logits, const std::vector<SamplingRow>& rows,
                              std::vector<TokenLogprobs>* logprobs = nullptr) override;
  std::vector<TokenLogprobs> token_logprobs(const Tensor& logits, const std::vector<int32_t>& tokens, int n) override;
  std::vector<float> to_host_f32(const Tensor& t) override;

 private:
  void linear_fp8(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  void linear_int8(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);
  void linear_int(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out);  // U4 / U8 codes
  void quantize_weight_fp8(const Tensor& w, Tensor& codes, WeightScales& scales);
  void quantize_weight_int8(const Tensor& w, Tensor& codes, WeightScales& scales);
  void quantize_weight_int(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales);
  CpuPrecision precision_;
  // Activations and logits, reused from step to step (256 MiB held at most).
  std::shared_ptr<cpu::HostBufferPool> pool_ = cpu::HostBufferPool::create(size_t(256) << 20);
};

// A weight vector as floats: w's own data when F32, else widened into `scratch`.
const float* weights_f32(const Tensor& w, std::vector<float>& scratch);

// Samples one row of float logits [V]; shared with tests. Implements greedy, temperature with
// Gumbel-max (argmax p_i / E_i, E_i ~ Exp(1)), top-k, top-p, min-p.
int32_t sample_row_cpu(const float* logits, int64_t vocab, const SamplingRow& row);

}  // namespace nanovllm
