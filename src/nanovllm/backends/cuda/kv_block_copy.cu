// KV-cache block copies (Backend::copy_kv_blocks): prefix caching's partial hits copy the leading
// slots of a cached block into a new sequence's own block, in every layer's keys and values, before
// the step's forward (engine/model_runner.cpp).
//
//   cache:  [P, num_blocks, block_size, R] of any dtype (P = 2 x layers), moved as bytes
//   copies: at most kMaxCopies per launch, passed by value in the kernel's parameters (nothing to
//           upload); a step has at most one per sequence it admits
//
// Grid (P, copies, chunks of kChunk bytes): CTA (p, c, z) moves chunk z of copy c's num_slots x R
// bytes in plane p, 16 bytes per thread per step when the cache's base and slot size are
// multiples of 16 (then so is every offset and length here), else one byte at a time.
// The copies of a launch never write a block another of them reads (check_copy_kv_blocks).
#include <algorithm>

#include "nanovllm/backends/checks.h"
#include "nanovllm/backends/cuda/cuda_backend.h"
#include "nanovllm/backends/cuda/cuda_common.cuh"

namespace nanovllm {

using namespace cuda;

namespace {

constexpr int kMaxCopies = 32;
constexpr int64_t kChunk = int64_t(64) << 10;

// Byte offsets of each copy's blocks inside a plane, and the bytes it moves per plane.
struct CopyList {
  int64_t src[kMaxCopies], dst[kMaxCopies], bytes[kMaxCopies];
};

template <class V>
__global__ void copy_kv_blocks_kernel(char* cache, int64_t plane_bytes, CopyList l) {
  pdl_begin();  // the source slots were written by earlier steps' kernels
  const int c = blockIdx.y;
  const int64_t lo = int64_t(blockIdx.z) * kChunk, hi = min(l.bytes[c], lo + kChunk);
  char* plane = cache + int64_t(blockIdx.x) * plane_bytes;
  const char* src = plane + l.src[c];
  char* dst = plane + l.dst[c];
  for (int64_t i = lo + int64_t(threadIdx.x) * int64_t(sizeof(V)); i < hi;
       i += int64_t(blockDim.x) * int64_t(sizeof(V)))
    *reinterpret_cast<V*>(dst + i) = *reinterpret_cast<const V*>(src + i);
}

}  // namespace

void CudaBackend::copy_kv_blocks(Tensor& cache, const std::vector<KVBlockCopy>& copies) {
  check_copy_kv_blocks(cache, copies);
  if (cache.device() != Device::CUDA) throw Error("copy_kv_blocks: the cache must be on the GPU");
  const int64_t P = cache.size(0), slot = cache.size(3) * int64_t(dtype_size(cache.dtype()));
  const int64_t block = slot * cache.size(2), plane = block * cache.size(1);
  const bool vec = aligned16({cache.raw()}) && slot % 16 == 0;
  char* base = static_cast<char*>(cache.raw());
  for (size_t first = 0; first < copies.size(); first += kMaxCopies) {
    const int n = int(std::min<size_t>(kMaxCopies, copies.size() - first));
    CopyList l{};
    int64_t most = 0;
    for (int i = 0; i < n; ++i) {
      const KVBlockCopy& c = copies[first + size_t(i)];
      l.src[i] = c.src_block * block;
      l.dst[i] = c.dst_block * block;
      l.bytes[i] = c.num_slots * slot;
      most = std::max(most, l.bytes[i]);
    }
    const dim3 grid(unsigned(P), unsigned(n), ceil_div(most, kChunk));
    if (vec)
      launch(copy_kv_blocks_kernel<uint4>, grid, 256, 0, on_stream(), base, plane, l);
    else
      launch(copy_kv_blocks_kernel<uint8_t>, grid, 256, 0, on_stream(), base, plane, l);
  }
}

}  // namespace nanovllm
