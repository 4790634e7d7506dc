// The gated activation of Qwen3's MLP, with its input projection: silu(x Wg^T) * (x Wu^T), gate
// and up packed in one weight w: [2I, K]; x: [T, K] -> [T, I]. One op (Backend::linear_silu_mul)
// so that a backend can fuse the GEMM and the activation.
#pragma once
#include "nanovllm/ops/backend.h"

namespace nanovllm {

inline Tensor gate_up_silu(Backend& be, const Tensor& x, const Tensor& gate_up_weight) {
  Tensor out = be.empty({x.size(0), gate_up_weight.size(0) / 2}, be.act_dtype());
  be.linear_silu_mul(x, gate_up_weight, out);
  return out;
}

}  // namespace nanovllm
