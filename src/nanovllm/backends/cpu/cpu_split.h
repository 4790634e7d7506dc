// Splitting a GEMM's output rows over the backend's OpenMP threads (the forward's one pool): each
// thread gets a contiguous share, a multiple of 16 rows, so the kernels' row blocks stay whole.
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <utility>
#include <vector>

#include "nanovllm/utils/tensor.h"

namespace nanovllm::cpu {

// [begin, end) of share `i` of n rows split into `parts` multiples of `align`.
inline std::pair<int64_t, int64_t> share(int64_t n, int parts, int i, int64_t align) {
  const int64_t units = (n + align - 1) / align, per = units / parts, extra = units % parts;
  const int64_t b = (i * per + std::min<int64_t>(i, extra)) * align;
  const int64_t e = ((i + 1) * per + std::min<int64_t>(i + 1, extra)) * align;
  return {std::min(b, n), std::min(e, n)};
}

// Runs fn(n0, n1) on every thread's share of N rows (the calling thread alone when that is all
// the work is worth: `work` multiply-adds under 2^15).
template <class F>
void split_rows(int64_t N, int64_t work, const F& fn) {
  const int threads = work >= (int64_t(1) << 15) ? omp_get_max_threads() : 1;
  if (threads == 1) return fn(int64_t(0), N);
#pragma omp parallel num_threads(threads)
  {
    auto [n0, n1] = share(N, omp_get_num_threads(), omp_get_thread_num(), 16);
    if (n0 < n1) fn(n0, n1);
  }
}

// Runs fn(n0, n1) over N rows split into contiguous ranges that the threads take as they come
// (each take: 1/(2 * threads) of the rows left, at least `min_rows`, a multiple of `align`), so a
// thread that loses its core for a while (2 vCPUs shared with other processes) does fewer rows
// instead of holding the others at the barrier. Only for kernels whose rows do not depend on
// where a range starts (the fast path's gemv_bf16). The calling thread alone under 2^15 `work`.
template <class F>
void split_rows_guided(int64_t N, int64_t work, int64_t align, int64_t min_rows, const F& fn) {
  const int threads = work >= (int64_t(1) << 15) ? omp_get_max_threads() : 1;
  if (threads == 1) return fn(int64_t(0), N);
  std::atomic<int64_t> next{0};
#pragma omp parallel num_threads(threads)
  for (;;) {
    int64_t n0 = next.load(std::memory_order_relaxed), n1 = 0;
    do {
      if (n0 >= N) break;
      const int64_t take = std::max(min_rows, (N - n0) / (2 * int64_t(omp_get_num_threads())));
      n1 = std::min(N, n0 + (take + align - 1) / align * align);
    } while (!next.compare_exchange_weak(n0, n1, std::memory_order_relaxed));
    if (n0 >= N) break;
    fn(n0, n1);
  }
}

// fn(n, row) for every row n of w [N, K] (any dtype convert_to_f32 reads), widened to F32 into a
// per-thread buffer, the rows split over the threads: the weight quantizers at load (cpu_quantize.cpp,
// cpu_int8.cpp).
template <class F>
void for_each_row_f32(const Tensor& w, const F& fn) {
  const int64_t N = w.size(0), K = w.size(1);
  const size_t es = dtype_size(w.dtype());
  split_rows(N, N * K, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(K));
    for (int64_t n = n0; n < n1; ++n) {
      convert_to_f32(static_cast<const char*>(w.raw()) + size_t(n * K) * es, w.dtype(), size_t(K), row.data());
      fn(n, row.data());
    }
  });
}

// The F32 GEMM of quantized weights, dequantized a block of 64 rows at a time in each thread's
// share of the N rows: dequant(n, row) writes row n's K values, gemm(b, e, rows) multiplies rows
// [b, e) (FP8 and group-quantized integer weights).
template <class D, class G>
void split_rows_dequantized(int64_t N, int64_t work, int64_t K, const D& dequant, const G& gemm) {
  split_rows(N, work, [&](int64_t n0, int64_t n1) {
    constexpr int64_t kRows = 64;
    std::vector<float> deq(size_t(std::min(kRows, n1 - n0) * K));
    for (int64_t b = n0; b < n1; b += kRows) {
      const int64_t e = std::min(n1, b + kRows);
      for (int64_t n = b; n < e; ++n) dequant(n, deq.data() + (n - b) * K);
      gemm(b, e, deq.data());
    }
  });
}

}  // namespace nanovllm::cpu
