// The linear with group-quantized U4/U8 weights on CUDA (W4A16 / W8A16: AWQ, GPTQ, compressed-
// tensors; semantics in backends/int_weights.h, the weights in int_layout.cuh's layout):
// out[T, N] = x[T, K][:, perm] @ value[N, K]^T, BF16 x and out (or F32 out), F32 accumulation.
// plan_int_linear (kernel_plan.h) picks the kernel by T.
//
// Decode (T <= kIntGemvMaxT), KernelOptions::int_gemv=v2: int_gemv_v2.cu (one pass for all T); v3:
// int_gemv_v3.cu (the same in fewer instructions, K split over a cluster where it fills the waves);
// v4: int_gemv_v4.cu (v3's outputs from a persistent grid of one wave).
// v1 (the default until v2 is measured), in passes of 8 rows: int_gemv_kernel. A CTA of 8 warps owns one
// 16-row block of the weight (with silu: the gate block and the up block I / 16 blocks further, so
// silu(gate) * up is its epilogue, gemv.cu's rounding); its warps take its K tiles round-robin, and
// a lane's one 16-byte load per tile (all of a warp's 512 bytes contiguous) is its A fragments for
// the tile's 4 (U4) or 2 (U8) mma.sync m16n8k16 steps: dequantized in registers (codes minus zero
// as exact BF16 integers), multiplied with up to 8 rows of x (the B fragment: 8 bytes of x per
// lane and step, no conversion) into F32, and each group's partial sums scaled in F32. The first
// tiles' codes and scales are loaded before griddepcontrol.wait (the weights are not written by the
// previous kernel); each lane keeps 4 tiles (silu: 2 tiles of both blocks) in flight, so 4 x 16
// bytes per lane, and the 8 warps of a CTA stride K together. Warps' partial sums are reduced
// through shared memory at the end. Per weight: half a byte (U4) plus the 4-byte scale of its row
// and group, about a tenth of an instruction per weight and pass (a shift, LOP3 and HSUB2 per
// BF16 pair of codes per 8 rows of x, the mma amortized): the pass streams at DRAM bandwidth.
// x rows past T in the mma's 8 columns read row T - 1 again (valid memory) and their columns are
// dropped.
//
// Act order (perm defined): x's columns are gathered by perm into a step-arena copy first
// (gather_columns_kernel; x is small at decode), then the plain kernels.
//
// add_rms_norm_linear_quantized (the decoder layer's add + RMSNorm, then this product): at 1..8 rows
// the v3 / v4 GEMV runs the norm as its prologue where kernel_plan.h's int_gemv_norm_fuses allows
// (int_gemv_norm.cuh: one kernel instead of two); otherwise add_rms_norm, then the product.
//
// kIntGemvMaxT < T <= kIntGemmMaxT (KernelOptions::int_gemm; plan_int_linear): a tensor-core GEMM
// on the same prepared codes, the mma.sync one of int_gemm.cu or the Hopper one of
// int_gemm_wgmma.cu (int_gemm_wgmma_applies), K split over CTAs by int_gemm_splits (partials in
// the persistent scratch below); the gated MLP fused when I is a multiple of 64, else the GEMM into
// [T, 2I] then silu_and_mul.
//
// Larger T (or int_gemm=dequantize): dequantize_int_kernel writes the BF16 weight (value = (q - z) * s, rounded once)
// into the backend's persistent scratch (int_prepare.cu sizes it at load), and cuBLASLt's BF16 GEMM multiplies it (then
// silu_and_mul). Cost: the codes read once, 2 bytes per weight written and read again; against a long prefill's GEMM
// this is a few percent (to be measured).
#include <algorithm>
#include <string>
#include <type_traits>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/mma.cuh"

