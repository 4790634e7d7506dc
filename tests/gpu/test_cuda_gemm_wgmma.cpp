// Our Hopper BF16 GEMM (backends/cuda/gemm_wgmma.cu) in each tile form against a double-precision
// product of the same BF16 inputs, at shapes with tails in T, N and K.
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

TEST(CudaGemmWgmma, RefusesShapesOutsideItsLimits) {
  REQUIRE_GPU();
  CudaBackend be(0);
  Tensor t = be.empty({64, 64}, DType::BF16);
  auto* p = t.data<uint16_t>();
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 8, 8, 12, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p, p, p, 0, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
  EXPECT_THROW(cuda::gemm_wgmma(p + 1, p, p, 8, 8, 64, cuda::GemmWgmmaForm::Cols128Stages6, be.stream()), Error);
}

}  // namespace
}  // namespace nanovllm::test
