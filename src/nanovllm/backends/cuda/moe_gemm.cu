// Mixture-of-experts experts on the GPU (the op moe_experts): the chosen (token, expert) pairs,
// grouped by expert (moe_align, moe_routing.cu), through two grouped GEMMs on the tensor cores and
// a combine.
//
//  1. gate_up: act[r, n] = silu(x[tok(r)] . w13[e, n]) * (x[tok(r)] . w13[e, I + n]) for every
//     row r of sorted_pairs (tok(r) = pair / k) and n < I, e the expert of r's M-tile. SiLU and
//     the product are fused in the epilogue: the CTA holds the same BN columns of gate and of up.
//  2. down:    y[r, h] = act[r] . w2[e, h] for h < H.
//  3. combine: out[t, h] = sum_j weights[t, j] * y[pair_row[t k + j], h], in F32, rounded once
//     (to BF16, or kept F32 as tensor parallelism's partial sums).
//
// GEMM kernel (one template for 1 and 2): grid (ceil(N / kBN), moe_max_tiles); CTA = 4 warps over
// a kMoeBlockM (32) x kBN output tile (2 x 2 warps, each 16 rows x kBN / 2 columns = kBN / 16 m16n8
// MMA tiles, twice for gate_up; kBN 64, or 32 where 64 would leave SMs idle: decode), K in steps of kBK (32) through a
// 3-stage cp.async pipeline in shared memory (two steps in flight while one is multiplied: decode is a stream of weight
// bytes, and a CTA must keep enough of them in flight), read as mma.sync m16n8k16 BF16 fragments (mma.cuh's layouts),
// FP32 accumulation. Each CTA reads its tile's expert from tile_expert and exits at once when it is -1 (a tile past the
// real count), so the grid depends only on (T, k, E) — CUDA-graph safe, no host sync — and at decode only the chosen
// experts' weights are read. Rows of padding (sorted_pairs == T k) load zeros and are not stored. Why a separate
// combine rather than atomics in down's epilogue: the sum over a token's k experts is then in a fixed order (bitwise
// reproducible, as the CUDA-graph vs eager tests compare), needs no zeroed F32 output and no atomics on BF16, and
// rounds once; the price is y's round trip
// ([T k, H] BF16), small beside the expert weights a step reads.
// Rounding, as transformers' BF16 modules: gate and up rounded to BF16, silu(gate) rounded, the
// product rounded (act), y rounded; the combine's sum in F32.
// Limits: H and I (per rank) multiples of 8 (16-byte loads), E <= kMoeMaxExperts; others throw.
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/mma.cuh"
#include "nanovllm/backends/cuda/moe.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

using namespace cuda;

