// The CPU's fast INT4 kernel (cpu_int4_kernels.h): the VNNI variant equals the portable recipe bit for
// bit, and both are within the activations' INT8 rounding of the exact product with the dequantized
// weights (backends/int_weights.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_int4_kernels.h"
#include "nanovllm/backends/cpu/cpu_int8_kernels.h"
#include "nanovllm/backends/int_weights.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

struct Case {
  int64_t T, N, K, G;
  bool zero_points;
};

void check(const Case& c, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  Tensor w = Tensor::host({c.N, c.K}, DType::F32), codes;
  for (int64_t i = 0; i < c.N * c.K; ++i) w.data<float>()[i] = 0.02f * nd(rng);
  WeightScales s;
  int_quantize_weight(w, 4, c.G, c.zero_points, codes, s);
  std::vector<float> x(size_t(c.T * c.K));
  for (auto& v : x) v = nd(rng);
  std::vector<cpu::Q4Activations> a(size_t(c.T));
  for (int64_t t = 0; t < c.T; ++t) cpu::quantize_q4_activations(x.data() + t * c.K, c.K, a[size_t(t)]);
  std::vector<uint8_t> zbytes(size_t(c.zero_points ? s.zero.numel() : 0));
  if (c.zero_points) ASSERT_TRUE(cpu::q4_zero_points(s.zero.data<float>(), s.zero.numel(), zbytes.data()));
  const uint8_t* zero = c.zero_points ? zbytes.data() : nullptr;
  std::vector<float> portable(size_t(c.T * c.N)), vnni(size_t(c.T * c.N));
  cpu::gemm_q4(a.data(), c.T, codes.data<uint8_t>(), s.scale.data<float>(), zero, c.K, c.G, 0, c.N, portable.data(),
               c.N, false);
  const bool has_vnni = cpu::detected_int8_isa() == cpu::Int8Isa::Avx512Vnni;
  if (has_vnni) {
    // Two calls splitting the rows, as the backend's threads do.
    cpu::gemm_q4(a.data(), c.T, codes.data<uint8_t>(), s.scale.data<float>(), zero, c.K, c.G, 0, c.N / 2, vnni.data(),
                 c.N, true);
    cpu::gemm_q4(a.data(), c.T, codes.data<uint8_t>(), s.scale.data<float>(), zero, c.K, c.G, c.N / 2, c.N, vnni.data(),
                 c.N, true);
  }
  std::vector<float> row(size_t(c.K)), xq(size_t(c.K)), xs(size_t(cpu::q8_blocks(c.K)));
  std::vector<int8_t> q(size_t(c.K));
  for (int64_t t = 0; t < c.T; ++t) {
    cpu::quantize_q8_row(x.data() + t * c.K, c.K, q.data(), xs.data());
    for (int64_t n = 0; n < c.N; ++n) {
      int_dequantize_row(codes, s, n, 0, c.K, row.data());
      // exact: the dequantized weights times the INT8-rounded activations, in double; bound: float
      // accumulation of K terms.
      double exact = 0, mag = 0;
      for (int64_t k = 0; k < c.K; ++k) {
        const double xv = double(q[size_t(k)]) * xs[size_t(k / 32)];
        exact += xv * row[size_t(k)];
        mag += std::fabs(xv * row[size_t(k)]);
      }
      const float got = portable[size_t(t * c.N + n)];
      EXPECT_NEAR(got, exact, 1e-5 * mag + 1e-6)
          << "T " << c.T << " N " << c.N << " K " << c.K << " G " << c.G << " t " << t << " n " << n;
      if (has_vnni) {
        EXPECT_EQ(got, vnni[size_t(t * c.N + n)]) << "t " << t << " n " << n << " G " << c.G;
      }
    }
  }
}

}  // namespace

TEST(CpuInt4, VnniEqualsPortableAndBothMatchTheDequantizedProduct) {
  const Case cases[] = {{1, 9, 128, 32, true},
                        {3, 8, 128, 64, false},
                        {5, 7, 256, 128, true},
                        {2, 5, 96, 32, true},
                        {1, 6, 160, 32, false},
                        {4, 12, 512, 512, true},
                        {6, 4, 384, 128, false},
                        {1, 3, 192, 64, true},
                        // one row of x: tiles of 8 weight rows, then 4, then 1
                        {1, 40, 256, 128, true},
                        {1, 21, 192, 64, true},
                        {1, 36, 384, 32, false}};
  uint32_t seed = 1;
  for (const Case& c : cases) check(c, seed++);
}

TEST(CpuInt4, ShapesOutsideTheRecipeAreRefused) {
  EXPECT_TRUE(cpu::q4_kernel_fits(4096, 128));
  EXPECT_TRUE(cpu::q4_kernel_fits(96, 32));
  EXPECT_FALSE(cpu::q4_kernel_fits(96, 96));  // a lane -> group pattern that changes per chunk
  EXPECT_FALSE(cpu::q4_kernel_fits(100, 4));
  cpu::Q4Activations a;
  float out = 0;
  EXPECT_THROW(cpu::gemm_q4(&a, 1, nullptr, nullptr, nullptr, 96, 96, 0, 1, &out, 1, false), Error);
}

