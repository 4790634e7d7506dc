// CPU GEMM: out[T, N] = x[T, K] @ w[N, K]^T. The output columns (rows of w) are split over the
// backend's OpenMP threads, the one pool of the forward: OpenBLAS runs single-threaded inside each
// thread's share, so no second pool spins against it.
//   F32 w (the exact path): OpenBLAS sgemm on each share.
//   BF16 w (the fast path): gemv_bf16 multiplies the FP32 activations with the widened weights
//   (exact products). Not vdpbf16ps (gemm_bf16_dp): on this project's Sapphire Rapids VM it issues
//   at a quarter of the rate of 512-bit FP32 FMAs (bench/RESULTS.md: "1.28 G vdpbf16ps/s"), so its
//   twice-as-many multiply-adds per instruction lose by half.
//   One kernel for every number of rows, whose per-row sums do not depend on the other rows: a
//   sequence's tokens are the same whatever batch it runs in (the server's tests rely on it).
//   Weights come in blocks of 96 rows against every 8 rows of x (prefill) or 4 (decode), so prefill
//   reads them once.
// Why not a library: Debian 12's OpenBLAS (0.3.21) is built without sbgemm, and oneDNN (2.6) would
// be a new dependency for one op; these kernels are ~200 lines and reach the memory bandwidth.
#include <cblas.h>

#include <algorithm>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/backends/cpu/cpu_bf16_kernels.h"
#include "nanovllm/backends/cpu/cpu_split.h"
#include "nanovllm/backends/fp8_weights.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

using cpu::split_rows;

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
    // Ranges taken as the threads come: decode (T <= 2) in multiples of the kernel's 8 rows (32 at
    // least: 64 KB of weights), prefill in whole 3-row tiles (96 at least: its L2 block). Every
    // row's sum is the same whichever range holds it.
    const bool decode = T <= 2;
    cpu::split_rows_guided(N, T * N * K, decode ? 16 : 48, decode ? 32 : 96,
                           [&](int64_t n0, int64_t n1) { cpu::gemv_bf16(xp, K, T, wp, K, n0, n1, op, N); });
  } else {
    throw Error(std::string("cpu linear: weights must be F32 or BF16 (got ") + dtype_name(w.dtype()) + ")");
  }
}

// FP8 weights: each thread dequantizes 64 rows of codes at a time into F32 and multiplies them with
// sgemm, so the result is the F32 GEMM of the dequantized weights (backends/fp8_weights.h's semantics).
void CpuBackend::linear_fp8(const Tensor& x, const Tensor& w, const WeightScales& scales, Tensor& out) {
  check_fp8_weight(w, scales, "cpu linear");
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  if (x.dtype() != DType::F32 || out.dtype() != DType::F32) throw Error("cpu linear: x and out must be F32");
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  cpu::split_rows_dequantized(
      N, T * N * K, K, [&](int64_t n, float* row) { fp8_dequantize_row(w, scales, n, 0, K, row); },
      [&](int64_t b, int64_t e, const float* deq) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(e - b), int(K), 1.0f, xp, int(K), deq, int(K),
                    0.0f, op + b, int(N));
      });
}

}  // namespace nanovllm
