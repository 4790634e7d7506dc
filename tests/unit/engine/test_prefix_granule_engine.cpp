// Prefix-cache hits at 16-token granularity on a real (tiny) model, CPU backend: prompts sharing
// 17..300 tokens with an earlier one give the same greedy outputs with the prefix cache on as with
// it off, while each reads floor(shared / 16) x 16 tokens from the cache (whole blocks, plus the
// granules of the next block copied), as the hit counters say. Block sizes 256 (one partial block)
// and 32 (whole blocks, then a granule), mixed and prefill-first scheduling, small prefill chunks
// (granules indexed where a chunk ends), and the FP8 KV cache (codes copied as they are).
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/engine/llm_engine.h"
#include "tiny_engine.h"

using namespace nanovllm;
using test::greedy;
using test::random_tokens;
using test::tiny_cfg;

namespace {

struct Run {
  std::vector<std::vector<int32_t>> tokens;  // per prompt
  std::vector<int64_t> cached;               // prompt tokens read from the cache, per prompt
};

// The base prompt first, alone; then the others one by one (each may hit the base), then all of
// them again in one batch (each may hit its own earlier run).
Run run(LLMEngine& e, const std::vector<int32_t>& base, const std::vector<std::vector<int32_t>>& prompts) {
  auto finish = [&](const std::vector<int64_t>& ids, Run& r) {
    std::map<int64_t, RequestOutput> outs;
    while (e.has_unfinished()) {
      for (auto& o : e.step().finished) outs[o.request_id] = o;
      EXPECT_EQ(e.block_manager().check_invariants(e.live_sequences()), "");
    }
    for (int64_t id : ids) {
      r.tokens.push_back(outs.at(id).token_ids);
      r.cached.push_back(outs.at(id).num_cached_prompt_tokens);
    }
  };
  Run warm, r;
  finish({e.add_request(base, greedy(3))}, warm);
  for (const auto& p : prompts) finish({e.add_request(p, greedy(6))}, r);
  std::vector<int64_t> ids;
  for (const auto& p : prompts) ids.push_back(e.add_request(p, greedy(6)));
  finish(ids, r);
  return r;
}

std::vector<std::vector<int32_t>> sharing_prompts(const std::vector<int32_t>& base, const std::vector<size_t>& shared) {
  std::vector<std::vector<int32_t>> v;
  for (size_t n : shared) {
    std::vector<int32_t> p(base.begin(), base.begin() + int64_t(n));
    auto tail = random_tokens(20 + n % 7, uint32_t(1000 + n));
    p.insert(p.end(), tail.begin(), tail.end());
    v.push_back(p);
  }
  return v;
}

void expect_same_outputs_and_granule_hits(EngineConfig cfg) {
  const auto base = random_tokens(340, 77);
  const std::vector<size_t> shared = {17, 31, 48, 100, 255, 256, 257, 300};
  const auto prompts = sharing_prompts(base, shared);
  cfg.enable_prefix_caching = false;
  LLMEngine off_engine(cfg);
  const Run off = run(off_engine, base, prompts);
  cfg.enable_prefix_caching = true;
  LLMEngine on_engine(cfg);
  const Run on = run(on_engine, base, prompts);
  ASSERT_EQ(on.tokens.size(), 2 * prompts.size());
  int64_t hits = 0, queries = int64_t(base.size());
  for (size_t i = 0; i < on.tokens.size(); ++i) {
    const size_t k = i % prompts.size();
    const bool batched = i >= prompts.size();
    EXPECT_EQ(on.tokens[i], off.tokens[i]) << "shared " << shared[k] << (batched ? " (batched)" : "");
    EXPECT_EQ(off.cached[i], 0);
    // Alone, a prompt reads its granules shared with the base; batched, all but the last token's
    // granule from its own earlier run.
    const int64_t want = batched ? (int64_t(prompts[k].size()) - 1) / 16 * 16 : int64_t(shared[k] / 16 * 16);
    EXPECT_EQ(on.cached[i], want) << "shared " << shared[k] << (batched ? " (batched)" : "") << ", block size "
                                  << cfg.block_size;
    hits += on.cached[i];
    queries += int64_t(prompts[k].size());
  }
  const BlockManager& bm = on_engine.block_manager();
  EXPECT_EQ(bm.num_hit_tokens(), hits);
  EXPECT_EQ(bm.num_query_tokens(), queries);
  EXPECT_GT(bm.num_granule_hit_tokens(), 0);
  EXPECT_EQ(on_engine.scheduler_stats().prefix_hit_tokens, hits);
}

}  // namespace

TEST(PrefixGranuleEngine, BlockSize256) {
  auto cfg = tiny_cfg();
  cfg.block_size = 256;
  expect_same_outputs_and_granule_hits(cfg);
}

TEST(PrefixGranuleEngine, BlockSize32PrefillFirst) {
  auto cfg = tiny_cfg();
  cfg.block_size = 32;
  cfg.enable_chunked_prefill = false;
  expect_same_outputs_and_granule_hits(cfg);
}

TEST(PrefixGranuleEngine, SmallChunksEndingInsideBlocks) {
  auto cfg = tiny_cfg();
  cfg.block_size = 64;
  cfg.max_num_batched_tokens = 72;  // the base is read in chunks of 72: granules indexed as they end
  cfg.max_num_seqs = 8;
  expect_same_outputs_and_granule_hits(cfg);
}

TEST(PrefixGranuleEngine, Fp8KvCache) {
  auto cfg = tiny_cfg();
  cfg.block_size = 64;
  cfg.kv_cache_dtype = KVCacheDtype::FP8E4M3;
  expect_same_outputs_and_granule_hits(cfg);
}
