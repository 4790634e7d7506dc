// KernelOptions: the tuning knobs of the CUDA kernels, one typed struct in EngineConfig
// (cfg.kernels). The defaults are the measured best (bench/RESULTS.md); the other values exist for
// A/B timing and for tests of the fallback paths. Which kernel runs for a given shape is decided
// from these options by the plan functions of backends/cuda/kernel_plan.h.
//
// Where the values come from, later wins:
//   1. the defaults below;
//   2. environment variables NANOVLLM_<NAME> (apply_kernel_env_overrides), read once by the front
//      end on rank 0, never by the backend: A/B runs such as `NANOVLLM_PDL=0 nanovllm bench ...`
//      (scripts/gpu_bench_ab.sh);
//   3. the CLI's --kernel-options KEY=VALUE[,KEY=VALUE...] (apply_kernel_options).
// Rank 0 sends its options to every tensor-parallel rank with the engine settings
// (engine/tp_protocol.h), so all ranks launch the same kernels and collectives whatever their own
// environment says (ranks that chose differently could hang in a collective).
//
// Keys, environment variables and values (to_string() prints them in the KEY=VALUE form that
// --kernel-options reads back):
//   pdl                NANOVLLM_PDL                 on | off    (also 1 | 0, true | false)
//   gemv_norm          NANOVLLM_GEMV_NORM           auto | never | always   (also 1 | 0 | 2)
//   max_decode_splits  NANOVLLM_DECODE_SPLITS       1 .. 16
//   long_decode_context NANOVLLM_LONG_DECODE_CONTEXT 0 (off) .. 999999 keys
//   long_decode_splits NANOVLLM_LONG_DECODE_SPLITS  1 .. 128
//   decode_cluster     NANOVLLM_DECODE_CLUSTER      on | off
//   decode_warps       NANOVLLM_DECODE_WARPS        4 | 8
//   decode_read_ahead  NANOVLLM_DECODE_READ_AHEAD   on | off
//   p2p_all_reduce     NANOVLLM_P2P_ALLREDUCE       on | off
//   all_reduce_norm    NANOVLLM_ALLREDUCE_NORM      on | off
//   prefill_attention  NANOVLLM_PREFILL_ATTENTION   auto | wgmma_tma | wgmma | mma | tiled
//   prefill_persistent NANOVLLM_PREFILL_PERSISTENT  on | off
//   fp8_gemm           NANOVLLM_FP8_GEMM            auto | dequantize
//   int_gemv           NANOVLLM_INT_GEMV            auto | v1 | v2 | v3 | v4 | v5
//   int_gemm           NANOVLLM_INT_GEMM            auto | mma | wgmma | wgmma_wide | wgmma_ss | dequantize
//   rope_kernel        NANOVLLM_ROPE_KERNEL         auto | head | token
//   gemm               NANOVLLM_GEMM                auto | cublaslt | wgmma
//   gemm_norm          NANOVLLM_GEMM_NORM           on | off
//   gemm_pair          NANOVLLM_GEMM_PAIR           on | off
//   gemm_pingpong      NANOVLLM_GEMM_PINGPONG       auto | on | off
//   norm_fold          NANOVLLM_NORM_FOLD           on | off
// The CPU backend's precision is an engine setting (EngineConfig::cpu_precision, --cpu-precision);
// --kernel-options still takes cpu_precision=fast|exact as its alias (settings.cpp).
#pragma once
#include <functional>
#include <string>

