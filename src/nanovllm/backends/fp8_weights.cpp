#include "nanovllm/backends/fp8_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/fp8.h"

namespace nanovllm {

float fp8_row_scale(float amax) { return amax > 0 ? amax / kFp8E4M3Max : 1.0f; }

float fp8_quantize_row(const float* w, int64_t K, uint8_t* codes) {
  float amax = 0;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(w[k]));
  const float s = fp8_row_scale(amax);
  for (int64_t k = 0; k < K; ++k) codes[k] = f32_to_e4m3(w[k] / s);
  return s;
}

void check_fp8_weight(const Tensor& codes, const WeightScales& scales, const char* what) {
  auto fail = [&](const std::string& m) { throw Error(std::string(what) + ": FP8 weight " + m); };
  if (codes.dtype() != DType::F8E4M3 || codes.dim() != 2)
    fail("codes must be F8_E4M3 [N, K] (got " + std::string(dtype_name(codes.dtype())) + " " +
         shape_str(codes.shape()) + ")");
  if (!scales.defined() || scales.scale.dtype() != DType::F32 || scales.block_n < 1 || scales.block_k < 0)
    fail("scales must be F32 with block_n >= 1, block_k >= 0");
  const int64_t N = codes.size(0), K = codes.size(1);
  const Shape want{(N + scales.block_n - 1) / scales.block_n,
                   scales.block_k ? (K + scales.block_k - 1) / scales.block_k : 1};
  if (scales.scale.shape() != want)
    fail("scales " + shape_str(scales.scale.shape()) + " do not fit codes " + shape_str(codes.shape()) +
         " in blocks of " + std::to_string(scales.block_n) + " x " + std::to_string(scales.block_k) + " (want " +
         shape_str(want) + ")");
}

void fp8_dequantize_row(const Tensor& codes, const WeightScales& scales, int64_t n, int64_t k0, int64_t k1,
                        float* out) {
  const int64_t K = codes.size(1);
  const uint8_t* c = codes.data<uint8_t>() + n * K;
  const float* s = scales.scale.data<float>() +
                   (n / scales.block_n) * (scales.block_k ? (K + scales.block_k - 1) / scales.block_k : 1);
  for (int64_t k = k0; k < k1; ++k) out[k - k0] = e4m3_to_f32(c[k]) * s[scales.block_k ? k / scales.block_k : 0];
}

void fake_quantize_activations_fp8(Tensor& x, int64_t block_k) {
  if (x.dtype() != DType::F32 || x.dim() != 2) throw Error("fake_quantize_activations_fp8: x must be F32 [T, K]");
  const int64_t T = x.size(0), K = x.size(1), B = block_k ? block_k : K;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k0 = 0; k0 < K; k0 += B) {
      float* r = x.data<float>() + t * K + k0;
      const int64_t n = std::min(B, K - k0);
      float amax = 0;
      for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(r[k]));
      const float s = fp8_row_scale(amax);
      for (int64_t k = 0; k < n; ++k) r[k] = e4m3_to_f32(f32_to_e4m3(r[k] / s)) * s;
    }
}

}  // namespace nanovllm
