#include "nanovllm/models/weights.h"

#include <cmath>
#include <algorithm>
#include <vector>

#include "nanovllm/ops/sampling_noise.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/safetensors.h"

namespace nanovllm {

static int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (auto d : s) n *= d;
  return n;
}

// The rows [row_offset, row_offset + rows) of dst as a tensor view.
static Tensor dst_view(const WeightSpec& s) {
  const int64_t rows = s.shape.empty() ? 1 : s.shape[0];
  if (s.dst->dim() == 1) return *s.dst;
  return s.dst->rows(s.row_offset, s.row_offset + rows);
}

void load_weights(Backend& be, const SafetensorsCheckpoint& ckpt, const std::vector<WeightSpec>& specs) {
  for (const auto& s : specs) {
    const TensorInfo* t = ckpt.find(s.name);
    if (!t) {
      if (s.optional) continue;
      throw LoadError("missing tensor '" + s.name + "' (expected shape " + shape_str(s.shape) + ") in the checkpoint");
    }
    if (t->shape != s.shape)
      throw LoadError(t->file + ": tensor '" + s.name + "' has shape " + shape_str(t->shape) + " but the config implies " +
                      shape_str(s.shape));
    if (t->dtype != DType::F32 && t->dtype != DType::BF16 && t->dtype != DType::F16)
      throw LoadError(t->file + ": tensor '" + s.name + "' has dtype " + dtype_name(t->dtype) + "; weights must be F32, BF16 or F16");
    Tensor view = dst_view(s);
    if (view.numel() != t->numel()) throw LoadError("tensor '" + s.name + "' does not fit its parameter");
    be.upload(t->data, t->dtype, view);
  }
}

void load_dummy_weights(Backend& be, const std::vector<WeightSpec>& specs) {
  for (const auto& s : specs) {
    if (s.optional) continue;
    Tensor view = dst_view(s);
    uint64_t seed = 1469598103934665603ull;
    for (char c : s.name) seed = (seed ^ uint8_t(c)) * 1099511628211ull;
    const float a = 0.02f * std::sqrt(3.0f);  // uniform(-a, a) has std 0.02
    // Fill and upload in chunks of rows, so no full-size host copy is needed.
    const int64_t rows = s.shape.size() == 1 ? 1 : s.shape[0], cols = numel_of(s.shape) / rows;
    const int64_t chunk = std::max<int64_t>(1, (int64_t(1) << 22) / cols);
    std::vector<float> host;
    for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
      const int64_t r1 = std::min(rows, r0 + chunk), n = (r1 - r0) * cols;
      host.resize(size_t(n));
      if (s.shape.size() == 1) {
        std::fill(host.begin(), host.end(), 1.0f);
      } else {
#pragma omp parallel for
        for (int64_t i = 0; i < n; ++i)
          host[size_t(i)] = (2.0f * sampling_uniform(seed, 0, uint64_t(r0 * cols + i)) - 1.0f) * a;
      }
      Tensor part = s.shape.size() == 1 ? view : view.rows(r0, r1);
      be.upload(host.data(), DType::F32, part);
    }
  }
}

}  // namespace nanovllm