namespace {

constexpr int kBK = 32, kPad = 8, kThreads = 128, kStages = 3;

__device__ __forceinline__ uint32_t smem_u32(const bf16* p) { return *reinterpret_cast<const uint32_t*>(p); }

// kGateUp: A = x [T, Kd] gathered by token, W = w13 [E, 2N, Kd], out = act [rows, N].
// else:    A = act [rows, Kd] (rows in sorted order), W = w2 [E, N, Kd], out = y [rows, N].
template <bool kGateUp, int kBN>
__global__ void __launch_bounds__(kThreads)
    moe_gemm_kernel(const bf16* __restrict__ A, const bf16* __restrict__ W, bf16* __restrict__ out,
                    const int32_t* __restrict__ sorted_pairs, const int32_t* __restrict__ tile_expert, int TK, int topk,
                    int N, int Kd) {
  constexpr int kMats = kGateUp ? 2 : 1, kNT = kBN / 16;  // n8 MMA tiles per warp (kBN / 2 columns)
  __shared__ __align__(16) bf16 As[kStages][kMoeBlockM][kBK + kPad];
  __shared__ __align__(16) bf16 Bs[kStages][kMats][kBN][kBK + kPad];
  pdl_begin();
  const int tile = blockIdx.y;
  const int e = tile_expert[tile];
  if (e < 0) return;  // past the real tiles
  const int row0 = tile * kMoeBlockM, n0 = blockIdx.x * kBN;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, q = lane & 3;
  const int wm = warp >> 1, wn = warp & 1;

  // This thread's A chunk: row a_r, columns a_c .. a_c + 7 of each K step (32 rows x 4 chunks).
  const int a_r = tid >> 2, a_c = (tid & 3) * 8;
  const int pair = sorted_pairs[row0 + a_r];
  const bf16* a_src = nullptr;
  if (pair < TK) a_src = kGateUp ? A + int64_t(pair / topk) * Kd : A + int64_t(row0 + a_r) * Kd;
  const bf16* We = W + int64_t(e) * kMats * N * Kd;

  // One K step into shared-memory stage `st` by cp.async (out-of-range chunks are zero-filled).
  auto load_stage = [&](int st, int k0) {
    const bool a_ok = a_src && k0 + a_c < Kd;
    cp_async16(&As[st][a_r][a_c], a_ok ? a_src + k0 + a_c : W, a_ok ? 16 : 0);
#pragma unroll
    for (int c = tid; c < kBN * kBK / 8; c += kThreads) {
      const int r = c >> 2, cc = (c & 3) * 8, n = n0 + r;
      const bool ok = n < N && k0 + cc < Kd;
#pragma unroll
      for (int m = 0; m < kMats; ++m)
        cp_async16(&Bs[st][m][r][cc], ok ? We + (int64_t(m) * N + n) * Kd + k0 + cc : W, ok ? 16 : 0);
    }
  };

  float acc[kMats][kNT][4] = {};
  const int nk = (Kd + kBK - 1) / kBK;
#pragma unroll
  for (int st = 0; st < kStages - 1; ++st) {
    if (st < nk) load_stage(st, st * kBK);
    cp_async_commit();
  }
  for (int kt = 0; kt < nk; ++kt) {
    cp_async_wait<kStages - 2>();  // step kt has landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; and stage (kt - 1) % kStages is free again
    const int st = kt % kStages;
#pragma unroll
    for (int kk = 0; kk < kBK; kk += 16) {
      const int ar = wm * 16 + g;
      const uint32_t a[4] = {smem_u32(&As[st][ar][kk + 2 * q]), smem_u32(&As[st][ar + 8][kk + 2 * q]),
                             smem_u32(&As[st][ar][kk + 2 * q + 8]), smem_u32(&As[st][ar + 8][kk + 2 * q + 8])};
#pragma unroll
      for (int m = 0; m < kMats; ++m)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt) {
          const int bn = wn * (kBN / 2) + nt * 8 + g;
          mma_bf16_16816(acc[m][nt], a, smem_u32(&Bs[st][m][bn][kk + 2 * q]), smem_u32(&Bs[st][m][bn][kk + 2 * q + 8]));
        }
    }
    const int next = kt + kStages - 1;
    if (next < nk) load_stage(next % kStages, next * kBK);
    cp_async_commit();
  }

#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row0 + wm * 16 + g + half * 8;
    if (sorted_pairs[row] >= TK) continue;  // padding
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int n = n0 + wn * (kBN / 2) + nt * 8 + 2 * q + i;
        if (n >= N) continue;
        float v = acc[0][nt][half * 2 + i];
        if constexpr (kGateUp) {
          const float gate = bf16_round(v), up = bf16_round(acc[kMats - 1][nt][half * 2 + i]);
          v = bf16_round(gate / (1.0f + __expf(-gate))) * up;
        }
        out[int64_t(row) * N + n] = __float2bfloat16(v);
      }
  }
}

