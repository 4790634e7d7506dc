// FP8 (E4M3) weights on the GPU (--quantization fp8, Qwen's FP8 checkpoints; format and semantics
// in backends/fp8_weights.h): out[T, N] = x[T, K] @ value[N, K]^T with value = code x scale, BF16 x,
// FP32 accumulation. The GEMV and the dequantize path are weight-only (x is not quantized), as the
// CPU oracle computes; the FP8 GEMM (fp8_gemm=auto) quantizes x per token as well.
//
// Decode (T <= kFp8GemvMaxM, plan_fp8_linear in kernel_plan.h): fp8_gemv_kernel, gemv.cu's
// structure over codes: a CTA of 4 warps owns 2 weight rows (kRows), its 128 lanes stride K in
// 16-byte chunks of 16 codes (half the bytes of gemv.cu's 8 BF16 values per chunk), two chunks of
// every row in flight per lane, and the first ones issued before griddepcontrol.wait (weights are
// never written by the previous kernel, so their DRAM latency overlaps its tail). The scales load
// with the codes: a scale fetched where it is used (per chunk for blocks, after the reduction per
// channel) put a dependent load into every CTA's critical path (bench/RESULTS.md:
// "The FP8 GEMV's scales now load with its codes"). Per-channel scales multiply each row's sum once
// at the end; block scales (128 x 128) multiply each chunk's 16-term partial sum (a chunk never
// straddles a block: block_k % 16 == 0). Batch-1 decode is one pass over the weight bytes: FP8
// halves them.
// With silu (linear_silu_mul_quantized) a CTA takes gate row n and up row I + n and writes
// silu(gate) * up: the MLP's activation in the GEMV's epilogue.
// Larger T: cuBLASLt's FP8 GEMM (fp8_gemm_cublaslt.cu) with per-token activation scales for
// per-channel weights, per-token-and-128-column ones for 128 x 128 block weights; the rest (odd
// shapes, fp8_gemm=dequantize): dequantize_fp8_kernel writes the BF16 weight (value rounded to
// BF16) into the step arena and cuBLASLt's BF16 GEMM multiplies it.
// U4/U8 codes (group-quantized integer weights) are sent on to int_linear.cu / int_prepare.cu.
// quantize_weight: quantize_rows_fp8_kernel, one CTA per row: scale = amax / 448 (1 for a zero
// row), code = rn_satfinite(w / scale): bit-equal to the CPU's codes from the same BF16 weight.
#include <string>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/cuda/fp8.cuh"
#include "nanovllm/backends/fp8_weights.h"

namespace nanovllm {
namespace cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
// Weight rows per CTA: 2, not gemv.cu's 4. Each thread's unpack + FMA burst after its loads land is
// the long pole of these one-wave kernels (ncu: under one eligible warp per scheduler;
// bench/RESULTS.md: "Where Qwen3-8B batch-1 `-q fp8` decode goes"); 2 rows halve the burst and the
// registers (more CTAs per SM), and batch-1 decode is faster (bench/RESULTS.md:
// "FP8 GEMV with 2 weight rows per CTA").
constexpr int kRows = 2;

// x: [M, K] BF16; w: [N, K] codes ([2N, K] with kSilu: gate rows, then up rows); scale:
// [ceil(rows / block_n), KB] F32 with KB = ceil(K / block_k) (kBlock) or 1 (per channel: block_k 0).
// kSilu: out[m, n] = silu(x w_gate[n]^T) * (x w_up[n]^T), a CTA taking gate row n and up row N + n
// (gemv.cu's silu_mul: BF16 rounding of gate, up, silu and the product, as silu_and_mul after a
// BF16 GEMM).
template <int M, bool kBlock, bool kSilu, class OutT>
__global__ void __launch_bounds__(kThreads)
    fp8_gemv_kernel(const bf16* __restrict__ x, const uint8_t* __restrict__ w, const float* __restrict__ scale,
                    OutT* __restrict__ out, int N, int K, int block_n, int block_k) {
  __shared__ float red[kWarps][M][kRows];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  constexpr int kOuts = kSilu ? kRows / 2 : kRows;  // output columns per CTA
  const int n0 = blockIdx.x * kOuts;
  const int KC = K / 16;  // 16-byte chunks of codes per row
  const uint4* xv = reinterpret_cast<const uint4*>(x);
  const uint4* wv = reinterpret_cast<const uint4*>(w);
  int rows[kRows];  // weight rows; past N re-read row N-1 (valid memory; results dropped)
#pragma unroll
  for (int r = 0; r < kRows; ++r) rows[r] = min(n0 + r % kOuts, N - 1) + (kSilu && r >= kOuts ? N : 0);
  int64_t row[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row[r] = int64_t(rows[r]) * KC;

  const int KB = kBlock ? (K + block_k - 1) / block_k : 1;
  const float* srow[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) srow[r] = scale + int64_t(rows[r] / block_n) * KB;

  // Weight chunks c0 and c0 + kThreads of each row, and with block scales their scales (issued with
  // the codes, so that their latency is not added to the unpack + FMA burst after the codes land).
  uint4 wq[2][kRows];
  float ws[2][kRows];
  auto load_w = [&](int c0) {
    const bool two = c0 + kThreads < KC;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      wq[0][r] = c0 < KC ? __ldg(wv + row[r] + c0) : make_uint4(0, 0, 0, 0);
      wq[1][r] = two ? __ldg(wv + row[r] + c0 + kThreads) : make_uint4(0, 0, 0, 0);
      if constexpr (kBlock) {
        ws[0][r] = c0 < KC ? __ldg(srow[r] + (c0 * 16) / block_k) : 0.f;
        ws[1][r] = two ? __ldg(srow[r] + ((c0 + kThreads) * 16) / block_k) : 0.f;
      }
    }
  };
  load_w(threadIdx.x);  // before the wait: weights and scales are not written by the previous kernel
  // Per-channel scales of the CTA's rows, for the epilogue: loaded now, not after the reduction
  // (a dependent DRAM load at the end of every CTA; the file comment says why).
  float row_scale[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) row_scale[r] = kBlock ? 1.f : __ldg(srow[r]);
  pdl_begin();

  float acc[M][kRows];
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) acc[m][r] = 0.f;