namespace nanovllm {
namespace cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;

// x: [M <= 8, K] BF16 (rows past M: row M - 1); codes / sz: int_layout.cuh; out: [M, N] with N the
// outputs (kSilu: I; the gate block of CTA b is b, its up block b + up_block). kStepGroups: G is not
// a multiple of TK, so a tile may span groups (a scale per k-step, not per tile).
template <int kBits, bool kSilu, bool kStepGroups, class OutT>
__global__ void __launch_bounds__(kThreads)
    int_gemv_kernel(const bf16* __restrict__ x, const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                    OutT* __restrict__ out, int M, int N, int K, int G, int up_block) {
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;  // columns and k-steps of a tile
  constexpr int RB = kSilu ? 2 : 1;                          // row blocks of the CTA
  constexpr int U = 4 / RB;                                  // tiles in flight per warp
  constexpr int SG = kStepGroups ? S : 1;                    // scale words per tile and row
  __shared__ float red[kWarps][RB][16][8];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int KT = (K + TK - 1) / TK, NG = K / G;
  const uint4* cb[RB];
  const uint32_t* sb[RB];
#pragma unroll
  for (int r = 0; r < RB; ++r)
    int_block_ptrs(codes, sz, int64_t(blockIdx.x) + (r ? up_block : 0), KT, NG, lane, cb[r], sb[r]);

  uint4 wq[U][RB];
  uint32_t ws[U][RB][SG][2];  // {scale, zero} words of rows g and g + 8
  auto load_w = [&](int kt0) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kt = kt0 + u * kWarps;
      const bool ok = kt < KT;
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        wq[u][r] = ok ? __ldg(cb[r] + int64_t(kt) * 32) : make_uint4(0, 0, 0, 0);
        int_tile_scales<TK, SG>(sb[r], kt, ok, G, NG, ws[u][r]);
      }
    }
  };
  load_w(warp);  // before the wait: the weights are not written by the previous kernel
  pdl_begin();

  float acc[RB][4];
#pragma unroll
  for (int r = 0; r < RB; ++r)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[r][c] = 0.f;
  const bf16* xr = x + int64_t(min(g, M - 1)) * K + 4 * t;

  for (int kt0 = warp; kt0 < KT; kt0 += kWarps * U) {
    if (kt0 != warp) load_w(kt0);
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int kt = kt0 + u * kWarps;
      if (kt >= KT) break;
      uint2 xb[S];
#pragma unroll
      for (int j = 0; j < S; ++j)  // zeros past K (the last tile's padding)
        xb[j] = kt * TK + kIntStepK * j < K ? __ldg(reinterpret_cast<const uint2*>(xr + kt * TK + kIntStepK * j))
                                            : make_uint2(0, 0);
#pragma unroll
      for (int r = 0; r < RB; ++r) {
        const uint32_t wv[4] = {wq[u][r].x, wq[u][r].y, wq[u][r].z, wq[u][r].w};
        float part[4] = {0.f, 0.f, 0.f, 0.f};
        float2 sz0 = int_scale_zero(ws[u][r][0][0]), sz1 = int_scale_zero(ws[u][r][0][1]);
#pragma unroll
        for (int j = 0; j < S; ++j) {
          if constexpr (kStepGroups) {
            sz0 = int_scale_zero(ws[u][r][j][0]);
            sz1 = int_scale_zero(ws[u][r][j][1]);
          }
          uint32_t a[4];
          int_fragment<kBits>(wv, j, sz0, sz1, a);
          mma_bf16_16816(part, a, xb[j].x, xb[j].y);
          if (kStepGroups || j == S - 1) {  // the group's partial sums, scaled per row (c0, c1: row g)
            int_scale_partials(acc[r], part, sz0.x, sz1.x);
          }
        }
      }
    }
  }
  // C fragment: c0, c1 = (row g, x rows 2t, 2t + 1); c2, c3 = (row g + 8, the same).
#pragma unroll
  for (int r = 0; r < RB; ++r) int_store_fragment<8>(red[warp][r], lane, acc[r]);
  __syncthreads();
  if (threadIdx.x < 16 * 8) {
    const int i = threadIdx.x >> 3, m = threadIdx.x & 7;
    const int n = blockIdx.x * 16 + i;
    if (m < M && n < N) {
      float s = 0.f, u = 0.f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) {
        s += red[wi][0][i][m];
        if constexpr (kSilu) u += red[wi][RB - 1][i][m];
      }
      int_gemv_store<kSilu>(s, u, out + int64_t(m) * N + n);
    }
  }
}

