// The Hopper W4A16 / W8A16 GEMM (KernelOptions::int_gemm=auto on sm_90a) for kIntGemvMaxT < T <=
// kIntGemmMaxT rows of BF16 x: out[T, N] = x[T, K] @ value[N, K]^T over group-quantized U4/U8 codes in
// int_layout.cuh's prepared layout (the GEMVs': nothing is re-laid out), F32 accumulation, BF16 or F32
// out, the gated MLP's silu(gate) * up as an epilogue. Semantics: backends/int_weights.h.
//
// Mapping. The weight is wgmma's M side (64 rows a warpgroup) and x its N side (`BN` = 64 or 128 rows
// of x). A CTA of W warpgroups (kernel_plan.h: plan_int_wgmma) owns 64 W weight rows (with silu: 32 W
// gate rows and their up rows I / 16 blocks further, so both halves of its outputs meet in its
// epilogue) x BN rows of x, over one of `splits` ranges of K stages of 64 columns. Warp w owns row
// block w of the tile (16 rows: its warpgroup's rows 16 (w % 4) ..), per k-step one
// wgmma.m64nBNk16 of its warpgroup with
//  * A (weights) from registers: a lane's 16-byte load per row block and 64 columns (U4; two for U8)
//    is its A fragments for the stage's 4 k-steps (int_layout.cuh: the mma.sync A fragment, which is
//    wgmma's A fragment of the warp's 16 rows), loaded straight from global memory into a ring of R
//    stages per warp with the stages' {scale, zero} words, dequantized in registers into BF16
//    (q - z) * s rounded once: U4 as 128 + q (one LOP3), minus 128 + z (HSUB2, exact), times s split
//    into s_hi + s_lo (BF16 each; s is F16): t = (q - z) s_lo is exact and fma(q - z, s_hi, t) rounds
//    the exact product once (HMUL2 + HFMA2); U8 in F32 ((2^23 + q) - (2^23 + z), times s, one
//    rounding). So the weights equal the dequantize path's bit for bit (int_linear.cu), and no F32
//    partial sums per group are kept (the mma.sync GEMM's, int_gemm.cu, double its registers).
//  * B (x) from shared memory: the CTA's BN x 64 slice of x per stage, stored as wgmma's K-major
//    128-byte-swizzle tile (wgmma.cuh), in kStages stages (kStages - 2 ahead in flight), copied by
//    4-byte cp.async: the layout's k order (lane t's columns 4t..4t+3 of a step are the mma's k 2t,
//    2t+1, 2t+8, 2t+9) permutes each k-step's 16 columns in BF16 pairs, [0,1 4,5 8,9 12,13 | 2,3 6,7
//    10,11 14,15], so that wgmma reads x at the k the A fragments hold. A warp copies one 128-byte row
//    (coalesced; its 32 words land in 32 banks). Rows past T and columns past K are zeros.
//  * Pipelining: per k-step the warpgroup waits until at most one wgmma is in flight (the A
//    registers alternate between two sets), dequantizes, fences, issues and commits. A stage's
//    shared memory is refilled two stages after its last read (the barrier at each stage follows
//    every warpgroup's wait for the stage before last).
//  * Epilogue: the accumulators (wgmma's m64nN layout: mma.sync's C fragments per warp) go through
//    shared memory as an F32 [BN][64 W] tile, then out (coalesced along N; silu(gate) * up with
//    gemv.cu's rounding). With splits > 1 the tile's CTAs are one thread-block cluster: each adds
//    every CTA's tile for 1 / splits of the rows of x through distributed shared memory, split 0
//    first (deterministic; no workspace, nothing allocated: graph-safe).
//
// Why. At T 33..256 the mma.sync GEMM ran 143-219 TFLOP/s (8 warps a SM, each group's partial sums
// in F32) and lost to BF16 cuBLASLt's wgmma at every T >= 64 (bench/RESULTS.md). Here the tensor
// cores run wgmma, fed by 8 (W 2, two CTAs a SM) or 16 (W 4) warps; the dequantization (~6
// instructions per A register a k-step) is small beside a wgmma's BN cycles of a SM's tensor cores.
// The codes (half a byte per weight plus the 4-byte {scale, zero} per row and group) are the only
// weight traffic: at T = 64 about a quarter of BF16's bytes.
//
// PDL: the ring's first stages of codes and scales are loaded before griddepcontrol.wait (weights
// are not written by the previous kernel); x only after it.
#include <cooperative_groups.h>

