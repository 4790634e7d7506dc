// Linear layers (no bias in Qwen3). The weight is [N, K] in the backend's weight dtype and may be
// packed from several checkpoint tensors: q/k/v -> qkv_proj, gate/up -> gate_up_proj; each
// WeightSpec (models/weights.h) says which rows of the packed weight a checkpoint tensor fills.
#pragma once
#include "nanovllm/ops/backend.h"

namespace nanovllm {

struct Linear {
  Tensor weight;  // [out_features, in_features]

  void create(Backend& be, int64_t out_features, int64_t in_features) {
    weight = be.empty({out_features, in_features}, be.weight_dtype());
  }
  // x: [T, in] -> [T, out]
  Tensor forward(Backend& be, const Tensor& x) const {
    Tensor out = be.empty({x.size(0), weight.size(0)}, be.act_dtype());
    be.linear(x, weight, out);
    return out;
  }
};

}  // namespace nanovllm
