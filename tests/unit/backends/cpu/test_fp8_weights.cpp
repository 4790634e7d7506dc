// FP8 weights on the CPU backend, the oracle of the CUDA FP8 GEMMs (backends/fp8_weights.h):
// per-channel quantization at load, the weight-only linear against the F32 GEMM of the dequantized
// weights, block scales, the activation rounding the CUDA prefill GEMM adds, and the engine with
// --quantization fp8 against the unquantized one on the tiny fixtures.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine_compare.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/fp8_weights.h"
#include "nanovllm/engine/llm_engine.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/fp8.h"
#include "quantized_engine_checks.h"
#include "tiny_engine.h"

namespace nanovllm {
namespace {

// Rows of very different magnitudes (each row scaled by 10^u, u in [-3, 2]); `zero_row` all zeros.
Tensor random_weight(int64_t N, int64_t K, uint32_t seed, int64_t zero_row = -1) {
  Tensor w = Tensor::host({N, K}, DType::F32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::uniform_real_distribution<float> u(-3, 2);
  for (int64_t n = 0; n < N; ++n) {
    const float m = std::pow(10.0f, u(rng));
    for (int64_t k = 0; k < K; ++k) w.data<float>()[n * K + k] = n == zero_row ? 0 : g(rng) * m;
  }
  return w;
}

// Backend::linear with scales (CpuBackend's own linear hides the overload).
void qlinear(Backend& be, const Tensor& x, const Tensor& w, const WeightScales& s, Tensor& out) {
  be.linear(x, w, s, out);
}

Tensor dequantized(const Tensor& codes, const WeightScales& s) {
  const int64_t N = codes.size(0), K = codes.size(1);
  Tensor w = Tensor::host({N, K}, DType::F32);
  for (int64_t n = 0; n < N; ++n) fp8_dequantize_row(codes, s, n, 0, K, w.data<float>() + n * K);
  return w;
}

double max_rel_err(const Tensor& a, const Tensor& ref) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    num = std::max(num, double(std::fabs(a.data<float>()[i] - ref.data<float>()[i])));
    den = std::max(den, double(std::fabs(ref.data<float>()[i])));
  }
  return num / den;
}

TEST(Fp8Weights, PerChannelRoundTripIsWithinHalfAnE4M3Step) {
  CpuBackend be(2);
  const int64_t N = 37, K = 131;
  for (DType dt : {DType::F32, DType::BF16}) {
    Tensor w32 = random_weight(N, K, 7, /*zero_row=*/5), w = be.empty({N, K}, dt);
    be.upload(w32.raw(), DType::F32, w);
    Tensor wf = be.empty({N, K}, DType::F32);
    be.upload(w.raw(), dt, wf);  // the weight as the backend holds it
    Tensor codes;
    WeightScales s;
    be.quantize_weight(w, Quantization::FP8, codes, s);
    ASSERT_EQ(codes.dtype(), DType::F8E4M3);
    ASSERT_EQ(codes.shape(), (Shape{N, K}));
    ASSERT_EQ(s.scale.shape(), (Shape{N, 1}));
    EXPECT_EQ(s.block_n, 1);
    EXPECT_EQ(s.block_k, 0);
    const Tensor d = dequantized(codes, s);
    for (int64_t n = 0; n < N; ++n) {
      const float* r = wf.data<float>() + n * K;
      float amax = 0;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(r[k]));
      const float sc = s.scale.data<float>()[n];
      if (n == 5) {
        EXPECT_EQ(sc, 1.0f);
        for (int64_t k = 0; k < K; ++k) EXPECT_EQ(codes.data<uint8_t>()[n * K + k], 0);
        continue;
      }
      EXPECT_FLOAT_EQ(sc, amax / 448.0f) << n;
      bool hit_max = false;
      for (int64_t k = 0; k < K; ++k) {
        const float x = r[k], y = d.data<float>()[n * K + k];
        // E4M3 keeps 3 mantissa bits: half a step is 2^-4 of the value (normals) or 2^-10 of the
        // scale (subnormals); plus the F32 rounding of code x scale.
        EXPECT_LE(std::fabs(y - x), std::max(std::fabs(x) / 16, sc / 1024) * 1.0001f + 1e-30f) << n << "," << k;
        hit_max |= (codes.data<uint8_t>()[n * K + k] & 0x7f) == 0x7e;  // +-448: the row's largest
      }
      EXPECT_TRUE(hit_max) << n;
    }
  }
}

TEST(Fp8Weights, LinearIsTheF32GemmOfTheDequantizedWeights) {
  CpuBackend be(2);
  for (auto [T, N, K] :
       {std::tuple<int64_t, int64_t, int64_t>{1, 37, 131}, {3, 200, 96}, {17, 129, 300}, {100, 64, 64}}) {
    Tensor w = random_weight(N, K, uint32_t(T + N), -1), codes;
    WeightScales s;
    be.quantize_weight(w, Quantization::FP8, codes, s);
    Tensor x = random_weight(T, K, 3);
    Tensor out = be.empty({T, N}, DType::F32), ref = be.empty({T, N}, DType::F32);
    qlinear(be, x, codes, s, out);
    be.linear(x, dequantized(codes, s), ref);
    EXPECT_LE(max_rel_err(out, ref), 1e-6) << T << "x" << N << "x" << K;
    Tensor exact = be.empty({T, N}, DType::F32);
    be.linear(x, w, exact);
    const double e = max_rel_err(out, exact);
    EXPECT_LT(e, 0.1) << "quantization error out of bounds";
    EXPECT_GT(e, 0.0) << "no quantization error: were the weights quantized?";
  }
}

