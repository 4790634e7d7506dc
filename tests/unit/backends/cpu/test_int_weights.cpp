// backends/int_weights: the host reference of group-quantized integer weights (canonical layout,
// dequantization, the dummy-weight quantizer, layout checks).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "nanovllm/backends/int_weights.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

Tensor random_weight(int64_t N, int64_t K, uint32_t seed) {
  Tensor w = Tensor::host({N, K}, DType::F32);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  for (int64_t i = 0; i < N * K; ++i) w.data<float>()[i] = d(rng);
  return w;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(IntWeights, QuantizeThenDequantizeIsWithinHalfAStep) {
  for (int bits : {4, 8})
    for (bool zp : {false, true})
      for (int64_t G : {32, 64, 0}) {
        const int64_t N = 5, K = 128;
        Tensor w = random_weight(N, K, uint32_t(bits * 100 + zp * 10 + G)), codes;
        WeightScales s;
        int_quantize_weight(w, bits, G, zp, codes, s);
        check_int_weight(codes, s, "w");
        EXPECT_EQ(codes.dtype(), bits == 4 ? DType::U4 : DType::U8);
        EXPECT_EQ(codes.nbytes(), size_t(N * K * bits / 8));
        EXPECT_EQ(s.zero.defined(), zp);
        std::vector<float> row(K);
        for (int64_t n = 0; n < N; ++n) {
          int_dequantize_row(codes, s, n, 0, K, row.data());
          const int64_t g = G ? G : K;
          for (int64_t k = 0; k < K; ++k) {
            const float step = s.scale.data<float>()[n * (K / g) + k / g];
            // Rounding costs half a step; an asymmetric zero rounded to an integer up to another half.
            EXPECT_LE(std::fabs(row[k] - w.data<float>()[n * K + k]), (zp ? 1.0f : 0.5f) * step * 1.0001f)
                << "bits " << bits << " zp " << zp << " G " << G << " n " << n << " k " << k;
          }
        }
      }
}

TEST(IntWeights, U4PacksTheEvenCodeInTheLowNibble) {
  Tensor w = Tensor::host({1, 4}, DType::F32);
  // Symmetric 4-bit, amax 7.5: scale 1, so codes are value + 8.
  const float v[4] = {-7.5f, 7.5f, 0.0f, 3.0f};
  std::copy(v, v + 4, w.data<float>());
  Tensor codes;
  WeightScales s;
  int_quantize_weight(w, 4, 4, false, codes, s);
  EXPECT_FLOAT_EQ(s.scale.data<float>()[0], 1.0f);
  const uint8_t* c = codes.data<uint8_t>();
  // -7.5 + 8 = 0.5 -> 0 (half to even), 7.5 + 8 = 15.5 -> clamped 15, 0 -> 8, 3 -> 11.
  EXPECT_EQ(c[0], uint8_t(0x0 | (0xF << 4)));
  EXPECT_EQ(c[1], uint8_t(0x8 | (0xB << 4)));
  float out[4];
  int_dequantize_row(codes, s, 0, 1, 4, out);
  EXPECT_FLOAT_EQ(out[0], 7.0f);
  EXPECT_FLOAT_EQ(out[1], 0.0f);
  EXPECT_FLOAT_EQ(out[2], 3.0f);
}

TEST(IntWeights, ChecksNameWhatIsWrong) {
  Tensor w = random_weight(4, 64, 1), codes;
  WeightScales s;
  int_quantize_weight(w, 4, 32, true, codes, s);
  WeightScales bad = s;
  bad.block_k = 48;
  EXPECT_NE(error_of([&] { check_int_weight(codes, bad, "layers.0.q"); }).find("group size 48 does not divide K 64"),
            std::string::npos);
  bad = s;
  bad.zero = Tensor::host({4, 1}, DType::F32);
  EXPECT_NE(error_of([&] { check_int_weight(codes, bad, "q"); }).find("zero must be F32 [4, 2]"), std::string::npos);
  bad = s;
  bad.perm = Tensor::host({64}, DType::I32);
  for (int k = 0; k < 64; ++k) bad.perm.data<int32_t>()[k] = k;
  check_int_weight(codes, bad, "q");
  bad.perm.data<int32_t>()[5] = 4;
  EXPECT_NE(error_of([&] { check_int_weight(codes, bad, "q"); }).find("not a permutation"), std::string::npos);
  EXPECT_NE(error_of([&] { check_int_weight(w, s, "q"); }).find("codes must be U4 or U8"), std::string::npos);
  EXPECT_NE(error_of([&] { int_quantize_weight(w, 3, 32, true, codes, s); }).find("bits must be 4 or 8"),
            std::string::npos);
}
