#include "nanovllm/backends/int_weights.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// Code k of row n (U4: nibble k % 2 of byte k / 2 of the row; rows hold an even number of codes).
inline uint32_t code_at(const uint8_t* row, DType d, int64_t k) {
  return d == DType::U4 ? (row[k >> 1] >> ((k & 1) * 4)) & 15u : row[k];
}

}  // namespace

void check_int_weight(const Tensor& codes, const WeightScales& scales, const char* what) {
  auto fail = [&](const std::string& m) { throw Error(std::string(what) + ": group-quantized weight " + m); };
  if ((codes.dtype() != DType::U4 && codes.dtype() != DType::U8) || codes.dim() != 2)
    fail("codes must be U4 or U8 [N, K] (got " + std::string(dtype_name(codes.dtype())) + " " +
         shape_str(codes.shape()) + ")");
  const int64_t N = codes.size(0), K = codes.size(1), G = scales.block_k;
  if (codes.dtype() == DType::U4 && K % 2) fail("U4 codes need an even K (got " + std::to_string(K) + ")");
  if (!scales.defined() || scales.scale.dtype() != DType::F32 || scales.block_n != 1)
    fail("scales must be F32 with block_n 1");
  if (G < 1 || K % G) fail("group size " + std::to_string(G) + " does not divide K " + std::to_string(K));
  if (codes.dtype() == DType::U4 && G % 2) fail("U4 codes need an even group size (got " + std::to_string(G) + ")");
  const Shape want{N, K / G};
  if (scales.scale.shape() != want)
    fail("scale " + shape_str(scales.scale.shape()) + " does not fit codes " + shape_str(codes.shape()) +
         " in groups of " + std::to_string(G) + " (want " + shape_str(want) + ")");
  if (scales.zero.defined() && (scales.zero.dtype() != DType::F32 || scales.zero.shape() != want))
    fail("zero must be F32 " + shape_str(want) + " (got " + std::string(dtype_name(scales.zero.dtype())) + " " +
         shape_str(scales.zero.shape()) + ")");
  if (scales.perm.defined()) {
    if (scales.perm.dtype() != DType::I32 || scales.perm.shape() != Shape{K})
      fail("perm must be I32 [" + std::to_string(K) + "] (got " + std::string(dtype_name(scales.perm.dtype())) + " " +
           shape_str(scales.perm.shape()) + ")");
    if (scales.perm.device() == Device::CPU) {  // a permutation of 0..K-1
      std::vector<bool> seen(size_t(K), false);
      const int32_t* p = scales.perm.data<int32_t>();
      for (int64_t k = 0; k < K; ++k) {
        if (p[k] < 0 || p[k] >= K || seen[size_t(p[k])])
          fail("perm is not a permutation of 0.." + std::to_string(K - 1) + " (entry " + std::to_string(k) + " is " +
               std::to_string(p[k]) + ")");
        seen[size_t(p[k])] = true;
      }
    }
  }
}

void int_dequantize_row(const Tensor& codes, const WeightScales& scales, int64_t n, int64_t k0, int64_t k1,
                        float* out) {
  const int64_t K = codes.size(1), G = scales.block_k, groups = K / G;
  const DType d = codes.dtype();
  const uint8_t* row = codes.data<uint8_t>() + dtype_bytes(d, size_t(n * K));
  const float* s = scales.scale.data<float>() + n * groups;
  const float* z = scales.zero.defined() ? scales.zero.data<float>() + n * groups : nullptr;
  const float mid = int_weight_midpoint(d);
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t g = k / G;
    out[k - k0] = (float(code_at(row, d, k)) - (z ? z[g] : mid)) * s[g];
  }
}

void int_quantize_weight(const Tensor& w, int bits, int64_t group, bool zero_points, Tensor& codes,
                         WeightScales& scales) {
  if (w.dtype() != DType::F32 || w.dim() != 2 || w.device() != Device::CPU)
    throw Error("int_quantize_weight: w must be host F32 [N, K]");
  if (bits != 4 && bits != 8) throw Error("int_quantize_weight: bits must be 4 or 8, got " + std::to_string(bits));
  const int64_t N = w.size(0), K = w.size(1), G = group > 0 ? group : K;
  if (K % G || (bits == 4 && G % 2))
    throw Error("int_quantize_weight: group " + std::to_string(G) + " does not fit K " + std::to_string(K));
  const DType d = bits == 4 ? DType::U4 : DType::U8;
  const float qmax = float((1 << bits) - 1), mid = int_weight_midpoint(d);
  codes = Tensor::host({N, K}, d);
  scales = WeightScales{};
  scales.block_n = 1;
  scales.block_k = G;
  scales.scale = Tensor::host({N, K / G}, DType::F32);
  if (zero_points) scales.zero = Tensor::host({N, K / G}, DType::F32);
  uint8_t* c = codes.data<uint8_t>();
  std::fill(c, c + codes.nbytes(), uint8_t(0));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < K / G; ++g) {
      const float* x = w.data<float>() + n * K + g * G;
      float lo = x[0], hi = x[0];
      for (int64_t i = 1; i < G; ++i) lo = std::min(lo, x[i]), hi = std::max(hi, x[i]);
      float s, z;
      if (zero_points) {  // AutoAWQ: min/max of the group, zero = round(-min / scale)
        s = hi - lo > 0 ? (hi - lo) / qmax : 1.0f;
        z = std::clamp(std::nearbyint(-lo / s), 0.0f, qmax);
      } else {  // GPTQ's symmetric quantizer: [-amax, amax] over the whole code range, zero at the midpoint
        const float amax = std::max(std::fabs(lo), std::fabs(hi));
        s = amax > 0 ? 2 * amax / qmax : 1.0f;
        z = mid;
      }
      scales.scale.data<float>()[n * (K / G) + g] = s;
      if (zero_points) scales.zero.data<float>()[n * (K / G) + g] = z;
      for (int64_t i = 0; i < G; ++i) {
        const uint32_t q = uint32_t(std::clamp(std::nearbyint(x[i] / s) + z, 0.0f, qmax));
        const int64_t k = n * K + g * G + i;
        if (d == DType::U4)
          c[k >> 1] |= uint8_t(q << ((k & 1) * 4));
        else
          c[k] = uint8_t(q);
      }
    }
}

}  // namespace nanovllm
