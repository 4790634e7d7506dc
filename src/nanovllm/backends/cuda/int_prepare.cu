// Group-quantized integer weights at load on the CUDA backend (AWQ, GPTQ, compressed-tensors:
// backends/int_weights.h):
//  * prepare_int_weight rewrites a layer's canonical codes [N, K] and F32 scale / zero [N, K / G]
//    (host or device) into the layout of int_layout.cuh, with two kernels: repack_int_codes_kernel
//    (one thread per 16-byte lane chunk of the new layout, gathering its 32 (U4) or 16 (U8) codes
//    from rows r0 and r0 + 8 of the canonical codes) and pack_int_scales_kernel (one thread per row
//    and group: the F16 {scale, zero} pair, checking that the zero is an integer of the code range
//    and the scale finite and within F16's range: a flag read back once per layer, at load). It
//    also grows the BF16 scratch of the dequantize path (int_linear.cu) to the largest layer: a
//    persistent buffer, so the path is graph-safe and allocates nothing during a step; the
//    tensor-core GEMM (int_gemm.cu) keeps its split-K partials there, so it is at least that large.
//  * quantize_weight (--load-format dummy with --quantization awq|gptq|compressed-tensors): the
//    formats' usual checkpoints, 4 bits in groups of 128 columns (K when 128 does not divide K),
//    AWQ with zero points, the others symmetric; quantize_int_groups_kernel applies
//    int_quantize_weight's rules (one thread per row and group, the same F32 arithmetic), then
//    prepare_int_weight. A device kernel: Qwen3-8B's 7 G weights quantize in well under a second.
#include <algorithm>
#include <string>

#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/int_layout.cuh"
#include "nanovllm/backends/int_weights.h"

