// Skinny GEMM for decode at small batch: out[M, N] = x[M, K] @ w[N, K]^T with M <= 4, and the
// same with the gated-MLP activation fused in: out[M, I] = silu(x Wg^T) * (x Wu^T) for a packed
// w = [Wg; Wu] of 2I rows (a CTA then takes gate rows n, n+1 and up rows I+n, I+n+1, so both
// halves of its two outputs are at hand; BF16 rounding of gate, up, silu and the product as in
// silu_and_mul after a BF16 GEMM).
//
// At M this small the product is a pass over the weight (2NK bytes; x is 2MK bytes, the FLOPs are
// negligible), and cuBLASLt's tiles for it reach well under the bandwidth (batch-1 profile in
// bench/RESULTS.md: GEMMs took ~48% of a decode step). Here a CTA of 4 warps owns 4 weight rows;
// its 128 lanes stride K in 16-byte chunks (lane t reads chunks t, t + 128, ...), so one row
// is read by the whole CTA with coalesced 512-byte warp accesses, and all 4 rows' loads (times 2
// chunks) are in flight before the first FMA. x chunks come through L1/L2 (each CTA reads x once;
// that is M/4 of the weight bytes, from L2). Partial sums (FP32) are reduced across lanes with
// shuffles and across the 4 warps through shared memory; one BF16 rounding at the end, like
// cuBLASLt's FP32-accumulating path.
#include <type_traits>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm::cuda {

constexpr int kGemvWarps = 4;
constexpr int kGemvRows = 4;  // weight rows (outputs per x row) per CTA
constexpr int kGemvMaxM = 4;

// N: output columns (kSilu: I, and w has 2I rows).
template <int M, bool kSilu, class OutT>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                               OutT* __restrict__ out, int N, int K) {
  __shared__ float red[kGemvWarps][M][kGemvRows];
  pdl_begin();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kOuts = kSilu ? kGemvRows / 2 : kGemvRows;  // output columns per CTA
  const int n0 = blockIdx.x * kOuts;
  const int KC = K / 8;  // 16-byte chunks per row
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  int64_t row[kGemvRows];  // rows past N re-read row N-1 (valid memory; results dropped)
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
    row[r] = (int64_t(min(n0 + r % kOuts, N - 1)) + (kSilu && r >= kOuts ? N : 0)) * KC;

  float acc[M][kGemvRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) acc[m][r] = 0.f;

  constexpr int kStride = kGemvWarps * 32;
  for (int c0 = threadIdx.x; c0 < KC; c0 += 2 * kStride) {
    const bool two = c0 + kStride < KC;
    uint4 wq[2][kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      wq[0][r] = __ldg(wv + row[r] + c0);
      wq[1][r] = two ? __ldg(wv + row[r] + c0 + kStride) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      if (u == 1 && !two) break;
      const int c = c0 + u * kStride;
      float wf[kGemvRows][8];
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) unpack8(wq[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack8(__ldg(xv + int64_t(m) * KC + c), xf);
#pragma unroll
        for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const float v = warp_sum(acc[m][r]);
      if (lane == 0) red[warp][m][r] = v;
    }
  __syncthreads();
  if (threadIdx.x < M * kOuts) {
    const int m = threadIdx.x / kOuts, r = threadIdx.x % kOuts;
    if (n0 + r < N) {
      float s = 0.f, u = 0.f;
#pragma unroll
      for (int wi = 0; wi < kGemvWarps; ++wi) {
        s += red[wi][m][r];
        if constexpr (kSilu) u += red[wi][m][r + kOuts];
      }
      if constexpr (kSilu) {
        const float g = bf16_round(s);
        s = bf16_round(g / (1.0f + expf(-g))) * bf16_round(u);
      }
      if constexpr (std::is_same_v<OutT, float>) out[int64_t(m) * N + n0 + r] = s;
      else out[int64_t(m) * N + n0 + r] = __float2bfloat16(s);
    }
  }
}

bool gemv_bf16(const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, Stream st, bool silu_mul,
               bool f32_out) {
  const bool aligned = (reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(w)) % 16 == 0;
  if (M < 1 || M > kGemvMaxM || K % 8 != 0 || !aligned || N > int64_t(1) << 30 || K > int64_t(1) << 30) return false;
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wb = static_cast<const bf16*>(w);
  const unsigned grid = ceil_div(N, silu_mul ? kGemvRows / 2 : kGemvRows);
  const int n = int(N), k = int(K);
  if (f32_out && silu_mul) return false;  // not needed: the activation feeds a BF16 GEMM
  auto go = [&](auto kernel, auto* o) { launch(kernel, grid, kGemvWarps * 32, 0, st, xb, wb, o, n, k); };
  auto* ob = static_cast<bf16*>(out);
  auto* of = static_cast<float*>(out);
  switch (M * 3 + (f32_out ? 2 : int(silu_mul))) {
    case 3: go(gemv_kernel<1, false, bf16>, ob); break;
    case 4: go(gemv_kernel<1, true, bf16>, ob); break;
    case 5: go(gemv_kernel<1, false, float>, of); break;
    case 6: go(gemv_kernel<2, false, bf16>, ob); break;
    case 7: go(gemv_kernel<2, true, bf16>, ob); break;
    case 8: go(gemv_kernel<2, false, float>, of); break;
    case 9: go(gemv_kernel<3, false, bf16>, ob); break;
    case 10: go(gemv_kernel<3, true, bf16>, ob); break;
    case 11: go(gemv_kernel<3, false, float>, of); break;
    case 12: go(gemv_kernel<4, false, bf16>, ob); break;
    case 13: go(gemv_kernel<4, true, bf16>, ob); break;
    default: go(gemv_kernel<4, false, float>, of); break;
  }
  return true;
}

}  // namespace nanovllm::cuda
