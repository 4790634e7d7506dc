// Kernel choice of the CUDA backend: one plan function per op, called by the op before it launches
// anything, returning a small struct that says which kernel runs and how. The kernels do not
// decline work: what they support is stated here (the limits below), and an op only calls a kernel
// that its plan chose. Plain C++ without CUDA types, so the rules are unit-tested on the CPU
// (tests/unit/backends/cuda/test_kernel_plan.cpp); the device facts they need (SM count, cluster limit,
// occupancy) come in as arguments.
//
// plan_linear (linear, linear_silu_mul, add_rms_norm_linear; gemm_cublaslt.cu):
//  * The skinny GEMV (gemv.cu) for 1 <= T <= 4 rows of BF16 x, K % 8 == 0, 16-byte aligned
//    operands; cuBLASLt otherwise. At these batches the product is one pass over the weight, and
//    cuBLASLt's tiles stayed well below the bandwidth, so the GEMMs took half a batch-1 decode step
//    and the GEMV made it faster (bench/RESULTS.md: "GEMMs 48%", "GEMV + merge fusion"). With
//    silu_mul, the GEMV computes gate and up and applies SiLU in one kernel; cuBLASLt is followed by
//    silu_and_mul. No F32 output with silu_mul.
//  * add_rms_norm_linear fuses the residual add + RMSNorm into the GEMV as its prologue (one kernel
//    instead of two) under KernelOptions::gemv_norm: never; always (where the T rows of x fit 48 KiB
//    of shared memory); auto (default): only for K <= 2048 and while the GEMV's grid fits one wave
//    (occupancy x SMs: norm_wave). Every CTA recomputes the prologue, whose bytes grow with K and
//    with the number of waves: fused batch-1 decode is slightly faster at K = 1024 (Qwen3-0.6B), no
//    faster at K = 4096 (Qwen3-8B) in one wave and slower beyond it
//    (bench/RESULTS.md: "in one wave only 206.2"); hence K <= 2048 and one wave. Not fused:
//    add_rms_norm, then the product as plan_linear chooses for it without the norm.
//  * Past the GEMV, KernelOptions::gemm picks cuBLASLt or our Hopper GEMM (gemm_wgmma.cu): its
//    persistent 128 x 256 form with the TMA-store epilogue, and for silu_mul its fused gate_up +
//    SiLU form (no [T, 2I] intermediate, no silu_and_mul kernel). It applies (gemm_wgmma_applies)
//    on an sm_90 GPU with a build carrying sm_90a, BF16 x, w and out (not the F32 partial sums of
//    row-parallel layers), 16-byte aligned, N % 8 == 0 (the TMA store's row pitch), K % 8 == 0, and
//    at least kGemmWgmmaMinRows rows (gemm=wgmma). gemm=auto (default) takes it only where the
//    epilogue takes a kernel's work (the gated MLP's SiLU, the qkv projection's q/k norm + RoPE + KV
//    store: add_rms_norm_linear_rope) from kGemmWgmmaAutoRows rows at K <= kGemmWgmmaAutoMaxK.
//    Measured on an H200 (bench/RESULTS.md, "gemm=auto"): the plain TMA-store form at 0.97-1.04x
//    cuBLASLt's TFLOP/s from 4,096 rows on Qwen3-0.6B and -8B shapes, so no gain alone (and 0.3-0.8x
//    at 512-1,024 rows); gate_up + SiLU 1.08-1.10x cuBLASLt + silu_and_mul on Qwen3-0.6B at 4,096 and
//    16,384 rows, 0.91-1.00x on Qwen3-8B's (K 4,096); embeddings (Qwen3-0.6B, 16,384-token steps)
//    2.6% faster with both fusions than on cuBLASLt.
//    With gemm_norm=on the residual add + RMSNorm after o_proj and down_proj join their product
//    (linear_add_norm_fuses) under gemm=auto at any K; off by default: on an H200 the fused kernel
//    (199.8 us a call) lost to cuBLASLt + add_rms_norm (118.1 + 38.1 us), embeddings 937 against 980
//    inputs/s: its clusters of 4 CTAs fit 30 at once (120 of 132 SMs; 128 row tiles take 5 rounds),
//    and its 3-stage ring and epilogue (two store rounds and the cluster's exchange a tile) stall the
//    tensor cores (bench/RESULTS.md: "add + RMSNorm epilogue").
//
// plan_attention (attention; attention.cu): which kernels compute a batch's attention.
//  * The split-KV decode kernel (attention_decode.cu) takes the leading sequences that have exactly
//    one new token (a decode batch: all of them; a mixed step: its decodes, which the scheduler
//    puts first), where head_dim is 64 or 128 and G = Hq / Hkv <= 8 (plan_decode_attention says
//    how). On a prefill kernel those rows would cost a 64-row tile each per KV head, and the grid
//    of a mixed step (sequences x tiles of the longest chunk) would be mostly empty CTAs.
//  * The other sequences go to the prefill (and chunked-prefill) kernels, as
//    KernelOptions::prefill_attention says; auto takes the fastest that applies, in this order
//    (bench/prefill_bench.cpp; bench/RESULTS.md:
//    "Prefill attention on tensor cores and long context"):
//    - wgmma with a TMA producer warp (attention_prefill_wgmma_tma.cu, FlashAttention-3's
//      structure): where the wgmma kernel runs and block_size is a multiple of 8
//      (tma_block_size_ok);
//    - wgmma (attention_prefill_wgmma.cu): sm_90 with sm_90a code in the build, head_dim 64/128,
//      G <= 64, other block sizes;
//    - mma.sync (attention_prefill_mma.cu): head_dim 64/128, G <= 64 (sm_80+);
//    - the CUDA-core kernel (attention_tiled.cu) for anything else: head_dim a multiple of 8 up to
//      256, G <= 16.
//
// plan_decode_attention (attention; attention_decode.cu): how the split-KV decode kernel runs the
// batches that attention.cu's plan_attention gives it (one new token per sequence, head_dim 64 or
// 128, at most 8 query heads per KV head; prefill kernels otherwise, as KernelOptions::
// prefill_attention says).
//  * Splits S = ceil(2 x SMs / (B x Hkv)) CTAs per (sequence, KV head), at most
//    max_decode_splits (16, the largest cluster; the most the kernel supports): two CTAs per SM
//    at batch 1, so the chain of DRAM round trips each CTA walks is short. S depends on the batch
//    size alone, so a CUDA graph captured for a batch stays valid at every context length.
//    A split costs a fixed part plus a part per key of its CTA, so beyond 16 splits the fixed part
//    dominates and more splits gain little (bench/RESULTS.md:
//    "decode attention increment at TP=2 by KV splits"); wanting 8 CTAs per SM instead of 2 (two
//    splits at batch 256, TP=2) gained nothing (bench/RESULTS.md: "NANOVLLM_DECODE_WAVES").
//  * Long contexts at small batch: with max_context (the longest context of the batch) at least
//    KernelOptions::long_decode_context and at most kLongDecodeMaxBatch sequences, S is no longer
//    capped by a cluster's 16: it grows to one full wave, floor(R x SMs / (B x Hkv)) with R the
//    split kernel's resident CTAs per SM (occupancy; 2 when unknown), at most long_decode_splits
//    (64, kDecodeMaxSplitsGlobal at most), and the partials go through the merge kernel. At batch
//    1 the cap of 16 left 128 CTAs on 132 SMs, too few loads in flight to read a long KV cache at
//    bandwidth. The best is the largest S that stays one wave, and beyond a wave the tail costs
//    more than the loads gain; at 4K keys the splits gain about nothing, so the rule starts at
//    8192 keys (bench/RESULTS.md: "Long-context decode, batch 1, decode tok/s by KV splits", and
//    "More than one wave of split CTAs still loses").
//    A CUDA graph is captured per context range (decode_context_breaks: the ranges' bounds), so a
//    replay always runs the plan of its batch's longest context.
//  * Merge: the S > 1 splits' partials go through global memory to the merge kernel (one L2 round
//    trip). With decode_cluster on (off by default), on sm_90+, they form one thread-block cluster
//    and merge through distributed shared memory instead, when S is at most the largest cluster the
//    device schedules (cluster_limit; 1 before sm_90). Clusters won while the merge kernel walked
//    the splits one L2 round trip after another; against the one-round merge kernel they lose: the
//    cluster's two barriers and remote loads cost more than that round trip (bench/RESULTS.md:
//    "Decode attention rewritten", "clusters 280.1 / 280.5 vs the merge kernel").
//  * Read-ahead (decode_read_ahead, on by default): at batches of at most kGemvMaxM sequences
//    (the GEMV's, whose weight loads are a chain of short kernels that leave DRAM idle between
//    them), in a step without prefill rows, when the merge kernel runs (S > 1 without clusters),
//    its CTAs ask for the weights the layer reads next (o_proj, the MLP, the next layer's qkv_proj,
//    in that order, Backend::attention's ReadAhead), up to 48% of the L2 (24 MiB of an H100's 50),
//    to be brought into L2 before they wait: DRAM streams them from the end of the key loops
//    while the merges, norms and GEMVs run, and the GEMVs then read L2: batch-1 decode gains most
//    at short contexts, Qwen3-8B less (the budget holds about 70% of its o_proj). Issued by the
//    decode CTAs after their key loops instead, it competes with the CTAs still reading keys and
//    loses at long contexts (bench/RESULTS.md: "Reading the layer's next weights").
//  * Warps: 8 per split CTA (decode_warps 8, default) when 8 warps' softmax states fit 32 KiB of
//    shared memory (8 x G x D floats <= 8192), else 4; unsplit CTAs use 4. 8 warps were faster
//    than 4 or 16 at batch 1 (bench/RESULTS.md: "8 warps; 4 warps 224.0").
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "nanovllm/config/kernel_options.h"

