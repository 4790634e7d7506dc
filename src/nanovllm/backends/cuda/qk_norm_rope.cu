// Fused q/k RMSNorm (Qwen3; qw == kw == nullptr: none, as Llama, Qwen2, Mistral) + rotary
// embedding (rotate-half), in place on the packed qkv rows
// [T, (Hq + 2 Hkv) * D]. Two kernels compute the same bits; plan_qk_norm_rope (kernel_plan.h)
// picks one by shape and KernelOptions::rope_kernel: this file's head kernel (decode batches) and
// the token kernel of qk_norm_rope_tokens.cu (prefills and large batches, where this one's warps
// would walk several heads each). The head kernel: a CTA per (token, head group); groups only at
// small T (decode batches, where one CTA per token would walk its heads one warp round trip after
// another). Each CTA computes the token's cos/sin table (D/2 entries) in shared memory as the CPU
// reference does (inv_freq from the model's RopeParams, plain RoPE or YaRN, passed by value in the
// launch, so a captured graph holds it; angle = float(pos) * inv_freq in FP32, cos/sin in double
// rounded to float, times the attention scaling in FP32: rope_cos_sin, qk_norm_rope.cuh), then each
// warp normalises and rotates whole heads (q heads then k heads; v is untouched).
//
// Rounding follows the BF16 Hugging Face model step by step (Qwen3RMSNorm rounds x * inv before
// and after the weight; Qwen3RotaryEmbedding hands out cos/sin in the activation dtype; and
// apply_rotary_pos_emb rounds q*cos, rotate_half(q)*sin and their sum), so that our q/k carry the
// same rounding as the reference model's instead of an independent error of the same size.
//
// qk_norm_rope_store also writes the token's k (after norm and RoPE) and v heads into the KV cache
// at slot_mapping[t] (rows of Hkv * D; -1 skips), which saves store_kvcache's launch per layer.
// With the FP8 KV cache it writes E4M3 codes of the BF16 values x 1/scale (saturating).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"
#include "nanovllm/backends/cuda/gemm_wgmma.h"
#include "nanovllm/backends/cuda/qk_norm_rope.cuh"

