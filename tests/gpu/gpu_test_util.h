// Helpers of the GPU tests: the CPU backend is the oracle, fed the same BF16-rounded inputs.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/ops/backend.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::test {

#define REQUIRE_GPU()                                            \
  do {                                                           \
    if (!::nanovllm::cuda_available()) GTEST_SKIP() << "no GPU"; \
  } while (0)

inline float bf16_round(float x) { return bf16_to_f32(f32_to_bf16(x)); }

// Uniform(lo, hi) values, rounded to BF16 so that both backends see identical inputs.
inline std::vector<float> rand_bf16(size_t n, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = bf16_round(d(g));
  return v;
}

struct Pair {
  Tensor cpu, gpu;
};

// The same values as an F32 CPU tensor and a `gpu_dtype` CUDA tensor.
inline Pair make_pair(CpuBackend& cpu, CudaBackend& gpu, const Shape& shape, const std::vector<float>& v,
                      DType gpu_dtype = DType::BF16) {
  Pair p{cpu.empty(shape, DType::F32), gpu.empty(shape, gpu_dtype)};
  cpu.upload(v.data(), DType::F32, p.cpu);
  gpu.upload(v.data(), DType::F32, p.gpu);
  return p;
}
inline Pair make_i32(CpuBackend& cpu, CudaBackend& gpu, const std::vector<int32_t>& v) {
  Pair p{cpu.empty({int64_t(v.size())}, DType::I32), gpu.empty({int64_t(v.size())}, DType::I32)};
  cpu.upload(v.data(), DType::I32, p.cpu);
  gpu.upload(v.data(), DType::I32, p.gpu);
  return p;
}

struct ErrStats {
  double max_abs = 0, rel_l2 = 0;  // max |a - b|, ||a - b|| / ||b||
  size_t nonfinite = 0;
};

inline ErrStats compare(const std::vector<float>& got, const std::vector<float>& ref) {
  ErrStats s;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (!std::isfinite(got[i])) ++s.nonfinite;
    const double d = double(got[i]) - ref[i];
    s.max_abs = std::max(s.max_abs, std::abs(d));
    num += d * d;
    den += double(ref[i]) * ref[i];
  }
  s.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return s;
}

// Checks and prints "[gpu] name: max_abs .. rel_l2 .." (grepped into the test log summary).
inline void expect_close(const std::string& name, const std::vector<float>& got, const std::vector<float>& ref,
                         double rel_tol, double abs_tol) {
  ASSERT_EQ(got.size(), ref.size()) << name;
  auto s = compare(got, ref);
  std::printf("[gpu] %s: max_abs %.3e rel_l2 %.3e (tol rel %.0e abs %.0e)\n", name.c_str(), s.max_abs, s.rel_l2,
              rel_tol, abs_tol);
  EXPECT_EQ(s.nonfinite, 0u) << name;
  EXPECT_LT(s.rel_l2, rel_tol) << name;
  EXPECT_LT(s.max_abs, abs_tol) << name;
}

}  // namespace nanovllm::test