// out [N, K] BF16 = value of the prepared weight (rows < N). One thread per lane chunk.
template <int kBits>
__global__ void dequantize_int_kernel(const uint4* __restrict__ codes, const uint32_t* __restrict__ sz,
                                      bf16* __restrict__ out, int N, int K, int G, int64_t chunks) {
  pdl_begin();
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const int lane = int(i % 32), KT = (K + TK - 1) / TK, NG = K / G;
  const int kt = int((i / 32) % KT);
  const int64_t b = i / 32 / KT;
  const int g = lane >> 2, t = lane & 3;
  const uint4 q = __ldg(codes + i);
  const uint32_t wv[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int k = kt * TK + kIntStepK * j + 4 * t;
    if (k >= K) break;  // the last tile's padding
    const int gi = k / G;
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // rows g, g + 8
      const int64_t row = b * 16 + g + 8 * h;
      if (row >= N) continue;
      const float2 s = int_scale_zero(__ldg(sz + (b * NG + gi) * 16 + g + 8 * h));
      float v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        uint32_t c;
        if constexpr (kBits == 4) {
          const int nib = (e & 1) * 4 + (e >> 1) * 2 + h;  // the inverse of int_u4_slot_*
          c = (wv[j] >> (4 * nib)) & 15u;
        } else {
          c = (wv[2 * j + h] >> (8 * e)) & 255u;
        }
        v[e] = (float(c) - s.y) * s.x;
      }
      uint2 o;
      o.x = pack_bf16x2(v[0], v[1]);
      o.y = pack_bf16x2(v[2], v[3]);
      *reinterpret_cast<uint2*>(out + row * K + k) = o;
    }
  }
}

// out[t][k] = x[t][perm[k]] (BF16 [T, K]). One thread per element.
__global__ void gather_columns_kernel(const bf16* __restrict__ x, const int32_t* __restrict__ perm,
                                      bf16* __restrict__ out, int K, int64_t total) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t row = i / K;
  out[i] = x[row * K + __ldg(perm + i % K)];
}

template <int kBits, bool kSilu, bool kStepGroups>
void launch_int_gemv(const Tensor& x, const Tensor& codes, const Tensor& sz, Tensor& out, int64_t G, Stream st) {
  const int64_t M = x.size(0), K = x.size(1), outs = out.size(1);
  const unsigned grid = ceil_div(outs, kIntRowBlock);
  const int up_block = kSilu ? int(outs / kIntRowBlock) : 0;
  const auto* xb = x.data<bf16>();
  const auto* cw = static_cast<const uint4*>(codes.raw());
  const auto* s = sz.data<uint32_t>();
  if (out.dtype() == DType::F32)
    launch(int_gemv_kernel<kBits, kSilu, kStepGroups, float>, grid, kThreads, 0, st, xb, cw, s, out.data<float>(),
           int(M), int(outs), int(K), int(G), up_block);
  else
    launch(int_gemv_kernel<kBits, kSilu, kStepGroups, bf16>, grid, kThreads, 0, st, xb, cw, s, out.data<bf16>(), int(M),
           int(outs), int(K), int(G), up_block);
  NV_LAUNCH_CHECK();
}

// One GEMV pass over x [M <= 8, K].
void int_gemv(const Tensor& x, const Tensor& codes, const WeightScales& scales, Tensor& out, bool silu, Stream st) {
  const bool u4 = codes.dtype() == DType::U4;
  const bool step_groups = scales.block_k % int_tile_k(u4 ? 4 : 8) != 0;  // a tile may straddle two groups
  const Tensor& sz = scales.scale;
  const int64_t G = scales.block_k;
  // kSilu with F32 out is never asked (linear_int checks).
  if (u4) {
    if (silu)
      step_groups ? launch_int_gemv<4, true, true>(x, codes, sz, out, G, st)
                  : launch_int_gemv<4, true, false>(x, codes, sz, out, G, st);
    else
      step_groups ? launch_int_gemv<4, false, true>(x, codes, sz, out, G, st)
                  : launch_int_gemv<4, false, false>(x, codes, sz, out, G, st);
  } else {
    if (silu)
      step_groups ? launch_int_gemv<8, true, true>(x, codes, sz, out, G, st)
                  : launch_int_gemv<8, true, false>(x, codes, sz, out, G, st);
    else
      step_groups ? launch_int_gemv<8, false, true>(x, codes, sz, out, G, st)
                  : launch_int_gemv<8, false, false>(x, codes, sz, out, G, st);
  }
}

}  // namespace
}  // namespace cuda

