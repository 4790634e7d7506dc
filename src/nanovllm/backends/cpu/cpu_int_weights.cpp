// Group-quantized integer weights on the CPU backend (awq, gptq, compressed-tensors: U4 / U8 codes in
// the canonical layout of backends/int_weights.h, which is also this backend's kernel layout).
//   linear_int: the exact reference. x [T, K] is gathered by perm (act order) once, each thread
//     dequantizes 64 rows of codes at a time to F32 (value = (code - zero) * scale) and multiplies
//     them with sgemm, so out is the F32 GEMM of the dequantized weights, as the FP8 path does.
//   quantize_weight_int: --quantization awq|gptq|compressed-tensors on unquantized weights (dummy or
//     BF16 checkpoints): int_quantize_weight in the format's usual scheme (4 bits, groups of 128;
//     where 128 does not divide K, one group a row, as the CUDA backend does).
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/backends/int_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void CpuBackend::linear_int(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_int_weight(w, scales, "cpu linear");
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
