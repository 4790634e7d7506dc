// CPU GEMM: out[T, N] = x[T, K] @ w[N, K]^T. The output columns (rows of w) are split over the
// backend's OpenMP threads, the one pool of the forward: OpenBLAS runs single-threaded inside each
// thread's share, so no second pool spins against it.
//   F32 w (the exact path): OpenBLAS sgemm on each share.
//   BF16 w (the fast path): up to kGemvRows rows of x, the GEMV kernel reads the BF16 rows once
//   (decode is bound by the bytes of the weights); more rows (prefill), each thread widens blocks of
//   kBlock weight rows to FP32 and runs sgemm on them (the widening is 1/T of the block's work).
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/ops/checks.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

constexpr int64_t kGemvRows = 8;
constexpr int64_t kBlock = 64;  // weight rows widened at a time: 64 x K floats stay in L2

// [begin, end) of share `i` of n rows split into `parts` multiples of `align`.
std::pair<int64_t, int64_t> share(int64_t n, int parts, int i, int64_t align) {
  const int64_t units = (n + align - 1) / align, per = units / parts, extra = units % parts;
  const int64_t b = (i * per + std::min<int64_t>(i, extra)) * align;
  const int64_t e = ((i + 1) * per + std::min<int64_t>(i + 1, extra)) * align;
  return {std::min(b, n), std::min(e, n)};
}

// Runs fn(n0, n1) on every thread's share of N rows (the calling thread alone when that is all
// the work is worth).
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

}  // namespace

void CpuBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear(x, w, out);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  if (x.dtype() != DType::F32 || out.dtype() != DType::F32)
    throw Error("cpu linear: x and out must be F32 (got " + std::string(dtype_name(x.dtype())) + ", " +
                dtype_name(out.dtype()) + ")");
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  if (w.dtype() == DType::F32) {
    const float* wp = w.data<float>();
    split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(n1 - n0), int(K), 1.0f, xp, int(K), wp + n0 * K,
                  int(K), 0.0f, op + n0, int(N));
    });
  } else if (w.dtype() == DType::BF16) {
    const uint16_t* wp = w.data<uint16_t>();
    if (T <= kGemvRows) {
      split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) { cpu::gemv_bf16(xp, K, T, wp, K, n0, n1, op, N); });
    } else {
      split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) {
        std::vector<float> block(size_t(std::min(kBlock, n1 - n0) * K));
        for (int64_t b0 = n0; b0 < n1; b0 += kBlock) {
          const int64_t rows = std::min(kBlock, n1 - b0);
          cpu::widen_bf16(wp + b0 * K, rows * K, block.data());
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(rows), int(K), 1.0f, xp, int(K),
                      block.data(), int(K), 0.0f, op + b0, int(N));
        }
      });
    }
  } else {
    throw Error(std::string("cpu linear: weights must be F32 or BF16 (got ") + dtype_name(w.dtype()) + ")");
  }
}

}  // namespace nanovllm