namespace nanovllm {

// add_rms_norm_linear at decode batches (BF16 weights: <= 4 rows; INT4/INT8 codes: <= 8): whether
// the decoder layer's residual add + RMSNorm runs as the prologue of the GEMV that follows it
// instead of as a kernel of its own.
enum class GemvNormFusion {
  Never = 0,   // always a separate add_rms_norm kernel
  Auto = 1,    // BF16: fused for K <= 2048 while the GEMV's grid fits one wave (the measured rule);
               // INT codes: wherever the v3 / v4 GEMV runs it (kernel_plan.h: int_gemv_norm_fuses)
  Always = 2,  // BF16: fused wherever the GEMV can hold the rows of x in 48 KiB of shared memory; INT: as auto
};

// Which kernel computes prefill (and chunked-prefill / mixed-step) attention; decode steps use the
// split-KV decode kernel either way. Read by CudaBackend::attention's plan (attention.cu).
enum class PrefillAttention {
  Auto,      // the fastest that applies: on sm_90 the TMA kernel (block sizes it takes) or the wgmma
             // kernel, else mma.sync tensor cores, else (head dims and GQA groups the tensor-core
             // kernels lack) the CUDA-core kernel
  WgmmaTma,  // FlashAttention-3's structure (attention_prefill_wgmma_tma.cu): as Wgmma, block size a multiple of 8
  Wgmma,     // the wgmma kernel (attention_prefill_wgmma.cu): sm_90 with a build carrying sm_90a
  Mma,       // the mma.sync tensor-core kernel (attention_prefill_mma.cu), where it applies
  Tiled,     // the CUDA-core kernel (attention_tiled.cu): the slow reference
};

// FP8 weights (--quantization fp8; backends/cuda/kernel_plan.h, plan_fp8_linear) in prefills and
// batches of more than the FP8 GEMV's 8 rows.
enum class Fp8Gemm {
  Auto,        // FP8 tensor cores (cuBLASLt) with the activations quantized per token (per-channel
               // weights, vLLM's online FP8) or per token and 128 columns (128 x 128 block weights of
               // FP8 checkpoints): prefill well ahead of the dequantized path (bench/RESULTS.md)
  Dequantize,  // weight-only: codes dequantized to BF16, then the BF16 GEMM (slower; closer to BF16:
               // FP8 activations cost accuracy on random-weight models, bench/RESULTS.md)
};

// The INT4/INT8 GEMV (group-quantized weights at decode batches; backends/cuda/kernel_plan.h,
// plan_int_linear) that multiplies T <= 32 rows of x.
enum class IntGemv {
  V1,    // int_linear.cu: one row block per CTA, passes of 8 rows of x, 4 tiles in flight per warp
  V2,    // int_gemv_v2.cu: all T <= 32 rows in one pass, a ring of up to 8 tiles in flight per warp
  V3,    // int_gemv_v3.cu: v2 with fewer instructions per tile and K split over a cluster of CTAs
  V4,    // int_gemv_v4.cu: v3's outputs (no K split) from a persistent grid, rings running across row
         // blocks, where the row blocks exceed one wave; v3 on the grids of one wave or less
  V5,    // int_gemv_v5.cu: v4's persistent grid with the rings in shared memory (cp.async), twice
         // the warps an SM (every grid)
  Auto,  // per call, the fastest measured (backends/cuda/kernel_plan.h: int_gemv_v5_applies,
         // int_gemv_v4_applies, int_gemv_v3_wide): v5 for long K runs, v4 past one wave of v3, else v3
};

// Group-quantized weights at 33..256 rows of x (backends/cuda/kernel_plan.h, plan_int_linear).
enum class IntGemm {
  Auto,        // per call (kernel_plan.h: plan_int_linear): wgmma where it applies, else mma at T <=
               // kIntGemmMmaMaxT, else dequantize (the default)
  Mma,         // int_gemm.cu: the mma.sync W4A16/W8A16 GEMM, codes dequantized in registers
  Wgmma,       // int_gemm_wgmma.cu: the Hopper W4A16 GEMM (U4, K and G multiples of 64; else mma)
  WgmmaWide,   // wgmma, past 64 rows in its wide form (int_gemm_wgmma_wide.cu: 128 rows of x a CTA)
  WgmmaSs,     // wgmma_wide with the weights dequantized into shared memory by two more warpgroups
               // and multiplied by SS wgmma (int_gemm_wgmma_ss.cu); measured slower than auto
  Dequantize,  // the codes dequantized into a BF16 scratch, then cuBLASLt's BF16 GEMM
};

// The fused q/k RMSNorm + RoPE (+ KV-cache store) kernel (qk_norm_rope.cu; backends/cuda/kernel_plan.h,
// plan_qk_norm_rope). Both compute the same bits.
enum class RopeKernel {
  Auto,   // the token kernel where the head kernel's warps would walk more than one head each
          // (prefills, large batches) and it applies; the head kernel otherwise (decode)
  Head,   // qk_norm_rope_kernel: a CTA per (token, head group), a warp per head, 2-byte accesses
  Token,  // qk_norm_rope_tokens.cu: CTAs of whole tokens, a few lanes per head with 8- or 16-byte
          // accesses, all heads at once (where it applies: head_dim a multiple of 8; else head)
};

// The BF16 GEMM of linear / linear_silu_mul / add_rms_norm_linear past the GEMV's rows
// (kernel_plan.h: plan_linear).
enum class Gemm {
  Auto,      // the faster by the measured rule (kernel_plan.h: gemm_wgmma_applies)
  CublasLt,  // cuBLASLt's GEMM (gemm_cublaslt.cu), then silu_and_mul for the gated MLP
  Wgmma,     // our Hopper GEMM (gemm_wgmma.cu) where it applies, its fused gate_up + SiLU for the
             // gated MLP; cuBLASLt elsewhere. Needs an sm_90 GPU and a build with sm_90a code
};

// Which of our Hopper GEMM's persistent forms run ping-pong (gemm_wgmma.h: the PingPong forms: CTA
// tiles of 64 rows, the two compute warpgroups taking turns tile by tile, each's epilogue under the
// other's products) instead of both warpgroups on one 128-row tile, whose epilogue stalls the tensor
// cores. The ping-pong mainloop is slower (0.87-0.95x cuBLASLt in pairs against 0.98-1.00x), so it
// pays only where the epilogue is long.
enum class GemmPingPong {
  Auto,  // the qkv form (q/k norm + RoPE + KV store in its epilogue): 231.8 vs 254.4 us a call on an
         // H200; gate_up + SiLU keeps its epilogue warp (312.9 vs 326.0 us ping-pong), plain products one
         // tile (bench/RESULTS.md: "ping-pong")
  On,    // every persistent form
  Off,   // none
};

struct KernelOptions {
  // Programmatic dependent launch of every kernel (sm_90+; ignored before): a kernel's launch and
  // set-up overlap its predecessor's tail (faster batch-1 decode). off: plain stream order.
  bool pdl = true;
  // See GemvNormFusion. never / always exist for A/B timing (always is slower at K = 4096).
  GemvNormFusion gemv_norm = GemvNormFusion::Auto;
  // Most KV splits (CTAs per sequence and KV head) of split-KV decode attention, 1..16; the plan
  // uses fewer when the batch already fills the GPU. 1: no split (one CTA walks the whole context).
  int max_decode_splits = 16;
  static constexpr int kMaxDecodeSplits = 16;  // the decode kernel's limit (kernel_plan.h: kDecodeMaxSplits)
  // Long contexts at small batch (kernel_plan.h, plan_decode_attention): a decode batch of at most
  // 16 sequences whose longest context has at least long_decode_context keys is split into one
  // full wave of CTAs, at most long_decode_splits per (sequence, KV head), partials merged by a
  // merge kernel beyond a cluster's 16, so that enough loads are in flight to read the KV cache
  // near bandwidth (kernel_plan.h says how the wave is sized). 0: never.
  int long_decode_context = 8192;
  int long_decode_splits = 64;
  static constexpr int kMaxLongDecodeSplits = 128;  // kernel_plan.h: kDecodeMaxSplitsGlobal
  // on (sm_90+): the splits of a (sequence, KV head) merge inside one thread-block cluster through
  // distributed shared memory. off (default): partials through global memory and the merge
  // kernel in one L2 round trip, which is faster than the cluster's barriers and remote loads
  // (bench/RESULTS.md).
  bool decode_cluster = false;
  // Warps per split decode CTA: 8, or 4. Unsplit CTAs, and group sizes whose 8 warps' softmax
  // states do not fit 32 KiB of shared memory, use 4 either way.
  int decode_warps = 8;
  // on (sm_90+): at small decode batches the attention's merge kernel brings the layer's next
  // weights into L2 (kernel_plan.h: read-ahead). off: not.
  bool decode_read_ahead = true;
  // Tensor parallelism on CUDA: all-reduces of at most 64 KiB (decode) by the one-shot NVLink peer
  // kernel instead of NCCL, whose ring costs more for such small messages. off: NCCL.
  bool p2p_all_reduce = true;
  // Tensor parallelism on CUDA: the row-parallel all-reduce fused with the residual add + RMSNorm
  // that follows it (one P2P kernel instead of three; needs p2p_all_reduce). off: separate ops.
  bool all_reduce_norm = true;
  // See PrefillAttention.
  PrefillAttention prefill_attention = PrefillAttention::Auto;
  // on: the TMA prefill attention kernel runs a persistent grid (one CTA an SM walking the work
  // items, longest tiles first, each CTA's next Q loaded under its current item). off: one CTA an
  // item (bench/RESULTS.md has both).
  bool prefill_persistent = true;
  // See Fp8Gemm.
  Fp8Gemm fp8_gemm = Fp8Gemm::Auto;
  // See IntGemv. v3: Qwen3-8B AWQ batch-1 decode 367 tok/s against v2's 326 (gate_up 1.38x, down
  // 1.10x, o 1.00x at T = 1; 1.1-3.6x at T 16-32), outputs within BF16 rounding of v2's (H200,
  // bench/RESULTS.md). v2: v1's outputs bit for bit.
  IntGemv int_gemv = IntGemv::Auto;  // measured: bench/RESULTS.md (issue 45, 2026-11-30)
  // See IntGemm. auto: bench.py's workload on Qwen3-8B AWQ decodes in 18.3 s with the Hopper GEMM
  // against 20.0 s with mma / dequantize by T (BF16: 16.0 s; H200, bench/RESULTS.md, issue 45).
  IntGemm int_gemm = IntGemm::Auto;
  // The Hopper INT GEMM's thread-block clusters, at most ROWSxCOLS (int_gemm_cluster=RxC; each 1, 2
  // or 4, at most 8 CTAs): row tiles of a cluster share each tile of x and column tiles share each
  // tile of codes, each CTA copying its share into all of them by TMA multicast, so the bytes into
  // shared memory (x, BF16, is two thirds of them) fall. The plan takes fewer where the tiles do not
  // fill them (kernel_plan.h: plan_int_gemm_cluster). 1x1: no clusters.
  int int_gemm_cluster_rows = 1;
  int int_gemm_cluster_cols = 1;
  // See RopeKernel.
  RopeKernel rope_kernel = RopeKernel::Auto;
  // See Gemm.
  Gemm gemm = Gemm::Auto;
  // on: where our Hopper GEMM may take o_proj / down_proj (gemm), the residual add + RMSNorm after
  // them run in its epilogue (gemm_wgmma_norm.cu; kernel_plan.h: linear_add_norm_fuses). off (the
  // default, measured faster): cuBLASLt's product, then the add_rms_norm kernel. On an H200 the fused
  // kernel took 199.8 us a call against 118.1 + 38.1 (bench/RESULTS.md: "add + RMSNorm epilogue").
  bool gemm_norm = false;
  // on (the default): our Hopper GEMM's persistent forms (the plain TMA-store form, gate_up + SiLU,
  // the qkv form) run on thread-block clusters of two CTAs that share each weight stage, loaded once
  // from L2 and multicast to both (gemm_wgmma.h: the Pair forms), where the device holds such pairs.
  // off: one CTA a tile, each loading its own. On an H200: the forms at parity in gemm_bench,
  // embeddings +0.4% (bench/RESULTS.md: "CTA pairs").
  bool gemm_pair = true;
  // See GemmPingPong.
  GemmPingPong gemm_pingpong = GemmPingPong::Auto;
  // on: the decoder layers' input and post-attention RMSNorm weights are folded into the columns of
  // the projection after them at load (BF16 weights, one rank, dense layers: models/norm_fold.h),
  // so that where our Hopper GEMM takes that projection (gemm auto or wgmma, prefill sizes) the
  // residual add joins the row-parallel product before it (cuBLASLt's C input) and the norm's
  // 1 / rms scales the product's rows in its epilogue: no add_rms_norm kernel (two a layer). Other
  // sizes run the usual kernels with a unit norm weight. The outputs differ from off's within a BF16
  // rounding (the weights are rounded once more). off (the default): on an H200, embeddings +4.0%
  // (1,086 against 1,045 inputs/s), but at Qwen3-0.6B size, through 28 random layers, reranker and
  // classifier scores land 1.4x / 2x further from the FP32 reference, past the pooling test's bar
  // (bench/RESULTS.md: "norm fold").
  bool norm_fold = false;

