// Fused q/k RMSNorm (Qwen3; none for Llama, Qwen2, Mistral) + rotary embedding, in place on the
// packed qkv rows.
// qkv row layout: [q heads (Hq x D) | k heads (Hkv x D) | v heads (Hkv x D)].
// RoPE is the rotate-half form of Hugging Face's Qwen3: for i < D/2, with
// angle = float(pos) * inv_freq[i] in float32 as transformers does, and cos/sin rounded to float
// then times the attention scaling in float32 (1 for plain RoPE: exact; YaRN's factor otherwise):
//   out[i]       = x[i] * cos - x[i + D/2] * sin
//   out[i + D/2] = x[i + D/2] * cos + x[i] * sin
#include <cmath>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

// w == nullptr: RoPE only (no q/k norm).
static void norm_rope_head(float* x, const float* w, float eps, int64_t D, const float* cos, const float* sin) {
  if (w) {
    double ss = 0;
    for (int64_t i = 0; i < D; ++i) ss += double(x[i]) * x[i];
    const float inv = float(1.0 / std::sqrt(ss / double(D) + eps));
    for (int64_t i = 0; i < D; ++i) x[i] = x[i] * inv * w[i];
  }
  const int64_t h = D / 2;
  for (int64_t i = 0; i < h; ++i) {
    const float a = x[i], b = x[i + h];
    x[i] = a * cos[i] - b * sin[i];
    x[i + h] = b * cos[i] + a * sin[i];
  }
}

void CpuBackend::qk_norm_rope(Tensor& qkv, const Tensor& q_norm_w, const Tensor& k_norm_w, const Tensor& positions,
                              int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, float eps,
                              const RopeParams& rope) {
  check_qkv(qkv, num_heads, num_kv_heads, head_dim, "qk_norm_rope");
  check_rope(rope, head_dim, "qk_norm_rope");
  check_qk_norm_weights(q_norm_w, k_norm_w, head_dim, "qk_norm_rope");
  if (positions.numel() != qkv.size(0)) throw Error("qk_norm_rope: positions must be [T]");
  const int64_t T = qkv.size(0), D = head_dim, h = D / 2, W = qkv.size(1);
  const std::vector<float>& inv_freq = rope.inv_freq;
  const float scale = rope.attention_scaling;
  const int32_t* pos = positions.data<int32_t>();
  std::vector<float> q_scratch, k_scratch;
  // Undefined norm weights: RoPE only (Llama, Qwen2, Mistral).
  const float* qw = q_norm_w.defined() ? weights_f32(q_norm_w, q_scratch) : nullptr;
  const float* kw = k_norm_w.defined() ? weights_f32(k_norm_w, k_scratch) : nullptr;
#pragma omp parallel for if (T * num_heads * D >= (1 << 14))
  for (int64_t t = 0; t < T; ++t) {
    std::vector<float> cos(static_cast<size_t>(h)), sin(static_cast<size_t>(h));
    for (int64_t i = 0; i < h; ++i) {
      const float angle = float(pos[t]) * inv_freq[size_t(i)];
      cos[size_t(i)] = float(std::cos(double(angle))) * scale;
      sin[size_t(i)] = float(std::sin(double(angle))) * scale;
    }
    float* row = qkv.data<float>() + t * W;
    for (int64_t hd = 0; hd < num_heads; ++hd) norm_rope_head(row + hd * D, qw, eps, D, cos.data(), sin.data());
    for (int64_t hd = 0; hd < num_kv_heads; ++hd)
      norm_rope_head(row + (num_heads + hd) * D, kw, eps, D, cos.data(), sin.data());
  }
}

}  // namespace nanovllm