#include <string>

#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"
#include "nanovllm/backends/cuda/wgmma.cuh"

namespace nanovllm::cuda {
namespace {

namespace cg = cooperative_groups;

constexpr int kXK = int(kIntWgmmaStageK);  // columns of a stage: one 128-byte row of x
constexpr int kSteps = kXK / kIntStepK;    // wgmma k-steps a stage: 4
constexpr int kStages = 4;                 // x stages in shared memory
constexpr int kAhead = kStages - 2;        // stages in flight ahead of the one computed

template <int BN, int W>
struct WgSmem {
  static constexpr int BM = int(kIntWgmmaRowsPerWg) * W;  // weight rows of the tile
  static constexpr int kStageBytes = BN * 128;
  static constexpr int kRedPitch = BM + 4;  // floats a row of the epilogue tile: 2t * pitch % 32 = 8t
  static constexpr int kRedBytes = BN * kRedPitch * 4;
  static constexpr int kBytes = (kStages * kStageBytes > kRedBytes ? kStages * kStageBytes : kRedBytes) + 1024;
};

struct WgParams {
  const bf16* x;       // [M, K]
  const uint4* codes;  // int_layout.cuh
  const uint32_t* sz;  // int_layout.cuh
  void* out;           // [M, N] BF16 (or F32: f32_out)
  int M, N, K, G;      // N: outputs (silu: I)
  int NB;              // row blocks of the weight (silu: 2I / 16)
  int up_block;        // silu: I / 16, the first up block
  int CT, splits;      // column tiles (of x), K splits (the cluster's CTAs)
  bool silu, f32_out;
};

template <int BN>
__device__ __forceinline__ void wgmma_rs_kmajor(float (&d)[BN / 8][4], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (BN == 64)
    wgmma_m64n64k16_rs<0>(d, a, db);
  else
    wgmma_m64n128k16_rs<0>(d, a, db);
}

// The dequantization constants of one row and {scale, zero} word: 128 + z as a BF16 pair, and the
// scale as s_hi + s_lo (BF16 pairs; exact: s has 11 significant bits) for U4; s and 2^23 + z in F32
// for U8.
struct RowScale {
  uint32_t z2, hi2, lo2;  // U4
  float s, zf;            // U8
};
template <int kBits>
__device__ __forceinline__ RowScale row_scale(uint32_t word) {
  const float2 sz = int_scale_zero(word);
  RowScale r{};
  if constexpr (kBits == 4) {
    const bf162 z2 = __float2bfloat162_rn(128.f + sz.y);
    const bf16 hi = __float2bfloat16_rn(sz.x);
    const bf162 hi2 = __halves2bfloat162(hi, hi);
    const bf162 lo2 = __float2bfloat162_rn(sz.x - __bfloat162float(hi));
    r.z2 = *reinterpret_cast<const uint32_t*>(&z2);
    r.hi2 = *reinterpret_cast<const uint32_t*>(&hi2);
    r.lo2 = *reinterpret_cast<const uint32_t*>(&lo2);
  } else {
    r.s = sz.x;
    r.zf = 8388608.f + sz.y;
  }
  return r;
}

// (v - z2) * (hi2 + lo2) per BF16 half, rounded once (v - z2 and its product with lo2 are exact).
__device__ __forceinline__ uint32_t dequant_pair(uint32_t v, const RowScale& r) {
  const bf162 d = __hsub2(*reinterpret_cast<const bf162*>(&v), *reinterpret_cast<const bf162*>(&r.z2));
  const bf162 t = __hmul2(d, *reinterpret_cast<const bf162*>(&r.lo2));
  const bf162 o = __hfma2(d, *reinterpret_cast<const bf162*>(&r.hi2), t);
  return *reinterpret_cast<const uint32_t*>(&o);
}

// The A registers of k-step j of a stage from the lane's code words (U4: q[0] word j; U8: code tile
// j / 2's words 2 (j % 2) and + 1), r0 / r1 the scales of rows g and g + 8.
template <int kBits, int CPS>
__device__ __forceinline__ void stage_fragment(const uint4 (&q)[CPS], int j, const RowScale& r0, const RowScale& r1,
                                               uint32_t (&a)[4]) {
  if constexpr (kBits == 4) {
    const uint32_t w = j == 0 ? q[0].x : j == 1 ? q[0].y : j == 2 ? q[0].z : q[0].w;
#pragma unroll
    for (int s = 0; s < 4; ++s) {
      const uint32_t v = ((w >> (4 * s)) & 0x000F000Fu) | 0x43004300u;  // BF16 pair 128 + q
      a[s] = dequant_pair(v, (s & 1) ? r1 : r0);
    }
  } else {
    const uint4& c = q[j >> 1];
    const uint32_t w0 = (j & 1) ? c.z : c.x, w1 = (j & 1) ? c.w : c.y;
    a[0] = pack_bf16x2(int8_code(w0, 0, r0.zf) * r0.s, int8_code(w0, 1, r0.zf) * r0.s);
    a[1] = pack_bf16x2(int8_code(w1, 0, r1.zf) * r1.s, int8_code(w1, 1, r1.zf) * r1.s);
    a[2] = pack_bf16x2(int8_code(w0, 2, r0.zf) * r0.s, int8_code(w0, 3, r0.zf) * r0.s);
    a[3] = pack_bf16x2(int8_code(w1, 2, r1.zf) * r1.s, int8_code(w1, 3, r1.zf) * r1.s);
  }
}

// Outputs of rows m_lo .. m_hi - 1 of the tile's x rows from get4(m, i): the F32 sums of local x row
// m and local weight rows i .. i + 3 (i % 4 == 0, < BM; with silu the gate rows are i < BM / 2 and
// their up rows i + BM / 2). Adjacent threads take adjacent groups of 4 outputs of a row.
template <int BM, int kThreads, class Get4>
__device__ __forceinline__ void wg_epilogue(const WgParams& p, int rt, int ct, int m_lo, int m_hi, int BN, Get4 get4) {
  const int per = p.silu ? BM / 2 : BM, per4 = per / 4;  // outputs of the tile per row of x
  const int rows = min(m_hi, p.M - ct * BN) - m_lo;
  for (int e = threadIdx.x; e < rows * per4; e += kThreads) {
    const int m = m_lo + e / per4, i = 4 * (e % per4);
    const float4 v = get4(m, i), u = p.silu ? get4(m, i + BM / 2) : make_float4(0.f, 0.f, 0.f, 0.f);
    const float vs[4] = {v.x, v.y, v.z, v.w}, us[4] = {u.x, u.y, u.z, u.w};
    const int64_t n0 = int64_t(rt) * per + i, o = int64_t(ct * BN + m) * p.N + n0;
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      if (n0 + c >= p.N) break;
      if (p.silu)
        int_gemv_store<true>(vs[c], us[c], static_cast<bf16*>(p.out) + o + c);
      else if (p.f32_out)
        int_gemv_store<false>(vs[c], 0.f, static_cast<float*>(p.out) + o + c);
      else
        int_gemv_store<false>(vs[c], 0.f, static_cast<bf16*>(p.out) + o + c);
    }
  }
}

// Grid (splits, RT * CT): blockIdx.x the split (the cluster's rank), blockIdx.y = rt * CT + ct (the
// column tiles of a row tile adjacent: they read the same codes). kStepGroups: G is not a multiple
// of the stage's 64 columns (a {scale, zero} per k-step; K may end inside the last stage).
template <int kBits, bool kStepGroups, int BN, int W>
__global__ void __launch_bounds__(128 * W, 4 / W) int_wgmma_kernel(const WgParams p) {
  using Smem = WgSmem<BN, W>;
  constexpr int kThreads = 128 * W, BM = Smem::BM, NT = BN / 8;
  constexpr int TK = int(int_tile_k(kBits)), CPS = kXK / TK;              // code tiles a stage: 1 (U4) or 2 (U8)
  constexpr int SG = kStepGroups ? kSteps : 1;                            // {scale, zero} words a stage and row
  constexpr int R = kBits == 4 && !kStepGroups ? (BN == 64 ? 4 : 3) : 2;  // stages of codes in flight
  constexpr int kRowsPerRound = kThreads / 32;                            // rows of x a round of copies (a warp each)
  static_assert(kRowsPerRound % 8 == 0 && BN % kRowsPerRound == 0, "whole rounds; one swizzle phase a thread");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* smem =
      reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int split = int(blockIdx.x), ct = int(blockIdx.y % unsigned(p.CT)), rt = int(blockIdx.y / unsigned(p.CT));
  const int K = p.K, G = p.G, KT = (K + TK - 1) / TK, NG = K / G, KS = (K + kXK - 1) / kXK;
  const int s_begin = int(int64_t(split) * KS / p.splits), s_end = int(int64_t(split + 1) * KS / p.splits);

  // The warp's row block: local block `warp` of the tile's 4 W (silu: 2 W gate blocks, then their up blocks).
  const int64_t gb = p.silu
                         ? (warp < 2 * W ? int64_t(rt) * 2 * W + warp : p.up_block + int64_t(rt) * 2 * W + warp - 2 * W)
                         : int64_t(rt) * 4 * W + warp;
  const bool has = gb < p.NB;  // the last row tile may pass the weight's last block (its A: zeros)
  const uint4* cb;
  const uint32_t* sb;
  int_block_ptrs(p.codes, p.sz, has ? gb : 0, KT, NG, lane, cb, sb);

  uint4 wq[R][CPS];
  uint32_t ws[R][SG][2];                // {scale, zero} words of rows g and g + 8
  auto load_slot = [&](int u, int s) {  // slot u <- stage s (zeros past the split's range)
    const bool ok = has && s < s_end;
#pragma unroll
    for (int c = 0; c < CPS; ++c) {
      const int kt = s * CPS + c;
      wq[u][c] = ok && kt < KT ? load_codes(cb + int64_t(kt) * 32) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int j = 0; j < SG; ++j) {
      const int gi = ok ? min((s * kXK + j * kIntStepK) / G, NG - 1) : 0;  // past K: any group
      ws[u][j][0] = ok ? __ldg(sb + gi * 16) : 0u;
      ws[u][j][1] = ok ? __ldg(sb + gi * 16 + 8) : 0u;
    }
  };
#pragma unroll
  for (int u = 0; u < R; ++u) load_slot(u, s_begin + u);
  pdl_begin();  // x is the previous kernel's output

  // x: lane l copies word l (columns 2l, 2l + 1) of rows warp + kRowsPerRound r. Its place in the
  // swizzled row: k-step j = l / 8, pair i = l % 8 -> word 8j + 4 (i % 2) + i / 2 of the 32, whose
  // 16-byte chunk c is stored at c ^ (row % 8) (row % 8 = warp % 8 in every round).
  const int m0 = ct * BN;
  const int pi = lane & 7, word = 8 * (lane >> 3) + 4 * (pi & 1) + (pi >> 1);
  const int dst = warp * 128 + (((word >> 2) ^ (warp & 7)) << 4) + 4 * (word & 3);
  auto load_x = [&](int s) {  // stage s's x into its buffer; always one commit group
    if (s < s_end) {
      unsigned char* st = smem + (s % kStages) * Smem::kStageBytes + dst;
      const int k = s * kXK + 2 * lane;
#pragma unroll
      for (int r = 0; r < BN / kRowsPerRound; ++r) {
        const int m = m0 + warp + r * kRowsPerRound;
        const bool ok = m < p.M && k < K;
        cp_async4(st + r * kRowsPerRound * 128, ok ? p.x + int64_t(m) * K + k : p.x, ok ? 4 : 0);
      }
    }
    cp_async_commit();
  };
#pragma unroll
  for (int s = 0; s < kAhead; ++s) load_x(s_begin + s);

  float acc[NT][4];
#pragma unroll
  for (int n = 0; n < NT; ++n)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[n][c] = 0.f;
  uint32_t a[2][4];  // the A registers of the last two k-steps (one wgmma in flight reads the other)

  for (int s0 = s_begin; s0 < s_end; s0 += R) {
#pragma unroll
    for (int u = 0; u < R; ++u) {
      const int s = s0 + u;
      if (s >= s_end) break;        // CTA-uniform
      cp_async_wait<kAhead - 1>();  // this thread's copies of stage s have landed
      fence_proxy_async_smem();     // ... for the tensor cores (async proxy)
      wgmma_wait<1>();              // this warpgroup's reads of stage s - 2 are done
      __syncthreads();              // everyone's copies; every warpgroup's reads of stage s - 2
      load_x(s + kAhead);           // into stage s - 2's buffer
      const uint64_t desc = wgmma_desc_sw128(smem + (s % kStages) * Smem::kStageBytes, 16, 1024);
      RowScale r0 = row_scale<kBits>(ws[u][0][0]), r1 = row_scale<kBits>(ws[u][0][1]);
#pragma unroll
      for (int j = 0; j < kSteps; ++j) {
        if (kStepGroups && j > 0) r0 = row_scale<kBits>(ws[u][j][0]), r1 = row_scale<kBits>(ws[u][j][1]);
        if (j > 0) wgmma_wait<1>();  // the wgmma that read a[j & 1] (two steps back) is done
        stage_fragment<kBits, CPS>(wq[u], j, r0, r1, a[j & 1]);
        wgmma_fence();
        wgmma_rs_kmajor<BN>(acc, a[j & 1], desc + 2 * j);  // + 32 bytes a k-step
        wgmma_commit();
      }
      load_slot(u, s + R);
    }
  }
  wgmma_wait<0>();
  wgmma_fence_operands(acc);

  // The accumulators as red[x row][weight row] F32 (the stages are free once every copy landed and
  // every warpgroup's wgmmas are done). Fragment n: d0, d1 = (weight row 16 warp + g, x rows 8n + 2t,
  // + 1); d2, d3 = weight row + 8.
  cp_async_wait<0>();
  __syncthreads();
  float* red = reinterpret_cast<float*>(smem);
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int n = 0; n < NT; ++n) {
    const int row = 16 * warp + g, col = 8 * n + 2 * t;
    red[col * Smem::kRedPitch + row] = acc[n][0];
    red[(col + 1) * Smem::kRedPitch + row] = acc[n][1];
    red[col * Smem::kRedPitch + row + 8] = acc[n][2];
    red[(col + 1) * Smem::kRedPitch + row + 8] = acc[n][3];
  }
  __syncthreads();
  if (p.splits == 1) {
    wg_epilogue<BM, kThreads>(p, rt, ct, 0, BN, BN, [&](int m, int i) {
      return *reinterpret_cast<const float4*>(red + m * Smem::kRedPitch + i);
    });
    return;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every CTA's tile visible to the cluster (release / acquire)
  const int m_lo = split * BN / p.splits, m_hi = (split + 1) * BN / p.splits;
  wg_epilogue<BM, kThreads>(p, rt, ct, m_lo, m_hi, BN, [&](int m, int i) {
    float4 t[kIntWgmmaMaxSplits];  // every split's 4 sums, the remote loads all in flight at once
#pragma unroll
    for (int q = 0; q < kIntWgmmaMaxSplits; ++q)
      t[q] = q < p.splits ? *cluster.map_shared_rank(reinterpret_cast<const float4*>(red + m * Smem::kRedPitch + i), q)
                          : make_float4(0.f, 0.f, 0.f, 0.f);
    float4 v = t[0];  // added in split order (the zeros past `splits` change nothing)
#pragma unroll
    for (int q = 1; q < kIntWgmmaMaxSplits; ++q) v.x += t[q].x, v.y += t[q].y, v.z += t[q].z, v.w += t[q].w;
    return v;
  });
  cluster.sync();  // the others may still read this CTA's tile
#endif
}

template <int kBits, bool kStepGroups, int BN, int W>
void launch_wgmma(const WgParams& p, int RT, Stream st) {
  const dim3 grid(unsigned(p.splits), unsigned(RT * p.CT)), cluster(unsigned(p.splits), 1u, 1u);
  launch_clustered(int_wgmma_kernel<kBits, kStepGroups, BN, W>, grid, dim3(128 * W), WgSmem<BN, W>::kBytes, st, cluster,
                   p);
  NV_LAUNCH_CHECK();
}

template <int kBits, bool kStepGroups, int BN, int W>
void allow_smem() {
  NV_CUDA_CHECK(cudaFuncSetAttribute(int_wgmma_kernel<kBits, kStepGroups, BN, W>,
                                     cudaFuncAttributeMaxDynamicSharedMemorySize, WgSmem<BN, W>::kBytes));
}

}  // namespace