// The CPU backend's linear on U4 weights: --cpu-precision fast takes this kernel where the shape fits
// (bit for bit), exact keeps the F32 reference, and a shape outside the recipe stays on the reference
// in fast mode too.
TEST(CpuInt4, FastPrecisionLinearTakesTheKernelWhereItFits) {
  for (const Case& c : {Case{3, 10, 256, 64, true}, Case{2, 6, 96, 96, true}}) {
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Tensor w = Tensor::host({c.N, c.K}, DType::F32), codes;
    for (int64_t i = 0; i < c.N * c.K; ++i) w.data<float>()[i] = 0.02f * nd(rng);
    WeightScales s;
    int_quantize_weight(w, 4, c.G, c.zero_points, codes, s);
    Tensor x = Tensor::host({c.T, c.K}, DType::F32);
    for (int64_t i = 0; i < c.T * c.K; ++i) x.data<float>()[i] = nd(rng);
    CpuBackend fast(1, CpuPrecision::Fast), exact(1, CpuPrecision::Exact);
    Tensor of = Tensor::host({c.T, c.N}, DType::F32), oe = Tensor::host({c.T, c.N}, DType::F32);
    static_cast<Backend&>(fast).linear(x, codes, s, of);
    static_cast<Backend&>(exact).linear(x, codes, s, oe);
    std::vector<cpu::Q4Activations> a(size_t(c.T));
    for (int64_t t = 0; t < c.T; ++t) cpu::quantize_q4_activations(x.data<float>() + t * c.K, c.K, a[size_t(t)]);
    std::vector<float> kernel(size_t(c.T * c.N));
    const bool fits = cpu::q4_kernel_fits(c.K, c.G);
    std::vector<uint8_t> zbytes(size_t(s.zero.numel()));
    ASSERT_TRUE(cpu::q4_zero_points(s.zero.data<float>(), s.zero.numel(), zbytes.data()));
    if (fits)
      cpu::gemm_q4(a.data(), c.T, codes.data<uint8_t>(), s.scale.data<float>(), zbytes.data(), c.K, c.G, 0, c.N,
                   kernel.data(), c.N, cpu::detected_int8_isa() == cpu::Int8Isa::Avx512Vnni);
    size_t differ = 0;
    for (int64_t i = 0; i < c.T * c.N; ++i) {
      if (fits)
        EXPECT_EQ(of.data<float>()[i], kernel[size_t(i)]) << "K " << c.K << " i " << i;
      else
        EXPECT_EQ(of.data<float>()[i], oe.data<float>()[i]) << "K " << c.K << " i " << i;
      differ += of.data<float>()[i] != oe.data<float>()[i];
    }
    if (fits) EXPECT_GT(differ, 0u) << "fast and exact agree everywhere: was the INT8 kernel taken?";
  }
}

TEST(CpuInt4, ZeroPointBytesOnlyForIntegersInRange) {
  const float good[] = {0.0f, 7.0f, 15.0f, 255.0f};
  uint8_t out[4] = {};
  ASSERT_TRUE(cpu::q4_zero_points(good, 4, out));
  EXPECT_EQ(out[0], 0);
  EXPECT_EQ(out[1], 7);
  EXPECT_EQ(out[2], 15);
  EXPECT_EQ(out[3], 255);
  for (float bad : {7.5f, -1.0f, 256.0f, std::nanf(""), -0.25f}) {
    const float z[2] = {3.0f, bad};
    EXPECT_FALSE(cpu::q4_zero_points(z, 2, out)) << bad;
  }
}

// prepare_int_weight (what the loaders call): with --cpu-precision fast the zero points of weights the
// kernel takes become its U8 bytes and the linear's output is the same bit for bit as on the
// unprepared weights; the exact precision, a shape outside the recipe and non-integral zero points
// keep the canonical F32 ones.
TEST(CpuInt4, PreparedZeroPointsGiveTheSameOutputs) {
  struct P {
    int64_t T, N, K, G;
    CpuPrecision precision;
    float zero_shift;  // added to every zero point: 0.5 makes them non-integral
    bool converted;
  };
  for (const P& c :
       {P{1, 24, 256, 128, CpuPrecision::Fast, 0.0f, true}, P{3, 10, 256, 64, CpuPrecision::Fast, 0.0f, true},
        P{2, 6, 96, 96, CpuPrecision::Fast, 0.0f, false}, P{1, 8, 256, 128, CpuPrecision::Exact, 0.0f, false},
        P{2, 8, 256, 128, CpuPrecision::Fast, 0.5f, false}}) {
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    Tensor w = Tensor::host({c.N, c.K}, DType::F32), codes;
    for (int64_t i = 0; i < c.N * c.K; ++i) w.data<float>()[i] = 0.02f * nd(rng);
    WeightScales s;
    int_quantize_weight(w, 4, c.G, true, codes, s);
    for (int64_t i = 0; i < s.zero.numel(); ++i) s.zero.data<float>()[i] += c.zero_shift;
    Tensor x = Tensor::host({c.T, c.K}, DType::F32);
    for (int64_t i = 0; i < c.T * c.K; ++i) x.data<float>()[i] = nd(rng);
    CpuBackend be(2, c.precision);
    Backend& b = be;
    Tensor before = Tensor::host({c.T, c.N}, DType::F32), after = Tensor::host({c.T, c.N}, DType::F32);
    b.linear(x, codes, s, before);
    WeightScales p = s;
    b.prepare_int_weight(codes, p);
    EXPECT_EQ(p.zero.dtype(), c.converted ? DType::U8 : DType::F32) << "N " << c.N << " K " << c.K;
    b.linear(x, codes, p, after);
    for (int64_t i = 0; i < c.T * c.N; ++i)
      EXPECT_EQ(before.data<float>()[i], after.data<float>()[i]) << "K " << c.K << " G " << c.G << " i " << i;
  }
}
