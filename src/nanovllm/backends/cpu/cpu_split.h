// Splitting a GEMM's output rows over the backend's OpenMP threads (the forward's one pool): each
// thread gets a contiguous share, a multiple of 16 rows, so the kernels' row blocks stay whole.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <utility>

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

}  // namespace nanovllm::cpu
