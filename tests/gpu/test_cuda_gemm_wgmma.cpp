// Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) in each tile form against a double-precision
// product of the same BF16 inputs, at shapes with tails in T, N and K; its fused gate_up + SiLU form
// against the GEMM then silu_and_mul.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "nanovllm/backends/cuda/gemm_wgmma.h"

namespace nanovllm::test {
namespace {

struct Case {
  int64_t T, N, K;
};

TEST(CudaGemmWgmma, EveryFormMatchesADoubleProductWithTails) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  // T: one row, a partial tile, several tiles and a tail; N: below, at and past the 128 / 256
  // weight-row tiles; K: one partial stage, several stages with a tail, many stages.
  for (const Case c :
       {Case{1, 256, 64}, Case{37, 1000, 1000}, Case{129, 384, 136}, Case{300, 520, 4096}, Case{256, 2048, 1024}}) {
    const auto xv = rand_bf16(size_t(c.T * c.K), 7), wv = rand_bf16(size_t(c.N * c.K), 8);
    std::vector<double> ref(size_t(c.T * c.N));
    double ss = 0;
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t n = 0; n < c.N; ++n) {
        double a = 0;
        for (int64_t k = 0; k < c.K; ++k) a += double(xv[size_t(t * c.K + k)]) * wv[size_t(n * c.K + k)];
        ref[size_t(t * c.N + n)] = a;
        ss += a * a;
      }
    const double rms = std::sqrt(ss / double(ref.size()));
    Tensor x = be.empty({c.T, c.K}, DType::BF16), w = be.empty({c.N, c.K}, DType::BF16);
    be.upload(xv.data(), DType::F32, x);
    be.upload(wv.data(), DType::F32, w);
    for (const cuda::GemmWgmmaForm form : cuda::kGemmWgmmaForms) {
      Tensor out = be.empty({c.T, c.N}, DType::BF16);
      std::vector<uint16_t> sentinel(size_t(c.T * c.N), 0x7FC0);  // NaN: every output must be written
      be.upload(sentinel.data(), DType::BF16, out);
      cuda::gemm_wgmma(x.data<uint16_t>(), w.data<uint16_t>(), out.data<uint16_t>(), c.T, c.N, c.K, form, be.stream());
      std::vector<uint16_t> got(size_t(c.T * c.N));
      be.download(out, got.data());
      const std::string name = std::string(cuda::gemm_wgmma_form_name(form)) + " T " + std::to_string(c.T) + " N " +
                               std::to_string(c.N) + " K " + std::to_string(c.K);
      double worst = 0;
      size_t bad = 0;
      for (size_t i = 0; i < ref.size(); ++i) {
        const double g = bf16_to_f32(got[i]), e = std::abs(g - ref[i]);
        // One BF16 rounding of an FP32 sum: 2^-8 of the value, plus the sum's own float error.
        if (!(e <= std::abs(ref[i]) / 256 + rms / 4096)) ++bad;
        if (std::isfinite(g)) worst = std::max(worst, e / rms);
      }
      std::printf("[gpu] gemm_wgmma %s: worst error %.2e x rms, %zu outside\n", name.c_str(), worst, bad);
      EXPECT_EQ(bad, 0u) << name;
    }
  }
}

TEST(CudaGemmWgmma, GateUpSiluEqualsTheGemmThenSiluAndMul) {
  REQUIRE_GPU();
  CudaBackend be(0);
  if (!be.wgmma()) GTEST_SKIP() << "no sm_90a code for this GPU";
  // I: below, at and past a 128-output tile; T and K with tails.
  for (const Case c : {Case{37, 200, 1000}, Case{129, 384, 136}, Case{256, 520, 1024}}) {
    const int64_t T = c.T, I = c.N, K = c.K;
    const auto xv = rand_bf16(size_t(T * K), 11), wv = rand_bf16(size_t(2 * I * K), 12);
    Tensor x = be.empty({T, K}, DType::BF16), w = be.empty({2 * I, K}, DType::BF16);
    be.upload(xv.data(), DType::F32, x);
    be.upload(wv.data(), DType::F32, w);
    // The unfused path on the same GEMM: gate_up [T, 2I], then silu_and_mul.
    Tensor gate_up = be.empty({T, 2 * I}, DType::BF16), unfused = be.empty({T, I}, DType::BF16),
           fused = be.empty({T, I}, DType::BF16);
    cuda::gemm_wgmma(x.raw(), w.raw(), gate_up.raw(), T, 2 * I, K,
                     cuda::GemmWgmmaForm::Cols256Stages4PersistentTmaStore, be.stream());
    be.silu_and_mul(gate_up, unfused);
    cuda::gemm_wgmma(x.raw(), w.raw(), fused.raw(), T, I, K, cuda::GemmWgmmaForm::GateUpSilu, be.stream());
    std::vector<uint16_t> got(size_t(T * I)), want(size_t(T * I));
    be.download(fused, got.data());
    be.download(unfused, want.data());
    // And both against a double product: silu(g) * u with g, u, silu(g) rounded to BF16 as the model does.
    std::vector<double> ref(size_t(T * I));
    double ss = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < K; ++k) {
          g += double(xv[size_t(t * K + k)]) * wv[size_t(i * K + k)];
          u += double(xv[size_t(t * K + k)]) * wv[size_t((I + i) * K + k)];
        }
        const float gb = bf16_round(float(g));
        const double v = double(bf16_round(gb / (1.0f + std::exp(-gb)))) * bf16_round(float(u));
        ref[size_t(t * I + i)] = v;
        ss += v * v;
      }
    const double rms = std::sqrt(ss / double(ref.size()));
    size_t differ = 0, bad = 0;
    for (size_t e = 0; e < ref.size(); ++e) {
      differ += got[e] != want[e];
      const double err = std::abs(double(bf16_to_f32(got[e])) - ref[e]);
      if (!(err <= std::abs(ref[e]) / 64 + rms / 1024)) ++bad;
    }
    const std::string name = "T " + std::to_string(T) + " I " + std::to_string(I) + " K " + std::to_string(K);
    std::printf("[gpu] gemm_wgmma gate_up_silu %s: %zu of %zu differ from the unfused path, %zu outside\n",
                name.c_str(), differ, ref.size(), bad);
    EXPECT_EQ(differ, 0u) << name;
    EXPECT_EQ(bad, 0u) << name;
  }
}

TEST(CudaGemmWgmma, RefusesShapesOutsideItsLimits) {
  REQUIRE_GPU();
  CudaBackend be(0);
  Tensor t = be.empty({64, 64}, DType::BF16);
  auto* p = t.data<uint16_t>();
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 8, 8, 12, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 0, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p + 1, p, p, 8, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
  // The TMA-store epilogues write rows of N BF16 by TMA: N a multiple of 8.
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 8, 12, 64, cuda::GemmWgmmaForm::GateUpSilu, be.stream()), Error);
}

}  // namespace
}  // namespace nanovllm::test
