#include "nanovllm/engine/block_manager.h"

#include <algorithm>
#include <cstring>

#include <xxhash.h>

#include "nanovllm/utils/error.h"

namespace nanovllm {

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, bool enable_prefix_caching)
    : block_size_(block_size),
      granules_per_block_(block_size > kGranule && block_size % kGranule == 0 ? block_size / kGranule : 1),
      prefix_caching_(enable_prefix_caching) {
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

BlockManager::Plan BlockManager::plan(const Sequence& seq) const {
  Plan p;
  if (prefix_caching_ && !seq.needs_prompt_logprobs()) {  // prompt logprobs need every prompt position computed
    const int64_t lookups = (seq.num_tokens() - 1) / block_size_;  // never the last token's block
    std::optional<uint64_t> prefix;
    for (int64_t i = 0; i < lookups; ++i) {
      uint64_t h;
      int32_t id = lookup(seq, i, prefix, h);
      if (id < 0) break;
      p.hits.push_back(id);
      if (blocks_[size_t(id)].ref_count == 0) ++p.hits_in_free;
      prefix = h;
    }
    if (granules_per_block_ > 1) find_granules(seq, int64_t(p.hits.size()), prefix, p);
  }
  const int64_t needed = seq.num_blocks() - int64_t(p.hits.size());
  int64_t free = num_free_blocks() - p.hits_in_free;
  // A free source is held out of the free list until its copy runs: skip the hit where that
  // block is wanted for the sequence itself.
  if (p.source >= 0 && blocks_[size_t(p.source)].ref_count == 0) {
    if (free - 1 >= needed) {
      --free;
    } else {
      p.source = -1;
      p.granules = 0;
    }
  }
  p.fits = free >= needed;
  return p;
}

void BlockManager::find_granules(const Sequence& seq, int64_t i, std::optional<uint64_t> prefix, Plan& p) const {
  const int64_t start = i * block_size_;
  // Never the last token; never a whole block (that would have been a block hit).
  const int64_t most = std::min(granules_per_block_ - 1, (seq.num_tokens() - 1 - start) / kGranule);
  const int32_t* toks = seq.token_ids.data() + start;
  for (int64_t j = 1; j <= most; ++j) {
    const uint64_t h = compute_hash({toks + (j - 1) * kGranule, size_t(kGranule)}, prefix);
    prefix = h;
    auto it = granule_to_blocks_.find(h);
    if (it == granule_to_blocks_.end()) return;
    int32_t found = -1;
    for (int32_t id : it->second) {
      const Block& b = blocks_[size_t(id)];
      if (int64_t(b.token_ids.size()) < j * kGranule || !std::equal(toks, toks + j * kGranule, b.token_ids.begin()))
        continue;
      if (std::find(p.hits.begin(), p.hits.end(), id) != p.hits.end()) continue;  // (a hash collision)
      found = id;
      if (b.ref_count > 0) break;  // one in use costs no free block
    }
    if (found < 0) return;
    p.source = found;
    p.granules = j;
  }
}

int64_t BlockManager::can_allocate(const Sequence& seq) const {
  Plan p = plan(seq);
  return p.fits ? int64_t(p.hits.size()) : -1;
}

void BlockManager::hold(int32_t id) {
  Block& b = blocks_[size_t(id)];
  if (b.ref_count == 0) take_block_out_of_free_list(id);
  ++b.ref_count;
}

void BlockManager::release(int32_t id) {
  Block& b = blocks_[size_t(id)];
  if (b.ref_count <= 0) throw Error("block manager: double free of block " + std::to_string(b.id));
  if (--b.ref_count == 0) free_.push_back(b.id);
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
  for (uint64_t h : b.granule_hashes) {
    auto it = granule_to_blocks_.find(h);
    if (it == granule_to_blocks_.end()) continue;
    std::erase(it->second, id);
    if (it->second.empty()) granule_to_blocks_.erase(it);
  }
  b.granule_hashes.clear();
  b.token_ids.clear();
  b.ref_count = 1;
  return id;
}

void BlockManager::allocate(Sequence& seq) {
  if (!seq.block_table.empty())
    throw Error("block manager: sequence " + std::to_string(seq.id) + " already has blocks");
  const Plan p = plan(seq);
  if (!p.fits) throw ResourceError("block manager: not enough free blocks for sequence " + std::to_string(seq.id));
  for (int32_t id : p.hits) {
    hold(id);
    seq.block_table.push_back(id);
  }
  if (p.source >= 0) hold(p.source);  // before the fresh blocks: none of them may be the source
  for (int64_t i = int64_t(p.hits.size()); i < seq.num_blocks(); ++i) seq.block_table.push_back(take_free_block());
  const int64_t hits = int64_t(p.hits.size()), copied = p.granules * kGranule;
  if (p.source >= 0) seq.kv_copy = KVBlockCopy{p.source, seq.block_table[size_t(hits)], int32_t(copied)};
  seq.num_cached_tokens = hits * block_size_ + copied;
  seq.num_hashed_blocks = hits;
  if (prefix_caching_) {
    query_tokens_ += seq.num_tokens();
    hit_tokens_ += seq.num_cached_tokens;
    granule_hit_tokens_ += copied;
  }
}

void BlockManager::deallocate(Sequence& seq) {
  if (seq.kv_copy) release(seq.kv_copy->src_block);
  seq.kv_copy.reset();
  for (auto it = seq.block_table.rbegin(); it != seq.block_table.rend(); ++it) release(*it);
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

void BlockManager::trim(Sequence& seq, int64_t tokens) {
  const int64_t keep = std::max<int64_t>(seq.num_hashed_blocks, (tokens + block_size_ - 1) / block_size_);
  while (int64_t(seq.block_table.size()) > keep) {
    release(seq.block_table.back());
    seq.block_table.pop_back();
  }
}

void BlockManager::index_granules(Block& b, std::span<const int32_t> tokens, std::optional<uint64_t> prefix,
                                  int64_t upto) {
  upto = std::min(upto, granules_per_block_ - 1);
  if (int64_t(b.granule_hashes.size()) >= upto) return;
  if (int64_t(b.token_ids.size()) < upto * kGranule)
    b.token_ids.assign(tokens.begin(), tokens.begin() + upto * kGranule);
  for (int64_t j = int64_t(b.granule_hashes.size()) + 1; j <= upto; ++j) {
    if (j > 1) prefix = b.granule_hashes.back();
    const uint64_t h = compute_hash(tokens.subspan(size_t((j - 1) * kGranule), size_t(kGranule)), prefix);
    b.granule_hashes.push_back(h);
    granule_to_blocks_[h].push_back(b.id);
  }
}

void BlockManager::hash_blocks(Sequence& seq) {
  if (seq.kv_copy) release(seq.kv_copy->src_block);  // the step that ran the copy is over
  seq.kv_copy.reset();
  if (!prefix_caching_) return;
  const int64_t computed = std::min(seq.num_cached_tokens, int64_t(seq.block_table.size()) * block_size_);
  const int64_t full = computed / block_size_;
  auto prefix_of = [&](int64_t i) -> std::optional<uint64_t> {
    if (i == 0) return std::nullopt;
    return blocks_[size_t(seq.block_table[size_t(i - 1)])].hash;
  };
  for (int64_t i = seq.num_hashed_blocks; i < full; ++i) {
    const std::optional<uint64_t> prefix = prefix_of(i);
    Block& b = blocks_[size_t(seq.block_table[size_t(i)])];
    auto toks = seq.block(i);
    uint64_t h = compute_hash(toks, prefix);
    b.hash = h;
    b.token_ids.assign(toks.begin(), toks.end());
    hash_to_block_[h] = b.id;
    if (granules_per_block_ > 1) index_granules(b, toks, prefix, granules_per_block_);
  }
  seq.num_hashed_blocks = std::max(seq.num_hashed_blocks, full);
  // The partly computed last block (a running sequence's, or a prompt chunk's end).
  if (granules_per_block_ > 1 && full < int64_t(seq.block_table.size()) && computed - full * block_size_ >= kGranule)
    index_granules(blocks_[size_t(seq.block_table[size_t(full)])], seq.block(full), prefix_of(full),
                   (computed - full * block_size_) / kGranule);
}

}  // namespace nanovllm
