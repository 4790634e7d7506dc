#include "nanovllm/engine/block_manager.h"

#include <algorithm>
#include <cstring>
#include <map>

#include <xxhash.h>

#include "nanovllm/utils/error.h"

namespace nanovllm {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size), prefix_caching_(enable_prefix_caching) {
  if (num_blocks <= 0) throw ResourceError("the KV cache has no blocks");
  blocks_.resize(size_t(num_blocks));
  for (int64_t i = 0; i < num_blocks; ++i) {
    blocks_[size_t(i)].id = int32_t(i);
    free_.push_back(int32_t(i));
  }
}

uint64_t BlockManager::compute_hash(std::span<const int32_t> tokens, std::optional<uint64_t> prefix) {
  XXH64_state_t* st = XXH64_createState();
  XXH64_reset(st, 0);
  if (prefix) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = uint8_t(*prefix >> (8 * i));
    XXH64_update(st, le, 8);
  }
  // int32 little-endian on every platform we build for (x86-64, aarch64).
  XXH64_update(st, tokens.data(), tokens.size() * sizeof(int32_t));
  uint64_t h = XXH64_digest(st);
  XXH64_freeState(st);
  return h;
}

int32_t BlockManager::lookup(const Sequence& seq, int64_t i, std::optional<uint64_t> prefix, uint64_t& hash) const {
  auto toks = seq.block(i);
  hash = compute_hash(toks, prefix);
  auto it = hash_to_block_.find(hash);
  if (it == hash_to_block_.end()) return -1;
  const Block& b = blocks_[size_t(it->second)];
  if (!b.hash || *b.hash != hash || !std::equal(toks.begin(), toks.end(), b.token_ids.begin(), b.token_ids.end()))
    return -1;
  return b.id;
}

int64_t BlockManager::can_allocate(const Sequence& seq) const {
  int64_t hits = 0, hits_in_free = 0;
  if (prefix_caching_ && !seq.needs_prompt_logprobs()) {  // prompt logprobs need every prompt position computed
    const int64_t lookups = (seq.num_tokens() - 1) / block_size_;  // never the last token's block
    std::optional<uint64_t> prefix;
    for (int64_t i = 0; i < lookups; ++i) {
      uint64_t h;
      int32_t id = lookup(seq, i, prefix, h);
      if (id < 0) break;
      ++hits;
      if (blocks_[size_t(id)].ref_count == 0) ++hits_in_free;
      prefix = h;
    }
  }
  const int64_t needed = seq.num_blocks() - hits;
  return num_free_blocks() - hits_in_free >= needed ? hits : -1;
}

void BlockManager::take_block_out_of_free_list(int32_t id) {
  auto it = std::find(free_.begin(), free_.end(), id);
  if (it == free_.end()) throw Error("block manager: block " + std::to_string(id) + " is not free");
  free_.erase(it);
}

int32_t BlockManager::take_free_block() {
  if (free_.empty()) throw ResourceError("block manager: no free KV block");
  int32_t id = free_.front();
  free_.pop_front();
  Block& b = blocks_[size_t(id)];
  // Reallocation ends the block's life in the prefix cache.
  if (b.hash) {
    auto it = hash_to_block_.find(*b.hash);
    if (it != hash_to_block_.end() && it->second == id) hash_to_block_.erase(it);
    b.hash.reset();
  }
  b.token_ids.clear();
  b.ref_count = 1;
  return id;
}

void BlockManager::allocate(Sequence& seq) {
  if (!seq.block_table.empty())
    throw Error("block manager: sequence " + std::to_string(seq.id) + " already has blocks");
  if (can_allocate(seq) < 0)
    throw ResourceError("block manager: not enough free blocks for sequence " + std::to_string(seq.id));
  std::optional<uint64_t> prefix;
  bool hitting = prefix_caching_ && !seq.needs_prompt_logprobs();
  const int64_t lookups = (seq.num_tokens() - 1) / block_size_;
  int64_t hits = 0;
  for (int64_t i = 0; i < seq.num_blocks(); ++i) {
    int32_t id = -1;
    if (hitting && i < lookups) {
      uint64_t h;
      id = lookup(seq, i, prefix, h);
      prefix = h;
    }
    if (id >= 0) {
      Block& b = blocks_[size_t(id)];
      if (b.ref_count == 0) take_block_out_of_free_list(id);
      ++b.ref_count;
      ++hits;
    } else {
      hitting = false;
      id = take_free_block();
    }
    seq.block_table.push_back(id);
  }
  seq.num_cached_tokens = hits * block_size_;
  seq.num_hashed_blocks = hits;
  if (prefix_caching_) {
    query_tokens_ += seq.num_tokens();
    hit_tokens_ += seq.num_cached_tokens;
  }
}

