// Fused q/k RMSNorm + rotary embedding (rotate-half), in place on the packed qkv rows
// [T, (Hq + 2 Hkv) * D]. One CTA per token: the token's cos/sin table (D/2 entries) is computed
// once in shared memory exactly as the CPU reference does (inv_freq = float(1 / theta^(2i/D)) in
// double on the host, angle = float(pos) * inv_freq in FP32, cos/sin in double rounded to float),
// then each warp normalises and rotates whole heads (q heads then k heads; v is untouched).
#include <cmath>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/ops/checks.h"

namespace nanovllm {

using namespace cuda;

constexpr int kMaxHeadDim = 256;
struct InvFreq {
  float v[kMaxHeadDim / 2];
};

__global__ void qk_norm_rope_kernel(bf16* __restrict__ qkv, const bf16* __restrict__ qw, const bf16* __restrict__ kw,
                                    const int32_t* __restrict__ pos, const InvFreq inv_freq, int64_t W, int Hq, int Hkv,
                                    int D, float eps) {
  __shared__ float cs[kMaxHeadDim / 2], sn[kMaxHeadDim / 2];
  const int64_t t = blockIdx.x;
  const int half = D / 2;
  const float p = float(pos[t]);
  for (int i = threadIdx.x; i < half; i += blockDim.x) {
    const float angle = p * inv_freq.v[i];
    double s, c;
    sincos(double(angle), &s, &c);
    cs[i] = float(c);
    sn[i] = float(s);
  }
  __syncthreads();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  for (int hd = warp; hd < Hq + Hkv; hd += nw) {
    bf16* x = qkv + t * W + int64_t(hd) * D;
    const bf16* w = hd < Hq ? qw : kw;
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
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / float(D) + eps);
#pragma unroll
    for (int c = 0; c < kMaxHeadDim / 64; ++c) {
      const int i = lane + 32 * c;
      if (i < half) {
        const float xa = a[c] * inv * __bfloat162float(w[i]);
        const float xb = b[c] * inv * __bfloat162float(w[i + half]);
        x[i] = __float2bfloat16(xa * cs[i] - xb * sn[i]);
        x[i + half] = __float2bfloat16(xb * cs[i] + xa * sn[i]);
      }
    }
  }
}

void CudaBackend::qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                               int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps, float rope_theta) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "qk_norm_rope");
  if (q_norm_w.numel() != head_dim || k_norm_w.numel() != head_dim || positions.numel() != qkv.size(0))
    throw Error("qk_norm_rope: norm weights must be [head_dim] and positions [T]");
  if (head_dim % 2 != 0 || head_dim > kMaxHeadDim)
    throw Error("qk_norm_rope: head_dim " + std::to_string(head_dim) + " must be even and at most 256");
  if (qkv.dtype() != DType::BF16 || q_norm_w.dtype() != DType::BF16 || k_norm_w.dtype() != DType::BF16 ||
      positions.dtype() != DType::I32)
    throw Error("qk_norm_rope: qkv and norm weights must be BF16, positions I32");
  const int64_t T = qkv.size(0), D = head_dim;
  if (T == 0) return;
  InvFreq f{};
  for (int64_t i = 0; i < D / 2; ++i) f.v[i] = float(1.0 / std::pow(double(rope_theta), double(2 * i) / double(D)));
  const int threads = num_heads + num_kv_heads >= 8 ? 256 : 128;
  qk_norm_rope_kernel<<<unsigned(T), threads, 0, static_cast<cudaStream_t>(stream_)>>>(
      qkv.data<bf16>(), q_norm_w.data<bf16>(), k_norm_w.data<bf16>(), positions.data<int32_t>(), f, qkv.size(1),
      int(num_heads), int(num_kv_heads), int(D), eps);
  NV_LAUNCH_CHECK();
}

}  // namespace nanovllm
