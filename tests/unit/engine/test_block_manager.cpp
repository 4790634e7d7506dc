// BlockManager: allocation, prefix hashing and hits, reuse of freed-but-cached blocks,
// collision guard, decode appends.
#include <gtest/gtest.h>

#include <numeric>

#include "nanovllm/engine/block_manager.h"

using namespace nanovllm;

static Sequence make_seq(int64_t id, int64_t n, int64_t bs, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return Sequence(id, t, SamplingParams{}, bs, 0);
}

TEST(BlockManager, HashChainsOverPrefix) {
  std::vector<int32_t> a{1, 2, 3, 4};
  const uint64_t h0 = BlockManager::compute_hash(a, std::nullopt);
  EXPECT_EQ(h0, BlockManager::compute_hash(a, std::nullopt));
  EXPECT_NE(h0, BlockManager::compute_hash(a, 7));
  EXPECT_NE(BlockManager::compute_hash(a, 7), BlockManager::compute_hash(a, 8));
}

TEST(BlockManager, AllocateAndFree) {
  BlockManager bm(10, 4, true);
  auto s = make_seq(0, 10, 4);
  EXPECT_EQ(bm.can_allocate(s), 0);
  bm.allocate(s);
  EXPECT_EQ(s.block_table.size(), 3u);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_EQ(bm.check_invariants({&s}), "");
  bm.deallocate(s);
  EXPECT_EQ(bm.num_free_blocks(), 10);
  EXPECT_TRUE(s.block_table.empty());
}

TEST(BlockManager, PrefixHitAfterSealAndAfterFree) {
  BlockManager bm(10, 4, true);
  auto a = make_seq(0, 10, 4);
  bm.allocate(a);
  a.num_cached_tokens = 10;  // the step computed all 10 tokens
  bm.hash_blocks(a);
  EXPECT_EQ(a.num_hashed_blocks, 2);
  auto b = make_seq(1, 11, 4);  // same first 10 tokens
  EXPECT_EQ(bm.can_allocate(b), 2);
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 8);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(bm.block(a.block_table[0]).ref_count, 2);
  EXPECT_EQ(bm.check_invariants({&a, &b}), "");
  bm.deallocate(a);
  bm.deallocate(b);
  // Freed blocks keep their hash: a third sequence still hits them, taking them off the free list.
  auto c = make_seq(2, 9, 4);
  EXPECT_EQ(bm.can_allocate(c), 2);
  bm.allocate(c);
  EXPECT_EQ(c.num_cached_tokens, 8);
  EXPECT_EQ(bm.num_free_blocks(), 7);
  EXPECT_EQ(bm.check_invariants({&c}), "");
}

TEST(BlockManager, NeverCachesTheLastTokensBlock) {
  BlockManager bm(10, 4, true);
  auto a = make_seq(0, 8, 4);
  bm.allocate(a);
  a.num_cached_tokens = 8;
  bm.hash_blocks(a);
  auto b = make_seq(1, 8, 4);  // identical prompt: only block 0 may hit
  EXPECT_EQ(bm.can_allocate(b), 1);
}

TEST(BlockManager, DifferentPrefixMisses) {
  BlockManager bm(10, 4, true);
  auto a = make_seq(0, 9, 4);
  bm.allocate(a);
  a.num_cached_tokens = 9;
  bm.hash_blocks(a);
  auto b = make_seq(1, 9, 4, 100);  // other tokens
  EXPECT_EQ(bm.can_allocate(b), 0);
  auto c = make_seq(2, 9, 4);
  c.token_ids[1] = 99;  // block 0 differs, so block 1 (same tokens) must not hit either
  EXPECT_EQ(bm.can_allocate(c), 0);
}

TEST(BlockManager, ReallocationDropsTheStaleHash) {
  BlockManager bm(3, 4, true);
  auto a = make_seq(0, 5, 4);
  bm.allocate(a);
  a.num_cached_tokens = 5;
  bm.hash_blocks(a);
  bm.deallocate(a);
  auto b = make_seq(1, 12, 4, 500);  // takes all three blocks, including a's cached one
  bm.allocate(b);
  auto c = make_seq(2, 5, 4);
  EXPECT_EQ(bm.can_allocate(c), -1);  // no room, and no stale hit
  bm.deallocate(b);
  EXPECT_EQ(bm.can_allocate(c), 0);
  EXPECT_EQ(bm.check_invariants({}), "");
}

TEST(BlockManager, CannotAllocateWhenFull) {
  BlockManager bm(2, 4, false);
  auto a = make_seq(0, 9, 4);
  EXPECT_EQ(bm.can_allocate(a), -1);
}

TEST(BlockManager, AppendAllocatesAtBlockBoundary) {
  BlockManager bm(4, 4, true);
  auto a = make_seq(0, 4, 4);
  bm.allocate(a);
  EXPECT_EQ(a.block_table.size(), 1u);
  a.token_ids.push_back(42);  // 5 tokens: position 4 starts block 1
  EXPECT_TRUE(bm.can_append(a));
  bm.may_append(a);
  EXPECT_EQ(a.block_table.size(), 2u);
  a.token_ids.push_back(43);  // 6 tokens: still block 1
  bm.may_append(a);
  EXPECT_EQ(a.block_table.size(), 2u);
}

TEST(BlockManager, PrefixCachingOffNeverHits) {
  BlockManager bm(10, 4, false);
  auto a = make_seq(0, 10, 4);
  bm.allocate(a);
  a.num_cached_tokens = 10;
  bm.hash_blocks(a);
  auto b = make_seq(1, 10, 4);
  EXPECT_EQ(bm.can_allocate(b), 0);
}