namespace nanovllm {

using namespace cuda;

__global__ void qk_norm_rope_kernel(bf16* __restrict__ qkv, const bf16* __restrict__ qw, const bf16* __restrict__ kw,
                                    const int32_t* __restrict__ pos, const InvFreq inv_freq, float rope_scale,
                                    int64_t W, int Hq, int Hkv, int D, float eps, const KVDest kv) {
  __shared__ float cs[kMaxHeadDim / 2], sn[kMaxHeadDim / 2];
  // Our successor (decode attention) may launch at once, before our wait: its CTAs then start
  // during the qkv GEMV and have their KV rows of earlier steps loaded by the time q is ready
  // (attention_decode.cu; before its wait it reads nothing that the GEMV or this kernel writes).
  pdl_trigger();
  // Before the wait on the previous kernel (which writes qkv): the cos/sin table (double-precision
  // sincos, the slowest part) and the norm weights. Positions, slots and weights are uploads.
  const int64_t t = blockIdx.x;
  const int half = D / 2;
  const float p = float(pos[t]);
  const int64_t slot = kv.k ? kv.slots[t] : -1;
  const int64_t kv_row = int64_t(Hkv) * D;
  for (int i = threadIdx.x; i < half; i += blockDim.x) rope_cos_sin(p, inv_freq.v[i], rope_scale, cs[i], sn[i]);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  constexpr int kC = kMaxHeadDim / 64;
  float wq[2][kC], wk[2][kC];  // lane's norm weights at i and i + half, i = lane + 32 c
#pragma unroll
  for (int c = 0; c < kC; ++c) {
    const int i = lane + 32 * c;
    const bool in = i < half;
    wq[0][c] = in ? (qw ? __bfloat162float(qw[i]) : 1.f) : 0.f;  // no norm: weights 1 and inv 1 (exact)
    wq[1][c] = in ? (qw ? __bfloat162float(qw[i + half]) : 1.f) : 0.f;
    wk[0][c] = in ? (kw ? __bfloat162float(kw[i]) : 1.f) : 0.f;
    wk[1][c] = in ? (kw ? __bfloat162float(kw[i + half]) : 1.f) : 0.f;
  }
  pdl_begin();
  __syncthreads();
  for (int hd = int(blockIdx.y) * nw + warp; hd < Hq + Hkv; hd += nw * int(gridDim.y)) {
    bf16* x = qkv + t * W + int64_t(hd) * D;
    const bool is_q = hd < Hq;
    float a[kMaxHeadDim / 64], b[kMaxHeadDim / 64];
    float ss = 0.f;
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 64; ++c) {
      const int i = lane + 32 * c;
      a[c] = b[c] = 0.f;
      if (i < half) {
        a[c] = __bfloat162float(x[i]);
        b[c] = __bfloat162float(x[i + half]);
        ss += a[c] * a[c] + b[c] * b[c];
      }
    }
    const float inv = qw ? 1.0f / sqrtf(warp_sum(ss) / float(D) + eps) : 1.0f;
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 64; ++c) {
      const int i = lane + 32 * c;
      if (i < half) {
        const float xa = bf16_round(bf16_round(a[c] * inv) * (is_q ? wq[0][c] : wk[0][c]));
        const float xb = bf16_round(bf16_round(b[c] * inv) * (is_q ? wq[1][c] : wk[1][c]));
        const bf16 ya = __float2bfloat16(bf16_round(xa * cs[i]) - bf16_round(xb * sn[i]));
        const bf16 yb = __float2bfloat16(bf16_round(xb * cs[i]) + bf16_round(xa * sn[i]));
        x[i] = ya;
        x[i + half] = yb;
        if (hd >= Hq && slot >= 0) {
          const int64_t at = slot * kv_row + int64_t(hd - Hq) * D;
          if (kv.fp8) {
            uint8_t* kd = static_cast<uint8_t*>(kv.k) + at;
            kd[i] = float_to_e4m3(__bfloat162float(ya) * kv.inv_k);
            kd[i + half] = float_to_e4m3(__bfloat162float(yb) * kv.inv_k);
          } else {
            bf16* kd = static_cast<bf16*>(kv.k) + at;
            kd[i] = ya;
            kd[i + half] = yb;
          }
        }
      }
    }
  }
  if (slot < 0 || blockIdx.y != 0) return;
  // v heads: straight copy into the cache row (16-byte pieces when D allows).
  const bf16* vs = qkv + t * W + int64_t(Hq + Hkv) * D;
  if (kv.fp8) {  // 8 values (16 bytes) -> 8 codes (8 bytes) per step when D allows
    uint8_t* vd = static_cast<uint8_t*>(kv.v) + slot * kv_row;
    if (D % 8 == 0 && W % 8 == 0) {
      for (int64_t i = threadIdx.x; i < kv_row / 8; i += blockDim.x) {
        float f[8];
        unpack8(reinterpret_cast<const uint4*>(vs)[i], f);
        reinterpret_cast<uint2*>(vd)[i] = pack8_e4m3(f, kv.inv_v);
      }
    } else {
      for (int64_t i = threadIdx.x; i < kv_row; i += blockDim.x)
        vd[i] = float_to_e4m3(__bfloat162float(vs[i]) * kv.inv_v);
    }
    return;
  }
  bf16* vd = static_cast<bf16*>(kv.v) + slot * kv_row;
  if (D % 8 == 0 && W % 8 == 0) {
    for (int64_t i = threadIdx.x; i < kv_row / 8; i += blockDim.x)
      reinterpret_cast<uint4*>(vd)[i] = reinterpret_cast<const uint4*>(vs)[i];
  } else {
    for (int64_t i = threadIdx.x; i < kv_row; i += blockDim.x) vd[i] = vs[i];
  }
}

