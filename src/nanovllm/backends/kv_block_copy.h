// One copy between two blocks of the paged KV cache: the first num_slots slots of src_block into
// dst_block, in every layer's keys and values. Prefix caching's partial hits make them
// (engine/block_manager.h: a new sequence reads the leading 16-token granules of a cached block
// through its own copy); Backend::copy_kv_blocks runs them. Plain C++17: the CUDA sources include it.
#pragma once
#include <cstdint>

namespace nanovllm {

struct KVBlockCopy {
  int32_t src_block = 0, dst_block = 0;
  int32_t num_slots = 0;  // leading slots copied, 1..block_size
};

}  // namespace nanovllm
