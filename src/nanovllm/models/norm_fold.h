// Folding a decoder layer's RMSNorm weight into the projection after it (KernelOptions::norm_fold).
//
// rms_norm(x) * g @ w^T = r * (x @ (w diag(g))^T), with r = 1 / sqrt(mean(x^2) + eps) per row: once
// w's columns are scaled by g at load, the norm needs only r, which a GEMM can apply to its output
// rows in its epilogue, so the residual add can join the row-parallel product before the norm
// (Backend::linear_residual_rms_linear) and no add + RMSNorm kernel runs between the two products.
// The norm's weight becomes all ones: every other path (a separate add_rms_norm, the GEMV's fused
// norm) then computes the same product. The folded weights are rounded once more (to the weight
// dtype), so outputs move within a BF16 rounding.
#pragma once
#include "nanovllm/backends/backend.h"
#include "nanovllm/layers/layernorm.h"
#include "nanovllm/layers/linear.h"

namespace nanovllm {

// Scales proj.weight's columns by norm.weight, sets norm.weight to ones and norm.folded. False
// (nothing changed) where it does not apply: already folded, quantized weights (codes and scales),
// a norm of another width than the weight's columns, or a weight that is not a float dtype.
bool fold_rms_norm(Backend& be, RMSNorm& norm, Linear& proj);

}  // namespace nanovllm
