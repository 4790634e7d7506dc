#include "nanovllm/models/norm_fold.h"

#include <vector>

namespace nanovllm {

bool fold_rms_norm(Backend& be, RMSNorm& norm, Linear& proj) {
  if (norm.folded || proj.weight_scales.defined() || !norm.weight.defined() || !proj.weight.defined()) return false;
  const DType dt = proj.weight.dtype();
  if ((dt != DType::BF16 && dt != DType::F16 && dt != DType::F32) || proj.weight.dim() != 2) return false;
  const int64_t N = proj.weight.size(0), K = proj.weight.size(1);
  if (norm.weight.numel() != K) return false;
  // Through the host: once at load, a layer at a time (the largest, gate_up, is 2I x H values).
  std::vector<float> w = be.to_host_f32(proj.weight);
  const std::vector<float> g = be.to_host_f32(norm.weight);
  for (int64_t n = 0; n < N; ++n) {
    float* row = w.data() + n * K;
    for (int64_t k = 0; k < K; ++k) row[k] *= g[size_t(k)];
  }
  be.upload(w.data(), DType::F32, proj.weight);
  const std::vector<float> ones(size_t(K), 1.0f);
  be.upload(ones.data(), DType::F32, norm.weight);
  norm.folded = true;
  return true;
}

}  // namespace nanovllm
