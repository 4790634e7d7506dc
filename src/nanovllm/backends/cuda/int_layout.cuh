// The CUDA backend's private layout of group-quantized integer weights (W4A16 / W8A16; the canonical
// layout and the semantics are backends/int_weights.h), written once at load by
// CudaBackend::prepare_int_weight (int_prepare.cu) and read by the GEMVs (int_linear.cu,
// int_gemv_v2.cu), the tensor-core GEMM (int_gemm.cu) and the dequantize kernel of int_linear.cu. Shapes: N output
// rows, K input columns, G the group size, bits 4 (U4) or 8 (U8); TK = int_tile_k(bits) (64 for U4, 32 for U8), NB =
// ceil(N / 16) row blocks, KT = ceil(K / TK) tiles, NG = K / G groups (kernel_plan.h: int_layout_supports states the
// shapes it covers: G % 16
// == 0, so K % 16 == 0 and a k-step is wholly inside K or wholly past it).
//
// Why: the GEMV multiplies on the tensor cores (mma.sync m16n8k16, BF16 in, F32 accumulation): a
// 16-row block of the weight is the mma's A and up to 8 rows of x its B. Dequantizing on the CUDA
// cores into F32 and multiplying there costs ~3.5 instructions per weight at batch 1, which is the
// whole issue rate of an SM at H200 bandwidth; feeding the mma costs ~1.1 (a shift, a LOP3 and an
// HSUB2 per BF16 pair, amortized over 8 columns of x). The codes are arranged so that one 16-byte
// load per lane is exactly its A fragments for TK / 16 k-steps, with no shuffles:
//
// codes: uint4 [NB][KT][32 lanes]. Lane l = 4g + t of tile (b, kt) holds, for each k-step j < TK/16,
//   the codes of rows r0 = 16b + g and r1 = r0 + 8 at columns k_e = kt*TK + 16j + 4t + e, e = 0..3.
//   The mma's k index within the step maps to these columns (PTX's fragment columns 2t, 2t+1, 2t+8,
//   2t+9 -> e 0, 1, 2, 3), for A and B alike, so x's B fragment for step j is the 8 bytes
//   x[m][kt*TK + 16j + 4t .. +3]: one aligned load, no conversion, and every step lies in one group.
//   U4: 32-bit word j; nibble i holds (r0,e0) (r1,e0) (r0,e2) (r1,e2) (r0,e1) (r1,e1) (r0,e3) (r1,e3)
//       for i = 0..7, so (w >> 4s) & 0x000F000F | 0x43004300 is the BF16 pair 128 + code of the A
//       register s (a0: r0 e0/e1, a1: r1 e0/e1, a2: r0 e2/e3, a3: r1 e2/e3): the magic-number trick
//       (BF16 128.0 has ulp 1, so 128 + q is exact) in one LOP3.
//   U8: words 2j (row r0, bytes e = 0..3) and 2j + 1 (row r1); a byte becomes F32 2^23 + q with one
//       PRMT (2^23 has ulp 1), the zero is subtracted in F32 and the pair rounded (exactly) to BF16.
//   Rows r >= N (the last block's padding) hold code 0 and scale 0: value 0. Columns k >= K (the
//   last tile's padding) hold code 0; the GEMV multiplies them with zeros instead of x.
// scale: uint32 [NB][NG][16]: row 16b + i of group gi as the F16 pair {scale, zero} (low, high); the
//   zero in code units (the midpoint for symmetric weights). The zero is subtracted from the code in
//   the dequantization (exact: (128 + q) - (128 + z) is an integer of at most 8 bits, exact in BF16),
//   so the mma multiplies x by q - z exactly and the F32 partial sum of a group is multiplied by the
//   F32 scale: the weight is never rounded. F16 for the scale: AWQ and GPTQ checkpoints store F16
//   scales (exact); others lose at most 2^-11 relative (subnormal scales, below 6.1e-5, lose more,
//   but their contribution is then as small). Zero points must be integers of the code range
//   (prepare_int_weight refuses others; every format's are). 4 bytes per row and group: 6% of the U4
//   codes' bytes at G = 128.
// The tensors after prepare_int_weight: codes keep dtype and shape [N, K] (a view of the first N * K
// codes of the NB * 16 * KT * TK the storage holds); scales.scale is F16 [NB, NG, 16, 2] (the mark of this layout:
// canonical scales are F32 [N, NG]), scales.zero undefined (folded in), block_k G, perm unchanged (on the device).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/kernel_plan.h"

