// The CPU fast path's BF16-weight kernels (backends/cpu/cpu_bf16_kernels.h): every variant this CPU
// runs against a double-precision reference of the same BF16 weights, over shapes that exercise
// the 4-row and 4-weight-row blocks and the K tails; and CpuBackend::linear with BF16 weights
// against the exact path (F32 weights holding the same values).
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "nanovllm/backends/backend.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/backends/cpu/cpu_vec.h"
#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

struct Problem {
  int64_t T, N, K;
  std::vector<float> x;
  std::vector<uint16_t> w;
  std::vector<double> want;  // [T, N]
};

// p.want = x @ w^T in double.
void set_reference(Problem& p) {
  p.want.assign(size_t(p.T * p.N), 0.0);
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t n = 0; n < p.N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < p.K; ++k) s += double(p.x[size_t(t * p.K + k)]) * bf16_to_f32(p.w[size_t(n * p.K + k)]);
      p.want[size_t(t * p.N + n)] = s;
    }
}

Problem make_problem(int64_t T, int64_t N, int64_t K, uint32_t seed) {
  Problem p{T, N, K, std::vector<float>(size_t(T * K)), std::vector<uint16_t>(size_t(N * K)), {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (auto& v : p.x) v = u(rng);
  for (auto& v : p.w) v = f32_to_bf16(u(rng));
  set_reference(p);
  return p;
}

// FP32 sums of K products of magnitude <= 1: error well under K * 2^-24 * sqrt(K) for these sizes.
double tolerance(int64_t K) { return 4e-6 * double(K); }

}  // namespace

TEST(CpuBf16Kernels, EveryVariantMatchesTheReference) {
  const cpu::Isa top = cpu::detected_isa();
  std::printf("this CPU runs the %s kernels\n", cpu::isa_name(top));
  for (int isa = 0; isa <= int(top); ++isa)
    for (auto [T, N, K] :
         {std::tuple{1, 13, 1024}, {3, 9, 33}, {4, 70, 128}, {5, 8, 7}, {9, 67, 300}, {1, 4, 16}, {2, 21, 100}}) {
      const Problem p = make_problem(T, N, K, uint32_t(T * 1000 + N + K));
      // Rows [2, N - 1) only, into a wider output: the row range and ldo are honoured.
      const int64_t ldo = N + 3;
      std::vector<float> out(size_t(T * ldo), -7.0f);
      cpu::gemv_bf16(p.x.data(), K, T, p.w.data(), K, 2, N - 1, out.data(), ldo, cpu::Isa(isa));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < ldo; ++n) {
          const float got = out[size_t(t * ldo + n)];
          if (n < 2 || n >= N - 1)
            EXPECT_EQ(got, -7.0f) << "row " << n << " outside the range was written";
          else
            EXPECT_NEAR(got, p.want[size_t(t * N + n)], tolerance(K))
                << cpu::isa_name(cpu::Isa(isa)) << " T=" << T << " N=" << N << " K=" << K << " t=" << t << " n=" << n;
        }
    }
}

TEST(CpuBf16Kernels, WidenIsExact) {
  std::vector<uint16_t> src(37);
  for (size_t i = 0; i < src.size(); ++i) src[i] = f32_to_bf16(float(i) * 0.37f - 5.0f);
  for (int isa = 0; isa <= int(cpu::detected_isa()); ++isa) {
    std::vector<float> dst(src.size());
    cpu::widen_bf16(src.data(), int64_t(src.size()), dst.data(), cpu::Isa(isa));
    for (size_t i = 0; i < src.size(); ++i) EXPECT_EQ(dst[i], bf16_to_f32(src[i]));
  }
}

