// A TMA descriptor (CUtensorMap: 128 opaque bytes, 64-byte aligned) as plain C++, so that host
// headers without the CUDA driver API (cuda_backend.h) can hold one. Made by make_cache_tma
// (attention_prefill_wgmma_tma.cu), read by the kernels as a __grid_constant__ CUtensorMap.
#pragma once

namespace nanovllm::cuda {

struct alignas(64) TmaDesc {
  unsigned char bytes[128];
};

}  // namespace nanovllm::cuda
