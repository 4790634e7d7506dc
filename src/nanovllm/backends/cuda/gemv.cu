// Skinny GEMM for decode at small batch: out[M, N] = x[M, K] @ w[N, K]^T with M <= 4, and the
// same with the gated-MLP activation fused in: out[M, I] = silu(x Wg^T) * (x Wu^T) for a packed
// w = [Wg; Wu] of 2I rows (a CTA then takes gate rows n, n+1 and up rows I+n, I+n+1, so both
// halves of its two outputs are at hand; BF16 rounding of gate, up, silu and the product as in
// silu_and_mul after a BF16 GEMM).
//
// At M this small the product is a pass over the weight (2NK bytes; x is 2MK bytes, the FLOPs are
// negligible), and cuBLASLt's tiles for it reach well under the bandwidth (bench/RESULTS.md:
// "GEMMs 48%"). Here a CTA of 4 warps owns 4 weight rows (2 at one row of x: twice the CTAs, faster
// at batch 1; kernel_plan.h, gemv_shape);
// its 128 lanes stride K in 16-byte chunks (lane t reads chunks t, t + 128, ...), so one row
// is read by the whole CTA with coalesced 512-byte warp accesses, and all its rows' loads (times 2
// chunks) are in flight before the first FMA. x chunks come through L1/L2 (each CTA reads x once;
// that is M/R of the weight bytes for R rows a CTA, from L2). Partial sums (FP32) are reduced across lanes with
// shuffles and across the 4 warps through shared memory; one BF16 rounding at the end, like
// cuBLASLt's FP32-accumulating path.
//
// Two things take kernel boundaries out of a decode step, where each costs more than the work:
//  * The weights never change during a step, so each CTA issues its first weight loads before
//    griddepcontrol.wait: they fly while the previous kernel finishes.
//  * With a GemvNorm, the decoder layer's add + RMSNorm runs as the prologue: every CTA computes
//    h = bf16(x + residual) and xn = bf16(bf16(h / rms(h)) * norm_w) for all M rows into shared
//    memory (2MK bytes from L2; the same rounding as add_rms_norm's kernel) and multiplies xn. h
//    goes to a second buffer (residual_out), each 16-byte chunk written by one CTA: all CTAs read
//    the residual, so none may overwrite it. Every CTA pays the prologue (its x and residual are
//    half as many bytes as its 4 weight rows, from L2), so the fusion pays only while the grid runs
//    in one wave: plan_linear (kernel_plan.h) does not fuse past that (gemv_norm_wave below).
//
// Which products come here, and the limits of this kernel (kGemv* in kernel_plan.h), are
// plan_linear's to decide.
#include <algorithm>
#include <string>
#include <type_traits>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm::cuda {

constexpr int kGemvWarps = 4;
constexpr int kGemvThreads = kGemvWarps * 32;
// kGemvRows (weight rows per CTA), kGemvMaxM and kGemvNormSmem (the normalized x lives in shared
// memory: M * K * 2 bytes) are in kernel_plan.h.

// N: output columns (kSilu: I, and w has 2I rows). kNorm: x is normalized first (see above); the
// dynamic shared memory holds the normalized x as [M, K/8] 16-byte chunks.
// R: weight rows per CTA (plan_linear's GemvShape; kGemvRows, or 2 at one row of x).
template <int M, bool kSilu, bool kNorm, class OutT, int R = kGemvRows>
__global__ void __launch_bounds__(kGemvThreads) gemv_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                                                            OutT* __restrict__ out, int N, int K, GemvNorm nrm) {
  extern __shared__ uint4 xs[];
  __shared__ float red[kGemvWarps][M][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kOuts = kSilu ? R / 2 : R;  // output columns per CTA
  const int n0 = blockIdx.x * kOuts;
  const int KC = K / 8;  // 16-byte chunks per row
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  int64_t row[R];  // rows past N re-read row N-1 (valid memory; results dropped)
#pragma unroll
  for (int r = 0; r < R; ++r)
    row[r] = (int64_t(min(n0 + r % kOuts, N - 1)) + (kSilu && r >= kOuts ? N : 0)) * KC;

  // Weight chunks c0 and c0 + kGemvThreads of the CTA's rows (zeros past the row's end).
  constexpr int kStride = kGemvThreads;
  uint4 wq[2][R];
  auto load_w = [&](int c0) {
    const bool two = c0 + kStride < KC;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      wq[0][r] = c0 < KC ? __ldg(wv + row[r] + c0) : make_uint4(0, 0, 0, 0);
      wq[1][r] = two ? __ldg(wv + row[r] + c0 + kStride) : make_uint4(0, 0, 0, 0);
    }
  };
  // Before the wait: weights (and the norm's) are not written by the previous kernel.
  load_w(threadIdx.x);
  const uint4* nv = reinterpret_cast<const uint4*>(nrm.norm_w);
  const uint4 g0 = kNorm && int(threadIdx.x) < KC ? __ldg(nv + threadIdx.x) : make_uint4(0, 0, 0, 0);
  pdl_begin();

  if constexpr (kNorm) {
    const uint4* rv = reinterpret_cast<const uint4*>(nrm.residual);
    uint4* ro = reinterpret_cast<uint4*>(nrm.residual_out);
    float ss[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      ss[m] = 0.f;
      for (int c = threadIdx.x; c < KC; c += kStride) {
        const uint4 h = add8_sumsq(xv[int64_t(m) * KC + c], rv[int64_t(m) * KC + c], ss[m]);
        xs[m * KC + c] = h;
        if ((m * KC + c) % int(gridDim.x) == int(blockIdx.x)) ro[int64_t(m) * KC + c] = h;
      }
      const float v = warp_sum(ss[m]);
      if (lane == 0) red[warp][m][0] = v;
    }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < M; ++m) {
      float t = 0.f;
#pragma unroll
      for (int wi = 0; wi < kGemvWarps; ++wi) t += red[wi][m][0];
      const float inv = 1.0f / sqrtf(t / float(K) + nrm.eps);
      for (int c = threadIdx.x; c < KC; c += kStride)  // the chunks this thread wrote above
        xs[m * KC + c] = rms_scale8(xs[m * KC + c], c == int(threadIdx.x) ? g0 : __ldg(nv + c), inv);
    }
    __syncthreads();  // xs complete; red free again
  }

  float acc[M][R];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) acc[m][r] = 0.f;

  for (int c0 = threadIdx.x; c0 < KC; c0 += 2 * kStride) {
    if (c0 != int(threadIdx.x)) load_w(c0);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int c = c0 + u * kStride;
      if (c >= KC) break;
      float wf[R][8];
#pragma unroll
      for (int r = 0; r < R; ++r) unpack8(wq[u][r], wf[r]);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        if constexpr (kNorm)
          unpack8(xs[m * KC + c], xf);
        else
          unpack8(__ldg(xv + int64_t(m) * KC + c), xf);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int e = 0; e < 8; ++e) acc[m][r] = fmaf(xf[e], wf[r][e], acc[m][r]);
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < R; ++r) {
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
        s = silu_bf16(g) * bf16_round(u);
      }
      if constexpr (std::is_same_v<OutT, float>)
        out[int64_t(m) * N + n0 + r] = s;
      else
        out[int64_t(m) * N + n0 + r] = __float2bfloat16(s);
    }
  }
}

