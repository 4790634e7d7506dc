// CPU weight quantization at load (--quantization, models/quantize_weights.*): fp8 gives per-output-
// channel E4M3 codes (ops/fp8_weights.h), the format the CUDA backend's FP8 kernels read too.
#include <omp.h>

#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/ops/fp8_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

bool CpuBackend::supports_quantization(Quantization q) const {
  return q == Quantization::None || q == Quantization::FP8;
}

void CpuBackend::quantize_weight(const Tensor& w, Quantization q, Tensor& codes, WeightScales& scales) {
  if (q != Quantization::FP8) return Backend::quantize_weight(w, q, codes, scales);
  if (w.dim() != 2) throw Error("cpu quantize_weight: w must be [N, K] (got " + shape_str(w.shape()) + ")");
  const int64_t N = w.size(0), K = w.size(1);
  codes = Tensor::host({N, K}, DType::F8E4M3);
  scales = WeightScales{Tensor::host({N, 1}, DType::F32), 1, 0};
  const size_t es = dtype_size(w.dtype());
#pragma omp parallel
  {
    std::vector<float> row(static_cast<size_t>(K));
#pragma omp for
    for (int64_t n = 0; n < N; ++n) {
      convert_to_f32(static_cast<const char*>(w.raw()) + size_t(n * K) * es, w.dtype(), size_t(K), row.data());
      scales.scale.data<float>()[n] = fp8_quantize_row(row.data(), K, codes.data<uint8_t>() + n * K);
    }
  }
}

}  // namespace nanovllm