void CudaBackend::linear_int(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out, bool silu,
                             const cuda::GemvNorm* norm) {
  if (!int_weight_prepared(w, scales))
    throw Error("cuda linear: the " + std::string(dtype_name(w.dtype())) + " weight " + shape_str(w.shape()) +
                " was not prepared (Backend::prepare_int_weight must run once its checkpoint tensors are loaded)");
  if (sm_ < 80)
    throw UserError("group-quantized (AWQ/GPTQ/compressed-tensors) weights need an sm_80+ GPU; this is sm_" +
                    std::to_string(sm_));
  if (x.dtype() != DType::BF16 || (out.dtype() != DType::BF16 && (silu || out.dtype() != DType::F32)))
    throw Error(std::string("linear (") + dtype_name(w.dtype()) + " weights): x must be BF16, out BF16" +
                (silu ? "" : " or F32") + " (got " + dtype_name(x.dtype()) + ", " + dtype_name(out.dtype()) + ")");
  const int bits = w.dtype() == DType::U4 ? 4 : 8;
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0), outs = out.size(1), G = scales.block_k;
  const int64_t NB = (N + cuda::kIntRowBlock - 1) / cuda::kIntRowBlock, NG = K / G;
  if (!cuda::int_layout_supports(bits, K, G) || scales.scale.shape() != Shape{NB, NG, cuda::kIntRowBlock, 2} ||
      !cuda::aligned16({x.raw(), w.raw()}))
    throw Error("cuda linear: prepared weight " + shape_str(w.shape()) + " with scales " +
                shape_str(scales.scale.shape()) + " and group " + std::to_string(G) +
                " does not match its layout (int_layout.cuh), or x is not 16-byte aligned");
  if (T == 0 || outs == 0) return;
  const cuda::Stream st = on_stream();
  Tensor xs = x;
  if (scales.perm.defined()) {  // act order: x's columns gathered once for this call
    xs = empty({T, K}, DType::BF16);
    const int64_t total = T * K;
    cuda::launch(cuda::gather_columns_kernel, dim3(cuda::ceil_div(total, 256)), dim3(256), 0, st, x.data<cuda::bf16>(),
                 scales.perm.data<int32_t>(), xs.data<cuda::bf16>(), int(K), total);
    NV_LAUNCH_CHECK();
  }
  // The GEMV (KernelOptions::int_gemv: v1 in passes of 8 rows, v2 / v3 / v4 in one pass) into o [T, outs of o].
  auto gemv = [&](Tensor& o, bool fused_silu) {
    const int64_t slice = cuda::int_gemv_slice(options_.int_gemv);
    for (int64_t t0 = 0; t0 < T; t0 += slice) {
      const int64_t t1 = std::min(T, t0 + slice);
      Tensor ot = o.rows(t0, t1);
      if (options_.int_gemv == IntGemv::V1) {
        cuda::int_gemv(xs.rows(t0, t1), w, scales, ot, fused_silu, st);
        continue;
      }
      cuda::IntGemvArgs a;
      a.x = xs.rows(t0, t1).data<cuda::bf16>();
      a.codes = static_cast<const uint4*>(w.raw());
      a.sz = scales.scale.data<uint32_t>();
      a.out = ot.raw();
      a.M = t1 - t0, a.outs = ot.size(1), a.K = K, a.G = G, a.bits = bits;
      a.silu = fused_silu, a.f32_out = ot.dtype() == DType::F32;
      // kernel_plan.h, int_gemv_pick: v5 where its long K runs pay, v4 where v3's grid would take
      // more than one wave, else v3, wide where its row blocks exceed two CTAs an SM (int_gemv_v3_wide).
      const int64_t row_blocks = cuda::int_gemv_row_blocks(a.outs, a.silu);
      const IntGemv v = int_gemv_version(a.M, a.outs, a.silu, K, bits);
      if (norm) {  // add_rms_norm_linear_quantized chose the prologue for this call (int_gemv_norm_fuses)
        if (v != IntGemv::V3 && v != IntGemv::V4)
          throw Error("cuda linear: the norm prologue was planned for a GEMV without one");
        a.norm = *norm;
      }
      if (v == IntGemv::V5)
        cuda::int_gemv_v5(a, num_sms_, st);
      else if (v == IntGemv::V4)
        cuda::int_gemv_v4(a, num_sms_, st);
      else if (v == IntGemv::V3)
        cuda::int_gemv_v3(a, cuda::int_gemv_v3_splits(a.M, a.outs, a.silu, K, G, bits, num_sms_, sm_ >= 90),
                          cuda::int_gemv_v3_wide(row_blocks, a.silu, a.M, num_sms_), st);
      else
        cuda::int_gemv_v2(a, st);
    }
  };
  if (norm && T > cuda::kIntGemvNormMaxT) throw Error("cuda linear: the norm prologue was planned past a GEMV's rows");
  if (int_gemv_splits_silu(T, outs, silu)) {
    // The gated MLP at decode sizes whose I the fused epilogue cannot split (I % 16 != 0): the plain
    // GEMV into [T, 2I], then silu_and_mul. (Not the dequantize path: a BF16 GEMV of <= 4 rows reads
    // its weight before griddepcontrol.wait, so it must not read a scratch its predecessor writes.)
    Tensor gate_up = empty({T, N}, DType::BF16);
    gemv(gate_up, false);
    silu_and_mul(gate_up, out);
    return;
  }
  const bool wgmma_ok = cuda::int_gemm_wgmma_applies(bits, K, G, wgmma_);
  const cuda::IntLinearKernel plan = cuda::plan_int_linear({T, outs, silu, options_.int_gemm, wgmma_ok});
  if (plan == cuda::IntLinearKernel::Gemv) {
    gemv(out, silu);
    return;
  }
  if (plan == cuda::IntLinearKernel::Gemm || plan == cuda::IntLinearKernel::GemmWgmma) {
    const bool fused = !silu || cuda::int_gemm_fuses_silu(outs);
    Tensor o = fused ? out : empty({T, N}, DType::BF16);  // unfused silu: [T, 2I], then silu_and_mul
    cuda::IntGemmArgs a;
    a.x = xs.data<cuda::bf16>();
    a.codes = static_cast<const uint4*>(w.raw());
    a.sz = scales.scale.data<uint32_t>();
    a.out = o.raw();
    a.M = T, a.outs = o.size(1), a.K = K, a.G = G, a.bits = bits;
    a.silu = silu && fused, a.f32_out = o.dtype() == DType::F32;
    const int64_t row_tiles = cuda::int_gemm_row_tiles(a.outs, a.silu);
    const int64_t col_tiles = (T + cuda::kIntGemmCols - 1) / cuda::kIntGemmCols;
    cuda::IntGemmCluster cluster;  // the Hopper GEMM's: clusters, or its wide form (kernel_plan.h)
    if (plan == cuda::IntLinearKernel::GemmWgmma)
      cluster = cuda::plan_int_gemm_cluster({options_.int_gemm_cluster_rows, options_.int_gemm_cluster_cols}, row_tiles,
                                            col_tiles, a.silu);
    a.wide =
        plan == cuda::IntLinearKernel::GemmWgmma && cuda::int_gemm_wgmma_wide(options_.int_gemm, T, cluster, a.silu);
    a.ss = plan == cuda::IntLinearKernel::GemmWgmma && cuda::int_gemm_wgmma_ss(options_.int_gemm, T, cluster, a.silu);
    a.splits = cuda::int_gemm_splits(T, a.outs, a.silu, K, num_sms_, (a.wide ? 2 : 1) * cuda::kIntGemmCols,
                                     a.ss ? cuda::kIntGemmSsCtasPerSm : cuda::kIntGemmCtasPerSm);
    // The F32 partials in the dequantize path's scratch (unused by this path; prepare_int_weight
    // sizes it for one wave of tiles). One split when it is smaller (a backend that never
    // prepared a weight cannot get here).
    a.workspace_floats = int_scratch_.defined() ? int_scratch_.numel() / 2 : 0;
    a.workspace = int_scratch_.defined() ? static_cast<float*>(int_scratch_.raw()) : nullptr;
    if (a.splits * row_tiles * col_tiles * cuda::kIntGemmRows * cuda::kIntGemmCols > a.workspace_floats) a.splits = 1;
    Tensor x_perm;  // the Hopper kernel's x in the mma's k order
    if (plan == cuda::IntLinearKernel::GemmWgmma) {
      x_perm = empty({T, K}, DType::BF16);
      a.wgmma = true, a.x_perm = x_perm.data<cuda::bf16>(), a.cluster = cluster;
    }
    cuda::int_gemm(a, st);
    if (!fused) silu_and_mul(o, out);
    return;
  }
  const int64_t need = N * K;
  if (!int_scratch_.defined() || int_scratch_.numel() < need)
    throw Error("cuda linear: the dequantize scratch holds " +
                std::to_string(int_scratch_.defined() ? int_scratch_.numel() : 0) + " values, the weight " +
                shape_str(w.shape()) + " needs " + std::to_string(need) + " (was it prepared by this backend?)");
  const Tensor wb = int_scratch_.rows(0, N * K).view({N, K});
  const int64_t TK = cuda::int_tile_k(bits), chunks = NB * ((K + TK - 1) / TK) * 32;
  const auto* cw = static_cast<const uint4*>(w.raw());
  const auto* sz = scales.scale.data<uint32_t>();
  auto* o = wb.data<cuda::bf16>();
  if (bits == 4)
    cuda::launch(cuda::dequantize_int_kernel<4>, dim3(cuda::ceil_div(chunks, 256)), dim3(256), 0, st, cw, sz, o, int(N),
                 int(K), int(G), chunks);
  else
    cuda::launch(cuda::dequantize_int_kernel<8>, dim3(cuda::ceil_div(chunks, 256)), dim3(256), 0, st, cw, sz, o, int(N),
                 int(K), int(G), chunks);
  NV_LAUNCH_CHECK();
  if (silu)  // T > kIntGemvMaxT: cuBLASLt (which waits for the dequantization), then silu_and_mul
    Backend::linear_silu_mul(xs, wb, out);
  else
    linear(xs, wb, out);
}

