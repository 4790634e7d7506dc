// Linear layers, with an optional bias (Qwen2's q/k/v). The weight is [N, K] in the backend's weight dtype and may be
// packed from several checkpoint tensors: q/k/v -> qkv_proj, gate/up -> gate_up_proj; each
// WeightSpec (models/weights.h) says which rows of the packed weight a checkpoint tensor fills.
// Tensor parallelism (nano-vllm's Column/RowParallelLinear): a column-parallel layer is a plain
// Linear over this rank's output rows (the specs load the slice); a row-parallel one holds a
// slice of the input columns, so its outputs are partial sums that all_reduce_sum completes. The
// partial sums stay in F32 through the all-reduce and are rounded to the act dtype once, after
// it: as one rank's GEMM rounds its F32 accumulator once. (Rounding each rank's part to BF16 and
// summing in BF16 adds two roundings per output; on Qwen3-8B shapes that cost TP=2 vs TP=1 a
// logits cosine of 0.9984 instead of >= 0.999.)
#pragma once
#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/communicator.h"

namespace nanovllm {

struct Linear {
  Tensor weight;               // [out_features, in_features]: values, or codes with weight_scales
  Tensor bias;                 // [out_features], or undefined: no bias
  WeightScales weight_scales;  // quantized weights' scales (backends/weight_scales.h); undefined: not quantized

  void create(Backend& be, int64_t out_features, int64_t in_features, bool with_bias = false) {
    weight = be.empty({out_features, in_features}, be.weight_dtype());
    if (with_bias) bias = be.empty({out_features}, be.weight_dtype());
  }
  // x: [T, in] -> [T, out]
  Tensor forward(Backend& be, const Tensor& x) const {
    Tensor out = be.empty({x.size(0), weight.size(0)}, be.act_dtype());
    be.linear(x, weight, weight_scales, out);
    add_bias(be, out);
    return out;
  }
  // out += bias, where there is one (for callers that ran the GEMM fused with something else).
  void add_bias(Backend& be, Tensor& out) const {
    if (bias.defined()) be.add_bias(out, bias);
  }
};

struct RowParallelLinear : Linear {
  Communicator* comm = nullptr;  // nullptr: one rank, a plain Linear

  // x: [T, in/N] (this rank's slice of the features) -> [T, out]: with comm, this rank's F32
  // partial sums, NOT yet reduced: the RMSNorm that reads them (layernorm.h) does the all-reduce,
  // fused with its residual add (as vLLM's reduce_results=False + fused all-reduce/norm).
  Tensor forward(Backend& be, const Tensor& x) const {
    if (!comm) return Linear::forward(be, x);
    Tensor partial = be.empty({x.size(0), weight.size(0)}, DType::F32);
    be.linear(x, weight, weight_scales, partial);
    return partial;
  }
};

// partial: [T, H] F32 partial sums -> [T, H] act dtype, summed over the ranks of comm.
inline Tensor reduce_partial_sums(Backend& be, Communicator& comm, Tensor& partial) {
  comm.all_reduce_sum(partial);
  if (be.act_dtype() == partial.dtype()) return partial;
  Tensor out = be.empty(partial.shape(), be.act_dtype());
  be.cast(partial, out);
  return out;
}

}  // namespace nanovllm
