// The scales of a quantized linear weight (--quantization, quantization.h). A weight [N, K] of
// dtype F8E4M3 or I8 holds codes, and
//   value[n][k] = code[n][k] * scale[n / block_n][k / block_k]
// with block_k = 0 meaning the whole row (one scale per output channel: scale is [ceil(N / block_n), 1]).
// Examples: vLLM's online FP8 (per-channel): block_n 1, block_k 0; Qwen's FP8 checkpoints
// (weight_scale_inv): block_n = block_k = 128; llama.cpp's Q8_0-like INT8: block_n 1, block_k 32.
#pragma once
#include <cstdint>

#include "nanovllm/utils/tensor.h"

namespace nanovllm {

struct WeightScales {
  Tensor scale;         // F32 [ceil(N / block_n), block_k ? ceil(K / block_k) : 1]; undefined: not quantized
  int64_t block_n = 1;  // output rows sharing one scale
  int64_t block_k = 0;  // input columns sharing one scale; 0: the whole row
  Tensor zero;          // U4/U8 codes only: F32 zero points in code units, shaped as scale; undefined: the
                        // codes' midpoint (8 for U4, 128 for U8), i.e. symmetric quantization
  Tensor perm;          // U4/U8 codes only: I32 [K] act order (x's columns gathered by it); undefined: identity

  bool defined() const { return scale.defined(); }
};

}  // namespace nanovllm
