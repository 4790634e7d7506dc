// Bias add (Qwen2's q/k/v projections): x[t, :] += bias, bias in the weight dtype (F32, or BF16
// where the backend keeps weights in BF16).
#include <algorithm>
#include <vector>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/dtype.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

void CpuBackend::add_bias(Tensor& x, const Tensor& bias) {
  check_add_bias(x, bias);
  if (x.dtype() != DType::F32) throw Error("add_bias: x must be F32 on the CPU");
  const int64_t T = x.size(0), N = x.size(1);
  std::vector<float> b(static_cast<size_t>(N));
  if (bias.dtype() == DType::F32)
    std::copy(bias.data<float>(), bias.data<float>() + N, b.begin());
  else if (bias.dtype() == DType::BF16)
    for (int64_t n = 0; n < N; ++n) b[size_t(n)] = bf16_to_f32(bias.data<uint16_t>()[n]);
  else
    throw Error("add_bias: bias must be F32 or BF16");
  float* out = x.data<float>();
#pragma omp parallel for if (T * N >= (1 << 16))
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) out[t * N + n] += b[size_t(n)];
}

}  // namespace nanovllm