IntGemv CudaBackend::int_gemv_version(int64_t T, int64_t outs, bool silu, int64_t K, int bits) const {
  return cuda::int_gemv_pick(options_.int_gemv, cuda::int_gemv_row_blocks(outs, silu), silu, T, K, bits, num_sms_);
}

bool CudaBackend::int_gemv_splits_silu(int64_t T, int64_t outs, bool silu) const {
  return silu && T <= cuda::kIntGemvMaxT && cuda::plan_int_linear({T, outs, silu}) != cuda::IntLinearKernel::Gemv;
}

void CudaBackend::add_rms_norm_linear_quantized(Tensor& x, Tensor& residual, const Tensor& norm_w, float eps,
                                                const Tensor& w, const WeightScales& scales, Tensor& out,
                                                bool silu_mul) {
  check_add_rms_norm_linear(x, residual, norm_w, w, out, silu_mul);
  const bool int_codes = w.dtype() == DType::U4 || w.dtype() == DType::U8;
  const bool bf16 = x.dtype() == DType::BF16 && residual.dtype() == DType::BF16 && norm_w.dtype() == DType::BF16 &&
                    out.dtype() == DType::BF16;
  bool fuse = false;
  if (int_codes && bf16 && sm_ >= 80 && int_weight_prepared(w, scales)) {
    const int bits = w.dtype() == DType::U4 ? 4 : 8;
    const int64_t T = x.size(0), K = x.size(1), outs = out.size(1);
    // The GEMV call linear_int makes: the gated MLP whose I the epilogue cannot split runs the plain
    // product into [T, 2I].
    const bool split = int_gemv_splits_silu(T, outs, silu_mul);
    const int64_t gemv_outs = split ? w.size(0) : outs;
    const bool gemv_silu = silu_mul && !split;
    fuse = cuda::int_gemv_norm_fuses(options_.gemv_norm, int_gemv_version(T, gemv_outs, gemv_silu, K, bits), T, K,
                                     scales.block_k, bits, scales.perm.defined()) &&
           cuda::aligned16({x.raw(), residual.raw(), norm_w.raw()});
  }
  if (!fuse) {
    Backend::add_rms_norm_linear_quantized(x, residual, norm_w, eps, w, scales, out, silu_mul);
    return;
  }
  // The norm runs as the GEMV's prologue (int_gemv_norm.cuh). Every CTA reads the residual, so the
  // sum goes to a new buffer that residual becomes.
  Tensor sum = empty(residual.shape(), residual.dtype());
  const cuda::GemvNorm nrm{residual.data<cuda::bf16>(), sum.data<cuda::bf16>(), norm_w.data<cuda::bf16>(), eps};
  linear_int(x, w, scales, out, silu_mul, &nrm);
  residual = sum;
}

}  // namespace nanovllm
