// --quantization int8 on the CPU backend (backends/cpu/cpu_int8*): the block quantizer, every
// kernel variant against the portable one (bit for bit: the integer sums are exact and the float
// recipe is the same), the kernels against the F32 GEMM of the dequantized weights within the
// activation rounding's bound, CpuBackend's quantize_weight / linear_quantized, and the engine on
// the tiny fixtures against the unquantized one.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine_compare.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_int8_kernels.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "quantized_engine_checks.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

std::vector<float> uniform(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

struct Quantized {
  std::vector<int8_t> codes;
  std::vector<float> scales;
};

Quantized quantize_rows(const std::vector<float>& x, int64_t rows, int64_t K) {
  const int64_t nb = cpu::q8_blocks(K);
  Quantized q{std::vector<int8_t>(size_t(rows * K)), std::vector<float>(size_t(rows * nb))};
  for (int64_t r = 0; r < rows; ++r)
    cpu::quantize_q8_row(x.data() + r * K, K, q.codes.data() + r * K, q.scales.data() + r * nb);
  return q;
}

TEST(CpuInt8, QuantizeRoundTrip) {
  for (int64_t K : {1, 32, 100, 1024}) {
    std::vector<float> x = uniform(size_t(K), uint32_t(K), -3.0f, 3.0f);
    if (K >= 64) std::fill(x.begin() + 32, x.begin() + 64, 0.0f);  // an all-zero block
    const Quantized q = quantize_rows(x, 1, K);
    for (int64_t b = 0; b < cpu::q8_blocks(K); ++b) {
      float amax = 0;
      for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) amax = std::max(amax, std::fabs(x[size_t(k)]));
      ASSERT_EQ(q.scales[size_t(b)], amax / 127.0f) << "K " << K << " block " << b;
      for (int64_t k = b * 32; k < std::min(K, b * 32 + 32); ++k) {
        const int c = q.codes[size_t(k)];
        ASSERT_LE(std::abs(c), 127);
        // Nearest: within half a step (and the code of the largest element is +-127).
        EXPECT_LE(std::fabs(float(c) * q.scales[size_t(b)] - x[size_t(k)]), 0.5f * q.scales[size_t(b)] * 1.0001f);
        if (amax == 0) EXPECT_EQ(c, 0);
        if (std::fabs(x[size_t(k)]) == amax && amax > 0) EXPECT_EQ(std::abs(c), 127);
      }
    }
  }
  // Ties go to even; a scale of exactly 1 (amax 127) makes the halves exact.
  std::vector<float> t = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.5f, 1.49f, -126.5f};
  const Quantized q = quantize_rows(t, 1, int64_t(t.size()));
  EXPECT_EQ(q.scales[0], 1.0f);
  const std::vector<int8_t> want = {127, 2, 4, -2, 0, 0, 1, -126};
  EXPECT_EQ(q.codes, want);
}

struct Problem {
  int64_t T, N, K;
  std::vector<float> x, w;  // [T, K], [N, K]
  Quantized xq, wq;
};

Problem make_problem(int64_t T, int64_t N, int64_t K, uint32_t seed) {
  Problem p{T, N, K, uniform(size_t(T * K), seed), uniform(size_t(N * K), seed + 1), {}, {}};
  p.xq = quantize_rows(p.x, T, K);
  p.wq = quantize_rows(p.w, N, K);
  return p;
}

const std::vector<std::tuple<int64_t, int64_t, int64_t>> kShapes = {
    {1, 13, 1024}, {3, 9, 33}, {4, 70, 128}, {5, 8, 7}, {9, 67, 300}, {1, 4, 16}, {12, 37, 100}, {17, 5, 64}};

std::vector<float> run(const Problem& p, cpu::Int8Isa isa) {
  // Rows [1, N) only, into a wider output (ldo N + 3): the row range and ldo are honoured.
  const int64_t ldo = p.N + 3;
  std::vector<float> out(size_t(p.T * ldo), -7.0f);
  cpu::gemm_q8(p.xq.codes.data(), p.xq.scales.data(), p.T, p.wq.codes.data(), p.wq.scales.data(), p.K, 1, p.N,
               out.data(), ldo, isa);
  for (int64_t t = 0; t < p.T; ++t) {
    EXPECT_EQ(out[size_t(t * ldo)], -7.0f) << "row 0 was written";
    EXPECT_EQ(out[size_t(t * ldo + p.N)], -7.0f) << "past the row range";
  }
  return out;
}