  for (int c0 = threadIdx.x; c0 < KC; c0 += 2 * kThreads) {
    if (c0 != int(threadIdx.x)) load_w(c0);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
      const int c = c0 + u * kThreads;
      if (c >= KC) break;
      float wf[kRows][16];
      float sc[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        unpack16_e4m3(wq[u][r], wf[r]);
        sc[r] = kBlock ? ws[u][r] : 1.f;
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[16];
        const int64_t xc = int64_t(m) * (K / 8) + 2 * c;
        unpack8(__ldg(xv + xc), xf);
        unpack8(__ldg(xv + xc + 1), xf + 8);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float p = 0.f;
#pragma unroll
          for (int e = 0; e < 16; ++e) p = fmaf(xf[e], wf[r][e], p);
          acc[m][r] = kBlock ? fmaf(p, sc[r], acc[m][r]) : acc[m][r] + p;
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m)
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float v = warp_sum(acc[m][r]);
      if (lane == 0) red[warp][m][r] = v;
    }
  __syncthreads();
  if (threadIdx.x < M * kOuts) {
    const int m = threadIdx.x / kOuts, r = threadIdx.x % kOuts;
    if (n0 + r < N) {
      float s = 0.f, u = 0.f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) {
        s += red[wi][m][r];
        if constexpr (kSilu) u += red[wi][m][r + kOuts];
      }
      static_assert(kRows == 2, "the epilogue picks one of two row scales");
      if constexpr (!kBlock) {
        s *= kSilu || r == 0 ? row_scale[0] : row_scale[1];
        if constexpr (kSilu) u *= row_scale[1];
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

// out[n][k] = bf16(e4m3(code[n][k]) x scale): the weight for cuBLASLt's BF16 GEMM. One thread per 8
// codes; K % 8 == 0.
__global__ void dequantize_fp8_kernel(const uint8_t* __restrict__ w, const float* __restrict__ scale,
                                      bf16* __restrict__ out, int64_t N, int K, int block_n, int block_k) {
  pdl_begin();
  const int KC = K / 8, KB = block_k ? (K + block_k - 1) / block_k : 1;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= N * KC) return;
  const int64_t n = i / KC;
  const int c = int(i % KC);
  float f[8];
  unpack8_e4m3(__ldg(reinterpret_cast<const uint2*>(w) + i), f);
  const float s = __ldg(scale + (n / block_n) * KB + (block_k ? (c * 8) / block_k : 0));
#pragma unroll
  for (int e = 0; e < 8; ++e) f[e] *= s;
  reinterpret_cast<uint4*>(out)[i] = pack8(f);
}

// Row n of w [N, K] (BF16) -> codes and scale[n] (per-channel FP8). One CTA per row.
__global__ void quantize_rows_fp8_kernel(const bf16* __restrict__ w, uint8_t* __restrict__ codes,
                                         float* __restrict__ scale, int K) {
  __shared__ float red[32];
  pdl_begin();
  const bf16* r = w + int64_t(blockIdx.x) * K;
  float amax = 0.f;
  for (int k = threadIdx.x; k < K; k += blockDim.x) amax = fmaxf(amax, fabsf(__bfloat162float(r[k])));
  amax = warp_max(amax);
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = amax;
  __syncthreads();
  amax = 0.f;
  for (int i = 0; i < int(blockDim.x >> 5); ++i) amax = fmaxf(amax, red[i]);
  const float s = amax > 0.f ? amax / 448.0f : 1.0f;  // fp8_row_scale
  for (int k = threadIdx.x; k < K; k += blockDim.x)
    codes[int64_t(blockIdx.x) * K + k] = float_to_e4m3(__bfloat162float(r[k]) / s);
  if (threadIdx.x == 0) scale[blockIdx.x] = s;
}

}  // namespace
}  // namespace cuda

