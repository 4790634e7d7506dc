// CPU GEMM: out[T, N] = x[T, K] @ w[N, K]^T through OpenBLAS sgemm (threaded by OpenBLAS).
#include <cblas.h>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/ops/checks.h"

namespace nanovllm {

void CpuBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear(x, w, out);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f, x.data<float>(), int(K),
              w.data<float>(), int(K), 0.0f, out.data<float>(), int(N));
}

}  // namespace nanovllm
