// Tensor-parallel helpers of the CUDA backend.
//  merge_vocab_shards: the LM head's all-gathered logits [N, B, Vl] (rank-major) -> [B, N * Vl]:
//    rank r's block of Vl columns goes to columns [r * Vl, (r + 1) * Vl) of every row. N strided
//    2-D copies on the backend stream: no kernel, no host sync, so it is captured into graphs.
//  cuda_device_count: visible GPUs, to refuse more ranks per node than GPUs before any GPU work.
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"
#include "nanovllm/backends/checks.h"

namespace nanovllm {

void CudaBackend::merge_vocab_shards(const Tensor& parts, Tensor& out) {
  check_merge_vocab_shards(parts, out);
  const int64_t N = parts.size(0), B = parts.size(1), Vl = parts.size(2);
  if (B == 0) return;
  const size_t es = dtype_size(parts.dtype()), row = size_t(Vl) * es;
  auto s = static_cast<cudaStream_t>(stream_);
  for (int64_t r = 0; r < N; ++r) {
    // dst: B rows of `row` bytes, pitch N * row, starting at column block r; src: rank r's [B, Vl].
    NV_CUDA_CHECK(cudaMemcpy2DAsync(static_cast<char*>(out.raw()) + size_t(r) * row, size_t(N) * row,
                                    static_cast<const char*>(parts.raw()) + size_t(r * B) * row, row, row, size_t(B),
                                    cudaMemcpyDeviceToDevice, s));
  }
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace nanovllm