// Block scales (Qwen's FP8 checkpoints): scale [ceil(N/128), ceil(K/128)] applied per 128 x 128
// block, partial blocks at both edges; against a sum in double written out here.
TEST(Fp8Weights, BlockScalesApplyPerBlock) {
  CpuBackend be(2);
  const int64_t T = 5, N = 300, K = 260, bn = (N + 127) / 128, bk = (K + 127) / 128;
  Tensor codes = Tensor::host({N, K}, DType::F8E4M3);
  std::mt19937 rng(11);
  for (int64_t i = 0; i < codes.numel(); ++i) {
    uint8_t c = uint8_t(rng());
    codes.data<uint8_t>()[i] = (c & 0x7f) == 0x7f ? 0x7e : c;  // no NaN codes
  }
  WeightScales s{Tensor::host({bn, bk}, DType::F32), 128, 128};
  for (int64_t i = 0; i < bn * bk; ++i) s.scale.data<float>()[i] = std::ldexp(1.0f, int(i) - 8);
  Tensor x = random_weight(T, K, 4), out = be.empty({T, N}, DType::F32);
  qlinear(be, x, codes, s, out);
  double worst = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double v =
            double(e4m3_to_f32(codes.data<uint8_t>()[n * K + k])) * s.scale.data<float>()[(n / 128) * bk + k / 128];
        acc += double(x.data<float>()[t * K + k]) * v, mag += std::fabs(double(x.data<float>()[t * K + k]) * v);
      }
      worst = std::max(worst, std::fabs(out.data<float>()[t * N + n] - acc) / mag);
    }
  EXPECT_LT(worst, 1e-6);
}

TEST(Fp8Weights, ScaleShapeAndDtypeAreChecked) {
  CpuBackend be(1);
  Tensor codes = Tensor::host({10, 20}, DType::F8E4M3), x = be.empty({2, 20}, DType::F32),
         out = be.empty({2, 10}, DType::F32);
  for (WeightScales bad : {WeightScales{Tensor::host({9, 1}, DType::F32), 1, 0},
                           WeightScales{Tensor::host({1, 1}, DType::F32), 128, 128},  // fits; below: wrong
                           WeightScales{Tensor::host({1, 2}, DType::F32), 128, 128},
                           WeightScales{Tensor::host({10, 1}, DType::BF16), 1, 0}}) {
    if (bad.block_n == 128 && bad.scale.size(1) == 1) {
      EXPECT_NO_THROW(qlinear(be, x, codes, bad, out));
      continue;
    }
    EXPECT_THROW(qlinear(be, x, codes, bad, out), Error);
  }
  // The CPU backend dispatches by scheme: int8 gives I8 codes (cpu_int8.cpp), fp8 E4M3 ones.
  WeightScales s;
  Tensor q;
  be.quantize_weight(x, Quantization::INT8, q, s);
  EXPECT_EQ(q.dtype(), DType::I8);
  be.quantize_weight(x, Quantization::FP8, q, s);
  EXPECT_EQ(q.dtype(), DType::F8E4M3);
}

// The activation rounding of the CUDA prefill GEMM: each row (or 128-column block) scaled to 448 at
// its largest magnitude and rounded to E4M3: idempotent, and within half a step of each value.
TEST(Fp8Weights, FakeQuantizedActivationsMatchTheE4M3Grid) {
  for (int64_t block : {int64_t(0), int64_t(128)}) {
    Tensor x = random_weight(6, 300, 21, /*zero_row=*/2), y = random_weight(6, 300, 21, 2);
    fake_quantize_activations_fp8(y, block);
    Tensor z = Tensor::host({6, 300}, DType::F32);
    std::copy(y.data<float>(), y.data<float>() + y.numel(), z.data<float>());
    fake_quantize_activations_fp8(z, block);
    size_t changed = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const float a = x.data<float>()[i], b = y.data<float>()[i];
      EXPECT_NEAR(z.data<float>()[i], b, std::fabs(b) * 1e-6) << "not idempotent at " << i;
      changed += a != b;
      EXPECT_LE(std::fabs(a - b), std::fabs(a) / 16 + 1e-3f) << i;
    }
    EXPECT_GT(changed, 100u);
  }
}

// The engine with --quantization fp8 (per-channel weights, weight-only GEMMs) against the
// unquantized engine on the tiny fixtures: greedy tokens and the logits of every step up to the
// first differing token (cosine >= 0.99: the bound for FP8 weights).
TEST(Fp8Weights, EngineAgreesWithTheUnquantizedOneOnTinyFixtures) {
  test::expect_quantized_engine_near_unquantized(Quantization::FP8, 0.99);
}

TEST(Fp8Weights, RefusedForQwen3MoE) { test::expect_quantization_refused_for_moe(Quantization::FP8); }

}  // namespace
}  // namespace nanovllm