namespace nanovllm::cuda {

constexpr int kIntStepK = 16;  // columns of one mma k-step

// The canonical (row r, column k) of lane l's word j, element `slot` (U4: nibble; U8: byte of word
// 2j / 2j + 1 chosen by `row8`) in tile (b, kt): the inverse map prepare and the tests use.
__host__ __device__ constexpr int int_u4_slot_row8(int nibble) { return nibble & 1; }  // 0: r0, 1: r1
__host__ __device__ constexpr int int_u4_slot_e(int nibble) { return ((nibble >> 1) & 1) * 2 + (nibble >> 2); }

// The four A registers of one k-step from U4 word w: BF16 pairs q - z (z2_r0 / z2_r1: 128 + z of
// rows r0 and r1 as BF16 pairs).
__device__ __forceinline__ void int4_fragment(uint32_t w, bf162 z2_r0, bf162 z2_r1, uint32_t (&a)[4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint32_t v = ((w >> (4 * s)) & 0x000F000Fu) | 0x43004300u;
    const bf162 d = __hsub2(*reinterpret_cast<const bf162*>(&v), (s & 1) ? z2_r1 : z2_r0);
    a[s] = *reinterpret_cast<const uint32_t*>(&d);
  }
}

// 16 bytes of codes (one lane's tile), read once by the kernels that stream them (int_gemv_v2.cu,
// int_gemm.cu): not kept in L1, which then holds x, read again by every row block.
__device__ __forceinline__ uint4 load_codes(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// Byte i of w as F32 minus zf (zf = 2^23 + z): q - z, exact.
__device__ __forceinline__ float int8_code(uint32_t w, int i, float zf) {
  return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7540u | unsigned(i))) - zf;
}

// The four A registers of one k-step from U8 words w0 (row r0) and w1 (row r1).
__device__ __forceinline__ void int8_fragment(uint32_t w0, uint32_t w1, float zf_r0, float zf_r1, uint32_t (&a)[4]) {
  auto pair = [](float lo, float hi) {
    const bf162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&h);
  };
  a[0] = pair(int8_code(w0, 0, zf_r0), int8_code(w0, 1, zf_r0));
  a[1] = pair(int8_code(w1, 0, zf_r1), int8_code(w1, 1, zf_r1));
  a[2] = pair(int8_code(w0, 2, zf_r0), int8_code(w0, 3, zf_r0));
  a[3] = pair(int8_code(w1, 2, zf_r1), int8_code(w1, 3, zf_r1));
}

// One GEMV call over this layout: out[M, outs] from x[M, K] (BF16, 16-byte aligned) and the
// prepared codes / {scale, zero} words of a weight of group G; silu: the weight has 2 * outs rows
// [gate; up] and out = silu(gate) * up (BF16 out only); f32_out: out is F32, else BF16.
struct IntGemvArgs {
  const bf16* x = nullptr;
  const uint4* codes = nullptr;
  const uint32_t* sz = nullptr;
  void* out = nullptr;
  int64_t M = 0, outs = 0, K = 0, G = 0;
  int bits = 4;
  bool silu = false, f32_out = false;
  // With norm.residual set (v3 / v4; kernel_plan.h: int_gemv_norm_fuses): x is the layer's output,
  // and the product multiplies rms_norm(x + residual) * norm_w instead (int_gemv_norm.cuh); the
  // sum goes to norm.residual_out.
  GemvNorm norm;
};
// KernelOptions::int_gemv=v2 (int_gemv_v2.cu): all M <= kIntGemvMaxT rows in one pass. Throws
// Error outside the kernel's limits (plan_int_linear's to respect).
void int_gemv_v2(const IntGemvArgs& a, Stream st);
// KernelOptions::int_gemv=v3 (int_gemv_v3.cu): the same, K split over `splits` CTAs of a cluster
// (kernel_plan.h: int_gemv_v3_splits; 1 before sm_90); wide: three CTAs an SM (kernel_plan.h:
// int_gemv_v3_wide; only the plain product at one n-tile has that form, others ignore it). Throws
// Error outside the kernel's limits.
void int_gemv_v3(const IntGemvArgs& a, int splits, bool wide, Stream st);
// KernelOptions::int_gemv=v4 (int_gemv_v4.cu): v3's outputs (one split) from a persistent grid of
// at most kIntGemvV4CtasPerSm x num_sms CTAs. Throws Error outside the kernel's limits.
void int_gemv_v4(const IntGemvArgs& a, int num_sms, Stream st);
// KernelOptions::int_gemv=v5 (int_gemv_v5.cu): v4's grid with the rings in shared memory (cp.async)
// and twice the warps an SM. Throws Error outside the kernel's limits.
void int_gemv_v5(const IntGemvArgs& a, int num_sms, Stream st);
// Sets v5's shared-memory limits (once, by the backend's constructor).
void int_gemv_v5_init();