// Rounding to BF16 (KV stores, weight uploads) is f32_to_bf16 bit for bit: ties to even, denormals
// kept (vcvtneps2bf16 would flush them), NaNs quiet, infinities and signed zeros kept; and an F32 ->
// BF16 upload over many 64K-element blocks and a tail gives the same bits.
TEST(CpuBf16Kernels, RoundingToBf16IsBitExact) {
  std::vector<float> src;
  for (uint32_t u :
       {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00018000u, 0x00028000u, 0x3f808000u, 0x3f818000u,
        0x3f80ffffu, 0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xffc00000u, 0x7fbfffffu})
    src.push_back(std::bit_cast<float>(u));
  std::mt19937 rng(5);
  std::uniform_int_distribution<uint32_t> bits;
  while (src.size() < 16 * 70 + 9) src.push_back(std::bit_cast<float>(bits(rng)));
  std::vector<uint16_t> dst(src.size());
  cpu::round_to_bf16(src.data(), int64_t(src.size()), dst.data());
  for (size_t i = 0; i < src.size(); ++i)
    EXPECT_EQ(dst[i], f32_to_bf16(src[i])) << "i=" << i << " bits=" << std::bit_cast<uint32_t>(src[i]);

  auto fast = make_cpu_backend(2, CpuPrecision::Fast);
  const int64_t n = 3 * (int64_t(1) << 16) + 77;
  std::vector<float> big(static_cast<size_t>(n));
  for (auto& v : big) v = std::bit_cast<float>(bits(rng));
  Tensor w = fast->empty({n}, DType::BF16);
  fast->upload(big.data(), DType::F32, w);
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += w.data<uint16_t>()[i] != f32_to_bf16(big[size_t(i)]);
  EXPECT_EQ(wrong, 0);
}

// The vdpbf16ps GEMM against a double-precision reference with x rounded to BF16 as it rounds it
// (products of two BF16 values are exact in FP32: only the FP32 sums differ); refused on CPUs
// without the instruction.
TEST(CpuBf16Kernels, DotProductGemmMatchesTheReference) {
  if (cpu::detected_isa() != cpu::Isa::Avx512Bf16) {
    std::vector<uint16_t> x(4), w(4);
    std::vector<float> out(1);
    EXPECT_THROW(cpu::gemm_bf16_dp(x.data(), 4, 1, w.data(), 4, 0, 1, out.data(), 1), Error);
    GTEST_SKIP() << "no AVX512_BF16 on this CPU";
  }
  for (auto [T, N, K] : {std::tuple{1, 13, 1024}, {6, 9, 34}, {9, 70, 128}, {13, 67, 302}, {4, 5, 2}}) {
    Problem p = make_problem(T, N, K, uint32_t(T * 7 + N + K));
    std::vector<uint16_t> xb(p.x.size());
    cpu::round_to_bf16(p.x.data(), int64_t(xb.size()), xb.data());
    for (size_t i = 0; i < xb.size(); ++i) {
      EXPECT_EQ(xb[i], f32_to_bf16(p.x[i]));
      p.x[i] = bf16_to_f32(xb[i]);
    }
    set_reference(p);
    const int64_t ldo = N + 1;
    std::vector<float> out(size_t(T * ldo), -7.0f);
    cpu::gemm_bf16_dp(xb.data(), K, T, p.w.data(), K, 1, N, out.data(), ldo);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(out[size_t(t * ldo)], -7.0f);
      for (int64_t n = 1; n < N; ++n)
        EXPECT_NEAR(out[size_t(t * ldo + n)], p.want[size_t(t * N + n)], tolerance(K)) << "T=" << T << " n=" << n;
    }
  }
  std::vector<uint16_t> odd(3);
  std::vector<float> out(1);
  EXPECT_THROW(cpu::gemm_bf16_dp(odd.data(), 3, 1, odd.data(), 3, 0, 1, out.data(), 1), Error);
}

// The fast backend (BF16 weights) against the exact one (F32 weights of the same values), at a
// decode shape (GEMV) and a prefill shape.
TEST(CpuBf16Kernels, FastLinearMatchesExactLinear) {
  auto exact = make_cpu_backend(2, CpuPrecision::Exact);
  auto fast = make_cpu_backend(2, CpuPrecision::Fast);
  ASSERT_EQ(exact->weight_dtype(), DType::F32);
  ASSERT_EQ(fast->weight_dtype(), DType::BF16);
  // x is rounded to BF16 where the CPU has vdpbf16ps: relative error 2^-9 per product.
  const bool rounds = cpu::detected_isa() == cpu::Isa::Avx512Bf16;
  for (int64_t T : {1, 2, 4, 37}) {
    const Problem p = make_problem(T, 300, 520, uint32_t(T));
    std::vector<float> wf(p.w.size());
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = bf16_to_f32(p.w[i]);
    Tensor x = exact->empty({T, p.K}, DType::F32);
    exact->upload(p.x.data(), DType::F32, x);
    Tensor w32 = exact->empty({p.N, p.K}, DType::F32), w16 = fast->empty({p.N, p.K}, DType::BF16);
    exact->upload(wf.data(), DType::F32, w32);
    fast->upload(wf.data(), DType::F32, w16);  // F32 -> BF16 at upload: exact for BF16 values
    Tensor a = exact->empty({T, p.N}, DType::F32), b = fast->empty({T, p.N}, DType::F32);
    exact->linear(x, w32, a);
    fast->linear(x, w16, b);
    for (int64_t i = 0; i < T * p.N; ++i) {
      EXPECT_NEAR(a.data<float>()[i], p.want[size_t(i)], tolerance(p.K));
      const double tol = rounds ? 3.0 * std::sqrt(double(p.K)) * 0x1p-9 : 2 * tolerance(p.K);
      EXPECT_NEAR(b.data<float>()[i], a.data<float>()[i], tol) << "T=" << T << " i=" << i;
    }
    // Batch invariance: row 0 alone gives the same bits as row 0 of the batch.
    Tensor x0 = exact->empty({1, p.K}, DType::F32), b0 = fast->empty({1, p.N}, DType::F32);
    exact->upload(p.x.data(), DType::F32, x0);
    fast->linear(x0, w16, b0);
    for (int64_t n = 0; n < p.N; ++n) EXPECT_EQ(b0.data<float>()[n], b.data<float>()[n]) << "T=" << T << " n=" << n;
  }
}

