// Rotary position embedding of a model (nano-vllm's RotaryEmbedding, Hugging Face's
// Qwen3RotaryEmbedding with its ROPE_INIT_FUNCTIONS): the inverse frequency of every rotated pair
// and the cos/sin scale, computed once when the model is built, for plain RoPE, YaRN or llama3. The
// backend's qk_norm_rope ops apply them (backends/rope_params.h).
#pragma once
#include <cstdint>

#include "nanovllm/backends/rope_params.h"
#include "nanovllm/config/config.h"

namespace nanovllm {

// YaRN (arXiv 2309.00071), as transformers 5.17's _compute_yarn_parameters: each pair's frequency
// is blended between extrapolation (theta^(-2i/D), the pre-training one) and interpolation (that
// over `factor`) by a linear ramp over the pairs whose wavelength lies between beta_fast and
// beta_slow rotations in original_max_position_embeddings tokens; cos/sin are scaled by the
// attention factor (given, or 0.1 ln(factor) + 1, or DeepSeek's mscale ratio).
RopeParams yarn_rope(int64_t head_dim, double theta, const RopeScaling& yarn);

// Llama 3.1's scaling, as transformers 5.17's _compute_llama3_parameters: over the plain
// frequencies, wavelengths 2 pi / f shorter than original / high_freq_factor are kept, longer than
// original / low_freq_factor divided by factor, and blended in between with weight
// (original / wavelength - low_freq_factor) / (high_freq_factor - low_freq_factor) on the kept
// frequency. cos/sin are not scaled.
RopeParams llama3_rope(int64_t head_dim, double theta, const RopeScaling& scaling);

// The model's rotary embedding: plain RoPE of base rope_theta, YaRN or llama3.
RopeParams rotary_embedding(const ModelConfig& cfg);

}  // namespace nanovllm
