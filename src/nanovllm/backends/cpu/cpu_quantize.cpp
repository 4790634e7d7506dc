// CPU weight quantization at load (--quantization, models/quantize_weights.*) and the quantized
// linear's dispatch: fp8 gives per-output-channel E4M3 codes (backends/fp8_weights.h), the format the CUDA
// backend's FP8 kernels read too; int8 the Q8_0-like codes of cpu_int8.cpp; awq, gptq and
// compressed-tensors the U4/U8 group-quantized codes of cpu_int_weights.cpp.

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/backends/fp8_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

bool CpuBackend::supports_quantization(Quantization q) const {
  return q == Quantization::None || q == Quantization::FP8 || q == Quantization::INT8 || is_int_weight_only(q);
}

void CpuBackend::quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  switch (q) {
    case Quantization::FP8: return quantize_weight_fp8(w, codes, scales);
    case Quantization::INT8: return quantize_weight_int8(w, codes, scales);
    case Quantization::AWQ:
    case Quantization::GPTQ:
    case Quantization::CompressedTensors: return quantize_weight_int(w, q, codes, scales);
    case Quantization::None: break;
  }
  Backend::quantize_weight(w, q, codes, scales);
}

void CpuBackend::linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_linear(x, w, out);
  if (w.dtype() == DType::F8E4M3) return linear_fp8(x, w, scales, out);
  if (w.dtype() == DType::I8) return linear_int8(x, w, scales, out);
  if (w.dtype() == DType::U4 || w.dtype() == DType::U8) return linear_int(x, w, scales, out);
  Backend::linear_quantized(x, w, scales, out);
}

void CpuBackend::quantize_weight_fp8(const Tensor& w, Tensor& codes, WeightScales& scales) {
  if (w.dim() != 2) throw Error("cpu quantize_weight: w must be [N, K] (got " + shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1);
  codes = Tensor::host({N, K}, DType::F8E4M3);
  scales = WeightScales{Tensor::host({N, 1}, DType::F32), 1, 0};
  cpu::for_each_row_f32(w, [&](int64_t n, const float* row) {
    scales.scale.data<float>()[n] = fp8_quantize_row(row, K, codes.data<uint8_t>() + n * K);
  });
}

}  // namespace nanovllm
