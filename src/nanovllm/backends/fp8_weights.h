// FP8 (E4M3) linear weights, --quantization fp8 and Qwen's FP8 checkpoints: the host reference of
// the format and of what every backend's FP8 linear computes.
//
// Format (backends/weight_scales.h): codes [N, K] F8E4M3, value[n][k] = e4m3(code[n][k]) x
// scale[n / block_n][k / block_k], scales F32.
//   per-channel (--quantization fp8 on a BF16/F32 checkpoint, vLLM's online FP8): block_n 1,
//     block_k 0, scale[n] = amax(|w[n, :]|) / 448 (an all-zero row gets 1), code = rn_satfinite(w / scale);
//   block (Qwen's Qwen3-*-FP8 checkpoints' weight_scale_inv): block_n = block_k = 128.
//
// Semantics of linear_quantized with FP8 weights (the one definition the backends implement):
//   out[t][n] = sum_k x[t][k] x value[n][k], with F32 accumulation,
// i.e. weight-only: activations are NOT quantized. This is what the CPU oracle computes exactly (an
// F32 GEMM of the dequantized weights) and what the CUDA decode GEMV computes (BF16 activations x
// FP8 weights, rows <= a few). The CUDA GEMM of larger batches and prompts runs on the FP8 tensor
// cores and so quantizes the activations dynamically, scale = amax / 448: per token for per-channel
// weights (vLLM's online FP8), per token and 128 columns for 128 x 128 block weights (vLLM's block
// FP8); fake_quantize_activations_fp8 below reproduces that rounding on the host, so a test can
// hold that GEMM to the CPU oracle tightly (kernel option fp8_gemm=dequantize keeps CUDA
// weight-only). Weight-only decode is both faster (no activation pass) and more accurate than
// quantizing activations there.
#pragma once
#include <cstdint>

#include "nanovllm/backends/weight_scales.h"

namespace nanovllm {

constexpr int64_t kFp8BlockSize = 128;  // Qwen's weight_block_size [128, 128]

// The per-channel scale of a row whose largest magnitude is amax: amax / 448, or 1 for amax 0
// (an all-zero row: codes 0 whatever the scale).
float fp8_row_scale(float amax);

// One row w[0..K) -> codes[0..K) and its per-channel scale (returned).
float fp8_quantize_row(const float* w, int64_t K, uint8_t* codes);

// Checks codes [N, K] F8E4M3 against its scales (F32 of the shape weight_scales.h gives); throws
// Error naming `what` and the shapes.
void check_fp8_weight(const Tensor& codes, const WeightScales& scales, const char* what);

// value[n][k0..k1) of codes [N, K] (host) with its host scales -> out[0..k1-k0).
void fp8_dequantize_row(const Tensor& codes, const WeightScales& scales, int64_t n, int64_t k0, int64_t k1, float* out);

// In place on x [T, K] (F32, host): each row (block_k 0) or each 128-column block of a row
// (block_k 128) replaced by e4m3(x / s) x s with s = amax / 448 (1 where amax is 0): the
// activation rounding of the CUDA FP8 GEMM.
void fake_quantize_activations_fp8(Tensor& x, int64_t block_k);

}  // namespace nanovllm
