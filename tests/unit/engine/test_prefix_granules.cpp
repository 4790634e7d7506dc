// Prefix-cache hits at 16-token granularity inside larger blocks (BlockManager's granules): hits
// from sealed blocks and from a running sequence's partly filled block, sources in use or free but
// cached (held until the copy runs), reallocation ending them, the last token always computed, and
// a property test that simulates the KV cache slot by slot (copies run before each step's writes)
// and checks that every sequence reads exactly its own tokens' K/V.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "nanovllm/engine/block_manager.h"

using namespace nanovllm;

namespace {

std::vector<int32_t> iota_tokens(int64_t n, int32_t start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}

Sequence seq_of(int64_t id, std::vector<int32_t> tokens, int64_t bs) {
  return Sequence(id, std::move(tokens), {}, bs, 0);
}

// `shared` tokens of iota, then n - shared others.
Sequence sharing(int64_t id, int64_t shared, int64_t n, int64_t bs) {
  auto t = iota_tokens(shared);
  auto tail = iota_tokens(n - shared, 10000 + int32_t(id) * 1000);
  t.insert(t.end(), tail.begin(), tail.end());
  return seq_of(id, t, bs);
}

// The step computed all of seq's uncached tokens.
void compute_all(BlockManager& bm, Sequence& s) {
  s.num_cached_tokens = s.num_tokens();
  bm.hash_blocks(s);
}

// A 100-token sequence computed and freed: its blocks free but cached (granules 1, 2 of block 1).
void computed_and_freed(BlockManager& bm) {
  auto a = sharing(0, 100, 100, 64);
  bm.allocate(a);
  compute_all(bm, a);
  bm.deallocate(a);
}

// Allocates s, alone in the pool's live set: `cached` tokens hit, none of them through a copy.
void expect_hit_without_copy(BlockManager& bm, Sequence& s, int64_t cached) {
  bm.allocate(s);
  EXPECT_EQ(s.num_cached_tokens, cached);
  EXPECT_FALSE(s.kv_copy.has_value());
  EXPECT_EQ(bm.check_invariants({&s}), "");
}

}  // namespace

TEST(PrefixGranules, OnlyForBlocksOfSeveralGranules) {
  EXPECT_EQ(BlockManager(4, 256, true).granules_per_block(), 16);
  EXPECT_EQ(BlockManager(4, 32, true).granules_per_block(), 2);
  EXPECT_EQ(BlockManager(4, 16, true).granules_per_block(), 1);
  EXPECT_EQ(BlockManager(4, 40, true).granules_per_block(), 1);
}

TEST(PrefixGranules, HitInsideASealedBlockCopiesItsGranules) {
  BlockManager bm(20, 64, true);
  auto a = sharing(0, 200, 200, 64);  // blocks 0..2 full, 8 tokens in block 3
  bm.allocate(a);
  compute_all(bm, a);
  auto b = sharing(1, 100, 150, 64);  // block 0 whole, then 36 shared tokens: 2 granules
  EXPECT_EQ(bm.can_allocate(b), 1);
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 64 + 32);
  ASSERT_TRUE(b.kv_copy.has_value());
  EXPECT_EQ(b.kv_copy->src_block, a.block_table[1]);
  EXPECT_EQ(b.kv_copy->dst_block, b.block_table[1]);
  EXPECT_EQ(b.kv_copy->num_slots, 32);
  EXPECT_EQ(b.block_table[0], a.block_table[0]);
  EXPECT_EQ(bm.block(a.block_table[1]).ref_count, 2);  // a's table and b's pending copy
  EXPECT_EQ(bm.num_hit_tokens(), 96);
  EXPECT_EQ(bm.num_granule_hit_tokens(), 32);
  EXPECT_EQ(bm.check_invariants({&a, &b}), "");
  compute_all(bm, b);  // the step ran the copy: the source is let go
  EXPECT_FALSE(b.kv_copy.has_value());
  EXPECT_EQ(bm.block(a.block_table[1]).ref_count, 1);
  EXPECT_EQ(bm.check_invariants({&a, &b}), "");
}

TEST(PrefixGranules, HitInARunningSequencesPartlyFilledBlock) {
  BlockManager bm(20, 64, true);
  auto a = sharing(0, 100, 100, 64);
  bm.allocate(a);
  compute_all(bm, a);  // block 1 holds 36 computed tokens: granules 1 and 2 indexed
  EXPECT_EQ(bm.block(a.block_table[1]).granule_hashes.size(), 2u);
  a.token_ids.push_back(7777);  // a decodes on into that block
  bm.may_append(a);
  compute_all(bm, a);
  auto b = sharing(1, 90, 120, 64);
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 80);
  EXPECT_EQ(b.kv_copy->src_block, a.block_table[1]);
  EXPECT_EQ(bm.check_invariants({&a, &b}), "");
  // Decoding a to 112 tokens indexes granule 3 too; a sequence sharing all of them copies 48.
  for (int i = 0; i < 11; ++i) {
    a.token_ids.push_back(7778 + i);
    bm.may_append(a);
    compute_all(bm, a);
  }
  EXPECT_EQ(bm.block(a.block_table[1]).granule_hashes.size(), 3u);
  auto c = seq_of(2, a.token_ids, 64);
  c.token_ids.push_back(1);
  bm.allocate(c);
  EXPECT_EQ(c.num_cached_tokens, 64 + 48);
  EXPECT_EQ(bm.check_invariants({&a, &b, &c}), "");
}

