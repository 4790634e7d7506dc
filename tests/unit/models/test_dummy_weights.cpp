// Dummy weights (--load-format dummy): the AVX-512 generator gives the portable formula's values
// bit for bit, and the CPU loader (chunks filled and uploaded by all threads) puts every value
// where its index says, in F32 and rounded to BF16.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "nanovllm/backends/sampling_noise.h"
#include "nanovllm/models/dummy_fill.h"
#include "nanovllm/models/weights.h"
#include "nanovllm/utils/dtype.h"

using namespace nanovllm;

namespace {

const float kA = 0.02f * std::sqrt(3.0f);

float expected(uint64_t seed, uint64_t index) { return (2.0f * sampling_uniform(seed, 0, index) - 1.0f) * kA; }

uint64_t name_seed(const std::string& name) {
  uint64_t seed = 1469598103934665603ull;
  for (char c : name) seed = (seed ^ uint8_t(c)) * 1099511628211ull;
  return seed;
}

}  // namespace

TEST(DummyWeights, VectorFillEqualsThePortableFormulaBitForBit) {
  for (uint64_t seed : {uint64_t(0), uint64_t(1469598103934665603ull), ~uint64_t(0)})
    for (uint64_t base : {uint64_t(0), uint64_t(5), (uint64_t(1) << 32) - 3, ~uint64_t(0) - 9})
      for (int64_t cols : {0, 1, 7, 8, 9, 15, 16, 17, 1000, 1027}) {
        std::vector<float> fast(size_t(cols) + 1, 7.0f), portable(size_t(cols) + 1, 7.0f);
        fill_uniform(seed, base, cols, kA, fast.data(), true);
        fill_uniform(seed, base, cols, kA, portable.data(), false);
        ASSERT_EQ(std::memcmp(fast.data(), portable.data(), fast.size() * sizeof(float)), 0)
            << "seed " << seed << " base " << base << " cols " << cols;
        EXPECT_EQ(fast[size_t(cols)], 7.0f) << "wrote past cols";
        for (int64_t c = 0; c < cols; ++c) {
          ASSERT_EQ(portable[size_t(c)], expected(seed, base + uint64_t(c))) << c;
          ASSERT_LE(std::fabs(portable[size_t(c)]), kA);
        }
      }
}

// A tensor wider than a 2^17-float chunk (one row a chunk) and one of many chunks with a partial
// last one, loaded by 2 threads into F32 and BF16: every element is its index's value.
TEST(DummyWeights, ThreadedCpuLoadPutsEveryValueAtItsIndex) {
  auto be = make_cpu_backend(2);
  for (DType dt : {DType::F32, DType::BF16})
    for (Shape shape : {Shape{3, (int64_t(1) << 17) + 5}, Shape{1000, 300}}) {
      const std::string name = "layers.0.w";
      Tensor t = be->empty(shape, dt);
      load_dummy_weights(*be, {{name, shape, &t}});
      const auto got = be->to_host_f32(t);
      const uint64_t seed = name_seed(name);
      for (size_t i = 0; i < got.size(); ++i) {
        const float want = dt == DType::F32 ? expected(seed, i) : bf16_to_f32(f32_to_bf16(expected(seed, i)));
        ASSERT_EQ(got[i], want) << dtype_name(dt) << " element " << i << " of " << shape_str(shape);
      }
    }
}

TEST(DummyWeights, NormsAreOneAndBiasesZero) {
  auto be = make_cpu_backend(2);
  Tensor norm = be->empty({64}, DType::F32), bias = be->empty({64}, DType::F32);
  load_dummy_weights(*be, {{"model.norm.weight", {64}, &norm}, {"q_proj.bias", {64}, &bias}});
  for (float v : be->to_host_f32(norm)) EXPECT_EQ(v, 1.0f);
  for (float v : be->to_host_f32(bias)) EXPECT_EQ(v, 0.0f);
}
