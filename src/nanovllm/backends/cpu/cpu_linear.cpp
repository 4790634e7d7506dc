// CPU GEMM: out[T, N] = x[T, K] @ w[N, K]^T. The output columns (rows of w) are split over the
// backend's OpenMP threads, the one pool of the forward: OpenBLAS runs single-threaded inside each
// thread's share, so no second pool spins against it.
//   F32 w (the exact path): OpenBLAS sgemm on each share.
//   BF16 w (the fast path): gemv_bf16 multiplies the FP32 activations with the widened weights
//   (exact products). Not vdpbf16ps (gemm_bf16_dp): on this project's Sapphire Rapids VM it issues
//   at a quarter of the rate of 512-bit FP32 FMAs (measured: 1.3 G/s against 5.3 G/s, two vCPUs), so
//   its twice-as-many multiply-adds per instruction lose by half.
//   One kernel for every number of rows, whose per-row sums do not depend on the other rows: a
//   sequence's tokens are the same whatever batch it runs in (the server's tests rely on it).
//   Weights come in blocks of 96 rows against every 8 rows of x (prefill) or 4 (decode), so prefill
//   reads them once.
// Why not a library: Debian 12's OpenBLAS (0.3.21) is built without sbgemm, and oneDNN (2.6) would
// be a new dependency for one op; these kernels are ~200 lines and reach the memory bandwidth.
#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <vector>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/ops/checks.h"
#include "nanovllm/ops/fp8_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

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
    split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) { cpu::gemv_bf16(xp, K, T, wp, K, n0, n1, op, N); });
  } else {
    throw Error(std::string("cpu linear: weights must be F32 or BF16 (got ") + dtype_name(w.dtype()) + ")");
  }
}

// FP8 weights: each thread dequantizes 64 rows of codes at a time into F32 and multiplies them with
// sgemm, so the result is the F32 GEMM of the dequantized weights (ops/fp8_weights.h's semantics).
void CpuBackend::linear_quantized(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_linear(x, w, out);
  if (w.dtype() != DType::F8E4M3) return Backend::linear_quantized(x, w, scales, out);
  check_fp8_weight(w, scales, "cpu linear");
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  if (x.dtype() != DType::F32 || out.dtype() != DType::F32) throw Error("cpu linear: x and out must be F32");
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  split_rows(N, T * N * K, [&](int64_t n0, int64_t n1) {
    constexpr int64_t kRows = 64;
    std::vector<float> deq(size_t(kRows * K));
    for (int64_t b = n0; b < n1; b += kRows) {
      const int64_t e = std::min(n1, b + kRows);
      for (int64_t n = b; n < e; ++n) fp8_dequantize_row(w, scales, n, 0, K, deq.data() + (n - b) * K);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(e - b), int(K), 1.0f, xp, int(K), deq.data(),
                  int(K), 0.0f, op + b, int(N));
    }
  });
}

}  // namespace nanovllm
