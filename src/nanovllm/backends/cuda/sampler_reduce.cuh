// Block reductions of the sampler kernels (sampler.cu, logprobs.cu): (value, index) argmax with the
// lowest index winning ties, and double sums, over blocks of up to 1024 threads (32 warps).
#pragma once
#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm::cuda {

template <class T>
__device__ __forceinline__ float ld(const T* p, int64_t i);
template <>
__device__ __forceinline__ float ld<float>(const float* p, int64_t i) {
  return p[i];
}
template <>
__device__ __forceinline__ float ld<bf16>(const bf16* p, int64_t i) {
  return __bfloat162float(p[i]);
}

// (value, index) argmax across a warp, the lowest index winning ties; every lane gets the result.
__device__ __forceinline__ void warp_argmax(float& v, int& idx) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float v2 = __shfl_xor_sync(0xffffffffu, v, o);
    const int i2 = __shfl_xor_sync(0xffffffffu, idx, o);
    if (v2 > v || (v2 == v && i2 < idx)) {
      v = v2;
      idx = i2;
    }
  }
}

// The same across the block (through shared sv/si, one slot per warp); every thread gets the result.
__device__ inline void block_argmax(float& v, int& idx, float* sv, int* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  warp_argmax(v, idx);
  __syncthreads();
  if (lane == 0) {
    sv[warp] = v;
    si[warp] = idx;
  }
  __syncthreads();
  v = sv[lane];
  idx = si[lane];
  warp_argmax(v, idx);
}

__device__ inline double block_sum_d(double v, double* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = red[lane];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace nanovllm::cuda
