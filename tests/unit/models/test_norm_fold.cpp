// models/norm_fold.h on the CPU backend: folding the decoder layers' norm weights into the
// projections after them (KernelOptions::norm_fold's load step) leaves the model's function as it
// was. A forward on the folded weights (unit norm weights, so the usual add_rms_norm + product
// paths) against one on the loaded weights: within float error (exact precision: F32 weights) or a
// BF16 rounding of the weights (fast precision). Dense layers fold both norms; a sparse MLP's
// post-attention norm (router and experts read it) stays. The norms get random weights first (dummy
// weights make them ones, which a fold would not change).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/models/norm_fold.h"
#include "two_prompt_forward.h"

using namespace nanovllm;

namespace {

// Dummy weights give norms of ones, which a fold would not change: the decoder layers' norm weights
// get values in [0.5, 1.5) first (the same in both runs).
void random_norms(CausalLM& m, Backend& be) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(0.5f, 1.5f);
  for (const WeightSpec& s : m.weight_specs()) {
    const std::string& n = s.name;
    if (n.find("layers.") == std::string::npos || n.size() < 16 ||
        n.compare(n.size() - 16, 16, "layernorm.weight") != 0)
      continue;
    std::vector<float> v(size_t(s.dst->numel()));
    for (float& x : v) x = u(rng);
    be.upload(v.data(), DType::F32, *s.dst);
  }
}

void check(const std::string& fixture, CpuPrecision precision) {
  const ModelConfig cfg = load_model_config(test::fixture(fixture));
  const test::Run want = test::two_prompt_forward(fixture, precision, nullptr, random_norms);
  int64_t folded = -1, again = -1;
  const test::Run got = test::two_prompt_forward(fixture, precision, nullptr, [&](CausalLM& m, Backend& be) {
    random_norms(m, be);
    folded = m.fold_rms_norms();
    again = m.fold_rms_norms();  // already folded: nothing more
  });
  int64_t expected = 0;  // every input norm; the post-attention norms of dense layers
  for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) expected += cfg.is_moe_layer(l) ? 1 : 2;
  EXPECT_EQ(folded, expected) << fixture;
  EXPECT_EQ(again, 0) << fixture;
  ASSERT_EQ(got.hidden.size(), want.hidden.size());
  const size_t H = size_t(cfg.hidden_size);
  double worst = 0, scale = 0, min_cos = 1;
  for (size_t row = 0; row * H < want.hidden.size(); ++row) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t k = 0; k < H; ++k) {
      const double a = got.hidden[row * H + k], b = want.hidden[row * H + k];
      ab += a * b, aa += a * a, bb += b * b;
      worst = std::max(worst, std::abs(a - b));
      scale = std::max(scale, std::abs(b));
    }
    min_cos = std::min(min_cos, ab / std::sqrt(aa * bb));
  }
  std::printf("%s: %lld norms folded; rows' cosine min %.8f, worst |diff| %.3e of max |h| %.3e\n", fixture.c_str(),
              static_cast<long long>(folded), min_cos, worst, scale);
  if (precision == CpuPrecision::Exact) {
    EXPECT_LE(worst, 1e-4 * scale) << fixture;  // F32 weights: the products regrouped
  } else {
    EXPECT_GE(min_cos, 0.999) << fixture;  // BF16 weights rounded once more
    EXPECT_LE(worst, 0.05 * scale) << fixture;
  }
}

}  // namespace

TEST(NormFold, DenseModelKeepsItsFunction) { check("tiny-qwen3-untied", CpuPrecision::Exact); }
TEST(NormFold, DenseModelBf16Weights) { check("tiny-qwen3-tied", CpuPrecision::Fast); }
TEST(NormFold, MoeModelFoldsTheSparseLayersInputNormOnly) { check("tiny-qwen3-moe", CpuPrecision::Exact); }

// What fold_rms_norm refuses: a norm of another width, and a norm folded already.
TEST(NormFold, RefusesWhatDoesNotApply) {
  auto be = make_cpu_backend(1, CpuPrecision::Exact);
  RMSNorm norm;
  norm.create(*be, 8, 1e-6);
  const std::vector<float> g{1, 2, 3, 4, 5, 6, 7, 8}, wv(4 * 8, 0.5f);
  be->upload(g.data(), DType::F32, norm.weight);
  Linear narrow, proj;
  narrow.weight = be->empty({4, 6}, be->weight_dtype());
  proj.weight = be->empty({4, 8}, be->weight_dtype());
  be->upload(wv.data(), DType::F32, proj.weight);
  EXPECT_FALSE(fold_rms_norm(*be, norm, narrow));
  EXPECT_FALSE(norm.folded);
  ASSERT_TRUE(fold_rms_norm(*be, norm, proj));
  EXPECT_TRUE(norm.folded);
  const std::vector<float> w = be->to_host_f32(proj.weight), ones = be->to_host_f32(norm.weight);
  for (size_t e = 0; e < w.size(); ++e) EXPECT_EQ(w[e], 0.5f * g[e % 8]) << e;
  for (float v : ones) EXPECT_EQ(v, 1.0f);
  EXPECT_FALSE(fold_rms_norm(*be, norm, proj));  // folded already: the weight stays as it is
  EXPECT_EQ(be->to_host_f32(proj.weight), w);
}