namespace nanovllm {
namespace cuda {
namespace {

// Flags of pack_int_scales_kernel.
constexpr int kBadZero = 1, kBadScale = 2;

// out: uint4 [NB][KT][32] (int_layout.cuh) from canonical codes [N, K] (U4 or U8).
template <int kBits>
__global__ void repack_int_codes_kernel(const uint8_t* __restrict__ codes, uint4* __restrict__ out, int N, int K,
                                        int64_t chunks) {
  pdl_begin();
  constexpr int TK = int_tile_k(kBits), S = TK / kIntStepK;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= chunks) return;
  const int lane = int(i % 32), KT = (K + TK - 1) / TK;
  const int kt = int((i / 32) % KT);
  const int64_t b = i / 32 / KT;
  const int g = lane >> 2, t = lane & 3;
  const int64_t rows[2] = {b * 16 + g, b * 16 + g + 8};
  uint32_t words[4] = {0, 0, 0, 0};
#pragma unroll
  for (int j = 0; j < S; ++j) {
    const int k = kt * TK + kIntStepK * j + 4 * t;  // the step's 4 columns k .. k + 3
    uint32_t v[2];                                  // rows r0, r1: their 4 codes, 4 bits or 8 bits each
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (rows[h] >= N || k >= K) {  // padding
        v[h] = 0;
      } else if (kBits == 4) {
        v[h] = *reinterpret_cast<const uint16_t*>(codes + (rows[h] * K + k) / 2);
      } else {
        v[h] = *reinterpret_cast<const uint32_t*>(codes + rows[h] * K + k);
      }
    }
    if constexpr (kBits == 4) {
      uint32_t w = 0;
#pragma unroll
      for (int nib = 0; nib < 8; ++nib) {
        const uint32_t q = (v[int_u4_slot_row8(nib)] >> (4 * int_u4_slot_e(nib))) & 15u;
        w |= q << (4 * nib);
      }
      words[j] = w;
    } else {
      words[2 * j] = v[0];
      words[2 * j + 1] = v[1];
    }
  }
  out[i] = make_uint4(words[0], words[1], words[2], words[3]);
}

// out: uint32 [NB][NG][16] F16 pairs {scale, zero}; zero null: the midpoint. One thread per (row, group).
__global__ void pack_int_scales_kernel(const float* __restrict__ scale, const float* __restrict__ zero,
                                       uint32_t* __restrict__ out, int N, int NG, int64_t total, float mid, float qmax,
                                       int* __restrict__ flags) {
  pdl_begin();
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int r16 = int(i % 16), gi = int((i / 16) % NG);
  const int64_t b = i / 16 / NG, r = b * 16 + r16;
  float s = 0.f, z = 0.f;
  if (r < N) {
    s = scale[r * NG + gi];
    z = zero ? zero[r * NG + gi] : mid;
    if (!(z >= 0.f && z <= qmax && z == rintf(z))) atomicOr(flags, kBadZero);
    if (!(fabsf(s) <= 65504.f)) atomicOr(flags, kBadScale);  // also NaN
  }
  const __half2 h = __floats2half2_rn(s, z);
  out[i] = *reinterpret_cast<const uint32_t*>(&h);
}

// Canonical codes, scale and zero (zero null: symmetric) of w [N, K] (BF16) in groups of G, as
// int_quantize_weight computes them. One thread per (row, group).
template <int kBits>
__global__ void quantize_int_groups_kernel(const bf16* __restrict__ w, uint8_t* __restrict__ codes,
                                           float* __restrict__ scale, float* __restrict__ zero, int N, int K, int G) {
  pdl_begin();
  const int NG = K / G;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(N) * NG) return;
  const int64_t n = i / NG;
  const int gi = int(i % NG);
  const bf16* x = w + n * K + int64_t(gi) * G;
  const float qmax = float((1 << kBits) - 1), mid = float(1 << (kBits - 1));
  float lo = __bfloat162float(x[0]), hi = lo;
  for (int e = 1; e < G; ++e) {
    const float v = __bfloat162float(x[e]);
    lo = fminf(lo, v), hi = fmaxf(hi, v);
  }
  float s, z;
  if (zero) {  // AutoAWQ: min/max of the group, zero = round(-min / scale)
    s = hi - lo > 0 ? __fdiv_rn(hi - lo, qmax) : 1.0f;
    z = fminf(fmaxf(rintf(__fdiv_rn(-lo, s)), 0.f), qmax);
    zero[i] = z;
  } else {  // GPTQ's symmetric quantizer
    const float amax = fmaxf(fabsf(lo), fabsf(hi));
    s = amax > 0 ? __fdiv_rn(2 * amax, qmax) : 1.0f;
    z = mid;
  }
  scale[i] = s;
  for (int e = 0; e < G; e += 2) {
    uint32_t q[2];
#pragma unroll
    for (int h = 0; h < 2; ++h)
      q[h] = uint32_t(fminf(fmaxf(rintf(__fdiv_rn(__bfloat162float(x[e + h]), s)) + z, 0.f), qmax));
    const int64_t k = n * K + int64_t(gi) * G + e;
    if constexpr (kBits == 4) {
      codes[k / 2] = uint8_t(q[0] | (q[1] << 4));
    } else {
      codes[k] = uint8_t(q[0]);
      codes[k + 1] = uint8_t(q[1]);
    }
  }
}

}  // namespace
}  // namespace cuda

bool CudaBackend::int_weight_prepared(const Tensor& codes, const WeightScales& scales) {
  return (codes.dtype() == DType::U4 || codes.dtype() == DType::U8) && scales.scale.defined() &&
         scales.scale.dtype() == DType::F16 && scales.scale.dim() == 4;
}