TEST(PrefixGranules, FreeSourceIsHeldUntilTheCopyRuns) {
  BlockManager bm(6, 64, true);
  auto a = sharing(0, 100, 100, 64);
  bm.allocate(a);
  compute_all(bm, a);
  const int32_t src = a.block_table[1];
  bm.deallocate(a);  // free but cached
  EXPECT_EQ(bm.num_free_blocks(), 6);
  auto b = sharing(1, 100, 130, 64);  // 3 blocks: block 0 a hit, block 1 copies 2 granules
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 96);
  EXPECT_EQ(b.kv_copy->src_block, src);
  EXPECT_EQ(bm.num_free_blocks(), 6 - 3 - 1);  // b's 3 blocks and the held source
  EXPECT_EQ(std::count(b.block_table.begin(), b.block_table.end(), src), 0);
  // Another sequence takes every free block: never the source.
  auto c = sharing(2, 0, 128, 64);
  bm.allocate(c);
  EXPECT_EQ(std::count(c.block_table.begin(), c.block_table.end(), src), 0);
  EXPECT_EQ(bm.num_free_blocks(), 0);
  EXPECT_EQ(bm.check_invariants({&b, &c}), "");
  // Freed before its step ran (preempted or aborted): the source goes back, still cached.
  bm.deallocate(b);
  EXPECT_EQ(bm.block(src).ref_count, 0);
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.check_invariants({&c}), "");
  auto d = sharing(3, 100, 130, 64);
  bm.allocate(d);
  EXPECT_EQ(d.num_cached_tokens, 96);
  EXPECT_EQ(bm.check_invariants({&c, &d}), "");
}

TEST(PrefixGranules, NoHeldSourceWhenThePoolNeedsIt) {
  BlockManager bm(3, 64, true);
  computed_and_freed(bm);
  // 3 blocks, block 0 a hit: the other two need both free blocks, one of which is the source.
  auto b = sharing(1, 100, 180, 64);
  EXPECT_EQ(bm.can_allocate(b), 1);
  expect_hit_without_copy(bm, b, 64);
}

TEST(PrefixGranules, ReallocationEndsTheGranules) {
  BlockManager bm(3, 64, true);
  computed_and_freed(bm);
  auto big = sharing(1, 0, 192, 64);  // takes all three blocks
  bm.allocate(big);
  bm.deallocate(big);
  auto b = sharing(2, 100, 120, 64);
  expect_hit_without_copy(bm, b, 0);
}

TEST(PrefixGranules, TheLastTokenIsAlwaysComputed) {
  BlockManager bm(20, 64, true);
  auto a = sharing(0, 200, 200, 64);
  bm.allocate(a);
  compute_all(bm, a);
  auto same80 = sharing(1, 80, 80, 64);  // granule 1 of block 1 ends at the last token
  bm.allocate(same80);
  EXPECT_EQ(same80.num_cached_tokens, 64);
  auto same81 = sharing(2, 81, 81, 64);
  bm.allocate(same81);
  EXPECT_EQ(same81.num_cached_tokens, 80);
  auto same128 = sharing(3, 128, 128, 64);  // a whole block but the last token: 3 granules
  bm.allocate(same128);
  EXPECT_EQ(same128.num_cached_tokens, 64 + 48);
  EXPECT_EQ(bm.check_invariants({&a, &same80, &same81, &same128}), "");
}

TEST(PrefixGranules, ChainedOntoThePreviousBlock) {
  BlockManager bm(20, 64, true);
  auto a = sharing(0, 200, 200, 64);
  bm.allocate(a);
  compute_all(bm, a);
  auto b = sharing(1, 100, 150, 64);
  b.token_ids[3] = 99999;  // block 0 differs: block 1's equal tokens sit after another prefix
  bm.allocate(b);
  EXPECT_EQ(b.num_cached_tokens, 0);
  auto c = sharing(2, 20, 150, 64);  // inside block 0: one granule
  bm.allocate(c);
  EXPECT_EQ(c.num_cached_tokens, 16);
  EXPECT_EQ(c.kv_copy->src_block, a.block_table[0]);
}