// FP8 on sm_89+; group-quantized integer weights (int_prepare.cu, int_linear.cu) on sm_80+ (mma.sync
// with BF16 operands).
bool CudaBackend::supports_quantization(Quantization q) const {
  return q == Quantization::None || (q == Quantization::FP8 && sm_ >= 89) || (is_int_weight_only(q) && sm_ >= 80);
}

static void require_fp8(int sm) {
  if (sm < 89)
    throw UserError(
        "--quantization fp8: FP8 weights need a GPU with FP8 support (sm_89 or newer: Ada, Hopper); this is sm_" +
        std::to_string(sm) + " (use --quantization none and a BF16 checkpoint)");
}

void CudaBackend::quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  if (is_int_weight_only(q) && sm_ >= 80) return quantize_int_weight(w, q, codes, scales);
  if (q != Quantization::FP8) return Backend::quantize_weight(w, q, codes, scales);
  require_fp8(sm_);
  if (w.dim() != 2 || w.dtype() != DType::BF16)
    throw Error("cuda quantize_weight: w must be BF16 [N, K] (got " + std::string(dtype_name(w.dtype())) + " " +
                shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1);
  codes = empty({N, K}, DType::F8E4M3);
  scales = WeightScales{empty({N, 1}, DType::F32), 1, 0};
  if (N == 0 || K == 0) return;
  cuda::launch(cuda::quantize_rows_fp8_kernel, dim3(unsigned(N)), dim3(256), 0, on_stream(), w.data<cuda::bf16>(),
               codes.data<uint8_t>(), scales.scale.data<float>(), int(K));
  NV_LAUNCH_CHECK();
}

namespace {

// The FP8 GEMV plan's problem for x [T, K] and codes [N, K]; throws for shapes no path takes.
cuda::Fp8LinearProblem fp8_problem(const Tensor& x, const Tensor& w, const WeightScales& scales, Fp8Gemm mode) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (K % 8 != 0 || K > cuda::kGemvMaxDim || N > cuda::kGemvMaxDim)
    throw Error("linear (FP8 weights): K must be a multiple of 8 (got [" + std::to_string(N) + ", " +
                std::to_string(K) + "])");
  cuda::Fp8LinearProblem p;
  p.T = T, p.N = N, p.K = K, p.block_k = scales.block_k;
  p.fp8_activations = mode == Fp8Gemm::Auto;
  p.aligned16 = cuda::aligned16({x.raw(), w.raw()});
  return p;
}

// fp8_gemv_kernel over x [T <= kFp8GemvMaxM, K] into out [T, outs] (outs = N, or I = N / 2 with silu).
void launch_fp8_gemv(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out, bool silu,
                     cuda::Stream stream) {
  const int64_t T = x.size(0), K = x.size(1), outs = out.size(1);
  const int bn = int(scales.block_n), bk = int(scales.block_k);
  const unsigned grid = cuda::ceil_div(outs, silu ? cuda::kRows / 2 : cuda::kRows);
  const auto* xb = x.data<cuda::bf16>();
  const auto* wc = w.data<uint8_t>();
  const float* sc = scales.scale.data<float>();
  auto pick = [&](auto m_tag) {
    constexpr int kM = decltype(m_tag)::value;
    auto go = [&](auto kernel, auto* o) {
      cuda::launch(kernel, grid, cuda::kThreads, 0, stream, xb, wc, sc, o, int(outs), int(K), bn, bk);
    };
    const bool f32 = out.dtype() == DType::F32;
    if (silu && bk)
      go(cuda::fp8_gemv_kernel<kM, true, true, cuda::bf16>, out.data<cuda::bf16>());
    else if (silu)
      go(cuda::fp8_gemv_kernel<kM, false, true, cuda::bf16>, out.data<cuda::bf16>());
    else if (bk && f32)
      go(cuda::fp8_gemv_kernel<kM, true, false, float>, out.data<float>());
    else if (bk)
      go(cuda::fp8_gemv_kernel<kM, true, false, cuda::bf16>, out.data<cuda::bf16>());
    else if (f32)
      go(cuda::fp8_gemv_kernel<kM, false, false, float>, out.data<float>());
    else
      go(cuda::fp8_gemv_kernel<kM, false, false, cuda::bf16>, out.data<cuda::bf16>());
  };
  cuda::with_batch<cuda::kFp8GemvMaxM>(T, pick);
  NV_LAUNCH_CHECK();
}

