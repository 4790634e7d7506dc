// Scheduler without a model: prefill-first batching, token budget, chunked prefill, decode
// preemption, finishing; plus a randomized property test of the BlockManager invariants.
#include <gtest/gtest.h>

#include <memory>
#include <numeric>
#include <random>

#include "nanovllm/engine/scheduler.h"

using namespace nanovllm;

namespace {

struct Harness {
  EngineConfig cfg;
  std::unique_ptr<BlockManager> bm;
  std::unique_ptr<Scheduler> sched;
  std::vector<std::unique_ptr<Sequence>> seqs;

  Harness(int64_t blocks, int64_t bs, int64_t max_tokens_batch, int64_t max_seqs = 512, bool caching = true) {
    cfg.block_size = bs;
    cfg.max_num_batched_tokens = max_tokens_batch;
    cfg.max_num_seqs = max_seqs;
    cfg.max_model_len = 1 << 20;
    bm = std::make_unique<BlockManager>(blocks, bs, caching);
    sched = std::make_unique<Scheduler>(cfg, *bm, std::vector<int32_t>{0});
  }
  Sequence* add(int64_t n, int max_tokens, int32_t start = 1) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    std::iota(t.begin(), t.end(), start);
    SamplingParams p;
    p.max_tokens = max_tokens;
    p.ignore_eos = true;
    seqs.push_back(std::make_unique<Sequence>(int64_t(seqs.size()), t, p, cfg.block_size, 0));
    sched->add(seqs.back().get());
    return seqs.back().get();
  }
  std::vector<const Sequence*> live() const {
    std::vector<const Sequence*> out;
    for (auto& s : seqs)
      if (!s->block_table.empty()) out.push_back(s.get());
    return out;
  }
  ScheduledBatch step(int32_t tok = 7) {
    auto b = sched->schedule();
    sched->postprocess(b, std::vector<int32_t>(b.seqs.size(), tok));
    return b;
  }
};

}  // namespace

TEST(Scheduler, PrefillThenDecode) {
  Harness h(100, 4, 64);
  h.add(10, 3);
  h.add(6, 3);
  auto b = h.step();
  EXPECT_TRUE(b.is_prefill);
  EXPECT_EQ(b.seqs.size(), 2u);
  EXPECT_EQ(b.num_tokens, 16);
  b = h.step();
  EXPECT_FALSE(b.is_prefill);
  EXPECT_EQ(b.seqs.size(), 2u);
  h.step();
  EXPECT_TRUE(h.sched->is_finished());
  EXPECT_EQ(h.seqs[0]->num_completion_tokens(), 3);
  EXPECT_EQ(h.seqs[0]->finish_reason, FinishReason::Length);
  EXPECT_EQ(h.bm->num_free_blocks(), 100);
}

TEST(Scheduler, TokenBudgetSplitsPrefillBatches) {
  Harness h(100, 4, 16);
  h.add(10, 2);
  h.add(10, 2);
  auto b = h.sched->schedule();
  ASSERT_TRUE(b.is_prefill);
  // The first takes 10 of 16 tokens; the second (10) does not fit and is not chunked.
  EXPECT_EQ(b.seqs.size(), 1u);
}

TEST(Scheduler, ChunkedPrefillOfTheFirstSequence) {
  Harness h(100, 4, 8);
  auto* s = h.add(20, 2);
  int prefill_steps = 0;
  while (s->num_completion_tokens() == 0) {
    auto b = h.step();
    ASSERT_TRUE(b.is_prefill);
    EXPECT_LE(b.num_tokens, 8);
    ++prefill_steps;
  }
  EXPECT_EQ(prefill_steps, 3);  // 8 + 8 + 4
  EXPECT_EQ(s->num_cached_tokens, 20);
  EXPECT_EQ(s->status, SequenceStatus::Running);
}

TEST(Scheduler, DecodePreemptsFromTheBack) {
  Harness h(4, 4, 64);
  auto* a = h.add(4, 8);
  auto* b = h.add(4, 8);
  h.step();  // prefill both: 1 block each, 2 free
  h.step();  // decode: each needs a second block -> 0 free
  EXPECT_EQ(h.bm->num_free_blocks(), 0);
  // At 9 tokens a needs a third block: b (the back) is preempted to make room.
  for (int i = 0; i < 10 && h.sched->num_preemptions() == 0; ++i) h.step();
  ASSERT_EQ(h.sched->num_preemptions(), 1);
  ASSERT_FALSE(h.sched->waiting().empty());
  EXPECT_EQ(b->status, SequenceStatus::Waiting);
  EXPECT_EQ(b->num_cached_tokens, 0);
  EXPECT_EQ(h.sched->waiting().front(), b);
  while (!h.sched->is_finished()) h.step();
  EXPECT_EQ(a->num_completion_tokens(), 8);
  EXPECT_EQ(b->num_completion_tokens(), 8);
  EXPECT_EQ(h.bm->num_free_blocks(), 4);
}

