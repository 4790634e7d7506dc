// The CPU backend's buffer pool (backends/cpu/cpu_buffer_pool.h): once steps run, a released
// 1-64 MiB buffer is handed out again for the same rounded size, zeroed; what it holds stays under its cap; small
// and huge tensors bypass it.
#include <gtest/gtest.h>

#include <cstring>

#include "nanovllm/backends/cpu/cpu_buffer_pool.h"

using namespace nanovllm;

TEST(CpuBufferPool, ReusesReleasedBuffersZeroed) {
  auto pool = cpu::HostBufferPool::create(size_t(8) << 20);
  { Tensor loading = pool->take({1000, 600}, DType::F32); }
  EXPECT_EQ(pool->cached_bytes(), 0u) << "nothing is kept before the first step";
  pool->start_caching();
  void* first = nullptr;
  {
    Tensor t = pool->take({1000, 600}, DType::F32);  // 2.4 MB
    first = t.raw();
    std::memset(t.raw(), 0x5a, t.nbytes());
  }
  EXPECT_GE(pool->cached_bytes(), size_t(2400000));
  Tensor again = pool->take({600, 1000}, DType::F32);  // same bytes
  EXPECT_EQ(again.raw(), first) << "the released mapping is reused";
  EXPECT_EQ(pool->cached_bytes(), 0u);
  const auto* b = static_cast<const unsigned char*>(again.raw());
  for (size_t i = 0; i < again.nbytes(); ++i) ASSERT_EQ(b[i], 0) << "byte " << i << " not zeroed";
  Tensor other = pool->take({1000, 700}, DType::F32);  // another size: a new mapping
  EXPECT_NE(other.raw(), first);
}

TEST(CpuBufferPool, HoldsNoMoreThanItsCapAndBypassesSmallAndHugeTensors) {
  auto pool = cpu::HostBufferPool::create(size_t(3) << 20);
  pool->start_caching();
  {
    Tensor a = pool->take({1 << 19}, DType::F32), b = pool->take({1 << 19}, DType::F32);  // 2 MiB each
  }
  EXPECT_EQ(pool->cached_bytes(), size_t(2) << 20) << "the second 2 MiB goes over a 3 MiB cap";
  { Tensor small = pool->take({1000}, DType::F32), huge = pool->take({int64_t(20) << 20}, DType::F32); }
  EXPECT_EQ(pool->cached_bytes(), size_t(2) << 20) << "1 KB and 80 MB tensors are not pooled";
  Tensor z = pool->take({0}, DType::F32);
  EXPECT_EQ(z.numel(), 0);
}

TEST(CpuBufferPool, BuffersOutliveThePool) {
  Tensor kept;
  {
    auto pool = cpu::HostBufferPool::create(size_t(8) << 20);
    kept = pool->take({1 << 19}, DType::F32);
  }
  static_cast<float*>(kept.raw())[0] = 1.0f;  // still mapped: the buffer holds the pool
  EXPECT_EQ(static_cast<const float*>(kept.raw())[0], 1.0f);
}