void check_fp8_operands(const Tensor& x, const Tensor& w, const WeightScales& scales, const Tensor& out, int sm) {
  require_fp8(sm);
  check_fp8_weight(w, scales, "cuda linear");
  if (x.dtype() != DType::BF16 || (out.dtype() != DType::BF16 && out.dtype() != DType::F32))
    throw Error(std::string("linear (FP8 weights): x must be BF16, out BF16 or F32 (got ") + dtype_name(x.dtype()) +
                ", " + dtype_name(out.dtype()) + ")");
}

}  // namespace

void CudaBackend::linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_linear(x, w, out);
  if (w.dtype() == DType::U4 || w.dtype() == DType::U8) return linear_int(x, w, scales, out, false);
  if (w.dtype() != DType::F8E4M3) return Backend::linear_quantized(x, w, scales, out);
  check_fp8_operands(x, w, scales, out, sm_);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0 || N == 0) return;
  const cuda::Fp8LinearProblem p = fp8_problem(x, w, scales, options_.fp8_gemm);
  const cuda::Fp8LinearKernel kernel = cuda::plan_fp8_linear(p);
  if (kernel == cuda::Fp8LinearKernel::Gemv) return launch_fp8_gemv(x, w, scales, out, false, on_stream());
  if (kernel == cuda::Fp8LinearKernel::CublasLtFp8 && linear_fp8_cublaslt(x, w, scales, out)) return;
  if (kernel == cuda::Fp8LinearKernel::CublasLtFp8Block) {
    const int64_t T4 = cuda::fp8_block_gemm_rows(T);  // the GEMM's rows; the GEMV takes the rest
    Tensor head = out.rows(0, T4);
    if (T4 > 0 && linear_fp8_block_cublaslt(x.rows(0, T4), w, scales, head)) {
      if (T4 < T) {
        Tensor tail = out.rows(T4, T);
        launch_fp8_gemv(x.rows(T4, T), w, scales, tail, false, on_stream());
      }
      return;
    }
  }
  // The BF16 weight lives in the step arena until this GEMM is done (graph-safe: no cudaMalloc
  // inside a captured step once a warm-up has sized the arena).
  Tensor wb = empty({N, K}, DType::BF16);
  const int64_t chunks = N * (K / 8);
  cuda::launch(cuda::dequantize_fp8_kernel, dim3(cuda::ceil_div(chunks, 256)), dim3(256), 0, on_stream(),
               w.data<uint8_t>(), scales.scale.data<float>(), wb.data<cuda::bf16>(), N, int(K), int(scales.block_n),
               int(scales.block_k));
  NV_LAUNCH_CHECK();
  linear(x, wb, out);
}

// Decode rows (the FP8 GEMV's plan): the gated activation in the GEMV's epilogue, one kernel and
// no [T, 2I] intermediate; otherwise the default (the GEMM, then silu_and_mul).
void CudaBackend::linear_silu_mul_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_linear_silu_mul(x, w, out);
  if (w.dtype() == DType::U4 || w.dtype() == DType::U8) return linear_int(x, w, scales, out, true);
  if (w.dtype() != DType::F8E4M3 || out.dtype() != DType::BF16 || x.size(0) == 0)
    return Backend::linear_silu_mul_quantized(x, w, scales, out);
  check_fp8_operands(x, w, scales, out, sm_);
  if (cuda::plan_fp8_linear(fp8_problem(x, w, scales, options_.fp8_gemm)) != cuda::Fp8LinearKernel::Gemv)
    return Backend::linear_silu_mul_quantized(x, w, scales, out);
  launch_fp8_gemv(x, w, scales, out, true, on_stream());
}

}  // namespace nanovllm