// The guided split hands out every row exactly once, in ranges that start on `align` (but the
// last), whatever the thread count and N.
TEST(CpuBf16Kernels, GuidedSplitCoversEveryRowOnce) {
  auto be = make_cpu_backend(2, CpuPrecision::Fast);  // sets the pool's threads
  for (int64_t N : {int64_t(1), int64_t(17), int64_t(1024), int64_t(4099), int64_t(151936)})
    for (int64_t align : {int64_t(16), int64_t(48)}) {
      std::vector<std::atomic<int>> seen(static_cast<size_t>(N));
      std::atomic<int> ranges{0}, misaligned{0};
      cpu::split_rows_guided(N, int64_t(1) << 20, align, 2 * align, [&](int64_t n0, int64_t n1) {
        ranges.fetch_add(1);
        if (n0 % align != 0 || n1 <= n0) misaligned.fetch_add(1);
        for (int64_t n = n0; n < n1; ++n) seen[size_t(n)].fetch_add(1);
      });
      for (int64_t n = 0; n < N; ++n) ASSERT_EQ(seen[size_t(n)].load(), 1) << "N=" << N << " row " << n;
      EXPECT_EQ(misaligned.load(), 0) << "N=" << N;
      EXPECT_LE(ranges.load(), N / align + 2) << "N=" << N;
    }
}

// The fast linear over 2 threads (rows split as the threads come) gives the single-threaded
// kernel's bits, at decode and prefill shapes large enough to be split.
TEST(CpuBf16Kernels, ThreadedFastLinearEqualsOneThread) {
  auto fast = make_cpu_backend(2, CpuPrecision::Fast);
  for (int64_t T : {1, 2, 9}) {
    const Problem p = make_problem(T, 1000, 96, uint32_t(40 + T));
    Tensor x = fast->empty({T, p.K}, DType::F32), w = fast->empty({p.N, p.K}, DType::BF16);
    fast->upload(p.x.data(), DType::F32, x);
    std::vector<float> wf(p.w.size());
    for (size_t i = 0; i < wf.size(); ++i) wf[i] = bf16_to_f32(p.w[i]);
    fast->upload(wf.data(), DType::F32, w);
    Tensor out = fast->empty({T, p.N}, DType::F32);
    fast->linear(x, w, out);
    std::vector<float> one(size_t(T * p.N));
    cpu::gemv_bf16(p.x.data(), p.K, T, p.w.data(), p.K, 0, p.N, one.data(), p.N);
    for (int64_t i = 0; i < T * p.N; ++i) ASSERT_EQ(out.data<float>()[i], one[size_t(i)]) << "T=" << T << " i=" << i;
  }
}

// The attention's vector helpers (cpu_vec.h) against plain loops, lengths around the vector width.
TEST(CpuVec, DotAndAxpyMatchPlainLoops) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t n : {1, 15, 16, 17, 64, 100, 128}) {
    std::vector<float> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)), y(static_cast<size_t>(n) + 1, 3.0f);
    for (auto& v : a) v = u(rng);
    for (auto& v : b) v = u(rng);
    double want = 0;
    for (int64_t i = 0; i < n; ++i) want += double(a[size_t(i)]) * b[size_t(i)];
    EXPECT_NEAR(cpu::dot_f32(a.data(), b.data(), n), want, 1e-5) << n;
    cpu::axpy_f32(0.5f, a.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_FLOAT_EQ(y[size_t(i)], 3.0f + 0.5f * a[size_t(i)]) << n;
    EXPECT_EQ(y[size_t(n)], 3.0f) << "wrote past n";
  }
}

