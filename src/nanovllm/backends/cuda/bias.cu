// Bias add, in place: x[t, n] += bias[n] for x [T, N], bias [N], both BF16 (Qwen2's q/k/v biases,
// after the qkv GEMM). The sum is rounded to BF16 once, so against a GEMM with a bias epilogue
// (PyTorch's addmm) the result carries one extra rounding of the GEMM's output. grid
// (ceil(N / (8 * 256)), T), 8 elements per thread when N % 8 == 0.
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

using namespace cuda;

__global__ void add_bias_kernel(bf16* __restrict__ x, const bf16* __restrict__ bias, int64_t N, bool vec) {
  pdl_begin();
  bf16* row = x + int64_t(blockIdx.y) * N;
  if (vec) {
    const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i >= N / 8) return;
    float a[8], b[8];
    unpack8(reinterpret_cast<const uint4*>(row)[i], a);
    unpack8(reinterpret_cast<const uint4*>(bias)[i], b);
#pragma unroll
    for (int k = 0; k < 8; ++k) a[k] += b[k];
    reinterpret_cast<uint4*>(row)[i] = pack8(a);
  } else {
    for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < N; i += int64_t(gridDim.x) * blockDim.x)
      row[i] = __float2bfloat16(__bfloat162float(row[i]) + __bfloat162float(bias[i]));
  }
}

void CudaBackend::add_bias(Tensor& x, const Tensor& bias) {
  check_add_bias(x, bias);
  if (x.dtype() != DType::BF16 || bias.dtype() != DType::BF16) throw Error("add_bias: x and bias must be BF16");
  const int64_t T = x.size(0), N = x.size(1);
  if (T == 0 || N == 0) return;
  const bool vec = N % 8 == 0;
  dim3 grid(vec ? ceil_div(N / 8, 256) : std::min<unsigned>(ceil_div(N, 256), 64), unsigned(T));
  launch(add_bias_kernel, grid, 256, 0, on_stream(), x.data<bf16>(), bias.data<bf16>(), N, vec);
}

}  // namespace nanovllm
