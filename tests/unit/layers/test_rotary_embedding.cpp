// Rotary embedding tables and the CPU qk_norm_rope op. YaRN's inverse frequencies and attention
// factor are checked against the formula written out again here, in double, with the correction
// range's bounds worked out by hand; the op with YaRN against a double-precision reference; and
// plain RoPE against the op as it was before the tables (bit for bit).
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>
#include <random>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/layers/rotary_embedding.h"
#include "nanovllm/models/hf_config.h"

using namespace nanovllm;

namespace {

RopeScaling yarn(double factor, int64_t original) {
  RopeScaling y;
  y.type = "yarn";
  y.factor = factor;
  y.original_max_position_embeddings = original;
  return y;
}

// inv_freq[i] = theta^(-2i/D) * (ramp_i / factor + 1 - ramp_i), ramp_i = clamp((i - low) / (high - low)):
// the pre-training frequency below the ramp, that over factor above it.
std::vector<double> expected_yarn(int64_t D, double theta, double factor, double low, double high) {
  std::vector<double> inv;
  for (int64_t i = 0; i < D / 2; ++i) {
    const double ramp = std::min(1.0, std::max(0.0, (double(i) - low) / (high - low)));
    inv.push_back(std::pow(theta, -2.0 * double(i) / double(D)) * (ramp / factor + 1 - ramp));
  }
  return inv;
}

void expect_table(const RopeParams& got, const std::vector<double>& want) {
  ASSERT_EQ(got.inv_freq.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.inv_freq[i], want[i], want[i] * 3e-7) << "pair " << i;  // float rounding
}

}  // namespace

// Qwen3's recipe (head_dim 128, theta 1e6, factor 4, original 32768). By hand: the pair turning
// beta_fast = 32 times in 32768 tokens is D ln(32768 / (32 * 2 pi)) / (2 ln 1e6) = 23.596 -> floor 23;
// beta_slow = 1 time: D ln(32768 / (2 pi)) / (2 ln 1e6) = 39.651 -> ceil 40.
TEST(RotaryEmbedding, YarnQwen3Recipe) {
  const RopeParams p = yarn_rope(128, 1e6, yarn(4, 32768));
  expect_table(p, expected_yarn(128, 1e6, 4, 23, 40));
  const RopeParams plain = RopeParams::plain(128, 1e6);
  for (int i = 0; i <= 23; ++i) EXPECT_EQ(p.inv_freq[size_t(i)], plain.inv_freq[size_t(i)]) << i;  // extrapolated
  for (int i = 40; i < 64; ++i)
    EXPECT_NEAR(p.inv_freq[size_t(i)], plain.inv_freq[size_t(i)] / 4, 1e-7 * p.inv_freq[size_t(i)]);
  EXPECT_GT(p.inv_freq[30], plain.inv_freq[30] / 4);  // blended
  EXPECT_LT(p.inv_freq[30], plain.inv_freq[30]);
  EXPECT_FLOAT_EQ(p.attention_scaling, float(0.1 * std::log(4.0) + 1));  // 1.138629...
  EXPECT_FLOAT_EQ(p.attention_scaling, 1.1386294f);
}

// The fixture's shape (D 32, theta 1e4, original 128): 32 ln(128 / 64 pi) / (2 ln 1e4) = -0.784 ->
// floor -1 -> clamped to 0; 32 ln(128 / 2 pi) / (2 ln 1e4) = 5.236 -> ceil 6. Without truncate the
// bounds stay fractional: 0 (clamped) and 5.2361.
TEST(RotaryEmbedding, YarnTruncateAndSmallContext) {
  RopeScaling y = yarn(4, 128);
  expect_table(yarn_rope(32, 1e4, y), expected_yarn(32, 1e4, 4, 0, 6));
  y.truncate = false;
  const double high = 32 * std::log(128 / (2 * std::numbers::pi)) / (2 * std::log(1e4));
  EXPECT_NEAR(high, 5.2361204, 1e-7);
  expect_table(yarn_rope(32, 1e4, y), expected_yarn(32, 1e4, 4, 0, high));
  // Other betas move the ramp: beta_fast 8, beta_slow 2 over 4096 tokens, D 64, theta 1e4:
  // 64 ln(4096 / 16 pi) / (2 ln 1e4) = 15.296 -> 15; 64 ln(4096 / 4 pi) / (2 ln 1e4) = 20.194 -> 21.
  y = yarn(8, 4096);
  y.beta_fast = 8;
  y.beta_slow = 2;
  expect_table(yarn_rope(64, 1e4, y), expected_yarn(64, 1e4, 8, 15, 21));
  // Equal bounds (beta_fast == beta_slow, untruncated) get transformers' +0.001: a step.
  y.beta_slow = 8;
  y.truncate = false;
  const double at = 64 * std::log(4096 / (16 * std::numbers::pi)) / (2 * std::log(1e4));
  expect_table(yarn_rope(64, 1e4, y), expected_yarn(64, 1e4, 8, at, at + 0.001));
}

