// Counter-based sampling noise shared by the CPU and CUDA samplers: the uniform number for vocab
// entry `index` when sampling the token at `position` of a request with `seed`. Stateless, so a
// request's output depends only on its seed, never on the batch it ran in or the backend.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define NANOVLLM_HD __host__ __device__ __forceinline__
#else
#define NANOVLLM_HD inline
#endif

namespace nanovllm {

NANOVLLM_HD uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Uniform in (0, 1): 24 random bits, never 0 (so -log(u) is finite).
NANOVLLM_HD float sampling_uniform(uint64_t seed, uint64_t position, uint64_t index) {
  uint64_t h = splitmix64(seed ^ splitmix64(position * 0x100000001b3ull + index));
  return (float(uint32_t(h >> 40)) + 0.5f) * (1.0f / 16777216.0f);
}

}  // namespace nanovllm