TEST(Scheduler, EosAndStopTokenFinish) {
  Harness h(10, 4, 64);
  auto* a = h.add(3, 10);
  a->params.ignore_eos = false;
  auto* b = h.add(3, 10);
  b->params.stop_token_ids = {5};
  auto batch = h.sched->schedule();
  auto fin = h.sched->postprocess(batch, {0, 4});
  ASSERT_EQ(fin.size(), 1u);
  EXPECT_EQ(a->finish_reason, FinishReason::Stop);
  batch = h.sched->schedule();
  fin = h.sched->postprocess(batch, {5});
  EXPECT_EQ(b->finish_reason, FinishReason::Stop);
  EXPECT_TRUE(h.sched->is_finished());
}

TEST(Scheduler, AbortFreesBlocks) {
  Harness h(10, 4, 64);
  auto* a = h.add(9, 10);
  h.step();
  EXPECT_LT(h.bm->num_free_blocks(), 10);
  EXPECT_TRUE(h.sched->abort(a->id));
  EXPECT_EQ(a->finish_reason, FinishReason::Abort);
  EXPECT_EQ(h.bm->num_free_blocks(), 10);
  EXPECT_FALSE(h.sched->abort(12345));
}

// Random add / step / finish / abort / preempt sequences keep the invariants: ref counts equal
// the number of block tables holding each block, free + used = all, every hash entry points at
// a full block whose tokens match, sealed blocks hold their sequence's tokens.
TEST(SchedulerProperty, RandomWorkloadsKeepBlockInvariants) {
  for (uint32_t seed = 0; seed < 40; ++seed) {
    std::mt19937 rng(seed);
    const int64_t bs = 1 + int64_t(rng() % 6), blocks = 8 + int64_t(rng() % 24);
    Harness h(blocks, bs, 4 + int64_t(rng() % 40), 1 + int64_t(rng() % 6), rng() % 4 != 0);
    std::vector<std::vector<int32_t>> prefixes;
    for (int i = 0; i < 3; ++i) {
      std::vector<int32_t> p(1 + rng() % 12);
      for (auto& t : p) t = int32_t(1 + rng() % 5);
      prefixes.push_back(p);
    }
    for (int it = 0; it < 300; ++it) {
      const uint32_t op = rng() % 10;
      if (op < 3 && h.seqs.size() < 60) {
        // Shared prefixes make prefix hits common.
        std::vector<int32_t> t = prefixes[rng() % prefixes.size()];
        for (uint32_t k = rng() % 8; k > 0; --k) t.push_back(int32_t(1 + rng() % 5));
        const int64_t cap = blocks * bs - 1;
        if (int64_t(t.size()) > cap - 4) t.resize(size_t(std::max<int64_t>(1, cap - 4)));
        SamplingParams p;
        p.max_tokens = 1 + int(rng() % 4);
        p.ignore_eos = rng() % 2;
        h.seqs.push_back(std::make_unique<Sequence>(int64_t(h.seqs.size()), t, p, bs, 0));
        h.sched->add(h.seqs.back().get());
      } else if (op == 3 && !h.seqs.empty()) {
        h.sched->abort(int64_t(rng() % h.seqs.size()));
      } else {
        auto b = h.sched->schedule();
        std::vector<int32_t> toks;
        for (size_t i = 0; i < b.seqs.size(); ++i) toks.push_back(int32_t(rng() % 6));  // 0 = EOS
        h.sched->postprocess(b, toks);
      }
      ASSERT_EQ(h.bm->check_invariants(h.live()), "") << "seed " << seed << " iteration " << it;
    }
    while (!h.sched->is_finished()) {
      auto b = h.sched->schedule();
      h.sched->postprocess(b, std::vector<int32_t>(b.seqs.size(), 3));
      ASSERT_EQ(h.bm->check_invariants(h.live()), "") << "seed " << seed;
    }
    EXPECT_EQ(h.bm->num_free_blocks(), blocks) << "seed " << seed;
  }
}
