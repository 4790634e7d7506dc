// The rotary embedding that Backend::qk_norm_rope applies: for each rotated pair (i, i + D/2) of a
// head its inverse frequency, and the scale of cos/sin. Made once per model from its config
// (layers/rotary_embedding.h: plain RoPE or YaRN); the ops only read it.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

namespace nanovllm {

struct RopeParams {
  // [D/2]: pair i turns by angle = float(position) * inv_freq[i] (a float32 product, as
  // transformers' inv_freq @ position_ids).
  std::vector<float> inv_freq;
  // cos(angle) and sin(angle) are multiplied by this in float32 (YaRN's attention factor; 1 for
  // plain RoPE, where the product is exact).
  float attention_scaling = 1.0f;

  // Plain RoPE of base theta: inv_freq[i] = 1 / theta^(2i/D) in double, rounded to float. theta is
  // rounded to float first, as transformers' float32 pow sees it.
  static RopeParams plain(int64_t head_dim, double theta) {
    RopeParams p;
    const double base = double(float(theta));
    for (int64_t i = 0; i < head_dim / 2; ++i)
      p.inv_freq.push_back(float(1.0 / std::pow(base, double(2 * i) / double(head_dim))));
    return p;
  }
};

}  // namespace nanovllm
