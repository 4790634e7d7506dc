// RMSNorm (Qwen3RMSNorm): y = x / sqrt(mean(x^2) + eps) * w, and the fused residual form
// (residual += x; x = norm(residual)) that lets each decoder layer do one pass over memory.
#pragma once
#include "nanovllm/ops/backend.h"

namespace nanovllm {

struct RMSNorm {
  Tensor weight;  // [H]
  float eps = 1e-6f;

  void create(Backend& be, int64_t hidden, double eps_) {
    weight = be.empty({hidden}, be.weight_dtype());
    eps = float(eps_);
  }
  Tensor forward(Backend& be, const Tensor& x) const {
    Tensor out = be.empty(x.shape(), x.dtype());
    be.rms_norm(x, weight, eps, out);
    return out;
  }
  // In place: residual += x; x = norm(residual).
  void forward_residual(Backend& be, Tensor& x, Tensor& residual) const { be.add_rms_norm(x, residual, weight, eps); }
};

}  // namespace nanovllm
