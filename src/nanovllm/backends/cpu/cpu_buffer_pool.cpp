// The CPU backend's pool of large host buffers (cpu_buffer_pool.h).
#include "nanovllm/backends/cpu/cpu_buffer_pool.h"

#include <sys/mman.h>

#include <cstring>
#include <string>

#include "nanovllm/utils/error.h"

namespace nanovllm::cpu {

namespace {
constexpr size_t kMinPooled = size_t(1) << 20, kMaxPooled = size_t(64) << 20, kGranule = size_t(64) << 10;
}

std::shared_ptr<HostBufferPool> HostBufferPool::create(size_t max_cached) {
  return std::shared_ptr<HostBufferPool>(new HostBufferPool(max_cached));
}

HostBufferPool::~HostBufferPool() {
  for (auto& [mapped, p] : free_) ::munmap(p, mapped);
}

size_t HostBufferPool::cached_bytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_;
}

Tensor HostBufferPool::take(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  const size_t bytes = dtype_bytes(dtype, size_t(n));
  if (bytes < kMinPooled || bytes > kMaxPooled) return Tensor::host(shape, dtype);
  const size_t mapped = (bytes + kGranule - 1) / kGranule * kGranule;
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = free_.find(mapped); it != free_.end()) {
      p = it->second;
      free_.erase(it);
      cached_ -= mapped;
    }
  }
  if (p) {
    std::memset(p, 0, bytes);  // as a fresh mapping reads
  } else {
    p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw ResourceError("out of host memory allocating " + std::to_string(bytes) + " bytes");
  }
  auto buf = std::make_shared<Buffer>();
  buf->ptr = p;
  buf->bytes = bytes;
  buf->device = Device::CPU;
  buf->release = [pool = shared_from_this(), mapped](void* q) { pool->give_back(q, mapped); };
  return Tensor(std::move(buf), dtype, shape);
}

void HostBufferPool::start_caching() {
  std::lock_guard<std::mutex> lock(mu_);
  caching_ = true;
}

void HostBufferPool::give_back(void* p, size_t mapped) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (caching_ && cached_ + mapped <= max_cached_) {
      free_.emplace(mapped, p);
      cached_ += mapped;
      return;
    }
  }
  ::munmap(p, mapped);
}

}  // namespace nanovllm::cpu
