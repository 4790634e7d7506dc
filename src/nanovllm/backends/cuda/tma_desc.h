// A TMA descriptor (CUtensorMap: 128 opaque bytes, 64-byte aligned) as plain C++, so that host
// headers without the CUDA driver API (cuda_backend.h) can hold one. Made by make_tma_2d
// (tma_desc.cu), read by the kernels as a __grid_constant__ CUtensorMap.
#pragma once

namespace nanovllm::cuda {

struct alignas(64) TmaDesc {
  unsigned char bytes[128];
};

// A 2D tensor of `rows` rows of `inner` elements (BF16, or 32-bit words when !bf16), rows
// `row_bytes` apart (a multiple of 16; base 16-byte aligned), read in boxes of box_inner x box_rows
// elements (swizzle128: the 128-byte swizzle of wgmma.cuh, box_inner x element = 128 bytes; else
// stored as is). Coordinates outside the tensor read as zeros. Throws Error naming `what` if the
// driver refuses (tma_desc.cu).
TmaDesc make_tma_2d(const void* base, bool bf16, long long inner, long long rows, long long row_bytes,
                    unsigned box_inner, unsigned box_rows, bool swizzle128, const char* what);

}  // namespace nanovllm::cuda
