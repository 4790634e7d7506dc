// Backend::copy_kv_blocks on CUDA against the CPU backend: BF16 caches (the 16-byte path) and FP8
// codes of 3-byte slots (the byte path), more copies than one launch takes, one source read by
// several copies; the bytes of the whole cache must match.
#include "gpu_test_util.h"

#include <cstring>

using namespace nanovllm;
using namespace nanovllm::test;

TEST(CudaKvBlockCopy, MatchesTheCpuBackend) {
  REQUIRE_GPU();
  Backends b;
  for (auto [dt, R] : {std::pair{DType::BF16, int64_t(24)}, std::pair{DType::F8E4M3, int64_t(3)}}) {
    const Shape shape{6, 100, 32, R};  // [P, blocks, block_size, R]
    Tensor cpu = b.cpu.empty(shape, dt), gpu = b.gpu.empty(shape, dt);
    auto* p = static_cast<uint8_t*>(cpu.raw());
    for (size_t i = 0; i < cpu.nbytes(); ++i) p[i] = uint8_t((i * 131 + 7) % 251);
    b.gpu.upload(cpu.raw(), dt, gpu);
    std::vector<KVBlockCopy> copies;
    for (int32_t i = 0; i < 40; ++i) copies.push_back({i % 10, 10 + i, 1 + (i * 7) % 32});
    b.cpu.copy_kv_blocks(cpu, copies);
    b.gpu.copy_kv_blocks(gpu, copies);
    std::vector<uint8_t> got(gpu.nbytes());
    b.gpu.download(gpu, got.data());
    EXPECT_EQ(std::memcmp(got.data(), cpu.raw(), got.size()), 0) << dtype_name(dt);
  }
}