__global__ void rope_table_kernel(const int32_t* __restrict__ pos, const InvFreq inv_freq, float rope_scale, int64_t T,
                                  int half, __nv_bfloat162* __restrict__ out) {
  pdl_begin();
  const int64_t e = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= T * half) return;
  const int64_t t = e / half;
  const int i = int(e - t * half);
  float c, s;
  rope_cos_sin(float(pos[t]), inv_freq.v[i], rope_scale, c, s);
  out[e] = __floats2bfloat162_rn(c, s);
}

void cuda::launch_rope_cos_sin_table(const int32_t* pos, const InvFreq& inv_freq, float rope_scale, int64_t T, int half,
                                     uint32_t* out, Stream st) {
  if (T == 0) return;
  launch(rope_table_kernel, dim3(unsigned(ceil_div(T * half, 256))), dim3(256), 0, st, pos, inv_freq, rope_scale, T,
         half, reinterpret_cast<__nv_bfloat162*>(out));
  NV_LAUNCH_CHECK();
}

// The checks of the q/k norm + RoPE ops' arguments (qkv [T, (Hq + 2 Hkv) D] BF16, the norm
// weights, positions [T] I32, the RoPE parameters), named after `op`.
static void check_rope_args(const Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                            int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, const RopeParams& rope,
                            const char* op) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, op);
  check_rope(rope, head_dim, op);
  check_qk_norm_weights(q_norm_w, k_norm_w, head_dim, op);
  if (positions.numel() != qkv.size(0)) throw Error(std::string(op) + ": positions must be [T]");
  if (head_dim % 2 != 0 || head_dim > kMaxHeadDim)
    throw Error(std::string(op) + ": head_dim " + std::to_string(head_dim) + " must be even and at most 256");
  const bool norm = q_norm_w.defined();
  if (qkv.dtype() != DType::BF16 || (norm && (q_norm_w.dtype() != DType::BF16 || k_norm_w.dtype() != DType::BF16)) ||
      positions.dtype() != DType::I32)
    throw Error(std::string(op) + ": qkv and norm weights must be BF16, positions I32");
}

// The checks of the KV-cache store's arguments (both caches BF16 or both F8E4M3, the step's
// metadata with its slot mapping on the device), named after `op`.
static void check_store_args(const Tensor& k_cache, const Tensor& v_cache, int64_t num_kv_heads, int64_t head_dim,
                             const AttentionMetadata& md, int64_t T, const char* op) {
  check_kv_cache(k_cache, v_cache, num_kv_heads, head_dim);
  check_metadata(md, T, k_cache.size(0) * k_cache.size(1));
  if (v_cache.dtype() != k_cache.dtype() || !(k_cache.dtype() == DType::F8E4M3 || k_cache.dtype() == DType::BF16))
    throw Error(std::string(op) + ": k_cache and v_cache must both be BF16 or both F8E4M3");
  if (!md.d_slot_mapping.defined()) throw Error(std::string(op) + ": prepare_metadata() was not called for this batch");
}

// The launches' copy of the model's inverse frequencies (D / 2 of them).
static InvFreq inv_freq_of(const RopeParams& rope, int64_t D) {
  InvFreq f{};
  for (int64_t i = 0; i < D / 2; ++i) f.v[i] = rope.inv_freq[size_t(i)];
  return f;
}