// The many-row helpers: dots against a double-precision sum, the weighted sum exactly the axpy
// calls' sums, for head sizes around and above the eight-register chunk.
TEST(CpuVec, ManyRowHelpersEqualOneRowHelpers) {
  std::mt19937 rng(6);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int64_t n : {1, 17, 64, 128, 130, 256}) {
    for (int64_t count : {1, 3, 4, 5, 9}) {
      std::vector<std::vector<float>> rows(static_cast<size_t>(count), std::vector<float>(static_cast<size_t>(n)));
      std::vector<const float*> ptrs;
      for (auto& r : rows) {
        for (auto& v : r) v = u(rng);
        ptrs.push_back(r.data());
      }
      std::vector<float> q(static_cast<size_t>(n)), p(static_cast<size_t>(count));
      for (auto& v : q) v = u(rng);
      for (auto& v : p) v = u(rng);
      std::vector<float> got(static_cast<size_t>(count));
      cpu::dots_f32(q.data(), ptrs.data(), count, n, got.data());
      for (int64_t j = 0; j < count; ++j) {
        double want = 0;
        for (int64_t i = 0; i < n; ++i) want += double(q[size_t(i)]) * ptrs[size_t(j)][i];
        EXPECT_NEAR(got[size_t(j)], want, 1e-5 * std::sqrt(double(n))) << n << " " << count << " " << j;
      }
      std::vector<float> y(static_cast<size_t>(n) + 1, 0.25f), want = y;
      cpu::weighted_sum_f32(p.data(), ptrs.data(), count, n, y.data());
      for (int64_t j = 0; j < count; ++j) cpu::axpy_f32(p[size_t(j)], ptrs[size_t(j)], want.data(), n);
      for (int64_t i = 0; i <= n; ++i) EXPECT_EQ(y[size_t(i)], want[size_t(i)]) << n << " " << count << " " << i;
      // Two queries at once: each gets its own call's bits (q and p, then q reversed and 2p).
      std::vector<float> q1(q.rbegin(), q.rend()), p1(p), got1(static_cast<size_t>(count)), pair0(got1), pair1(got1);
      for (auto& v : p1) v *= 2;
      cpu::dots_f32(q1.data(), ptrs.data(), count, n, got1.data());
      cpu::dots2_f32(q.data(), q1.data(), ptrs.data(), count, n, pair0.data(), pair1.data());
      EXPECT_EQ(pair0, got) << n << " " << count;
      EXPECT_EQ(pair1, got1) << n << " " << count;
      std::vector<float> y1(static_cast<size_t>(n) + 1, -0.5f), z0(static_cast<size_t>(n) + 1, 0.25f), z1(y1);
      cpu::weighted_sum_f32(p1.data(), ptrs.data(), count, n, y1.data());
      cpu::weighted_sum2_f32(p.data(), p1.data(), ptrs.data(), count, n, z0.data(), z1.data());
      EXPECT_EQ(z0, y) << n << " " << count;
      EXPECT_EQ(z1, y1) << n << " " << count;
    }
  }
}

// The fast path's softmax against the exact one: within 4e-7 + 2e-6 relative of each value (the
// vector exp is within 2 ulp of expf, the FP32 sum of n values within n ulp), lengths around the
// vector width, scores far below the max (exp underflows to 0, as in the exact path) and equal ones.
TEST(CpuVec, FastSoftmaxMatchesExactSoftmax) {
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-30, 30);
  for (int64_t n : {1, 2, 15, 16, 17, 100, 515}) {
    std::vector<float> a(static_cast<size_t>(n));
    for (auto& v : a) v = u(rng);
    if (n > 2) a[1] = a[0] - 2000.0f, a[2] = a[0];
    std::vector<float> b = a;
    cpu::softmax_exact(a.data(), n, 0.7f);
    cpu::softmax_fast(b.data(), n, 0.7f);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      EXPECT_NEAR(b[size_t(j)], a[size_t(j)], 4e-7 + 2e-6 * a[size_t(j)]) << "n=" << n << " j=" << j;
      sum += b[size_t(j)];
    }
    EXPECT_NEAR(sum, 1.0, 1e-5) << "n=" << n;
    if (n > 2) EXPECT_EQ(b[1], 0.0f);
  }
}
