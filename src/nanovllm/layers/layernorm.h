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
  // residual += x, then the projection that follows the norm: norm(residual) @ w^T ([T, N] for w
  // [N, K]), or with silu_mul the gated activation of w = [gate; up] ([T, I] for w [2I, K]). One
  // op, so a backend can fold the norm into the GEMM (x is spent: its contents are unspecified after).
  Tensor forward_residual_linear(Backend& be, Tensor& x, Tensor& residual, const Tensor& w, bool silu_mul = false) const {
    Tensor out = be.empty({x.size(0), silu_mul ? w.size(0) / 2 : w.size(0)}, be.act_dtype());
    be.add_rms_norm_linear(x, residual, weight, eps, w, out, silu_mul);
    return out;
  }
};

}  // namespace nanovllm