void int_gemm_wgmma_init() {
  allow_smem<4, false, 64, 2>();
  allow_smem<4, false, 64, 4>();
  allow_smem<4, false, 128, 2>();
  allow_smem<4, false, 128, 4>();
  allow_smem<4, true, 64, 2>();
  allow_smem<8, false, 64, 2>();
  allow_smem<8, true, 64, 2>();
}

void int_gemm_wgmma(const IntGemmArgs& a, const IntWgmmaPlan& plan, Stream st) {
  const bool all_tiles = int_wgmma_all_tiles(a.bits, a.G);
  const bool tile_ok = (plan.cols == 64 || (all_tiles && plan.cols == 128)) &&
                       (plan.warpgroups == 2 || (all_tiles && plan.warpgroups == 4));
  const int64_t RT = tile_ok ? int_wgmma_row_tiles(a.outs, a.silu, plan.warpgroups) : 0;
  const bool bad_silu = a.silu && (a.f32_out || a.outs % (kIntWgmmaRowsPerWg * plan.warpgroups / 2) != 0 || a.outs < 1);
  if (a.M < 1 || a.M > kIntGemmMaxT || a.outs < 1 || bad_silu || (a.bits != 4 && a.bits != 8) ||
      !int_layout_supports(a.bits, a.K, a.G) || !tile_ok || plan.splits < 1 || plan.splits > kIntWgmmaMaxSplits ||
      RT * ((a.M + plan.cols - 1) / plan.cols) > 65535)
    throw Error("int_gemm_wgmma: M " + std::to_string(a.M) + ", outputs " + std::to_string(a.outs) + ", K " +
                std::to_string(a.K) + ", group " + std::to_string(a.G) + ", " + std::to_string(a.bits) +
                " bits, tile " + std::to_string(plan.cols) + " x " + std::to_string(plan.warpgroups) + " warpgroups, " +
                std::to_string(plan.splits) + " splits" + (a.silu ? ", silu" : "") + (a.f32_out ? ", F32 out" : "") +
                " is outside the kernel's limits (kernel_plan.h: plan_int_linear, plan_int_wgmma)");
  WgParams p;
  p.x = a.x, p.codes = a.codes, p.sz = a.sz, p.out = a.out;
  p.M = int(a.M), p.N = int(a.outs), p.K = int(a.K), p.G = int(a.G);
  const int64_t rows = a.silu ? 2 * a.outs : a.outs;  // of the weight
  p.NB = int((rows + kIntRowBlock - 1) / kIntRowBlock);
  p.up_block = a.silu ? int(a.outs / kIntRowBlock) : 0;
  p.CT = int((a.M + plan.cols - 1) / plan.cols), p.splits = plan.splits;
  p.silu = a.silu, p.f32_out = a.f32_out;
  const int rt = int(RT);
  if (!all_tiles) {
    if (a.bits == 4)
      launch_wgmma<4, true, 64, 2>(p, rt, st);
    else if (a.G % kIntWgmmaStageK == 0)
      launch_wgmma<8, false, 64, 2>(p, rt, st);
    else
      launch_wgmma<8, true, 64, 2>(p, rt, st);
    return;
  }
  if (plan.cols == 64)
    plan.warpgroups == 2 ? launch_wgmma<4, false, 64, 2>(p, rt, st) : launch_wgmma<4, false, 64, 4>(p, rt, st);
  else
    plan.warpgroups == 2 ? launch_wgmma<4, false, 128, 2>(p, rt, st) : launch_wgmma<4, false, 128, 4>(p, rt, st);
}

}  // namespace nanovllm::cuda