// One call of the tensor-core GEMM (int_gemm.cu) for kIntGemvMaxT < M <= kIntGemmMaxT rows of x:
// the fields of IntGemvArgs (silu: outs = I % (kIntGemmRows / 2) == 0, BF16 out), and `splits` of K
// (kernel_plan.h: int_gemm_splits) whose F32 partials go to `workspace` (at least splits x its CTA
// tiles x kIntGemmRows x kIntGemmCols floats, workspace_floats; unused for 1 split). Throws Error
// outside the kernel's limits. wgmma: the Hopper kernel (int_gemm_wgmma.cu, where kernel_plan.h's
// int_gemm_wgmma_applies), which first copies x into `x_perm` ([M, K], the caller's scratch) in the
// mma's k order.
struct IntGemmArgs {
  const bf16* x = nullptr;
  const uint4* codes = nullptr;
  const uint32_t* sz = nullptr;
  void* out = nullptr;
  float* workspace = nullptr;
  int64_t workspace_floats = 0;
  int64_t M = 0, outs = 0, K = 0, G = 0;
  int bits = 4, splits = 1;
  bool silu = false, f32_out = false;
  bool wgmma = false;
  bf16* x_perm = nullptr;
  IntGemmCluster cluster;  // wgmma: its thread-block clusters (kernel_plan.h: plan_int_gemm_cluster)
  bool wide = false;       // wgmma: the wide form (kernel_plan.h: int_gemm_wgmma_wide; no clusters)
  bool ss = false;         // wide: as int_gemm_wgmma_ss.cu (kernel_plan.h: int_gemm_wgmma_ss)
};
void int_gemm(const IntGemmArgs& a, Stream st);

// Scale and zero of one {scale, zero} F16 pair.
__device__ __forceinline__ float2 int_scale_zero(uint32_t word) {
  const __half2 h = *reinterpret_cast<const __half2*>(&word);
  return __half22float2(h);
}

// Where lane (g = lane / 4) of row block blk reads: its codes (tile kt at cb + 32 kt) and its
// rows' {scale, zero} words (group gi of row g at sb + 16 gi, of row g + 8 at sb + 16 gi + 8).
__device__ __forceinline__ void int_block_ptrs(const uint4* codes, const uint32_t* sz, int64_t blk, int KT, int NG,
                                               int lane, const uint4*& cb, const uint32_t*& sb) {
  cb = codes + blk * KT * 32 + lane;
  sb = sz + blk * NG * 16 + (lane >> 2);
}

// The {scale, zero} words of rows g and g + 8 for tile kt: SG == 1, the tile's group (G a multiple
// of the tile's TK columns); else one per k-step. Zeros when !ok (no tile: nothing is read).
// The group of tile kt's k-step s (past K: the last group; its columns multiply zeros).
template <int TK>
__device__ __forceinline__ int int_tile_group(int kt, int s, int G, int NG) {
  return min((kt * TK + s * kIntStepK) / G, NG - 1);
}

template <int TK, int SG>
__device__ __forceinline__ void int_tile_scales(const uint32_t* sb, int kt, bool ok, int G, int NG,
                                                uint32_t (&w)[SG][2]) {
#pragma unroll
  for (int s = 0; s < SG; ++s) {
    const int gi = ok ? int_tile_group<TK>(kt, s, G, NG) : 0;
    w[s][0] = ok ? __ldg(sb + gi * 16) : 0u;
    w[s][1] = ok ? __ldg(sb + gi * 16 + 8) : 0u;
  }
}