TEST(RotaryEmbedding, YarnAttentionFactor) {
  RopeScaling y = yarn(4, 128);
  EXPECT_FLOAT_EQ(yarn_rope(32, 1e4, y).attention_scaling, float(0.1 * std::log(4.0) + 1));
  y.mscale = 0.5;  // alone: ignored
  EXPECT_FLOAT_EQ(yarn_rope(32, 1e4, y).attention_scaling, float(0.1 * std::log(4.0) + 1));
  y.mscale_all_dim = 1;  // DeepSeek's ratio get_mscale(f, mscale) / get_mscale(f, mscale_all_dim)
  EXPECT_FLOAT_EQ(yarn_rope(32, 1e4, y).attention_scaling,
                  float((0.05 * std::log(4.0) + 1) / (0.1 * std::log(4.0) + 1)));
  y.attention_factor = 1.25;  // given: wins
  EXPECT_EQ(yarn_rope(32, 1e4, y).attention_scaling, 1.25f);
  EXPECT_EQ(yarn_rope(32, 1e4, yarn(1, 128)).attention_scaling, 1.0f);  // factor <= 1: no scaling
  EXPECT_EQ(yarn_rope(32, 1e4, yarn(0.5, 128)).attention_scaling, 1.0f);
}

TEST(RotaryEmbedding, FromConfig) {
  ModelConfig m = *preset_model_config("qwen3-0.6b");
  RopeParams p = rotary_embedding(m);
  EXPECT_EQ(p.attention_scaling, 1.0f);
  EXPECT_EQ(p.inv_freq, RopeParams::plain(128, 1e6).inv_freq);
  m.rope_scaling = yarn(4, 32768);
  p = rotary_embedding(m);
  EXPECT_EQ(p.inv_freq, yarn_rope(128, 1e6, m.rope_scaling).inv_freq);
  EXPECT_GT(p.attention_scaling, 1.1f);
}

namespace {

struct QkvCase {
  int64_t T = 7, hq = 4, hkv = 2, D = 32;
  std::vector<float> qkv, qw, kw;
  std::vector<int32_t> pos;
  QkvCase() {
    std::mt19937 g(5);
    std::uniform_real_distribution<float> u(-2, 2), w(0.5f, 1.5f);
    qkv.resize(size_t(T * (hq + 2 * hkv) * D));
    for (auto& x : qkv) x = u(g);
    for (int64_t i = 0; i < D; ++i) qw.push_back(w(g)), kw.push_back(w(g));
    pos = {0, 1, 63, 64, 65, 300, 4999};  // around and far past original_max_position_embeddings 64
  }
  int64_t W() const { return (hq + 2 * hkv) * D; }
};

std::vector<float> run_op(const QkvCase& c, const RopeParams& rope) {
  auto be = make_cpu_backend(1);
  Tensor qkv = be->empty({c.T, c.W()}, DType::F32), qw = be->empty({c.D}, DType::F32),
         kw = be->empty({c.D}, DType::F32), pos = be->empty({c.T}, DType::I32);
  be->upload(c.qkv.data(), DType::F32, qkv);
  be->upload(c.qw.data(), DType::F32, qw);
  be->upload(c.kw.data(), DType::F32, kw);
  be->upload(c.pos.data(), DType::I32, pos);
  be->qk_norm_rope(qkv, qw, kw, pos, c.hq, c.hkv, c.D, 1e-6f, rope);
  return be->to_host_f32(qkv);
}

}  // namespace