TEST(PrefixGranules, OffWithPromptLogprobsOrWithoutPrefixCaching) {
  for (bool caching : {true, false}) {
    BlockManager bm(20, 64, caching);
    auto a = sharing(0, 100, 100, 64);
    bm.allocate(a);
    compute_all(bm, a);
    auto b = sharing(1, 50, 60, 64);
    if (caching) b.params.prompt_logprobs = 1;
    bm.allocate(b);
    EXPECT_EQ(b.num_cached_tokens, 0);
    EXPECT_FALSE(b.kv_copy.has_value());
  }
}

// Random admissions of prompts sharing prefixes of random lengths, chunked steps that skip some
// sequences, decodes, finishes and preemptions, over a small pool; the KV cache simulated as the
// token each slot holds. Each step runs its copies, then checks that every scheduled sequence's
// cached slots hold its own tokens (what its attention reads), then writes the computed ones.
TEST(PrefixGranules, PropertySimulatedCacheReadsOwnTokens) {
  for (int64_t bs : {32, 64}) {
    std::mt19937 rng(static_cast<uint32_t>(bs));
    const int64_t blocks = 24;
    BlockManager bm(blocks, bs, true);
    std::vector<int32_t> slots(size_t(blocks * bs), -1);
    const std::vector<std::vector<int32_t>> bases = {iota_tokens(300, 0), iota_tokens(300, 5000)};
    std::vector<std::unique_ptr<Sequence>> all;
    std::vector<Sequence*> waiting, running;
    int64_t next_id = 0, granule_hits = 0, copies_run = 0;
    auto live = [&] {
      std::vector<const Sequence*> v(running.begin(), running.end());
      return v;
    };
    for (int op = 0; op < 3000; ++op) {
      const int r = int(rng() % 10);
      if (r < 2 && waiting.size() < 6) {  // a new prompt: a random prefix of a base, then its own tokens
        const auto& base = bases[rng() % 2];
        const size_t shared = rng() % 200, own = 1 + rng() % 80;
        std::vector<int32_t> t(base.begin(), base.begin() + int64_t(shared));
        for (size_t i = 0; i < own; ++i) t.push_back(int32_t(20000 + rng() % 50));
        all.push_back(std::make_unique<Sequence>(next_id++, t, SamplingParams{}, bs, 0));
        waiting.push_back(all.back().get());
      } else if (r < 4 && !waiting.empty()) {  // admission (not necessarily scheduled next)
        Sequence* s = waiting.front();
        if (bm.can_allocate(*s) < 0) continue;
        bm.allocate(*s);
        if (s->kv_copy) granule_hits += s->kv_copy->num_slots;
        waiting.erase(waiting.begin());
        running.push_back(s);
      } else if (r < 8) {  // a step over a random subset of the running sequences
        std::vector<Sequence*> batch;
        for (Sequence* s : running)
          if (rng() % 4 != 0) batch.push_back(s);
        std::vector<Sequence*> stepped;
        for (Sequence* s : batch) {
          if (s->num_cached_tokens == s->num_tokens()) {  // decode: the sampled token needs a slot
            if (!bm.can_append(*s, 1)) continue;
            s->token_ids.push_back(int32_t(30000 + rng() % 50));
            bm.may_append(*s);
          }
          stepped.push_back(s);
        }
        for (Sequence* s : stepped)
          if (s->kv_copy) {
            const auto& c = *s->kv_copy;
            std::copy_n(slots.begin() + c.src_block * bs, c.num_slots, slots.begin() + c.dst_block * bs);
            ++copies_run;
          }
        for (Sequence* s : stepped) {
          for (int64_t p = 0; p < s->num_cached_tokens; ++p)
            ASSERT_EQ(slots[size_t(s->block_table[size_t(p / bs)] * bs + p % bs)], s->token_ids[size_t(p)])
                << "sequence " << s->id << " position " << p << " of " << s->num_cached_tokens << " cached";
          const int64_t left = s->num_tokens() - s->num_cached_tokens;
          const int64_t n = 1 + int64_t(rng() % uint32_t(left));
          for (int64_t p = s->num_cached_tokens; p < s->num_cached_tokens + n; ++p)
            slots[size_t(s->block_table[size_t(p / bs)] * bs + p % bs)] = s->token_ids[size_t(p)];
          s->num_cached_tokens += n;
          bm.hash_blocks(*s);
        }
      } else if (!running.empty()) {  // finish or preempt one
        const size_t i = rng() % running.size();
        Sequence* s = running[i];
        running.erase(running.begin() + int64_t(i));
        bm.deallocate(*s);
        if (r == 9) waiting.insert(waiting.begin(), s);
      }
      ASSERT_EQ(bm.check_invariants(live()), "") << "after op " << op << " (block size " << bs << ")";
    }
    EXPECT_GT(granule_hits, 0) << "block size " << bs;
    EXPECT_GT(copies_run, 10) << "block size " << bs;
    EXPECT_EQ(bm.num_granule_hit_tokens(), granule_hits);
  }
}