void BlockManager::deallocate(Sequence& seq) {
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) {
    Block& b = blocks_[size_t(*it)];
    if (b.ref_count <= 0) throw Error("block manager: double free of block " + std::to_string(b.id));
    if (--b.ref_count == 0) free_.push_back(b.id);
  }
  seq.block_table.clear();
  seq.num_cached_tokens = 0;
  seq.num_hashed_blocks = 0;
}

int64_t BlockManager::blocks_to_append(const Sequence& seq, int64_t extra_tokens) const {
  const int64_t want = (seq.num_tokens() + extra_tokens + block_size_ - 1) / block_size_;
  return std::max<int64_t>(0, want - int64_t(seq.block_table.size()));
}

bool BlockManager::can_append(const Sequence& seq, int64_t extra_tokens) const {
  return num_free_blocks() >= blocks_to_append(seq, extra_tokens);
}

void BlockManager::may_append(Sequence& seq, int64_t extra_tokens) {
  for (int64_t n = blocks_to_append(seq, extra_tokens); n > 0; --n) seq.block_table.push_back(take_free_block());
}

void BlockManager::hash_blocks(Sequence& seq) {
  if (!prefix_caching_) return;
  const int64_t full = std::min<int64_t>(seq.num_cached_tokens / block_size_, int64_t(seq.block_table.size()));
  for (int64_t i = seq.num_hashed_blocks; i < full; ++i) {
    std::optional<uint64_t> prefix;
    if (i > 0) prefix = blocks_[size_t(seq.block_table[size_t(i - 1)])].hash;
    Block& b = blocks_[size_t(seq.block_table[size_t(i)])];
    auto toks = seq.block(i);
    uint64_t h = compute_hash(toks, prefix);
    b.hash = h;
    b.token_ids.assign(toks.begin(), toks.end());
    hash_to_block_[h] = b.id;
  }
  seq.num_hashed_blocks = std::max(seq.num_hashed_blocks, full);
}

std::string BlockManager::check_invariants(const std::vector<const Sequence*>& live) const {
  std::map<int32_t, int32_t> refs;
  for (auto* s : live)
    for (int32_t id : s->block_table) ++refs[id];
  int64_t used = 0;
  for (auto& b : blocks_) {
    int32_t want = refs.count(b.id) ? refs[b.id] : 0;
    if (b.ref_count != want)
      return "block " + std::to_string(b.id) + " has ref_count " + std::to_string(b.ref_count) + " but " +
             std::to_string(want) + " block tables hold it";
    if (b.ref_count > 0) ++used;
  }
  if (used + num_free_blocks() != num_blocks())
    return "used (" + std::to_string(used) + ") + free (" + std::to_string(num_free_blocks()) + ") != all (" +
           std::to_string(num_blocks()) + ")";
  for (int32_t id : free_)
    if (blocks_[size_t(id)].ref_count != 0) return "free block " + std::to_string(id) + " is referenced";
  for (auto& [h, id] : hash_to_block_) {
    const Block& b = blocks_[size_t(id)];
    if (!b.hash || *b.hash != h) return "hash entry points at block " + std::to_string(id) + " with another hash";
    if (int64_t(b.token_ids.size()) != block_size_) return "hashed block " + std::to_string(id) + " is not full";
  }
  // Every sealed block of a live sequence holds exactly that sequence's tokens.
  for (auto* s : live)
    for (int64_t i = 0; i < s->num_hashed_blocks; ++i) {
      const Block& b = blocks_[size_t(s->block_table[size_t(i)])];
      auto toks = s->block(i);
      if (!b.hash || !std::equal(toks.begin(), toks.end(), b.token_ids.begin(), b.token_ids.end()))
        return "sealed block " + std::to_string(b.id) + " of sequence " + std::to_string(s->id) +
               " does not match its tokens";
    }
  return "";
}

}  // namespace nanovllm
