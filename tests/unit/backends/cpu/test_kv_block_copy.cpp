// Backend::copy_kv_blocks on the CPU backend (the oracle of the CUDA kernel): every plane's leading
// slots of the source block land in the destination block, nothing else changes, FP8 codes are
// copied as bytes; copies that would overlap or leave the cache are refused with the op's name.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "nanovllm/backends/cpu/cpu_backend.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

namespace {

// cache [P, blocks, bs, R] of `dtype` (F32 or F8E4M3), every byte distinct-ish.
Tensor patterned(CpuBackend& be, const Shape& shape, DType dtype) {
  Tensor t = be.empty(shape, dtype);
  auto* p = static_cast<uint8_t*>(t.raw());
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = uint8_t((i * 131 + 7) % 251);
  return t;
}

}  // namespace

TEST(KvBlockCopy, CopiesLeadingSlotsOfEveryPlane) {
  CpuBackend be(1);
  for (DType dt : {DType::F32, DType::F8E4M3}) {
    const int64_t P = 4, blocks = 6, bs = 8, R = 3;
    Tensor cache = patterned(be, {P, blocks, bs, R}, dt);
    std::vector<uint8_t> before(static_cast<const uint8_t*>(cache.raw()),
                                static_cast<const uint8_t*>(cache.raw()) + cache.nbytes());
    const std::vector<KVBlockCopy> copies = {{1, 4, 5}, {1, 2, 8}, {0, 5, 1}};
    be.copy_kv_blocks(cache, copies);
    const size_t slot = size_t(R) * dtype_size(dt);
    const auto* now = static_cast<const uint8_t*>(cache.raw());
    for (int64_t p = 0; p < P; ++p)
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t s = 0; s < bs; ++s) {
          int64_t from = b;  // the block whose bytes slot s of block b should hold
          for (const auto& c : copies)
            if (c.dst_block == b && s < c.num_slots) from = c.src_block;
          const size_t want = size_t((p * blocks + from) * bs + s) * slot,
                       got = size_t((p * blocks + b) * bs + s) * slot;
          ASSERT_EQ(std::memcmp(now + got, before.data() + want, slot), 0)
              << dtype_name(dt) << " plane " << p << " block " << b << " slot " << s;
        }
  }
}

TEST(KvBlockCopy, RefusesCopiesOutsideTheCacheOrOverlapping) {
  CpuBackend be(1);
  Tensor cache = patterned(be, {2, 4, 8, 3}, DType::F32);
  auto refused = [&](std::vector<KVBlockCopy> copies, const std::string& says) {
    try {
      be.copy_kv_blocks(cache, copies);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("copy_kv_blocks"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({{0, 4, 1}}, "outside");
  refused({{-1, 2, 1}}, "outside");
  refused({{0, 1, 0}}, "slots outside 1..8");
  refused({{0, 1, 9}}, "slots outside 1..8");
  refused({{2, 2, 3}}, "the same block");
  refused({{0, 1, 3}, {1, 2, 3}}, "another copy");  // block 1 written, then read
  refused({{0, 1, 3}, {2, 1, 3}}, "another copy");  // block 1 written twice
  refused({{0, 1, 3}, {2, 0, 3}}, "another copy");  // block 0 read, then written
  Tensor flat = be.empty({8, 3}, DType::F32);
  EXPECT_THROW(be.copy_kv_blocks(flat, {{0, 1, 1}}), Error);
  be.copy_kv_blocks(cache, {{0, 1, 3}, {0, 2, 8}});  // one source, two destinations: fine
  be.copy_kv_blocks(cache, {});
}
