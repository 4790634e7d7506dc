// Group-quantized integer weights on the CPU backend (awq, gptq, compressed-tensors: U4 / U8 codes in
// the canonical layout of backends/int_weights.h, which is also this backend's kernel layout).
//   linear_int: the exact reference. x [T, K] is gathered by perm (act order) once, each thread
//     dequantizes 64 rows of codes at a time to F32 (value = (code - zero) * scale) and multiplies
//     them with sgemm, so out is the F32 GEMM of the dequantized weights, as the FP8 path does.
//     With --cpu-precision fast, U4 codes whose shape the INT4 x INT8 kernel takes (cpu_int4_kernels.h:
//     K % 32 == 0, groups of 32, 64 or a multiple of 128, integral zero points) go there instead:
//     the activations quantized per 32-block to INT8, integer products (llama.cpp's Q4_0 x Q8_0).
//   prepare_int_weight: zero points that the fast kernel takes become its U8 bytes, once at load.
//   quantize_weight_int: --quantization awq|gptq|compressed-tensors on unquantized weights (dummy or
//     BF16 checkpoints): int_quantize_weight in the format's usual scheme (4 bits, groups of 128;
//     where 128 does not divide K, one group a row, as the CUDA backend does).
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_int4_kernels.h"
#include "nanovllm/backends/cpu/cpu_int8_kernels.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/backends/int_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// Whether the INT4 x INT8 kernel takes these weights (zero points aside: integral ones only).
bool q4_kernel_takes(CpuPrecision p, const Tensor& w, const WeightScales& s) {
  return p == CpuPrecision::Fast && w.dtype() == DType::U4 && cpu::q4_kernel_fits(w.size(1), s.block_k);
}

}  // namespace

// Zero points the kernel takes become its bytes once here, not checked and converted on every call
// (a single-threaded pass over 1/8 of the weight bytes: ~45% of the INT4 decode GEMVs' time at
// Qwen3-0.6B's shapes on the dev VM, bench/RESULTS.md).
void CpuBackend::prepare_int_weight(Tensor& codes, WeightScales& scales) {
  check_int_weight(codes, scales, "cpu prepare_int_weight");
  if (!q4_kernel_takes(precision_, codes, scales) || !scales.zero.defined()) return;
  Tensor z = Tensor::host(scales.zero.shape(), DType::U8);
  if (cpu::q4_zero_points(scales.zero.data<float>(), scales.zero.numel(), z.data<uint8_t>())) scales.zero = z;
}

void CpuBackend::linear_int(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  const bool prepared = scales.zero.defined() && scales.zero.dtype() == DType::U8;  // prepare_int_weight's bytes
  if (prepared) {
    WeightScales canonical = scales;
    canonical.zero = Tensor();
    check_int_weight(w, canonical, "cpu linear");
    if (scales.zero.shape() != scales.scale.shape() || !q4_kernel_takes(precision_, w, scales))
      throw Error("cpu linear: U8 zero points " + shape_str(scales.zero.shape()) +
                  " are the INT4 kernel's (prepare_int_weight), which does not take these weights");
  } else {
    check_int_weight(w, scales, "cpu linear");
  }
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  if (x.dtype() != DType::F32 || out.dtype() != DType::F32) throw Error("cpu linear: x and out must be F32");
  const float* xp = x.data<float>();
  std::vector<float> gathered;
  if (scales.perm.defined()) {  // column k of the codes multiplies input column perm[k]
    const int32_t* perm = scales.perm.data<int32_t>();
    gathered.resize(size_t(T * K));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t k = 0; k < K; ++k) gathered[size_t(t * K + k)] = xp[t * K + perm[k]];
    xp = gathered.data();
  }
  float* op = out.data<float>();
  if (q4_kernel_takes(precision_, w, scales)) {
    // Unprepared F32 zero points (weights built outside the loaders, as tests do): converted here.
    std::vector<uint8_t> zbytes;
    const uint8_t* zero = nullptr;
    bool integral = true;
    if (prepared) {
      zero = scales.zero.data<uint8_t>();
    } else if (scales.zero.defined()) {
      zbytes.resize(size_t(scales.zero.numel()));
      integral = cpu::q4_zero_points(scales.zero.data<float>(), scales.zero.numel(), zbytes.data());
      zero = zbytes.data();
    }
    if (integral) {
      std::vector<cpu::Q4Activations> a(static_cast<size_t>(T));
      for (int64_t t = 0; t < T; ++t) cpu::quantize_q4_activations(xp + t * K, K, a[size_t(t)]);
      const bool vnni = cpu::detected_int8_isa() == cpu::Int8Isa::Avx512Vnni;
      cpu::split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) {
        cpu::gemm_q4(a.data(), T, w.data<uint8_t>(), scales.scale.data<float>(), zero, K, scales.block_k, n0, n1, op, N,
                     vnni);
      });
      return;
    }
  }
  cpu::split_rows_dequantized(
      N, T * N * K, K, [&](int64_t n, float* row) { int_dequantize_row(w, scales, n, 0, K, row); },
      [&](int64_t b, int64_t e, const float* deq) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(e - b), int(K), 1.0f, xp, int(K), deq, int(K),
                    0.0f, op + b, int(N));
      });
}

void CpuBackend::quantize_weight_int(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  if (w.dim() != 2) throw Error("cpu quantize_weight: w must be [N, K] (got " + shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1);
  const IntWeightScheme s = usual_int_weight_scheme(q);
  const int64_t G = K % s.group_size == 0 ? s.group_size : K;  // as the CUDA backend's (int_prepare.cu)
  if (K % 2 != 0)
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": a weight with " + std::to_string(K) +
                    " input columns has no even group size (K must be even)");
  Tensor f32 = Tensor::host({N, K}, DType::F32);
  cpu::for_each_row_f32(w, [&](int64_t n, const float* row) { std::copy(row, row + K, f32.data<float>() + n * K); });
  int_quantize_weight(f32, s.bits, G, s.zero_points, codes, scales);
}

}  // namespace nanovllm
