// BlockManager::check_invariants: what must hold between any two calls (ref counts against the
// live block tables and pending copies, the free list, both prefix-cache indexes and the tokens
// they cover). The tests' property checks call it after every operation.
#include <algorithm>
#include <map>

#include "nanovllm/engine/block_manager.h"

namespace nanovllm {

namespace {
std::string num(int64_t v) { return std::to_string(v); }
}  // namespace

std::string BlockManager::check_invariants(const std::vector<const Sequence*>& live) const {
  std::map<int32_t, int32_t> refs;
  for (auto* s : live) {
    for (int32_t id : s->block_table) ++refs[id];
    if (s->kv_copy) ++refs[s->kv_copy->src_block];
  }
  int64_t used = 0;
  for (auto& b : blocks_) {
    int32_t want = refs.count(b.id) ? refs[b.id] : 0;
    if (b.ref_count != want)
      return "block " + num(b.id) + " has ref_count " + num(b.ref_count) + " but " + num(want) +
             " block tables and pending copies hold it";
    if (b.ref_count > 0) ++used;
  }
  if (used + num_free_blocks() != num_blocks())
    return "used (" + num(used) + ") + free (" + num(num_free_blocks()) + ") != all (" + num(num_blocks()) + ")";
  for (int32_t id : free_)
    if (blocks_[size_t(id)].ref_count != 0) return "free block " + num(id) + " is referenced";
  for (auto& [h, id] : hash_to_block_) {
    const Block& b = blocks_[size_t(id)];
    if (!b.hash || *b.hash != h) return "hash entry points at block " + num(id) + " with another hash";
    if (int64_t(b.token_ids.size()) != block_size_) return "hashed block " + num(id) + " is not full";
  }
  // Granules: the index and the blocks' lists agree, each chain hash follows from the one before.
  for (auto& [h, ids] : granule_to_blocks_) {
    if (ids.empty()) return "an empty granule entry";
    for (int32_t id : ids) {
      const auto& gh = blocks_[size_t(id)].granule_hashes;
      if (std::find(gh.begin(), gh.end(), h) == gh.end())
        return "granule entry points at block " + num(id) + ", which does not hold it";
    }
  }
  for (auto& b : blocks_) {
    const int64_t n = int64_t(b.granule_hashes.size());
    if (n > granules_per_block_ - 1 || n * kGranule > int64_t(b.token_ids.size()))
      return "block " + num(b.id) + " indexes " + num(n) + " granules over " + num(int64_t(b.token_ids.size())) +
             " tokens";
    for (int64_t j = 0; j < n; ++j) {
      auto it = granule_to_blocks_.find(b.granule_hashes[size_t(j)]);
      if (it == granule_to_blocks_.end() || std::find(it->second.begin(), it->second.end(), b.id) == it->second.end())
        return "granule " + num(j + 1) + " of block " + num(b.id) + " is not in the index";
      if (j > 0 && b.granule_hashes[size_t(j)] != compute_hash({b.token_ids.data() + j * kGranule, size_t(kGranule)},
                                                               b.granule_hashes[size_t(j - 1)]))
        return "granule " + num(j + 1) + " of block " + num(b.id) + " does not chain onto granule " + num(j);
    }
  }
  for (auto* s : live) {
    // Every sealed block of a live sequence holds exactly that sequence's tokens; its other blocks'
    // indexed tokens are that sequence's too.
    for (int64_t i = 0; i < int64_t(s->block_table.size()); ++i) {
      const Block& b = blocks_[size_t(s->block_table[size_t(i)])];
      auto toks = s->block(i);
      const bool sealed = i < s->num_hashed_blocks;
      if (sealed
              ? !b.hash || !std::equal(toks.begin(), toks.end(), b.token_ids.begin(), b.token_ids.end())
              : b.token_ids.size() > toks.size() || !std::equal(b.token_ids.begin(), b.token_ids.end(), toks.begin()))
        return std::string(sealed ? "sealed" : "indexed") + " block " + num(b.id) + " of sequence " + num(s->id) +
               " does not match its tokens";
    }
    // A pending copy: from a block outside the table holding the same tokens, into the block after
    // the whole-block hits, whose slots it counts as cached.
    if (const auto& c = s->kv_copy) {
      const int64_t i = s->num_hashed_blocks;
      if (i >= int64_t(s->block_table.size()) || c->dst_block != s->block_table[size_t(i)] ||
          std::find(s->block_table.begin(), s->block_table.end(), c->src_block) != s->block_table.end() ||
          s->num_cached_tokens != i * block_size_ + c->num_slots)
        return "the pending copy of sequence " + num(s->id) + " is not from outside into its next block";
      const Block& src = blocks_[size_t(c->src_block)];
      auto toks = s->block(i);
      if (int64_t(src.token_ids.size()) < c->num_slots || int64_t(toks.size()) <= c->num_slots ||
          !std::equal(toks.begin(), toks.begin() + c->num_slots, src.token_ids.begin()))
        return "the pending copy of sequence " + num(s->id) + " reads block " + num(src.id) + " of other tokens";
    }
  }
  return "";
}

}  // namespace nanovllm
