// SiLU-and-mul: the gated activation of Qwen3's MLP. x: [T, 2I] = [gate | up] -> [T, I].
#pragma once
#include "nanovllm/ops/backend.h"

namespace nanovllm {

inline Tensor silu_and_mul(Backend& be, const Tensor& x) {
  Tensor out = be.empty({x.size(0), x.size(1) / 2}, x.dtype());
  be.silu_and_mul(x, out);
  return out;
}

}  // namespace nanovllm
