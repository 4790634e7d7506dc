// The folded RMSNorm on CUDA (KernelOptions::norm_fold; models/norm_fold.h, backends/cuda/norm_fold.cu):
// linear_residual_rms_linear on weights with the norm folded in against the unfolded path on the
// original weights (o_proj by cuBLASLt, add_rms_norm, then the product on our Hopper GEMM), for the
// gated MLP (gate_up + SiLU) and the attention's qkv (q/k norm + RoPE + KV store). The two round
// differently (the residual sum once instead of twice; the folded weight instead of the normed
// input), so they agree within a BF16 rounding: the residual element by element, the outputs row by
// row (cosine) and in their largest difference.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "nanovllm/layers/rotary_embedding.h"

namespace nanovllm::test {
namespace {

// Row-wise cosine (minimum over rows of `cols` values) and the largest |a - b| over max |b|.
struct Agreement {
  double min_cos = 1, max_rel = 0;
};
Agreement agreement(const std::vector<float>& a, const std::vector<float>& b, int64_t cols,
                    const std::function<bool(int64_t)>& keep = nullptr) {
  Agreement r;
  double peak = 0, worst = 0;
  for (size_t e = 0; e < b.size(); ++e)
    if (!keep || keep(int64_t(e) % cols)) peak = std::max(peak, double(std::abs(b[e])));
  for (size_t row = 0; row * size_t(cols) < b.size(); ++row) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t c = 0; c < cols; ++c) {
      if (keep && !keep(c)) continue;
      const size_t e = row * size_t(cols) + size_t(c);
      ab += double(a[e]) * b[e], aa += double(a[e]) * a[e], bb += double(b[e]) * b[e];
      worst = std::max(worst, double(std::abs(a[e] - b[e])));
    }
    if (aa > 0 && bb > 0) r.min_cos = std::min(r.min_cos, ab / std::sqrt(aa * bb));
  }
  r.max_rel = peak > 0 ? worst / peak : worst;
  return r;
}