// Checks, then the launch; kv.k == nullptr: no cache store.
static void run_qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                             int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps,
                             const RopeParams& rope, const KVDest& kv, Stream st, int num_sms,
                             const KernelOptions& options) {
  check_rope_args(qkv, q_norm_w, k_norm_w, positions, num_heads, num_kv_heads, head_dim, rope, "qk_norm_rope");
  const bool norm = q_norm_w.defined();
  const int64_t T = qkv.size(0), D = head_dim;
  if (T == 0) return;
  const InvFreq f = inv_freq_of(rope, D);
  const QkNormRopePlan plan = plan_qk_norm_rope(
      {T, num_heads, num_kv_heads, D, kv.k != nullptr, aligned16({qkv.raw(), kv.k, kv.v})}, num_sms, options);
  const bf16* qw = norm ? q_norm_w.data<bf16>() : nullptr;
  const bf16* kw = norm ? k_norm_w.data<bf16>() : nullptr;
  if (plan.kernel == QkNormRopeKernel::Token) {
    // The first wave: about 1024 threads per SM (the kernel takes up to 64 registers).
    const int64_t early_ctas = int64_t(num_sms) * std::max(1, 1024 / plan.threads);
    launch_qk_norm_rope_tokens(plan, qkv.data<bf16>(), qw, kw, positions.data<int32_t>(), f, rope.attention_scaling, T,
                               qkv.size(1), int(num_heads), int(num_kv_heads), int(D), eps, kv, early_ctas, st);
    return;
  }
  launch(qk_norm_rope_kernel, dim3(unsigned(T), unsigned(plan.head_groups)), plan.threads, 0, st, qkv.data<bf16>(), qw,
         kw, positions.data<int32_t>(), f, rope.attention_scaling, qkv.size(1), int(num_heads), int(num_kv_heads),
         int(D), eps, kv);
}

void CudaBackend::qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                               int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps,
                               const RopeParams& rope) {
  run_qk_norm_rope(qkv, q_norm_w, k_norm_w, positions, num_heads, num_kv_heads, head_dim, eps, rope, KVDest{},
                   on_stream(), num_sms_, options_);
}

void CudaBackend::qk_norm_rope_store(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w,
                                     const Tensor& positions, Tensor& k_cache, Tensor& v_cache, int64_t num_heads,
                                     int64_t num_kv_heads, int64_t head_dim, float eps, const RopeParams& rope,
                                     const AttentionMetadata& md, KVScales kv_scales) {
  check_store_args(k_cache, v_cache, num_kv_heads, head_dim, md, qkv.size(0), "qk_norm_rope_store");
  const bool fp8 = k_cache.dtype() == DType::F8E4M3;
  if (fp8) check_kv_scales(kv_scales, "qk_norm_rope_store");
  KVDest kv;
  kv.k = k_cache.raw();
  kv.v = v_cache.raw();
  kv.slots = md.d_slot_mapping.data<int32_t>();
  kv.fp8 = fp8;
  kv.inv_k = 1.0f / kv_scales.k;
  kv.inv_v = 1.0f / kv_scales.v;
  run_qk_norm_rope(qkv, q_norm_w, k_norm_w, positions, num_heads, num_kv_heads, head_dim, eps, rope, kv, on_stream(),
                   num_sms_, options_);
}

// What a step's cos/sin table was built from (AttentionMetadata::rope_table_key): the positions
// tensor, T, D and the RoPE parameters' bits.
static std::vector<uint32_t> rope_table_key(const Tensor& positions, const RopeParams& rope, int64_t D) {
  const auto p = reinterpret_cast<uintptr_t>(positions.raw());
  const int64_t T = positions.numel();
  std::vector<uint32_t> key = {uint32_t(p), uint32_t(uint64_t(p) >> 32), uint32_t(T), uint32_t(T >> 32), uint32_t(D)};
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
  };
  for (int64_t i = 0; i < D / 2; ++i) key.push_back(bits(rope.inv_freq[size_t(i)]));
  key.push_back(bits(rope.attention_scaling));
  return key;
}

