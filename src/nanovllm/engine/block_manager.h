// The paged KV cache's bookkeeping (nano-vllm's BlockManager): a fixed pool of blocks, a free
// list, ref counts, and the prefix cache `hash -> block_id`.
//
// Hash of a full block = xxHash64(previous block's hash as 8 little-endian bytes, if any, then the
// block's token ids as int32 little-endian). A hit also compares the token ids (collision guard).
// Freed blocks keep their hash and tokens until reallocated, so later requests can still hit them.
#pragma once
#include <cstdint>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "nanovllm/engine/sequence.h"

namespace nanovllm {

struct Block {
  int32_t id = 0;
  int32_t ref_count = 0;
  std::optional<uint64_t> hash;    // set once the block is full and sealed
  std::vector<int32_t> token_ids;  // the tokens the hash covers
};

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching);

  static uint64_t compute_hash(std::span<const int32_t> tokens, std::optional<uint64_t> prefix);

  // How many leading blocks of seq's prompt are in the prefix cache, or -1 when the free blocks
  // cannot hold the rest. Only full blocks before the last token are looked up, so at least one
  // token is always computed.
  int64_t can_allocate(const Sequence& seq) const;
  // Builds seq's block table (cache hits first); sets num_cached_tokens. Call after can_allocate.
  void allocate(Sequence& seq);
  // Releases seq's blocks (walking the table backwards) and resets its cache state.
  void deallocate(Sequence& seq);
  // Decode: is there a block for the token at position num_tokens-1 (+ extra_tokens: async
  // scheduling reserves the slot of a token not sampled yet)?
  bool can_append(const Sequence& seq, int64_t extra_tokens = 0) const;
  void may_append(Sequence& seq, int64_t extra_tokens = 0);
  // Blocks may_append would take.
  int64_t blocks_to_append(const Sequence& seq, int64_t extra_tokens = 0) const;
  // Seals the blocks that are now full of computed K/V into the prefix cache.
  void hash_blocks(Sequence& seq);

  int64_t num_blocks() const { return int64_t(blocks_.size()); }
  int64_t num_free_blocks() const { return int64_t(free_.size()); }
  int64_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Prefix-cache statistics: prompt tokens looked up vs found.
  int64_t num_query_tokens() const { return query_tokens_; }
  int64_t num_hit_tokens() const { return hit_tokens_; }
  const Block& block(int32_t id) const { return blocks_.at(size_t(id)); }

  // Checks the invariants against the live sequences (those holding block tables); returns an
  // empty string when they hold, else what is wrong. For tests.
  std::string check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  // The cached block for block i of seq given the previous block's hash, or -1.
  int32_t lookup(const Sequence& seq, int64_t i, std::optional<uint64_t> prefix, uint64_t& hash) const;
  int32_t take_free_block();
  void take_block_out_of_free_list(int32_t id);

  int64_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::deque<int32_t> free_;
  std::unordered_map<uint64_t, int32_t> hash_to_block_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0;
};

}  // namespace nanovllm