void CudaBackend::prepare_int_weight(Tensor& codes, WeightScales& scales) {
  if (int_weight_prepared(codes, scales)) return;  // quantize_weight's output, or prepared twice
  check_int_weight(codes, scales, "cuda prepare_int_weight");
  if (in_step_) throw Error("cuda prepare_int_weight: called during a step (weights are prepared at load)");
  const int bits = codes.dtype() == DType::U4 ? 4 : 8;
  const int64_t N = codes.size(0), K = codes.size(1), G = scales.block_k, NG = K / G;
  const std::string shape =
      std::string(dtype_name(codes.dtype())) + " " + shape_str(codes.shape()) + " in groups of " + std::to_string(G);
  if (!cuda::int_layout_supports(bits, K, G) || N > cuda::kGemvMaxDim)
    throw UserError("cuda: group-quantized weight " + shape +
                    ": the CUDA kernels need a group size that is a multiple of 16");
  auto on_device = [&](const Tensor& t) {
    if (!t.defined() || t.device() == Device::CUDA) return t;
    Tensor d = empty(t.shape(), t.dtype());
    upload(t.raw(), t.dtype(), d);
    return d;
  };
  const Tensor src = on_device(codes), scale = on_device(scales.scale), zero = on_device(scales.zero);
  const int64_t NB = (N + cuda::kIntRowBlock - 1) / cuda::kIntRowBlock;
  const int64_t TK = cuda::int_tile_k(bits), KT = (K + TK - 1) / TK;
  Tensor packed = empty({NB * cuda::kIntRowBlock * KT * TK}, codes.dtype());
  Tensor sz = empty({NB, NG, cuda::kIntRowBlock, 2}, DType::F16);
  Tensor flags = empty({1}, DType::I32);
  const cuda::Stream st = on_stream();
  const int64_t chunks = NB * KT * 32;
  if (chunks > 0) {
    auto* out = static_cast<uint4*>(packed.raw());
    if (bits == 4)
      cuda::launch(cuda::repack_int_codes_kernel<4>, dim3(cuda::ceil_div(chunks, 256)), dim3(256), 0, st,
                   src.data<uint8_t>(), out, int(N), int(K), chunks);
    else
      cuda::launch(cuda::repack_int_codes_kernel<8>, dim3(cuda::ceil_div(chunks, 256)), dim3(256), 0, st,
                   src.data<uint8_t>(), out, int(N), int(K), chunks);
    NV_LAUNCH_CHECK();
    const int64_t total = NB * NG * cuda::kIntRowBlock;
    cuda::launch(cuda::pack_int_scales_kernel, dim3(cuda::ceil_div(total, 256)), dim3(256), 0, st, scale.data<float>(),
                 zero.defined() ? zero.data<float>() : nullptr, sz.data<uint32_t>(), int(N), int(NG), total,
                 int_weight_midpoint(codes.dtype()), float((1 << bits) - 1), flags.data<int32_t>());
    NV_LAUNCH_CHECK();
  }
  int32_t bad = 0;
  download(flags, &bad);  // synchronizes: the canonical tensors may be freed after this
  if (bad & cuda::kBadZero)
    throw UserError("cuda: group-quantized weight " + shape + ": a zero point is not an integer in [0, " +
                    std::to_string((1 << bits) - 1) + "] (the CUDA kernels subtract integer zero points exactly)");
  if (bad & cuda::kBadScale)
    throw UserError("cuda: group-quantized weight " + shape + ": a scale is not finite or exceeds F16's range");
  codes = packed.rows(0, N * K).view({N, K});
  scales.scale = sz;
  scales.zero = Tensor();
  scales.perm = on_device(scales.perm);
  // The dequantize path's BF16 weight (int_linear.cu): one buffer for all layers, as large as the
  // largest; at least the tensor-core GEMM's split-K partials (a wave of F32 tiles, 2 BF16 each).
  const int64_t need = std::max(N * K, 2 * cuda::int_gemm_workspace_floats(num_sms_));
  if (!int_scratch_.defined() || int_scratch_.numel() < need) {
    int_scratch_ = Tensor();
    int_scratch_ = empty({need}, DType::BF16);
  }
}

void CudaBackend::quantize_int_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  if (w.dim() != 2 || w.dtype() != DType::BF16 || w.device() != Device::CUDA)
    throw Error("cuda quantize_weight: w must be a CUDA BF16 [N, K] tensor (got " + std::string(dtype_name(w.dtype())) +
                " " + shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1);
  const int64_t G = K % 128 == 0 ? 128 : K;
  const bool zero_points = q == Quantization::AWQ;
  if (K % 2 != 0 || N > cuda::kGemvMaxDim || K > cuda::kGemvMaxDim)
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": cannot quantize a weight " +
                    shape_str(w.shape()) + " to 4 bits");
  Tensor c = empty({N, K}, DType::U4);
  WeightScales s;
  s.block_n = 1;
  s.block_k = G;
  s.scale = empty({N, K / G}, DType::F32);
  if (zero_points) s.zero = empty({N, K / G}, DType::F32);
  const int64_t groups = N * (K / G);
  if (groups > 0) {
    cuda::launch(cuda::quantize_int_groups_kernel<4>, dim3(cuda::ceil_div(groups, 128)), dim3(128), 0, on_stream(),
                 w.data<cuda::bf16>(), c.data<uint8_t>(), s.scale.data<float>(),
                 zero_points ? s.zero.data<float>() : nullptr, int(N), int(K), int(G));
    NV_LAUNCH_CHECK();
  }
  prepare_int_weight(c, s);
  codes = c;
  scales = s;
}

}  // namespace nanovllm