TEST(CpuInt8, EveryVariantEqualsThePortableOne) {
  const cpu::Int8Isa top = cpu::detected_int8_isa();
  std::printf("this CPU runs the %s int8 kernels\n", cpu::int8_isa_name(top));
  for (auto [T, N, K] : kShapes) {
    const Problem p = make_problem(T, N, K, uint32_t(T * 1000 + N + K));
    const std::vector<float> want = run(p, cpu::Int8Isa::Portable);
    for (int isa = 1; isa <= int(top); ++isa) {
      const std::vector<float> got = run(p, cpu::Int8Isa(isa));
      EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0)
          << cpu::int8_isa_name(cpu::Int8Isa(isa)) << " T " << T << " N " << N << " K " << K;
    }
  }
  if (top != cpu::Int8Isa::Avx512Vnni) {
    const Problem p = make_problem(1, 4, 16, 1);
    EXPECT_THROW(run(p, cpu::Int8Isa::Avx512Vnni), Error);
  }
}

// Against x @ dequant(w)^T in double: rounding x to its codes moves each product by at most
// |w_k| x scale_b / 2, so |error| <= sum_k |w_k| scale_b(k) / 2, plus FP32 rounding of the sums.
TEST(CpuInt8, FastPathWithinTheActivationRoundingBound) {
  for (auto [T, N, K] : kShapes) {
    const Problem p = make_problem(T, N, K, uint32_t(7 + T + N + K));
    const std::vector<float> got = run(p, cpu::detected_int8_isa());
    const int64_t nb = cpu::q8_blocks(K), ldo = N + 3;
    double worst = 0;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t n = 1; n < N; ++n) {
        double want = 0, bound = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double wk = double(p.wq.codes[size_t(n * K + k)]) * p.wq.scales[size_t(n * nb + k / 32)];
          want += double(p.x[size_t(t * K + k)]) * wk;
          bound += std::fabs(wk) * p.xq.scales[size_t(t * nb + k / 32)] / 2;
          mag += std::fabs(double(p.x[size_t(t * K + k)]) * wk);
        }
        const double err = std::fabs(double(got[size_t(t * ldo + n)]) - want);
        EXPECT_LE(err, bound + 1e-6 * mag) << "t " << t << " n " << n << " K " << K;
        worst = std::max(worst, err / (bound + 1e-30));
      }
    std::printf("T %ld N %ld K %ld: worst error / bound %.3f\n", long(T), long(N), long(K), worst);
  }
}

TEST(CpuInt8, BackendLinearMatchesTheKernelsAndChecksScales) {
  CpuBackend cpu(2, CpuPrecision::Fast);
  Backend& be = cpu;  // linear(x, w, scales, out) is Backend's
  ASSERT_TRUE(be.supports_quantization(Quantization::INT8));
  const int64_t T = 6, N = 40, K = 100, nb = cpu::q8_blocks(K);
  const Problem p = make_problem(T, N, K, 99);
  Tensor w = be.empty({N, K}, DType::F32);
  std::copy(p.w.begin(), p.w.end(), w.data<float>());
  Tensor codes;
  WeightScales scales;
  be.quantize_weight(w, Quantization::INT8, codes, scales);
  ASSERT_EQ(codes.dtype(), DType::I8);
  ASSERT_EQ(scales.scale.shape(), (Shape{N, nb}));
  EXPECT_EQ(scales.block_n, 1);
  EXPECT_EQ(scales.block_k, 32);
  EXPECT_EQ(std::memcmp(codes.data<int8_t>(), p.wq.codes.data(), size_t(N * K)), 0);
  EXPECT_EQ(std::memcmp(scales.scale.data<float>(), p.wq.scales.data(), size_t(N * nb) * 4), 0);

  Tensor x = be.empty({T, K}, DType::F32), out = be.empty({T, N}, DType::F32);
  std::copy(p.x.begin(), p.x.end(), x.data<float>());
  be.linear(x, codes, scales, out);
  std::vector<float> want(size_t(T * N));
  cpu::gemm_q8(p.xq.codes.data(), p.xq.scales.data(), T, p.wq.codes.data(), p.wq.scales.data(), K, 0, N, want.data(), N,
               cpu::Int8Isa::Portable);
  EXPECT_EQ(std::memcmp(out.data<float>(), want.data(), want.size() * 4), 0);

  WeightScales bad = scales;
  bad.block_k = 0;
  try {
    be.linear(x, codes, bad, out);
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("need F32 scales [40, 4] per 1 x 32 block"), std::string::npos) << e.what();
  }
  EXPECT_THROW(be.linear(x, codes, WeightScales{}, out), Error);
}

// Greedy generation with -q int8 against the unquantized engine on the tiny fixtures: the logits
// of every step up to the first differing token have cosine >= 0.99; token agreement is printed.
TEST(CpuInt8, EngineAgreesWithTheUnquantizedOneOnTinyFixtures) {
  test::expect_quantized_engine_near_unquantized(Quantization::INT8, 0.99);
}

TEST(CpuInt8, RefusedForQwen3MoE) { test::expect_quantization_refused_for_moe(Quantization::INT8); }

}  // namespace
}  // namespace nanovllm