void gemv_bf16(const void* x, const void* w, void* out, int64_t M, int64_t N, int64_t K, Stream st, bool silu_mul,
               bool f32_out, const GemvNorm* norm, GemvShape shape) {
  const bool two_rows = shape.rows == 2 && M == 1 && !norm;
  const bool aligned = norm ? aligned16({x, w, norm->residual, norm->residual_out, norm->norm_w}) : aligned16({x, w});
  if (M < 1 || M > kGemvMaxM || N < 1 || K % 8 != 0 || !aligned || N > kGemvMaxDim || K > kGemvMaxDim ||
      (f32_out && (silu_mul || norm)) || (norm && M * K * 2 > kGemvNormSmem) ||
      !(shape.rows == kGemvRows || two_rows))
    throw Error("gemv: [" + std::to_string(M) + ", " + std::to_string(K) + "] x [" + std::to_string(N) + ", " +
                std::to_string(K) + "]^T" + (silu_mul ? " with SiLU" : "") + (norm ? " with the norm prologue" : "") +
                (f32_out ? " to F32" : "") + " in CTAs of " + std::to_string(shape.rows) +
                " rows is outside the kernel's limits (kernel_plan.h: plan_linear chose it)");
  const auto* xb = static_cast<const bf16*>(x);
  const auto* wb = static_cast<const bf16*>(w);
  const unsigned grid = ceil_div(N, silu_mul ? shape.rows / 2 : shape.rows);
  const int n = int(N), k = int(K);
  const GemvNorm nrm = norm ? *norm : GemvNorm{};
  const size_t smem = norm ? size_t(M * K * 2) : 0;
  auto go = [&](auto kernel, auto* o) { launch(kernel, grid, kGemvThreads, smem, st, xb, wb, o, n, k, nrm); };
  auto* ob = static_cast<bf16*>(out);
  auto* of = static_cast<float*>(out);
  // One instantiation per (M, variant): plain, SiLU, F32 out, norm, norm + SiLU; and at one row
  // in CTAs of 2 rows: plain, SiLU, F32 out.
  if (two_rows) {
    if (silu_mul)
      go(gemv_kernel<1, true, false, bf16, 2>, ob);
    else if (f32_out)
      go(gemv_kernel<1, false, false, float, 2>, of);
    else
      go(gemv_kernel<1, false, false, bf16, 2>, ob);
    return;
  }
  auto pick = [&](auto m_tag) {
    constexpr int kM = decltype(m_tag)::value;
    if (norm && silu_mul)
      go(gemv_kernel<kM, true, true, bf16>, ob);
    else if (norm)
      go(gemv_kernel<kM, false, true, bf16>, ob);
    else if (silu_mul)
      go(gemv_kernel<kM, true, false, bf16>, ob);
    else if (f32_out)
      go(gemv_kernel<kM, false, false, float>, of);
    else
      go(gemv_kernel<kM, false, false, bf16>, ob);
  };
  with_batch<kGemvMaxM>(M, pick);
}

int64_t gemv_norm_wave(int64_t M, int64_t K, bool silu_mul, int num_sms) {
  int per_sm = 0;
  const size_t smem = size_t(std::max<int64_t>(M, 1) * K * 2);
  auto occ = [&](auto kernel) {
    NV_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kGemvThreads, smem));
  };
  auto pick = [&](auto m_tag) {
    constexpr int kM = decltype(m_tag)::value;
    if (silu_mul)
      occ(gemv_kernel<kM, true, true, bf16>);
    else
      occ(gemv_kernel<kM, false, true, bf16>);
  };
  with_batch<kGemvMaxM>(M, pick);
  return int64_t(per_sm) * num_sms;
}

}  // namespace nanovllm::cuda