// grid T, 8 columns per thread: out[t] = sum_j weights[t, j] * y[pair_row[t k + j]].
__global__ void moe_combine_kernel(const bf16* __restrict__ y, const float* __restrict__ weights,
                                   const int32_t* __restrict__ pair_row, int topk, int H, void* __restrict__ out,
                                   bool f32_out) {
  pdl_begin();
  const int t = blockIdx.x;
  for (int c = threadIdx.x * 8; c < H; c += blockDim.x * 8) {
    float acc[8] = {};
    for (int j = 0; j < topk; ++j) {
      const int r = pair_row[int64_t(t) * topk + j];
      if (r < 0) continue;
      const float w = weights[int64_t(t) * topk + j];
      float v[8];
      unpack8(*reinterpret_cast<const uint4*>(y + int64_t(r) * H + c), v);
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[i] += w * v[i];
    }
    if (f32_out) {
      float* o = static_cast<float*>(out) + int64_t(t) * H + c;
      reinterpret_cast<float4*>(o)[0] = make_float4(acc[0], acc[1], acc[2], acc[3]);
      reinterpret_cast<float4*>(o)[1] = make_float4(acc[4], acc[5], acc[6], acc[7]);
    } else {
      *reinterpret_cast<uint4*>(static_cast<bf16*>(out) + int64_t(t) * H + c) = pack8(acc);
    }
  }
}

}  // namespace

void CudaBackend::moe_experts(const Tensor& x, const Tensor& w13, const Tensor& w2, const Tensor& weights,
                              const Tensor& ids, Tensor& out) {
  check_moe_experts(x, w13, w2, weights, ids, out);
  const int64_t T = x.size(0), H = x.size(1), E = w13.size(0), I = w13.size(1) / 2, K = ids.size(1);
  if (x.dtype() != DType::BF16 || w13.dtype() != DType::BF16 || w2.dtype() != DType::BF16)
    throw Error("moe_experts: x, w13 and w2 must be BF16");
  if (out.dtype() != DType::BF16 && out.dtype() != DType::F32) throw Error("moe_experts: out must be BF16 or F32");
  if (H % 8 != 0 || I % 8 != 0)
    throw Error("moe_experts: the CUDA kernels need hidden (" + std::to_string(H) +
                ") and the experts' intermediate (" + std::to_string(I) + ") to be multiples of 8");
  if (T == 0) return;
  const int64_t TK = T * K, tiles = moe_max_tiles(TK, E);
  if (tiles > 65535)
    throw Error("moe_experts: " + std::to_string(TK) + " token-expert pairs need " + std::to_string(tiles) +
                " M-tiles, more than a grid's 65535 (lower max_num_batched_tokens)");
  Tensor sorted_pairs = empty({tiles * kMoeBlockM}, DType::I32), tile_expert = empty({tiles}, DType::I32);
  Tensor pair_row = empty({TK}, DType::I32);
  const Stream st = on_stream();
  moe_align(ids, E, sorted_pairs, tile_expert, pair_row, st);
  Tensor act = empty({tiles * kMoeBlockM, I}, DType::BF16), y = empty({tiles * kMoeBlockM, H}, DType::BF16);
  // 64-column tiles, or 32 where the 64-column grid would not fill the SMs once (decode: a handful of
  // tiles per expert), so that more CTAs stream the chosen experts' weights at once.
  auto gemm = [&](auto kernel64, auto kernel32, const bf16* a, const bf16* w, bf16* o, int64_t N, int64_t Kd) {
    const bool narrow = int64_t(ceil_div(N, 64)) * tiles < num_sms_;
    launch(narrow ? kernel32 : kernel64, dim3(ceil_div(N, narrow ? 32 : 64), unsigned(tiles)), dim3(kThreads), 0, st, a,
           w, o, sorted_pairs.data<int32_t>(), tile_expert.data<int32_t>(), int(TK), int(K), int(N), int(Kd));
  };
  gemm(moe_gemm_kernel<true, 64>, moe_gemm_kernel<true, 32>, x.data<bf16>(), w13.data<bf16>(), act.data<bf16>(), I, H);
  gemm(moe_gemm_kernel<false, 64>, moe_gemm_kernel<false, 32>, act.data<bf16>(), w2.data<bf16>(), y.data<bf16>(), H, I);
  launch(moe_combine_kernel, dim3(unsigned(T)), dim3(unsigned(std::min<int64_t>(256, ceil_div(H, 8)))), 0, st,
         y.data<bf16>(), weights.data<float>(), pair_row.data<int32_t>(), int(K), int(H), out.raw(),
         out.dtype() == DType::F32);
}

}  // namespace nanovllm