TEST(CudaNormFold, FoldedProductsEqualTheUnfoldedPathWithinARounding) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  be.set_gemm(Gemm::Wgmma);  // our GEMM from kGemmWgmmaMinRows rows (auto: from 4,096)
  const int64_t K = 1024, Ko = 2048, I = 1536, Hq = 16, Hkv = 8, D = 128, W = (Hq + 2 * Hkv) * D, bs = 16;
  const float eps = 1e-6f;
  const auto wov = rand_bf16(size_t(K * Ko), 41, -0.03f, 0.03f), gv = rand_bf16(size_t(K), 42, 0.5f, 1.5f),
             wgv = rand_bf16(size_t(2 * I * K), 43, -0.05f, 0.05f), wqv = rand_bf16(size_t(W * K), 44, -0.05f, 0.05f),
             qnv = rand_bf16(size_t(D), 45, 0.5f, 1.5f), knv = rand_bf16(size_t(D), 46, 0.5f, 1.5f);
  auto upload = [&](const std::vector<float>& v, const Shape& s) {
    Tensor d = be.empty(s, DType::BF16);
    be.upload(v.data(), DType::F32, d);
    return d;
  };
  // The weights with the norm folded in, rounded to BF16 as models/norm_fold.h rounds them.
  auto folded = [&](const std::vector<float>& w, int64_t rows) {
    std::vector<float> f(w);
    for (int64_t n = 0; n < rows; ++n)
      for (int64_t k = 0; k < K; ++k) f[size_t(n * K + k)] *= gv[size_t(k)];
    return f;
  };
  const std::vector<float> ones(size_t(K), 1.0f);
  Tensor wo = upload(wov, {K, Ko}), g = upload(gv, {K}), unit = upload(ones, {K});
  Tensor wg = upload(wgv, {2 * I, K}), wgf = upload(folded(wgv, 2 * I), {2 * I, K});
  Tensor wq = upload(wqv, {W, K}), wqf = upload(folded(wqv, W), {W, K});
  Tensor qn = upload(qnv, {D}), kn = upload(knv, {D});
  const RopeParams rope = RopeParams::plain(D, 1e6);
  for (const int64_t T : {int64_t(600), int64_t(2100)}) {
    const auto xv = rand_bf16(size_t(T * Ko), uint32_t(T)), rv = rand_bf16(size_t(T * K), uint32_t(T + 1), -2.f, 2.f);
    const int64_t nblocks = (T + bs - 1) / bs + 1;
    std::vector<int32_t> slot(size_t(nblocks * bs));
    std::iota(slot.begin(), slot.end(), 0);
    std::shuffle(slot.begin(), slot.end(), std::mt19937(uint32_t(T)));
    slot.resize(size_t(T));
    std::vector<int32_t> pos(static_cast<size_t>(T));
    for (int64_t i = 0; i < T; ++i) pos[size_t(i)] = int32_t(i % 700);
    Tensor positions = be.empty({T}, DType::I32);
    be.upload(pos.data(), DType::I32, positions);
    AttentionMetadata md = one_prefill_metadata(T, slot, nblocks);
    be.prepare_metadata(md);
    for (const bool qkv : {false, true}) {
      // One run: out (qkv: its q columns), the caches (qkv), the residual, as floats.
      auto run = [&](bool fold) {
        Tensor x = upload(xv, {T, Ko}), res = upload(rv, {T, K});
        Tensor kc = be.empty({nblocks, bs, Hkv, D}, DType::BF16), vc = be.empty({nblocks, bs, Hkv, D}, DType::BF16);
        const std::vector<float> zeros(size_t(nblocks * bs * Hkv * D), 0.f);
        be.upload(zeros.data(), DType::F32, kc);
        be.upload(zeros.data(), DType::F32, vc);
        Tensor out = be.empty({T, qkv ? W : I}, DType::BF16);
        const Backend::QkNormRopeStore r{qn, kn, positions, kc, vc, Hq, Hkv, D, eps, rope, md, {}};
        be.set_norm_fold(fold);
        if (fold) {
          EXPECT_TRUE(be.linear_residual_rms_linear(x, wo, res, eps, qkv ? wqf : wgf, out, !qkv, qkv ? &r : nullptr))
              << "T " << T << (qkv ? " qkv" : " gate_up") << ": the folded form did not run";
        } else {
          // With the option off the op declines and leaves everything as it was.
          Tensor spare = be.empty({T, qkv ? W : I}, DType::BF16);
          EXPECT_FALSE(be.linear_residual_rms_linear(x, wo, res, eps, qkv ? wqf : wgf, spare, !qkv, nullptr));
          Tensor o = be.empty({T, K}, DType::BF16);
          be.linear(x, wo, o);
          if (qkv)
            be.add_rms_norm_linear_rope(o, res, g, eps, wq, out, r);
          else
            be.add_rms_norm_linear(o, res, g, eps, wg, out, true);
        }
        return std::vector<std::vector<float>>{be.to_host_f32(out), be.to_host_f32(kc), be.to_host_f32(vc),
                                               be.to_host_f32(res)};
      };
      const auto want = run(false), got = run(true);
      be.set_norm_fold(false);
      const std::string name = std::string(qkv ? "qkv" : "gate_up + SiLU") + " T " + std::to_string(T);
      // The residual: one rounding of the same sum apart at most.
      size_t differ = 0, bad = 0;
      for (size_t e = 0; e < want[3].size(); ++e) {
        differ += got[3][e] != want[3][e];
        bad += !(std::abs(got[3][e] - want[3][e]) <= std::abs(want[3][e]) / 128 + 1e-6f);
      }
      std::printf("[gpu] norm_fold %s: residual %zu of %zu differ, %zu by more than a BF16 rounding\n", name.c_str(),
                  differ, want[3].size(), bad);
      EXPECT_EQ(bad, 0u) << name;
      const Agreement o = agreement(got[0], want[0], qkv ? W : I, [&](int64_t c) { return !qkv || c < Hq * D; });
      std::printf("[gpu] norm_fold %s: %s rows' cosine min %.6f, largest difference %.2e of the largest value\n",
                  name.c_str(), qkv ? "q" : "output", o.min_cos, o.max_rel);
      EXPECT_GE(o.min_cos, 0.9999) << name;
      EXPECT_LE(o.max_rel, 0.02) << name;
      if (qkv)
        for (int c = 1; c <= 2; ++c) {
          const Agreement a = agreement(got[size_t(c)], want[size_t(c)], D);
          std::printf("[gpu] norm_fold %s: %s cache cosine min %.6f, largest difference %.2e\n", name.c_str(),
                      c == 1 ? "k" : "v", a.min_cos, a.max_rel);
          EXPECT_GE(a.min_cos, 0.9999) << name << (c == 1 ? " k cache" : " v cache");
          EXPECT_LE(a.max_rel, 0.02) << name << (c == 1 ? " k cache" : " v cache");
        }
    }
  }
  be.set_gemm(Gemm::Auto);
}

}  // namespace
}  // namespace nanovllm::test
