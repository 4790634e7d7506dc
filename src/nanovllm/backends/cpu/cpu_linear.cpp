// CPU GEMM: out[T, N] = x[T, K] @ w[N, K]^T through OpenBLAS sgemm (threaded by OpenBLAS), and
// the (trivial, F32 -> F32) cast.
#include <cblas.h>

#include <algorithm>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/ops/checks.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void CpuBackend::linear(const Tensor& x, const Tensor& w, Tensor& out) {
  check_linear(x, w, out);
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(T), int(N), int(K), 1.0f, x.data<float>(), int(K),
              w.data<float>(), int(K), 0.0f, out.data<float>(), int(N));
}

// The CPU backend computes in F32 only: a cast is a copy between F32 tensors.
void CpuBackend::cast(const Tensor& src, Tensor& dst) {
  if (src.shape() != dst.shape()) throw Error("cast: " + shape_str(src.shape()) + " -> " + shape_str(dst.shape()));
  if (src.dtype() != DType::F32 || dst.dtype() != DType::F32)
    throw Error(std::string("cast: the CPU backend holds F32 activations only (got ") + dtype_name(src.dtype()) +
                " -> " + dtype_name(dst.dtype()) + ")");
  std::copy(src.data<float>(), src.data<float>() + src.numel(), dst.data<float>());
}

}  // namespace nanovllm
