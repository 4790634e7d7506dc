// Unpacking AWQ, GPTQ and compressed-tensors layers into unsigned codes, scales and zeros
// (int_formats.h states each format's packing).
#include "nanovllm/models/int_formats.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "nanovllm/utils/error.h"
#include "nanovllm/utils/tensor.h"

namespace nanovllm {

namespace {

// AutoAWQ's interleave: nibble i of a word holds column 8c + kAwqOrder[i]; column 8c + j sits in
// nibble kAwqNibble[j] (the inverse: vLLM's AWQ_REVERSE_ORDER).
constexpr int kAwqNibble[8] = {0, 4, 1, 5, 2, 6, 3, 7};

float scalar_f32(const TensorInfo& t, int64_t i) {
  float f;
  convert_to_f32(static_cast<const char*>(t.data) + size_t(i) * dtype_size(t.dtype), t.dtype, 1, &f);
  return f;
}

int64_t integer_at(const TensorInfo& t, int64_t i) {
  const char* p = static_cast<const char*>(t.data) + size_t(i) * dtype_size(t.dtype);
  if (t.dtype == DType::I64) {
    int64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

IntLayerReader::IntLayerReader(const IntCheckpointFormat& fmt, const SafetensorsCheckpoint& ckpt,
                               const std::string& module, int64_t N, int64_t K)
    : fmt_(fmt), ckpt_(ckpt), module_(module), N_(N), K_(K), pf_(32 / fmt.bits) {
  G_ = fmt.group_size > 0 ? fmt.group_size : K;
  if (K % G_ != 0)
    throw LoadError("'" + module + "' has " + std::to_string(K) + " input columns, not a multiple of group_size " +
                    std::to_string(G_));
  const int64_t groups = K / G_;
  const std::vector<DType> floats{DType::F16, DType::BF16, DType::F32};
  switch (fmt.method) {
    case Quantization::AWQ:
      if (N % 8 != 0)
        throw LoadError("'" + module + "' has " + std::to_string(N) + " outputs, not a multiple of AWQ's 8 a word");
      codes_ = &need("qweight", {DType::I32}, {K, N / 8});
      zero_ = &need("qzeros", {DType::I32}, {groups, N / 8});
      scale_ = &need("scales", floats, {groups, N});
      break;
    case Quantization::GPTQ:
      if (K % pf_ != 0 || (fmt.zero_points && N % pf_ != 0))
        throw LoadError("'" + module + "' [" + std::to_string(N) + ", " + std::to_string(K) + "] does not pack into " +
                        std::to_string(pf_) + " codes a word");
      codes_ = &need("qweight", {DType::I32}, {K / pf_, N});
      if (fmt.zero_points) zero_ = &need("qzeros", {DType::I32}, {groups, N / pf_});
      scale_ = &need("scales", floats, {groups, N});
      if (ckpt.find(module + ".g_idx")) g_idx_ = &need("g_idx", {DType::I32}, {K});
      break;
    case Quantization::CompressedTensors: {
      codes_ = &need("weight_packed", {DType::I32}, {N, (K + pf_ - 1) / pf_});
      scale_ = &need("weight_scale", floats, {N, groups});
      if (fmt.zero_points) {
        const TensorInfo* z = ckpt.find(module + ".weight_zero_point");
        zero_ = z && z->dtype == DType::I8 ? &need("weight_zero_point", {DType::I8}, {N, groups})
                                           : &need("weight_zero_point", {DType::I32}, {(N + pf_ - 1) / pf_, groups});
      }
      if (const TensorInfo* s = ckpt.find(module + ".weight_shape")) {
        const TensorInfo& t = need("weight_shape", {DType::I32, DType::I64}, {2});
        if (integer_at(t, 0) != N || integer_at(t, 1) != K)
          throw LoadError(t.file + ": '" + s->name + "' is [" + std::to_string(integer_at(t, 0)) + ", " +
                          std::to_string(integer_at(t, 1)) + "] but the config implies [" + std::to_string(N) + ", " +
                          std::to_string(K) + "]");
      }
      if (ckpt.find(module + ".weight_g_idx")) g_idx_ = &need("weight_g_idx", {DType::I32}, {K});
      break;
    }
    default: throw Error("IntLayerReader: " + std::string(quantization_name(fmt.method)) + " is not an integer format");
  }
}

const TensorInfo& IntLayerReader::need(const std::string& suffix, std::vector<DType> dtypes, const Shape& shape) const {
  const std::string name = module_ + "." + suffix;
  const TensorInfo* t = ckpt_.find(name);
  if (!t)
    throw LoadError("missing tensor '" + name + "' (expected shape " + shape_str(shape) + ") of the " +
                    quantization_name(fmt_.method) + " checkpoint");
  if (std::find(dtypes.begin(), dtypes.end(), t->dtype) == dtypes.end()) {
    std::string want;
    for (DType d : dtypes) want += (want.empty() ? "" : " or ") + std::string(dtype_name(d));
    throw LoadError(t->file + ": tensor '" + name + "' has dtype " + dtype_name(t->dtype) + " where " + want +
                    " belongs (" + quantization_name(fmt_.method) + ", " + std::to_string(fmt_.bits) + " bits)");
  }
  if (t->shape != shape)
    throw LoadError(t->file + ": tensor '" + name + "' has shape " + shape_str(t->shape) + " but " +
                    quantization_name(fmt_.method) + " with " + std::to_string(fmt_.bits) + " bits and group " +
                    std::to_string(G_) + " implies " + shape_str(shape));
  return *t;
}

int32_t IntLayerReader::word(const TensorInfo& t, int64_t i) const {
  int32_t v;
  std::memcpy(&v, static_cast<const char*>(t.data) + size_t(i) * 4, 4);
  return v;
}

void IntLayerReader::codes(int64_t r0, int64_t r1, int64_t c0, int64_t c1, uint8_t* out) const {
  const int64_t cols = c1 - c0, bits = fmt_.bits;
  const uint32_t mask = (1u << bits) - 1;
  const TensorInfo& t = *codes_;
  switch (fmt_.method) {
    case Quantization::AWQ:  // [K, N/8], along N interleaved
      for (int64_t k = c0; k < c1; ++k)
        for (int64_t n = r0; n < r1; ++n)
          out[(n - r0) * cols + (k - c0)] =
              uint8_t((uint32_t(word(t, k * (N_ / 8) + n / 8)) >> (4 * kAwqNibble[n % 8])) & mask);
      break;
    case Quantization::GPTQ:  // [K/pf, N], along K
      for (int64_t k = c0; k < c1; ++k)
        for (int64_t n = r0; n < r1; ++n)
          out[(n - r0) * cols + (k - c0)] =
              uint8_t((uint32_t(word(t, (k / pf_) * N_ + n)) >> (bits * (k % pf_))) & mask);
      break;
    default: {  // compressed-tensors: [N, ceil(K/pf)], along K
      const int64_t words = (K_ + pf_ - 1) / pf_;
      for (int64_t n = r0; n < r1; ++n)
        for (int64_t k = c0; k < c1; ++k)
          out[(n - r0) * cols + (k - c0)] =
              uint8_t((uint32_t(word(t, n * words + k / pf_)) >> (bits * (k % pf_))) & mask);
    }
  }
}

void IntLayerReader::scales(int64_t r0, int64_t r1, int64_t g0, int64_t g1, float* out) const {
  const int64_t groups = K_ / G_, w = g1 - g0;
  const bool by_group_rows = fmt_.method != Quantization::CompressedTensors;  // [K/G, N] vs [N, K/G]
  for (int64_t n = r0; n < r1; ++n)
    for (int64_t g = g0; g < g1; ++g)
      out[(n - r0) * w + (g - g0)] = scalar_f32(*scale_, by_group_rows ? g * N_ + n : n * groups + g);
}

void IntLayerReader::zeros(int64_t r0, int64_t r1, int64_t g0, int64_t g1, float* out) const {
  if (!zero_) throw Error("IntLayerReader::zeros: '" + module_ + "' is symmetric");
  const int64_t groups = K_ / G_, w = g1 - g0, bits = fmt_.bits;
  const uint32_t mask = (1u << bits) - 1;
  const TensorInfo& t = *zero_;
  for (int64_t n = r0; n < r1; ++n)
    for (int64_t g = g0; g < g1; ++g) {
      uint32_t z;
      if (fmt_.method == Quantization::AWQ)
        z = (uint32_t(word(t, g * (N_ / 8) + n / 8)) >> (4 * kAwqNibble[n % 8])) & mask;
      else if (fmt_.method == Quantization::GPTQ)  // v1 stores z - 1
        z = ((uint32_t(word(t, g * (N_ / pf_) + n / pf_)) >> (bits * (n % pf_))) & mask) + (fmt_.gptq_v2 ? 0 : 1);
      else if (t.dtype == DType::I8)  // signed, unpacked
        z = uint32_t(int32_t(static_cast<const int8_t*>(t.data)[n * groups + g]) + (1 << (bits - 1)));
      else
        z = (uint32_t(word(t, (n / pf_) * groups + g)) >> (bits * (n % pf_))) & mask;
      out[(n - r0) * w + (g - g0)] = float(z);
    }
}

std::vector<int32_t> IntLayerReader::g_idx() const {
  std::vector<int32_t> g;
  if (!g_idx_) return g;
  g.resize(size_t(K_));
  for (int64_t k = 0; k < K_; ++k) g[size_t(k)] = int32_t(integer_at(*g_idx_, k));
  return g;
}

std::vector<int32_t> int_act_order_perm(const std::vector<int32_t>& g_idx, int64_t G, const std::string& what) {
  const int64_t K = int64_t(g_idx.size());
  if (G < 1 || K % G != 0) throw LoadError(what + ": group size " + std::to_string(G) + " does not divide K");
  std::vector<int64_t> count(size_t(K / G), 0);
  for (int64_t k = 0; k < K; ++k) {
    const int32_t g = g_idx[size_t(k)];
    if (g < 0 || g >= K / G)
      throw LoadError(what + ": g_idx[" + std::to_string(k) + "] is " + std::to_string(g) + ", outside [0, " +
                      std::to_string(K / G) + ")");
    ++count[size_t(g)];
  }
  for (size_t g = 0; g < count.size(); ++g)
    if (count[g] != G)
      throw LoadError(what + ": g_idx gives group " + std::to_string(g) + " " + std::to_string(count[g]) +
                      " columns, not group_size " + std::to_string(G));
  std::vector<int32_t> perm(static_cast<size_t>(K));
  std::iota(perm.begin(), perm.end(), 0);
  std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return g_idx[size_t(a)] < g_idx[size_t(b)]; });
  bool identity = true;
  for (int64_t k = 0; k < K && identity; ++k) identity = perm[size_t(k)] == k;
  if (identity) perm.clear();
  return perm;
}

}  // namespace nanovllm