// The op with YaRN against a double-precision reference: RMSNorm in double, the angle as float32
// position * inv_freq (as transformers), cos/sin and the attention factor in double.
TEST(RotaryEmbedding, CpuOpWithYarnMatchesDoubleReference) {
  QkvCase c;
  const RopeParams rope = yarn_rope(c.D, 1e4, yarn(4, 64));
  const std::vector<float> got = run_op(c, rope);
  const double af = 0.1 * std::log(4.0) + 1;
  const int64_t h = c.D / 2;
  double max_err = 0;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t hd = 0; hd < c.hq + 2 * c.hkv; ++hd) {
      const float* x = c.qkv.data() + t * c.W() + hd * c.D;
      const float* g = got.data() + t * c.W() + hd * c.D;
      if (hd >= c.hq + c.hkv) {  // v heads: untouched
        for (int64_t i = 0; i < c.D; ++i) EXPECT_EQ(g[i], x[i]);
        continue;
      }
      const std::vector<float>& w = hd < c.hq ? c.qw : c.kw;
      double ss = 0;
      for (int64_t i = 0; i < c.D; ++i) ss += double(x[i]) * x[i];
      const double inv = 1 / std::sqrt(ss / double(c.D) + 1e-6);
      for (int64_t i = 0; i < h; ++i) {
        const double a = x[i] * inv * w[size_t(i)], b = x[i + h] * inv * w[size_t(i + h)];
        const double angle = double(float(c.pos[size_t(t)]) * rope.inv_freq[size_t(i)]);
        const double cs = std::cos(angle) * af, sn = std::sin(angle) * af;
        max_err = std::max(max_err, std::abs(g[i] - (a * cs - b * sn)));
        max_err = std::max(max_err, std::abs(g[i + h] - (b * cs + a * sn)));
      }
    }
  EXPECT_LT(max_err, 2e-5);
  // And YaRN is not plain RoPE: past the first pairs the outputs differ.
  const std::vector<float> plain = run_op(c, RopeParams::plain(c.D, 1e4));
  double diff = 0;
  for (size_t i = 0; i < got.size(); ++i) diff = std::max(diff, double(std::abs(got[i] - plain[i])));
  EXPECT_GT(diff, 0.1);
}

// Plain RoPE gives what the op computed before it took a table (inv_freq from a float theta in
// double, cos/sin in double rounded to float, no scaling), bit for bit.
TEST(RotaryEmbedding, PlainRopeIsBitIdenticalToTheThetaForm) {
  QkvCase c;
  const float theta = 1e6f;
  std::vector<float> inv_freq;
  for (int64_t i = 0; i < c.D / 2; ++i)
    inv_freq.push_back(float(1.0 / std::pow(double(theta), double(2 * i) / double(c.D))));
  EXPECT_EQ(RopeParams::plain(c.D, theta).inv_freq, inv_freq);
  std::vector<float> want = c.qkv;
  const int64_t h = c.D / 2;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t hd = 0; hd < c.hq + c.hkv; ++hd) {
      float* x = want.data() + t * c.W() + hd * c.D;
      const float* w = (hd < c.hq ? c.qw : c.kw).data();
      double ss = 0;
      for (int64_t i = 0; i < c.D; ++i) ss += double(x[i]) * x[i];
      const float inv = float(1.0 / std::sqrt(ss / double(c.D) + 1e-6f));
      for (int64_t i = 0; i < c.D; ++i) x[i] = x[i] * inv * w[i];
      for (int64_t i = 0; i < h; ++i) {
        const float angle = float(c.pos[size_t(t)]) * inv_freq[size_t(i)];
        const float cs = float(std::cos(double(angle))), sn = float(std::sin(double(angle)));
        const float a = x[i], b = x[i + h];
        x[i] = a * cs - b * sn;
        x[i + h] = b * cs + a * sn;
      }
    }
  EXPECT_EQ(run_op(c, RopeParams::plain(c.D, theta)), want);
}