  // Throws UserError naming the field when a value is out of range.
  void validate() const;
  // "pdl=on gemv_norm=auto max_decode_splits=16 ...": every option, in the KEY=VALUE form that
  // apply_kernel_options reads; `sep` between the pairs.
  std::string to_string(const std::string& sep = " ") const;
};
bool operator==(const KernelOptions& a, const KernelOptions& b);  // (C++17 here: nvcc includes this)
// "v1" .. "v5", "auto": the int_gemv value as --kernel-options spells it.
const char* int_gemv_name(IntGemv g);
const char* int_gemm_name(IntGemm g);
const char* gemm_name(Gemm g);
const char* gemm_pingpong_name(GemmPingPong g);
// int_gemm_cluster's rows x cols: each 1, 2 or 4, at most 8 CTAs (the portable cluster size; the
// kernel's further rule: backends/cuda/kernel_plan.h, int_gemm_cluster_ok).
constexpr bool int_gemm_cluster_valid(int rows, int cols) {
  auto side = [](int v) { return v == 1 || v == 2 || v == 4; };
  return side(rows) && side(cols) && rows * cols <= 8;
}
inline bool operator!=(const KernelOptions& a, const KernelOptions& b) { return !(a == b); }

// Applies "KEY=VALUE[,KEY=VALUE...]" (the CLI's --kernel-options; the values of the table above);
// throws UserError naming --kernel-options for a pair without '=', an unknown key or a bad value.
void apply_kernel_options(KernelOptions& o, const std::string& spec);

// Applies the NANOVLLM_* environment overrides that `getenv` returns (std::getenv in the CLI; a
// map in tests); a variable that is unset or empty changes nothing. Throws UserError naming the
// variable for a bad value.
using EnvLookup = std::function<const char*(const char*)>;
void apply_kernel_env_overrides(KernelOptions& o, const EnvLookup& getenv);

}  // namespace nanovllm