namespace nanovllm::cuda {

// ---- what the kernels support

constexpr int kGemvMaxM = 4;                       // gemv.cu: rows of x
constexpr int kGemvRows = 4;                       // gemv.cu: weight rows per CTA (2 gate + 2 up with SiLU)
constexpr int64_t kGemvNormSmem = 48 << 10;        // gemv.cu norm prologue: x as T x K BF16 in shared memory
constexpr int64_t kGemvMaxDim = int64_t(1) << 30;  // N and K (int indexing)
constexpr int kDecodeMaxSplits = 16;               // attention_decode.cu: a cluster holds at most 16 CTAs
constexpr int kDecodeMaxSplitsGlobal = 128;        // attention_decode.cu: partials merged by attn_merge_kernel
constexpr int64_t kLongDecodeMaxBatch = 16;        // plan_decode_attention: the long-context rule's batches
// attention_decode.cu: 8 warps' softmax states (8 x G x D floats) fit its 32 KiB of shared memory.
constexpr bool decode_eight_warps_fit(int64_t head_dim, int64_t group) { return 8 * group * head_dim <= 8192; }

// ---- linear

enum class LinearKernel {
  Gemv,      // gemv.cu (SiLU and the norm prologue fused as the plan says)
  CublasLt,  // gemm_cublaslt.cu (then silu_and_mul for silu_mul)
  Wgmma,     // gemm_wgmma.cu (its fused gate_up + SiLU form for silu_mul)
};
constexpr int64_t kGemmWgmmaMinRows = 512;    // gemm=wgmma: fewer rows stay on cuBLASLt
constexpr int64_t kGemmWgmmaAutoRows = 4096;  // gemm=auto: the fused epilogues from this many rows
constexpr int64_t kGemmWgmmaAutoMaxK = 2048;  // gemm=auto: and at most this K

// out[T, N] = x[T, K] @ w[N, K]^T; with silu_mul, w has 2N rows [gate; up] and out = silu(gate) * up.
struct LinearProblem {
  int64_t T = 0, N = 0, K = 0;
  bool silu_mul = false;  // linear_silu_mul, add_rms_norm_linear(silu_mul)
  bool f32_out = false;   // F32 output (row-parallel partial sums)
  bool norm = false;      // add_rms_norm_linear: x is first added to the residual and normalized
  bool bf16 = true;       // every operand BF16
  bool aligned16 = true;  // every pointer 16-byte aligned
  bool wgmma = false;     // gemm_wgmma runs on this device and build (CudaBackend::wgmma())
  bool rope = false;      // add_rms_norm_linear_rope: the q/k norm + RoPE + KV store may join the product
  bool add_norm = false;  // linear_add_rms_norm: the residual add + RMSNorm after the product may join it
};

// The GEMV's CTA shape: weight rows per CTA (SiLU: half gate, half up rows).
struct GemvShape {
  int rows = kGemvRows;
};

struct LinearPlan {
  LinearKernel kernel = LinearKernel::CublasLt;
  bool fused_norm = false;  // norm: add + RMSNorm run as the GEMV's prologue (else add_rms_norm first)
  GemvShape gemv;           // kernel Gemv: its CTA shape (gemv_shape)
};

// The GEMV's CTA shape (plan_linear): one row of x without the norm prologue takes CTAs of 2 weight
// rows (SiLU: 1 gate + 1 up), twice the CTAs of the default 4 (each thread then has 2 x 2 chunks of
// 16 bytes in flight before its wait, not 4 x 2): batch-1 decode is faster than with 4 rows, and 8
// rows x 1 chunk or 2 rows x 4 chunks were slower (bench/RESULTS.md:
// "GEMV CTA shape at one row of x"). Several rows of x keep 4 rows (not measured otherwise).
GemvShape gemv_shape(int64_t T, bool norm);

// gemm_heuristic_rows (linear through cuBLASLt; gemm_cublaslt.cu): cuBLASLt's heuristic is asked
// once per bucket of row counts, not per T: T rounded up to 8, 16, 32, 64, then to a multiple of 64
// up to 512, of 256 up to 4096, of 1024 beyond. Its algorithm serves every T of the bucket (after
// cublasLtMatmulAlgoCheck; else T's own heuristic). Mixed steps and prefills of varied lengths see
// a new T almost every step, and the queries (with the first use of each new kernel) cost
// milliseconds in the step that met them (bench/RESULTS.md: "single forward 18.6 ms").
int64_t gemm_heuristic_rows(int64_t T);

// CTAs of the GEMV's grid for this problem (T rows, N outputs; SiLU CTAs take half as many).
int64_t gemv_grid(const LinearProblem& p);

// norm_wave(): CTAs of the norm-prologue GEMV for (T, K, silu_mul) that the GPU holds at once;
// called only where the rule needs it (gemv_norm auto, K <= 2048).
LinearPlan plan_linear(const LinearProblem& p, const KernelOptions& o, const std::function<int64_t()>& norm_wave);
// Whether gemm_wgmma takes p (past the GEMV) under o.gemm: the rule above.
bool gemm_wgmma_applies(const LinearProblem& p, const KernelOptions& o);
// add_rms_norm_linear_rope (qk_norm_rope.cu): add_rms_norm, then gemm_wgmma_rope, the qkv product
// with qk_norm_rope_store in its epilogue, where gemm_wgmma takes the product (p: N the qkv width,
// no SiLU) and the epilogue can: head_dim 128 and an even count of q + k + v heads (a 256-column
// tile is two whole heads), a BF16 KV cache. Else add_rms_norm_linear, then qk_norm_rope_store.
bool linear_rope_fuses(const LinearProblem& p, int64_t head_dim, int64_t heads, bool kv_bf16, const KernelOptions& o);
// linear_add_rms_norm (gemm_cublaslt.cu): gemm_wgmma_add_rms_norm, a row-parallel projection (o_proj,
// down_proj) with the residual add + RMSNorm after it in its epilogue, under KernelOptions::gemm_norm
// where gemm_wgmma takes the product (p: N = H, no SiLU, BF16 out; gemm=auto: from kGemmWgmmaAutoRows
// rows, at any K) and H is a multiple of 256 up to 2,048 (a thread-block cluster of H / 256 CTAs
// owns whole rows). Else the product, then the add + RMSNorm (or the norm fused with the next product).
bool linear_add_norm_fuses(const LinearProblem& p, const KernelOptions& o);

// ---- FP8 weights (linear_quantized; fp8_linear.cu, semantics in backends/fp8_weights.h)
//  * The FP8 GEMV for 1 <= T <= kFp8GemvMaxM rows of BF16 x, K % 16 == 0 (16 codes per 16-byte
//    load), 16-byte aligned operands, scales per output channel or in blocks whose K extent is a
//    multiple of 16: weight-only, one pass over half the bytes of the BF16 weight (batch-1 decode
//    is that pass). Twice the rows of the BF16 GEMV (8): its loads are half as many bytes per row.
//  * Per-channel weights (block_k 0), K and N multiples of 16, fp8_gemm=auto: cuBLASLt's FP8 GEMM on the tensor
//    cores (E4M3 x E4M3 -> BF16/F32, FP32 accumulation) with outer-vector scales (weight scale per
//    output channel x activation scale per token), the activations quantized per token first
//    (quantize_act_fp8_kernel; backends/fp8_weights.h's fake_quantize_activations_fp8 is the host
//    reference): vLLM's online FP8. Half the weight bytes and twice the BF16 tensor-core rate.
//  * Block scales with 128-column blocks (Qwen's FP8 checkpoints: 128 x 128), K % 128 == 0, N % 16
//    == 0, fp8_gemm=auto: the same GEMM with cuBLASLt's VEC128 scales for both operands (the
//    weight's expanded to one per row and 128 columns, the activations quantized per token and 128
//    columns: vLLM's block FP8).
//  * Otherwise (odd shapes; fp8_gemm=dequantize; or cuBLASLt has no FP8 algorithm) the codes are
//    dequantized to a BF16 weight in the step arena and multiplied by cuBLASLt's BF16 GEMM
//    (weight-only like the GEMV; 3 extra bytes of traffic per weight element).
enum class Fp8LinearKernel { Gemv, CublasLtFp8, CublasLtFp8Block, DequantizeGemm };
constexpr int kFp8GemvMaxM = 8;
// CublasLtFp8Block's split of T rows: the VEC128 GEMM takes the first T - T % 4 (its rows of
// activation scales must be 16-byte aligned; odd T found no algorithm on an H100 with cuBLASLt
// 13.0), the FP8 GEMV (weight-only) the last 1-3.
constexpr int64_t fp8_block_gemm_rows(int64_t T) { return T / 4 * 4; }
struct Fp8LinearProblem {
  int64_t T = 0, N = 0, K = 0;
  int64_t block_k = 0;  // of the scales (0: per output channel)
  bool aligned16 = true;
  bool fp8_activations = true;  // KernelOptions::fp8_gemm auto; false (dequantize): weight-only GEMMs
};
Fp8LinearKernel plan_fp8_linear(const Fp8LinearProblem& p);

// ---- group-quantized integer weights (linear_quantized with U4/U8 codes; int_linear.cu, layout in
// int_layout.cuh, semantics in backends/int_weights.h)
//  * The layout prepare_int_weight writes covers groups of a multiple of 16 columns (one tensor-core
//    k-step never straddles a group; K is then a multiple of 16 and the last tile of 64 (U4) or 32
//    (U8) columns is padded); anything else is refused at load (int_layout_supports). Real
//    checkpoints (G 32/64/128 or channel-wise, K a multiple of 128) fit.
//  * The INT GEMV (int_gemv_kernel) takes 1 <= T <= kIntGemvMaxT rows in slices of kIntGemvSlice
//    (the mma's n = 8: one pass over the packed weights per slice, dequantized in registers, the
//    zero subtracted exactly in BF16 pairs and the group scale applied to the F32 partial sums).
//    A U4 pass reads about 0.53 bytes per weight (half a byte of code, 4 bytes of scale and zero
//    per row and group of 128), the dequantize path about 4.5 (codes in, BF16 out and back through
//    the GEMM): four passes stay below it. A first estimate, to be measured (bench/RESULTS.md).
//    KernelOptions::int_gemv picks the GEMV: v1 (int_linear.cu, the passes above) or v2
//    (int_gemv_v2.cu: every T <= kIntGemvMaxT in one pass, int_gemv_ntiles(T) mma n-tiles of 8
//    rows of x sharing each dequantized A fragment, so the codes are read once whatever T is),
//    v3 (int_gemv_v3.cu: v2 in fewer instructions, K split over a cluster for small grids) or v4
//    (int_gemv_v4.cu: v3 on a persistent grid of one wave, where the row blocks exceed one wave;
//    v3 on smaller grids: int_linear.cu).
//  * kIntGemvMaxT < T <= kIntGemmMaxT with KernelOptions::int_gemm auto: the Hopper GEMM
//    (int_gemm_wgmma.cu) where int_gemm_wgmma_applies, else up to kIntGemmMmaMaxT the mma.sync GEMM
//    (int_gemm.cu). Both: CTA tiles of kIntGemmRows weight rows x kIntGemmCols rows of x, the codes read
//    once per tile and dequantized in registers; int_gemm_splits(...) splits K across CTAs when the
//    tiles alone leave SMs idle (F32 partials in the backend's persistent scratch, summed in a fixed
//    order by a second kernel: deterministic, graph-safe). The gated MLP's silu(gate) * up is its
//    epilogue when I is a multiple of kIntGemmRows / 2 (a CTA holds the gate and up halves of its
//    outputs), else the plain GEMM into [T, 2I] and silu_and_mul.
//  * Otherwise (prefill: compute-bound, where cuBLASLt's wgmma GEMM beats mma.sync), and for the
//    gated MLP at GEMV sizes with I not a multiple of 16: the codes are dequantized into a BF16
//    scratch (static, sized at load from the largest layer: graph-safe) and multiplied by
//    cuBLASLt's BF16 GEMM (then silu_and_mul).
constexpr int kIntGemvSlice = 8;      // rows of x per GEMV pass (the mma's n)
constexpr int kIntGemvMaxT = 32;      // rows of x the GEMV takes (in passes of kIntGemvSlice)
constexpr int64_t kIntRowBlock = 16;  // weight rows of a tile (the mma's m)
constexpr int64_t int_tile_k(int bits) { return bits == 4 ? 64 : 32; }
constexpr bool int_layout_supports(int bits, int64_t K, int64_t group) {
  return (bits == 4 || bits == 8) && K > 0 && group >= 16 && group % 16 == 0 && K % group == 0 && K <= kGemvMaxDim;
}
// Rows of x per GEMV call (one pass over the codes each) under the option.
constexpr int64_t int_gemv_slice(IntGemv v) { return v == IntGemv::V1 ? kIntGemvSlice : kIntGemvMaxT; }
// v2's mma n-tiles (8 rows of x each) for a pass of T rows: 1, 2 or 4 (T 17..24 pay a fourth tile
// of repeated rows rather than a fourth instantiation of the kernel).
constexpr int int_gemv_ntiles(int64_t T) { return T <= 8 ? 1 : T <= 16 ? 2 : 4; }
// v3's "wide" form: three CTAs an SM instead of two (its __launch_bounds__; a ring of 6 instead of
// 8: 79 registers), for the plain product at one n-tile (T <= 8) when the row blocks exceed two
// CTAs an SM: Qwen3-8B's qkv (384 row blocks on 132 SMs) then runs in one wave of 24 warps an SM,
// 8.76 -> 6.00 us on an H200 (v4's persistent grid: 8.61); o and down (256 row blocks) are faster
// with two (4.65 / 13.45 us against 5.12 / 14.25; bench/RESULTS.md, issue 45).
// A plain product (no gated MLP) at one mma n-tile (T <= 8): the calls v3's wide form and v5 take.
constexpr bool int_gemv_plain_one_ntile(bool silu, int64_t T) { return !silu && T <= kIntGemvSlice; }
constexpr int kIntGemvV3CtasPerSm = 2;  // __launch_bounds__ of the v3 kernel (wide: 3)
constexpr bool int_gemv_v3_wide(int64_t rows, bool silu, int64_t T, int num_sms) {
  return int_gemv_plain_one_ntile(silu, T) && rows > int64_t(kIntGemvV3CtasPerSm) * (num_sms > 0 ? num_sms : 1);
}
constexpr int int_gemv_v3_ctas_per_sm(bool wide) { return wide ? 3 : kIntGemvV3CtasPerSm; }
// v3 (int_gemv_v3.cu): tiles in flight per warp and row block (its ring; register-bound at 128 per
// thread, two CTAs per SM): 8 at one n-tile (wide: 6), 6 at two, 2 at four; halved for the gated
// MLP's two row blocks and for the general path (per-k-step scales: groups that split a tile, or K
// not a multiple of the tile).
constexpr int int_gemv_v3_ring(int row_blocks, int ntiles, bool general, bool wide = false) {
  const int p = (ntiles == 1 ? (wide ? 6 : 8) : ntiles == 2 ? 6 : 2) / row_blocks / (general ? 2 : 1);
  return p < 1 ? 1 : p;
}
constexpr int kIntGemvV3Warps = 8;      // warps of a v3 CTA (each a contiguous run of K tiles)
constexpr int kIntGemvV3MaxSplits = 8;  // CTAs of a cluster (the portable limit)
// v3's K splits for a call: T rows of x, `outs` outputs (silu: the gated MLP's I), K columns in
// groups of G, `bits` 4 or 8, on `num_sms` SMs; `clusters`: thread-block clusters exist (sm_90+;
// else 1). The S splits of a row block form one cluster and add their partial sums through
// distributed shared memory (fixed order: deterministic, no workspace, graph-safe). Why split:
// a CTA's life is about one DRAM round trip for its ring, so a grid of R row blocks runs
// ceil(R / slots) such rounds; at Qwen3-8B's qkv (384 row blocks on 264 slots of an H200) the
// second round is 45% full and its SMs idle (measured: 64% SM-active). S is the smallest of the
// splits that give every warp the same whole number of tiles, at least half its ring (fewer bytes
// in flight per CTA would starve DRAM), that fills the last wave best (by at least 5 points).
int int_gemv_v3_splits(int64_t T, int64_t outs, bool silu, int64_t K, int64_t G, int bits, int num_sms, bool clusters);
// v4 (int_gemv_v4.cu): v3's arithmetic (one split) on a persistent grid: at most
// kIntGemvV4CtasPerSm CTAs per SM (one wave), CTA c taking row blocks c, c + grid, ..., each warp's
// ring running on from one row block into the next, so a block's reduction and stores overlap the
// next block's loads instead of a new wave's ramp. Its ring: that of v3's two-CTA form (the same
// registers per slot, two CTAs an SM).
constexpr int kIntGemvV4Warps = kIntGemvV3Warps;
constexpr int kIntGemvV4CtasPerSm = kIntGemvV3CtasPerSm;  // __launch_bounds__ of the v4 kernel
constexpr int int_gemv_v4_ring(int row_blocks, int ntiles, bool general) {
  return int_gemv_v3_ring(row_blocks, ntiles, general, /*wide=*/false);
}
// v5 (int_gemv_v5.cu): v4's persistent grid with each warp's ring of tiles in shared memory
// (cp.async) instead of registers, so a thread needs ~64 registers and an SM holds twice the
// warps: 16-warp CTAs where the accumulators allow (one n-tile, or two without the gated MLP),
// else 8, two CTAs an SM. The ring takes up to kIntGemvV5RingBytes of a CTA's shared memory
// (tiles of 512 code bytes and 8 x SG scale bytes per lane and row block, SG = 1, or a word pair
// per k-step where groups split a tile), at most 8 tiles a warp.
constexpr int kIntGemvV5CtasPerSm = 2;
constexpr int kIntGemvV5RingBytes = 72 * 1024;
constexpr int int_gemv_v5_warps(int row_blocks, int ntiles) { return row_blocks * ntiles <= 2 ? 16 : 8; }
// Shared-memory bytes of one ring slot of a warp (all its lanes, all row blocks); sg: scale word
// pairs per tile and lane (1 on the fast path, the tile's k-steps on the general one).
constexpr int int_gemv_v5_slot_bytes(int row_blocks, int sg) { return row_blocks * 32 * (16 + 8 * sg); }
constexpr int int_gemv_v5_ring(int row_blocks, int ntiles, int sg) {
  const int p = kIntGemvV5RingBytes / (int_gemv_v5_warps(row_blocks, ntiles) * int_gemv_v5_slot_bytes(row_blocks, sg));
  return p < 1 ? 1 : p > 8 ? 8 : p;
}
// The reduction's buffers: [bufs][warps][row blocks][8 ntiles x rows][17] floats, double-buffered
// where two take at most 40 KiB.
constexpr int int_gemv_v5_red_bytes(int row_blocks, int ntiles) {
  return int_gemv_v5_warps(row_blocks, ntiles) * row_blocks * 8 * ntiles * 17 * 4;
}
constexpr int int_gemv_v5_red_bufs(int row_blocks, int ntiles) {
  return 2 * int_gemv_v5_red_bytes(row_blocks, ntiles) <= 40 * 1024 ? 2 : 1;
}
constexpr int int_gemv_v5_smem(int row_blocks, int ntiles, int sg) {
  return int_gemv_v5_warps(row_blocks, ntiles) * int_gemv_v5_ring(row_blocks, ntiles, sg) *
             int_gemv_v5_slot_bytes(row_blocks, sg) +
         int_gemv_v5_red_bufs(row_blocks, ntiles) * int_gemv_v5_red_bytes(row_blocks, ntiles);
}
// Under int_gemv=auto: whether v5 runs a call: the plain U4 product at one n-tile (T <= 8) with
// K >= 8192, where each of its 16 warps walks at least 8 tiles of a row block. Measured on an H200
// (bench/RESULTS.md, issue 45): Qwen3-8B's down (K 12,288) 10.56 us against v3's 13.45-14.25; at
// K = 4096 v5 loses (qkv 7.63 against v3 wide 6.00, gate_up 21.28 against v4 17.99, o 4.89 against
// v3 4.65).
constexpr bool int_gemv_v5_applies(bool silu, int64_t T, int64_t K, int bits) {
  return int_gemv_plain_one_ntile(silu, T) && bits == 4 && K >= 8192;
}
// v5's CTAs for `rows` row blocks (silu: gate blocks): one wave, or one per block.
constexpr int64_t int_gemv_v5_grid(int64_t rows, int num_sms) {
  const int64_t slots = int64_t(kIntGemvV5CtasPerSm) * (num_sms > 0 ? num_sms : 1);
  return rows < slots ? rows : slots;
}
// The row blocks of a v3 / v4 GEMV with `outs` outputs (silu: the gated MLP's I, whose gate blocks
// are the CTAs' units; else outputs rounded up to whole blocks).
constexpr int64_t int_gemv_row_blocks(int64_t outs, bool silu) {
  return silu ? outs / kIntRowBlock : (outs + kIntRowBlock - 1) / kIntRowBlock;
}
// Under int_gemv=v4 and auto: whether v4 runs a call of `rows` row blocks (silu: gate blocks) at T
// rows of x, or v3 (whose outputs it equals bit for bit): v4 where the row blocks exceed one wave
// of v3 CTAs (three an SM where v3 can go wide), so that its CTAs walk more than one block each; v3
// on grids of one wave or less (its K splits fill small ones, which v4 lacks).
constexpr bool int_gemv_v4_applies(int64_t rows, bool silu, int64_t T, int num_sms) {
  return rows > int64_t(int_gemv_v3_ctas_per_sm(int_gemv_plain_one_ntile(silu, T))) * (num_sms > 0 ? num_sms : 1);
}
// v4's CTAs for `rows` row blocks (silu: gate blocks) on num_sms SMs: one wave, or one per block.
constexpr int64_t int_gemv_v4_grid(int64_t rows, int num_sms) {
  const int64_t slots = int64_t(kIntGemvV4CtasPerSm) * (num_sms > 0 ? num_sms : 1);
  return rows < slots ? rows : slots;
}
// Which GEMV runs a decode call (V1 .. V5, never Auto): v1, v2, v3 and v5 as the int_gemv option
// says; under auto v5 where its long K runs pay; under auto and v4, v4 where v3's grid would take
// more than one wave, else v3.
constexpr IntGemv int_gemv_pick(IntGemv v, int64_t rows, bool silu, int64_t T, int64_t K, int bits, int num_sms) {
  if (v != IntGemv::V4 && v != IntGemv::Auto) return v;
  if (v == IntGemv::Auto && int_gemv_v5_applies(silu, T, K, bits)) return IntGemv::V5;
  if (int_gemv_v4_applies(rows, silu, T, num_sms)) return IntGemv::V4;
  return IntGemv::V3;
}
// The decoder layer's add + RMSNorm as the prologue of the INT GEMV after it (int_gemv_norm.cuh;
// CudaBackend::add_rms_norm_linear_quantized): every CTA adds x to the residual and normalizes its
// T rows into shared memory (T x int_gemv_norm_ld(K) BF16), and the tiles read x from there. One
// kernel instead of two per norm at batch-1 decode, where the separate add_rms_norm costs ~3 us a
// call (bench/RESULTS.md: "add + RMSNorm 3.1 us x 72"). The v3 / v4 GEMVs' grids are one wave of
// CTAs whose rings of codes are loaded before the prologue, so its L2 reads (2TK bytes a CTA)
// overlap their DRAM traffic. Fused under KernelOptions::gemv_norm auto / always, for v3 / v4 on the
// fast path (K and G multiples of the tile), one mma n-tile of x rows, no act order.
constexpr int64_t kIntGemvNormMaxT = 8;  // one mma n-tile
// The normalized rows' shared memory, at most (with v4's 17.7 KiB of static shared memory, under 48 KiB).
constexpr int64_t kIntGemvNormSmem = 28 << 10;
constexpr int64_t int_gemv_norm_ld(int64_t K) { return K + 16; }  // row stride: B fragments without bank conflicts
// The dynamic shared memory of the prologue's normalized rows: T x int_gemv_norm_ld(K) BF16.
constexpr int64_t int_gemv_norm_smem(int64_t T, int64_t K) { return T * int_gemv_norm_ld(K) * 2; }
// The shapes the prologue takes (the plan's rule below and the kernels' check, int_gemv_norm.cuh:
// int_gemv_norm_ok): 1..kIntGemvNormMaxT rows, K and G multiples of the tile (the fast path), the
// normalized rows within kIntGemvNormSmem.
constexpr bool int_gemv_norm_fits(int64_t T, int64_t K, int64_t G, int bits) {
  return T >= 1 && T <= kIntGemvNormMaxT && K > 0 && G > 0 && K % int_tile_k(bits) == 0 && G % int_tile_k(bits) == 0 &&
         int_gemv_norm_smem(T, K) <= kIntGemvNormSmem;
}
constexpr bool int_gemv_norm_fuses(GemvNormFusion f, IntGemv picked, int64_t T, int64_t K, int64_t G, int bits,
                                   bool act_order) {
  return f != GemvNormFusion::Never && (picked == IntGemv::V3 || picked == IntGemv::V4) &&
         int_gemv_norm_fits(T, K, G, bits) && !act_order;
}
enum class IntLinearKernel { Gemv, Gemm, GemmWgmma, DequantizeGemm };
struct IntLinearProblem {
  int64_t T = 0, N = 0;          // rows of x; outputs (silu_mul: I, the weight having 2I rows)
  bool silu_mul = false;         // linear_silu_mul_quantized
  IntGemm gemm = IntGemm::Auto;  // KernelOptions::int_gemm
  bool wgmma = false;            // int_gemm_wgmma_applies: the Hopper GEMM takes this weight here
};
IntLinearKernel plan_int_linear(const IntLinearProblem& p);

constexpr int64_t kIntGemmMaxT = 256;  // rows of x the tensor-core GEMM takes (above: dequantize + cuBLASLt)
// int_gemm auto: the Hopper GEMM wherever it applies (int_gemm_wgmma_applies); else the mma.sync
// GEMM up to this many rows of x, dequantize + cuBLASLt above. A Qwen3-8B layer's four linears on
// an H200 (bench/RESULTS.md, issue 45, 2026-11-30), wgmma / mma / dequantize / BF16 us: T 64 103.3 /
// 151.7 / 270.5 / 115.1, 128 165.7 / 263.0 / 282.8 / 129.6, 192 263.2 / 448.1 / 317.9 / 166.8, 256
// 291.8 / 479.9 / 312.6 / 166.0 (the GEMMs' time steps with their 64-row column tiles).
constexpr int64_t kIntGemmMmaMaxT = 128;
// The Hopper GEMM (int_gemm_wgmma.cu) takes U4 codes on sm_90a with K a multiple of its 128-column
// stage and each stage in one group (G a multiple of 128) or two (G = 64).
constexpr bool int_gemm_wgmma_applies(int bits, int64_t K, int64_t G, bool sm90a) {
  return sm90a && bits == 4 && K > 0 && K % 128 == 0 && G > 0 && (G == 64 || G % 128 == 0) && K % G == 0;
}
// The Hopper GEMM's thread-block clusters (KernelOptions::int_gemm_cluster): `rows` consecutive row
// tiles of a column tile share its x (each CTA copies kIntGemmCols / rows rows of it into all of them
// by TMA multicast) and `cols` consecutive column tiles of a row tile share its codes and scales
// (each copies 8 / cols of its row blocks, with silu 4 / cols of each half, into all of them).
struct IntGemmCluster {
  int rows = 1, cols = 1;
};
// The option's shapes (config/kernel_options.h: int_gemm_cluster_valid), with silu cols <= 2 (the
// scale rows of one row block are 64 bytes: shared-memory copies stay 128-byte aligned).
constexpr bool int_gemm_cluster_ok(IntGemmCluster c, bool silu) {
  return int_gemm_cluster_valid(c.rows, c.cols) && (!silu || c.cols <= 2);
}
// The cluster for RT row tiles and CT column tiles (silu: fused) within `most` (the kernel
// option): each side the largest of 1, 2, 4 that the tiles fill and int_gemm_cluster_ok allows.
IntGemmCluster plan_int_gemm_cluster(IntGemmCluster most, int64_t RT, int64_t CT, bool silu);
constexpr int64_t kIntGemmRows = 128;  // weight rows (outputs) of a GEMM CTA tile: 4 warps x 32
constexpr int64_t kIntGemmCols = 64;   // rows of x of a CTA tile (8 mma n-tiles per warp)
constexpr int kIntGemmCtasPerSm = 2;   // resident GEMM CTAs per SM (__launch_bounds__ of the kernel)
constexpr int kIntGemmSsCtasPerSm = 1;  // the SS form's (int_gemm_wgmma_ss.cu: 17 warps, 5 stages of 36.5 KB)
// What CTA `bx` (blockIdx.x) of the Hopper GEMM's grid of (RT, CT rounded up to the cluster's sides)
// tiles in clusters `c` owns and copies (the kernel and the plan's tests share it): its tile (rt, ct);
// its cluster rank cr + rows cc (%cluster_ctarank: the grid is whole clusters along x); the CTAs
// that share its x (its column tile: xmask, bit = rank) and its codes (its row tile: cmask); its
// share of x's kIntGemmCols rows (from x_row0, x_rows of them) and of the row blocks (from block0,
// blocks of them; of each half with silu: 4 blocks a half, else 8).
struct IntGemmClusterTile {
  int rt, ct, cr, cc;
  unsigned xmask, cmask;
  int x_row0, x_rows, block0, blocks;
};
constexpr IntGemmClusterTile int_gemm_cluster_tile(int bx, IntGemmCluster c, int CT, bool silu) {
  const int n = c.rows * c.cols, rank = bx % n, q = bx / n;
  const int cr = rank % c.rows, cc = rank / c.rows, CQ = (CT + c.cols - 1) / c.cols;  // CQ: clusters along ct
  unsigned cmask = 0;
  for (int j = 0; j < c.cols; ++j) cmask |= 1u << (cr + c.rows * j);
  const int x_rows = int(kIntGemmCols) / c.rows, blocks = (silu ? 4 : 8) / c.cols;
  return {(q / CQ) * c.rows + cr,
          (q % CQ) * c.cols + cc,
          cr,
          cc,
          ((1u << c.rows) - 1) << (c.rows * cc),
          cmask,
          cr * x_rows,
          x_rows,
          cc * blocks,
          blocks};
}
constexpr int kIntGemmMaxSplits = 16;    // K splits of one tile
constexpr int64_t kIntGemmSplitK = 256;  // fewest columns of K a split takes
// The gated MLP's silu(gate) * up as the GEMM's epilogue: whole half tiles of gate rows.
constexpr bool int_gemm_fuses_silu(int64_t I) { return I > 0 && I % (kIntGemmRows / 2) == 0; }
// The GEMM's CTA tiles of weight rows for `outs` outputs (silu: fused, `outs` = I).
constexpr int64_t int_gemm_row_tiles(int64_t outs, bool silu) {
  return silu ? outs / (kIntGemmRows / 2) : (outs + kIntGemmRows - 1) / kIntGemmRows;
}
// K splits of the GEMM for T rows of x and `outs` outputs (silu: fused) over K columns on num_sms
// SMs: as many as keep every CTA's splits within one wave of kIntGemmCtasPerSm CTAs per SM, at most
// kIntGemmMaxSplits and at least kIntGemmSplitK columns each; 1 when the CTAs fill the wave. A CTA
// covers `cols` rows of x (the wide Hopper GEMM: 2 kIntGemmCols) and an SM holds ctas_per_sm of
// them (the SS form: kIntGemmSsCtasPerSm); the F32 partials never exceed int_gemm_workspace_floats.
int int_gemm_splits(int64_t T, int64_t outs, bool silu, int64_t K, int num_sms, int64_t cols = kIntGemmCols,
                    int ctas_per_sm = kIntGemmCtasPerSm);
// The Hopper GEMM's wide form (int_gemm_wgmma_wide.cu: a CTA takes two column tiles, 128 rows of
// x, so each dequantized A fragment feeds twice the products), never in clusters (KernelOptions::
// int_gemm_cluster 1x1), past one column tile: under int_gemm wgmma_wide for every product; under
// auto for the plain ones (silu false). A Qwen3-8B layer on an H200 (bench/RESULTS.md, issue 45,
// 2026-11-30), 64-row / wide us: qkv T 128 29.96 / 25.05, T 256 48.49 / 46.95; o 20.62 / 20.82,
// 31.86 / 29.31; down 40.67 / 38.40, 74.49 / 63.88; but the gated MLP (N 24,576) 73.96 / 76.45,
// 136.74 / 147.87: at T 192 it pays a whole second column pair (114.05 / 147.31). Four column
// tiles a CTA (m64n256k16, one CTA an SM) were slower past 128 rows (a layer at T 256: 316.3 us
// against 284.3; bench.py 6,082.5 against 6,258.7 output tok/s; 2026-12-01) and were removed.
// Under int_gemm wgmma_ss the wide form's tiles run as int_gemm_wgmma_ss.cu (int_gemm_wgmma_ss):
// the weights dequantized into shared memory by two more warpgroups, SS products: slower (a layer
// at T 256: 317.6 us against 286.4 wide; bench.py 0.86x BF16 against auto's 0.90x; 2026-12-01).
constexpr bool int_gemm_wgmma_wide(IntGemm gemm, int64_t T, IntGemmCluster cluster, bool silu) {
  const bool asked = gemm == IntGemm::WgmmaWide || gemm == IntGemm::WgmmaSs || (gemm == IntGemm::Auto && !silu);
  return asked && T > kIntGemmCols && cluster.rows * cluster.cols == 1;
}
constexpr bool int_gemm_wgmma_ss(IntGemm gemm, int64_t T, IntGemmCluster cluster, bool silu) {
  return gemm == IntGemm::WgmmaSs && int_gemm_wgmma_wide(gemm, T, cluster, silu);
}
// F32 partials the split GEMM may write (one full wave of CTAs of the wide form: two column tiles each).
constexpr int64_t int_gemm_workspace_floats(int num_sms) {
  return int64_t(kIntGemmCtasPerSm) * num_sms * kIntGemmRows * 2 * kIntGemmCols;
}

// ---- attention: which kernel

constexpr int64_t kPrefillTcMaxGroup = 64;  // attention_prefill*.cu: 64 packed query rows per warpgroup
constexpr int64_t kTiledMaxGroup = 16;      // attention_tiled.cu: 16 query rows per CTA
constexpr bool prefill_tc_supports(int64_t head_dim, int64_t group) {
  return (head_dim == 64 || head_dim == 128) && group >= 1 && group <= kPrefillTcMaxGroup;
}

// attention_prefill_wgmma_tma.cu reads a tile of kTmaTileKeys keys as TMA boxes of tma_box_rows(bs) slots:
// the largest power of two dividing both the block size and the tile, so a box never crosses a
// block; boxes of fewer than 8 rows (32 to a tile half) are not worth it.
constexpr int64_t kTmaTileKeys = 128;
constexpr int64_t tma_box_rows(int64_t bs) {
  const int64_t low = bs & -bs;
  return low < kTmaTileKeys ? low : kTmaTileKeys;
}
constexpr bool tma_block_size_ok(int64_t bs) { return bs >= 8 && bs % 8 == 0; }

enum class AttentionKernel { None, Decode, PrefillWgmmaTma, PrefillWgmma, PrefillMma, PrefillTiled };

struct AttentionProblem {
  int64_t num_seqs = 0;
  int64_t leading_single = 0;  // leading sequences with exactly one new token (num_seqs: a decode batch)
  int64_t head_dim = 0, group = 1;
  int64_t block_size = 0;    // of the paged cache
  bool fp8_kv = false;       // an F8E4M3 cache (see plan_attention)
  bool decode_step = false;  // one new token per sequence (AttentionMetadata::is_prefill false; CUDA graphs)
};

struct AttentionPlan {
  int64_t decode_seqs = 0;                       // leading sequences on the decode kernel
  AttentionKernel rest = AttentionKernel::None;  // the kernel of the others (None: there are none)
};

// wgmma: the Hopper kernel runs on this device and build (prefill_attention_wgmma_init()). Throws a
// UserError when the option forces a kernel that cannot run the problem. With fp8_kv (the FP8 KV
// cache) the choice is the same: the decode and mma.sync kernels convert FP8 K/V in registers; for
// the others (TMA/wgmma load BF16 tiles as they are) attention.cu first converts the blocks the
// prefills read into a BF16 scratch cache (kv_fp8_scratch.cu), which costs far less than
// mma.sync's lower rate on long prompts (bench/RESULTS.md: "FP8 KV prefill regression fixed").
// Not in a decode step: its grid would depend on the contexts, which a CUDA graph fixes at capture;
// there the sequences the decode kernel does not take go to mma.sync, and a shape it lacks (head
// dims other than 64/128) is a UserError, which the engine meets at start-up (warm-up, capture).
AttentionPlan plan_attention(const AttentionProblem& p, bool wgmma, const KernelOptions& o);

// ---- attention at decode

// A decode batch: one new token for each of num_seqs sequences.
struct DecodeAttentionProblem {
  int64_t num_seqs = 0;
  int64_t num_heads = 0, num_kv_heads = 0, head_dim = 0;
  int64_t max_context = 0;  // the longest context of the batch (a bound of it under graph capture)
  bool fp8 = false;         // the FP8 KV cache's kernel (its own registers, so its own residency)
  bool mixed_step = false;  // prefill rows follow in the same attention call (no read-ahead)
  int64_t l2_bytes = 0;     // the device's L2 cache (the read-ahead's budget; 0: none)
};

struct DecodeAttentionPlan {
  int splits = 1;                // KV splits S per (sequence, KV head), 1..kDecodeMaxSplitsGlobal
  int warps = 4;                 // warps per CTA: 8 or 4
  bool cluster = false;          // S > 1 merged in a thread-block cluster; else partials + a merge kernel
  int64_t read_ahead_bytes = 0;  // > 0: the merge kernel brings up to this much of the next weights into L2
};

// num_sms: the device's SMs; cluster_limit: the largest cluster of decode CTAs it schedules (1
// without clusters: before sm_90); resident(head_dim, group, warps, fp8): CTAs of that split kernel
// one SM holds at once (the long-context rule; empty: 2).
using DecodeResidency = std::function<int(int64_t head_dim, int64_t group, int warps, bool fp8)>;
DecodeAttentionPlan plan_decode_attention(const DecodeAttentionProblem& p, int num_sms, int cluster_limit,
                                          const KernelOptions& o, const DecodeResidency& resident = {});

// The context lengths at which plan_decode_attention changes its plan for a batch of `batch`
// sequences (whatever the heads): a decode of that batch whose longest context is c runs the plan
// of the range [break_i, break_{i+1}) holding c. The CUDA-graph runner captures a graph per range.
std::vector<int64_t> decode_context_breaks(int64_t batch, const KernelOptions& o);

// ---- q/k norm + RoPE (qk_norm_rope, qk_norm_rope_store; qk_norm_rope.cu)
//  * The head kernel (qk_norm_rope_kernel): a CTA per (token, group of heads), a warp per head
//    walking the heads of its group one after another, 2-byte loads and stores. At decode batches
//    the groups split a token's heads over several CTAs while T x groups fits the SMs (batch-1
//    Qwen3-8B: 5 CTAs of one head per warp), and the cos/sin table is computed before the wait on
//    the qkv GEMV (programmatic dependent launch), so the kernel costs about one DRAM round trip.
//    At prefill sizes each CTA computes the table, then walks 3-5 heads per warp: 194 us per
//    16K-token Qwen3-0.6B layer (1.7 TB/s; bench/RESULTS.md).
//  * The token kernel (qk_norm_rope_tokens.cu): CTAs of `rows` x `tokens_per_thread` whole tokens,
//    a group of `lanes` lanes per head slot (q, k, and with the store v), each lane `vec` adjacent
//    values of each half of the head (8- or 16-byte accesses); every head of a token at once, the
//    loads issued before the table is computed. Applies where head_dim is a multiple of 8 (vec 8
//    where it is a multiple of 16, else 4; lanes = half / vec rounded up to a power of two, at most
//    32) and qkv is 16-byte aligned; slots beyond kRopeTokenMaxThreads threads go to blockIdx.y.
//  * rope_kernel auto: the token kernel where it applies and the head kernel could not give every
//    head a warp of its own (T x ceil(heads / 8) > SMs: its warps would walk heads one after
//    another); the head kernel otherwise. token: the token kernel wherever it applies; head: never.
//  * tokens_per_thread 2 (two tokens' loads in flight per lane) when that still leaves
//    kRopeTokenWaves x SMs CTAs; else 1.
enum class QkNormRopeKernel { Head, Token };
constexpr int kRopeHeadThreads = 256;      // head kernel: 8 warps (128 under 8 heads)
constexpr int kRopeTokenMaxThreads = 512;  // token kernel: threads of a CTA (its __launch_bounds__)
constexpr int kRopeTokenRowThreads = 256;  // token kernel: rows of tokens fill a CTA up to this many threads
constexpr int kRopeTokenMaxTokens = 16;    // token kernel: tokens of a CTA (its cos/sin tables in shared memory)
constexpr int64_t kRopeTokenWaves = 4;     // token kernel: CTAs per SM that two tokens per thread must leave
struct QkNormRopeProblem {
  int64_t T = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0;
  bool store = false;     // qk_norm_rope_store: the v heads are copied into the cache too
  bool aligned16 = true;  // qkv 16-byte aligned
};
struct QkNormRopePlan {
  QkNormRopeKernel kernel = QkNormRopeKernel::Head;
  int threads = kRopeHeadThreads;  // per CTA
  int head_groups = 1;             // head kernel: CTAs per token (grid.y)
  int vec = 8;                     // token kernel: values per lane from each half of a head (8 or 4)
  int lanes = 8;                   // token kernel: lanes per head slot (a power of two, <= 32)
  int slots_per_cta = 0;           // token kernel: head slots a row of a CTA takes
  int slot_splits = 1;             // token kernel: CTAs over a token's slots (grid.y)
  int rows = 1;                    // token kernel: rows of tokens per CTA
  int tokens_per_thread = 1;       // token kernel: 1 or 2
  int64_t ctas = 0;                // grid.x
};
// Whether the token kernel takes this shape.
bool rope_token_applies(const QkNormRopeProblem& p);
QkNormRopePlan plan_qk_norm_rope(const QkNormRopeProblem& p, int num_sms, const KernelOptions& o);

}  // namespace nanovllm::cuda
