// Host memory for the CPU backend's tensors. Tensor::host maps every buffer of 1 MiB or more
// afresh (lazy zero pages), so each step's large temporaries (a 200-token prefill makes ~400 MB of
// them over Qwen3-0.6B's 28 layers; a decode step its 1.2 MB of logits) paid a page fault per
// 4 KB page and an munmap. Once steps run, the pool keeps released mappings of 1-64 MiB (up to `max_cached` bytes
// in all) and hands them out again, zeroed like a fresh mapping, for the same rounded size.
// Thread-safe: a tensor may be released on any thread; a buffer outlives the backend if it must.
#pragma once
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

#include "nanovllm/utils/tensor.h"

namespace nanovllm::cpu {

class HostBufferPool : public std::enable_shared_from_this<HostBufferPool> {
 public:
  static std::shared_ptr<HostBufferPool> create(size_t max_cached);
  ~HostBufferPool();
  HostBufferPool(const HostBufferPool&) = delete;
  HostBufferPool& operator=(const HostBufferPool&) = delete;

  // A zeroed tensor: from the pool for 1-64 MiB, else Tensor::host.
  Tensor take(const Shape& shape, DType dtype);
  // Released buffers are kept from now on (the backend's first step); before, they are unmapped,
  // so weights freed while loading (quantize-at-load's BF16 copies) do not raise the peak memory.
  void start_caching();
  size_t cached_bytes();  // what the pool holds now (tests)

 private:
  explicit HostBufferPool(size_t max_cached) : max_cached_(max_cached) {}
  void give_back(void* p, size_t mapped);

  std::mutex mu_;
  std::multimap<size_t, void*> free_;  // mapped size -> mapping
  size_t cached_ = 0;
  bool caching_ = false;
  const size_t max_cached_;
};

}  // namespace nanovllm::cpu