// Whether the qkv product x w^T -> out takes the q/k norm + RoPE + KV store into its epilogue
// (kernel_plan.h: linear_rope_fuses). extra: the other operands the caller's op reads (aligned, BF16).
bool CudaBackend::linear_rope_fused(const Tensor& x, const Tensor& w, const Tensor& out, const QkNormRopeStore& r,
                                    std::initializer_list<const Tensor*> extra) const {
  LinearProblem prob;
  prob.T = x.size(0), prob.N = out.size(1), prob.K = x.size(1);
  prob.bf16 = x.dtype() == DType::BF16 && w.dtype() == DType::BF16 && out.dtype() == DType::BF16;
  prob.aligned16 = aligned16({x.raw(), w.raw(), out.raw()});
  for (const Tensor* t : extra) {
    prob.bf16 = prob.bf16 && t->dtype() == DType::BF16;
    prob.aligned16 = prob.aligned16 && aligned16({t->raw()});
  }
  prob.wgmma = wgmma_;
  const bool kv_bf16 = r.k_cache.defined() && r.v_cache.defined() && r.k_cache.dtype() == DType::BF16 &&
                       r.v_cache.dtype() == DType::BF16 && aligned16({r.k_cache.raw(), r.v_cache.raw()});
  return linear_rope_fuses(prob, r.head_dim, r.num_heads + 2 * r.num_kv_heads, kv_bf16, options_);
}

// The qkv product with the q/k norm + RoPE + KV store in its epilogue where the plan says: add_rms_norm,
// then gemm_wgmma_rope (linear_rope); else the two ops.
void CudaBackend::add_rms_norm_linear_rope(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps,
                                           const Tensor& w, Tensor& out, const QkNormRopeStore& r) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, false);
  if (!linear_rope_fused(x, w, out, r, {&residual, &norm_w}))
    return Backend::add_rms_norm_linear_rope(x, residual, norm_w, eps, w, out, r);
  if (x.size(0) == 0) return;
  add_rms_norm(x, residual, norm_w, eps);
  linear_rope(x, w, out, r);
}

void CudaBackend::linear_rope(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r) {
  check_linear(x, w, out);
  if (!linear_rope_fused(x, w, out, r, {})) return Backend::linear_rope(x, w, out, r);
  linear_rope_wgmma(x, w, out, r, nullptr);
}

void CudaBackend::linear_rope_wgmma(const Tensor& x, const Tensor& w, Tensor& out, const QkNormRopeStore& r,
                                    const float* row_scale) {
  const int64_t T = x.size(0), K = x.size(1), D = r.head_dim;
  const char* op = "linear_rope";
  check_rope_args(out, r.q_norm_w, r.k_norm_w, r.positions, r.num_heads, r.num_kv_heads, D, r.rope, op);
  check_store_args(r.k_cache, r.v_cache, r.num_kv_heads, D, r.md, T, op);
  if (T == 0) return;
  const bool norm = r.q_norm_w.defined();
  // The step's cos/sin table ([T][D/2] BF16 pairs): built by its first fused layer, kept in the
  // metadata for the others, which share the positions and the RoPE parameters.
  std::vector<uint32_t> key = rope_table_key(r.positions, r.rope, D);
  if (!r.md.d_rope_table.defined() || r.md.rope_table_key != key) {
    r.md.d_rope_table = empty({T, D / 2}, DType::I32);
    launch_rope_cos_sin_table(r.positions.data<int32_t>(), inv_freq_of(r.rope, D), r.rope.attention_scaling, T,
                              int(D / 2), reinterpret_cast<uint32_t*>(r.md.d_rope_table.data<int32_t>()), on_stream());
    r.md.rope_table_key = std::move(key);
  }
  GemmRopeEpilogue e;
  e.cos_sin = reinterpret_cast<const uint32_t*>(r.md.d_rope_table.data<int32_t>());
  e.q_norm = norm ? r.q_norm_w.raw() : nullptr;
  e.k_norm = norm ? r.k_norm_w.raw() : nullptr;
  e.eps = r.eps;
  e.num_heads = int(r.num_heads), e.num_kv_heads = int(r.num_kv_heads);
  e.k_cache = r.k_cache.raw(), e.v_cache = r.v_cache.raw();
  e.slots = r.md.d_slot_mapping.data<int32_t>();
  const bool pair = gemm_pairs();
  gemm_wgmma_rope(x.raw(), w.raw(), out.raw(), T, K, e, gemm_resident(pair), stream_, pair,
                  options_.gemm_pingpong != GemmPingPong::Off, row_scale);
}

}  // namespace nanovllm