// An F32 C fragment (c0, c1: row g, columns 2t, 2t + 1; c2, c3: row g + 8) into red [16][cols].
template <int kCols>
__device__ __forceinline__ void int_store_fragment(float (*red)[kCols], int lane, const float (&c)[4]) {
  const int g = lane >> 2, t = lane & 3;
  red[g][2 * t] = c[0];
  red[g][2 * t + 1] = c[1];
  red[g + 8][2 * t] = c[2];
  red[g + 8][2 * t + 1] = c[3];
}

// The four A registers of k-step j of a tile from its lane's code words wv (U4: word j; U8: words
// 2j and 2j + 1), sz0 / sz1 the {scale, zero} of rows r0 and r1.
template <int kBits>
__device__ __forceinline__ void int_fragment(const uint32_t (&wv)[4], int j, float2 sz0, float2 sz1, uint32_t (&a)[4]) {
  if constexpr (kBits == 4)
    int4_fragment(wv[j], __float2bfloat162_rn(128.f + sz0.y), __float2bfloat162_rn(128.f + sz1.y), a);
  else
    int8_fragment(wv[2 * j], wv[2 * j + 1], 8388608.f + sz0.y, 8388608.f + sz1.y, a);
}

// A group's partial sums (an mma C fragment: c0, c1 row r0, c2, c3 row r1) scaled by the rows'
// scales s0, s1 into acc; part is zeroed for the next group.
__device__ __forceinline__ void int_scale_partials(float (&acc)[4], float (&part)[4], float s0, float s1) {
  acc[0] = fmaf(s0, part[0], acc[0]);
  acc[1] = fmaf(s0, part[1], acc[1]);
  acc[2] = fmaf(s1, part[2], acc[2]);
  acc[3] = fmaf(s1, part[3], acc[3]);
#pragma unroll
  for (int c = 0; c < 4; ++c) part[c] = 0.f;
}

// A GEMV output from the F32 sum s of its row (kSilu: s of the gate row, u of the up row; the
// rounding of silu_and_mul after a BF16 product, as gemv.cu).
template <bool kSilu, class OutT>
__device__ __forceinline__ void int_gemv_store(float s, float u, OutT* o) {
  if constexpr (kSilu) {
    const float gt = bf16_round(s);
    s = silu_bf16(gt) * bf16_round(u);
  }
  if constexpr (std::is_same_v<OutT, float>)
    *o = s;
  else
    *o = __float2bfloat16(s);
}

// The U4 GEMVs' shared pieces (int_gemv_tile.cuh: v3, v4 and v5).
constexpr uint32_t kBf16Ones = 0x3F803F80u;  // a BF16 pair of 1.0

// The four A registers of one k-step from U4 word w: BF16 pairs 128 + q (exact: BF16 128 has ulp 1),
// (w >> 4s) & 0x000F000F | magic as one LOP3 each (written out: given two immediates, the compiler
// emits two), magic = 0x43004300 held in a register.
__device__ __forceinline__ void int4_fragment_biased(uint32_t w, uint32_t magic, uint32_t (&a)[4]) {
#pragma unroll
  for (int s = 0; s < 4; ++s)
    asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(a[s]) : "r"(w >> (4 * s)), "n"(0x000F000F), "r"(magic));
}

// acc += s * (part - zz * xs) per C element (zz = 128 + z: U4's bias; U8 subtracts its zero in the
// fragment and passes xs = 0), then part and xs are zeroed for the next group.
__device__ __forceinline__ void int_scale_partials_biased(float (&acc)[4], float (&part)[4], const float (&xs)[4],
                                                          float s0, float zz0, float s1, float zz1) {
  acc[0] = fmaf(s0, fmaf(-zz0, xs[0], part[0]), acc[0]);
  acc[1] = fmaf(s0, fmaf(-zz0, xs[1], part[1]), acc[1]);
  acc[2] = fmaf(s1, fmaf(-zz1, xs[2], part[2]), acc[2]);
  acc[3] = fmaf(s1, fmaf(-zz1, xs[3], part[3]), acc[3]);
#pragma unroll
  for (int c = 0; c < 4; ++c) part[c] = 0.f;
}

}  // namespace nanovllm::cuda
