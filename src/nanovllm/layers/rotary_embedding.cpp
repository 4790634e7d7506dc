// YaRN's and Llama 3's inverse frequencies (and YaRN's attention factor), step by step as
// transformers 5.17 computes them (modeling_rope_utils.py, _compute_yarn_parameters and
// _compute_llama3_parameters), in double and rounded once to float.
#include "nanovllm/layers/rotary_embedding.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// transformers' get_mscale: the attention scale of a context `scale` times the pre-training one.
double get_mscale(double scale, double mscale = 1) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// The pair index (as a fractional dimension) that turns `rotations` times over `length` tokens.
double correction_dim(double rotations, int64_t dim, double base, double length) {
  return double(dim) * std::log(length / (rotations * 2 * std::numbers::pi)) / (2 * std::log(base));
}

}  // namespace

RopeParams yarn_rope(int64_t head_dim, double theta, const RopeScaling& y) {
  if (!(theta > 1)) throw LoadError("YaRN needs rope_theta > 1 (got " + std::to_string(theta) + ")");
  const int64_t dim = head_dim;  // partial_rotary_factor 1 (smaller ones are refused at load)
  const double factor = y.factor;
  RopeParams p;
  if (y.attention_factor)
    p.attention_scaling = float(*y.attention_factor);
  else if (y.mscale > 0 && y.mscale_all_dim > 0)
    p.attention_scaling = float(get_mscale(factor, y.mscale) / get_mscale(factor, y.mscale_all_dim));
  else
    p.attention_scaling = float(get_mscale(factor));

  // The ramp runs from the pair that turns beta_fast times over the pre-training context (faster
  // ones keep their frequency) to the one that turns beta_slow times (slower ones are divided by
  // factor); with truncate, its ends are whole pairs.
  const double orig = double(y.original_max_position_embeddings);
  double low = correction_dim(y.beta_fast, dim, theta, orig);
  double high = correction_dim(y.beta_slow, dim, theta, orig);
  if (y.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, double(dim - 1));
  if (low == high) high += 0.001;  // as transformers: no division by zero

  const double base = double(float(theta));  // pos_freqs = base ** (...) in float32
  for (int64_t i = 0; i < dim / 2; ++i) {
    const double pos_freq = std::pow(base, double(2 * i) / double(dim));
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    const double extrapolation = 1 - ramp;  // the weight of the pre-training frequency
    const double inv = 1.0 / (factor * pos_freq) * (1 - extrapolation) + 1.0 / pos_freq * extrapolation;
    p.inv_freq.push_back(float(inv));
  }
  return p;
}

RopeParams llama3_rope(int64_t head_dim, double theta, const RopeScaling& s) {
  RopeParams p = RopeParams::plain(head_dim, theta);
  const double old_len = double(s.original_max_position_embeddings);
  const double low_freq_wavelen = old_len / s.low_freq_factor, high_freq_wavelen = old_len / s.high_freq_factor;
  for (float& f : p.inv_freq) {
    const double inv = f, wavelen = 2 * std::numbers::pi / inv;
    if (wavelen < high_freq_wavelen) continue;  // high frequencies: kept
    if (wavelen > low_freq_wavelen) {           // low frequencies: interpolated by factor
      f = float(inv / s.factor);
      continue;
    }
    // In between: blended, from 1/factor at the low edge to 1 at the high edge.
    const double smooth = (old_len / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
    f = float((1 - smooth) * inv / s.factor + smooth * inv);
  }
  return p;
}

RopeParams rotary_embedding(const ModelConfig& cfg) {
  if (cfg.rope_scaling.is_yarn()) return yarn_rope(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);
  if (cfg.rope_scaling.is_llama3()) return llama3_rope(cfg.head_dim, cfg.rope_theta, cfg.rope_scaling);
  return RopeParams::plain(cfg.head_dim, cfg.rope_theta);
}

}  // namespace nanovllm
