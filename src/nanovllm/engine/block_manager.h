// The paged KV cache's bookkeeping (nano-vllm's BlockManager): a fixed pool of blocks, a free
// list, ref counts, and the prefix cache.
//
// Whole blocks (nano-vllm): hash of a full block = xxHash64(previous block's hash as 8
// little-endian bytes, if any, then the block's token ids as int32 little-endian); `hash ->
// block_id`. A hit shares the block (ref_count + 1) after comparing the token ids (collision guard).
//
// Granules (hits at 16-token granularity inside large blocks, as vLLM's 16-token blocks hit,
// while the kernels keep their fast 256-token blocks): when block_size is a multiple of kGranule
// larger than it, the leading granules of every block whose K/V is computed are indexed too
// (sealed blocks, and the partly filled last block of a running sequence). Granule j of a block
// hashes its kGranule tokens chained onto granule j-1's hash (granule 1: onto the previous block's
// hash, where a block's own hash would start); `granule hash -> blocks`, guarded by comparing the
// block's leading tokens. After a sequence's whole-block hits, the longest run of leading granules
// of its next block that one cached block holds is a partial hit: the sequence's own fresh block
// gets those slots copied (Sequence::kv_copy, run by the model runner before the sequence's first
// forward), and the source block is held (ref_count + 1, out of the free list) until the copy has
// run: hash_blocks after that step, or deallocate. The source may be in use by another sequence
// or free but cached.
//
// Freed blocks keep their hash, tokens and granules until reallocated, so later requests can still
// hit them; reallocation ends all of them. At least one prompt token is always computed.
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
  int32_t ref_count = 0;         // block tables holding it, plus pending copies reading it
  std::optional<uint64_t> hash;  // set once the block is full and sealed
  // The tokens whose K/V the block holds and the prefix cache knows: all of them once sealed, else
  // its indexed granules'.
  std::vector<int32_t> token_ids;
  std::vector<uint64_t> granule_hashes;  // of its leading granules 1..n, as indexed
};

class BlockManager {
 public:
  static constexpr int64_t kGranule = 16;  // tokens: the prefix cache's hit granularity

  BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching);

  static uint64_t compute_hash(std::span<const int32_t> tokens, std::optional<uint64_t> prefix);

  // How many leading blocks of seq's prompt are in the prefix cache, or -1 when the free blocks
  // cannot hold the rest. Only full blocks before the last token are looked up, so at least one
  // token is always computed. (allocate may find a partial hit on top of them.)
  int64_t can_allocate(const Sequence& seq) const;
  // Builds seq's block table (cache hits first); sets num_cached_tokens (whole-block and granule
  // hits) and, for a granule hit, seq.kv_copy. Call after can_allocate.
  void allocate(Sequence& seq);
  // Releases seq's blocks (walking the table backwards) and a pending copy's source; resets its
  // cache state.
  void deallocate(Sequence& seq);
  // Decode: is there a block for the token at position num_tokens-1 (+ extra_tokens: async
  // scheduling reserves the slot of a token not sampled yet)?
  bool can_append(const Sequence& seq, int64_t extra_tokens = 0) const;
  void may_append(Sequence& seq, int64_t extra_tokens = 0);
  // Speculative decoding's rollback: releases seq's trailing blocks beyond those holding its
  // first `tokens` slots (a verify step reserved slots for drafts that were rejected). Those blocks
  // hold no computed token the prefix cache knows.
  void trim(Sequence& seq, int64_t tokens);
  // Blocks may_append would take.
  int64_t blocks_to_append(const Sequence& seq, int64_t extra_tokens = 0) const;
  // After a step that computed seq's scheduled tokens: releases the source of its copy (the step
  // ran it), seals the blocks now full of computed K/V into the prefix cache and indexes the
  // computed granules.
  void hash_blocks(Sequence& seq);

  int64_t num_blocks() const { return int64_t(blocks_.size()); }
  int64_t num_free_blocks() const { return int64_t(free_.size()); }
  int64_t block_size() const { return block_size_; }
  bool prefix_caching() const { return prefix_caching_; }
  // Granules per block; 1: granule hits are off (block_size is not a multiple of kGranule above it).
  int64_t granules_per_block() const { return granules_per_block_; }
  // Prefix-cache statistics: prompt tokens looked up vs found (whole blocks and granules), and the
  // part of the hits that came from granules (copied).
  int64_t num_query_tokens() const { return query_tokens_; }
  int64_t num_hit_tokens() const { return hit_tokens_; }
  int64_t num_granule_hit_tokens() const { return granule_hit_tokens_; }
  const Block& block(int32_t id) const { return blocks_.at(size_t(id)); }

  // Checks the invariants against the live sequences (those holding block tables); returns an
  // empty string when they hold, else what is wrong. For tests.
  std::string check_invariants(const std::vector<const Sequence*>& live) const;

 private:
  // What allocate would do for a sequence.
  struct Plan {
    std::vector<int32_t> hits;  // whole-block hits, in order
    int64_t hits_in_free = 0;   // of them, blocks now in the free list
    int32_t source = -1;        // the block a granule hit copies from, or -1
    int64_t granules = 0;       // its leading granules copied
    bool fits = false;          // the free blocks hold the rest
  };
  Plan plan(const Sequence& seq) const;
  // The longest granule hit for block i of seq, whose previous block hashes to prefix.
  void find_granules(const Sequence& seq, int64_t i, std::optional<uint64_t> prefix, Plan& p) const;
  // The cached block for block i of seq given the previous block's hash, or -1.
  int32_t lookup(const Sequence& seq, int64_t i, std::optional<uint64_t> prefix, uint64_t& hash) const;
  // Indexes b's granules up to `upto` (tokens: the block's computed tokens, prefix: the previous
  // block's hash).
  void index_granules(Block& b, std::span<const int32_t> tokens, std::optional<uint64_t> prefix, int64_t upto);
  int32_t take_free_block();
  void take_block_out_of_free_list(int32_t id);
  void hold(int32_t id);     // ref_count + 1, out of the free list if it was there
  void release(int32_t id);  // ref_count - 1, into the free list at 0

  int64_t block_size_;
  int64_t granules_per_block_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::deque<int32_t> free_;
  std::unordered_map<uint64_t, int32_t> hash_to_block_;
  std::unordered_map<uint64_t, std::vector<int32_t>> granule_to_blocks_;
  int64_t query_tokens_ = 0, hit_tokens_ = 0, granule_hit_tokens_ = 0;
};

}  // namespace nanovllm
