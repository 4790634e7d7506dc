// Scheduler without a model: mixed steps (decodes + prompt chunks under one token budget) and
// nano-vllm's prefill-first batching, token budget, chunked prefill, decode preemption,
// finishing; plus a randomized property test of the BlockManager invariants under both policies.
#include <gtest/gtest.h>

#include <algorithm>
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

  Harness(int64_t blocks, int64_t bs, int64_t max_tokens_batch, int64_t max_seqs = 512, bool caching = true,
          bool mixed = false) {
    cfg.enable_chunked_prefill = mixed;
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
  for (uint32_t seed = 0; seed < 80; ++seed) {
    std::mt19937 rng(seed);
    const int64_t bs = 1 + int64_t(rng() % 6), blocks = 8 + int64_t(rng() % 24);
    const int64_t budget = 4 + int64_t(rng() % 40), max_seqs = std::min<int64_t>(budget, 1 + int64_t(rng() % 6));
    const bool caching = rng() % 4 != 0, mixed = seed % 2 == 0;
    Harness h(blocks, bs, budget, max_seqs, caching, mixed);
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
        ASSERT_LE(b.num_tokens, budget);
        ASSERT_LE(int64_t(b.seqs.size()), max_seqs);
        std::vector<int32_t> toks;
        for (size_t i = 0; i < b.seqs.size(); ++i) toks.push_back(int32_t(rng() % 6));  // 0 = EOS
        h.sched->postprocess(b, toks);
      }
      ASSERT_EQ(h.bm->check_invariants(h.live()), "") << "seed " << seed << " iteration " << it;
      ASSERT_LE(int64_t(h.sched->running().size()), mixed ? max_seqs : INT64_MAX) << "seed " << seed;
    }
    while (!h.sched->is_finished()) {
      auto b = h.sched->schedule();
      h.sched->postprocess(b, std::vector<int32_t>(b.seqs.size(), 3));
      ASSERT_EQ(h.bm->check_invariants(h.live()), "") << "seed " << seed;
    }
    EXPECT_EQ(h.bm->num_free_blocks(), blocks) << "seed " << seed;
  }
}

// ---- mixed steps (chunked prefill on, the default)

// A long prompt arriving while two streams decode is read in budget-sized chunks, and the two
// streams get a token in every one of those steps (prefill-first would pause them).
TEST(SchedulerMixed, DecodesContinueWhileALongPromptIsChunked) {
  Harness h(100, 4, 16, 8, true, /*mixed=*/true);
  auto* a = h.add(5, 20);
  auto* b = h.add(6, 20, 100);
  auto first = h.step();
  EXPECT_TRUE(first.is_prefill);
  EXPECT_EQ(first.num_prefill_tokens, 11);
  EXPECT_EQ(a->num_completion_tokens(), 1);
  auto* big = h.add(60, 2, 200);
  int chunks = 0;
  while (big->num_completion_tokens() == 0) {
    const int64_t a0 = a->num_completion_tokens(), b0 = b->num_completion_tokens();
    auto batch = h.step();
    ASSERT_LE(batch.num_tokens, 16);
    ASSERT_GE(batch.seqs.size(), 3u);
    EXPECT_EQ(batch.seqs[0], a);  // decodes first, oldest first
    EXPECT_EQ(batch.seqs[1], b);
    EXPECT_EQ(batch.seqs[2], big);
    EXPECT_EQ(batch.num_decodes, 2);
    EXPECT_EQ(batch.num_prefill_tokens, batch.num_tokens - 2);
    EXPECT_EQ(a->num_completion_tokens(), a0 + 1);
    EXPECT_EQ(b->num_completion_tokens(), b0 + 1);
    EXPECT_EQ(big->status, SequenceStatus::Running);  // admitted: its blocks are held
    ++chunks;
  }
  EXPECT_EQ(chunks, 5);  // 60 tokens at 14 per step
  auto decode = h.step();
  EXPECT_FALSE(decode.is_prefill);
  EXPECT_EQ(decode.num_decodes, 3);
}

// Admissions fill what the decodes leave of the budget; the last admitted is chunked, and the
// next step gives it its next chunk before admitting anyone else.
TEST(SchedulerMixed, BudgetIsSharedAndTheLastAdmissionIsChunked) {
  Harness h(100, 4, 16, 8, true, true);
  auto* a = h.add(10, 5);
  auto* b = h.add(10, 5, 50);
  auto* c = h.add(3, 5, 90);
  auto s1 = h.sched->schedule();
  ASSERT_EQ(s1.seqs.size(), 2u);
  EXPECT_EQ(a->num_scheduled_tokens, 10);
  EXPECT_EQ(b->num_scheduled_tokens, 6);  // chunked
  EXPECT_EQ(h.sched->waiting().size(), 1u);
  h.sched->postprocess(s1, {7, 7});
  EXPECT_EQ(a->num_completion_tokens(), 1);
  EXPECT_EQ(b->num_completion_tokens(), 0);
  auto s2 = h.sched->schedule();
  ASSERT_EQ(s2.seqs.size(), 3u);
  EXPECT_EQ(s2.seqs[0], a);
  EXPECT_EQ(a->num_scheduled_tokens, 1);
  EXPECT_EQ(s2.seqs[1], b);
  EXPECT_EQ(b->num_scheduled_tokens, 4);  // the rest of its prompt
  EXPECT_EQ(s2.seqs[2], c);
  EXPECT_EQ(c->num_scheduled_tokens, 3);
  h.sched->postprocess(s2, {7, 7, 7});
  while (!h.sched->is_finished()) h.step();
  EXPECT_EQ(h.bm->num_free_blocks(), 100);
}

// Mixed steps keep at most max_num_seqs sequences running; the rest wait.
TEST(SchedulerMixed, MaxNumSeqsBoundsRunning) {
  Harness h(100, 4, 64, 2, true, true);
  for (int i = 0; i < 5; ++i) h.add(3, 4, 10 * i + 1);
  for (int step = 0; step < 30 && !h.sched->is_finished(); ++step) {
    auto b = h.step();
    EXPECT_LE(b.seqs.size(), 2u);
    EXPECT_LE(h.sched->running().size(), 2u);
  }
  EXPECT_TRUE(h.sched->is_finished());
}

// Out of blocks, a decode preempts the newest running sequence, even one whose prompt is still
// being chunked (its blocks go back; it is recomputed later), and every sequence still finishes.
TEST(SchedulerMixed, PreemptionTakesTheNewestEvenMidPrompt) {
  Harness h(6, 4, 4, 4, false, true);
  auto* a = h.add(4, 8);
  h.step();  // a: prompt (1 block) + first token
  auto* big = h.add(16, 2, 100);  // 4 blocks, read 3 tokens a step
  h.step();                        // a decodes (2nd block), big admitted: 4 blocks, 3 tokens read
  EXPECT_EQ(h.bm->num_free_blocks(), 0);
  EXPECT_EQ(big->status, SequenceStatus::Running);
  EXPECT_LT(big->num_cached_tokens, 16);
  // a fills its 2nd block, then needs a 3rd: big (the newest) is preempted, mid-prompt.
  for (int i = 0; i < 8 && h.sched->num_preemptions() == 0; ++i) h.step();
  ASSERT_EQ(h.sched->num_preemptions(), 1);
  EXPECT_EQ(h.sched->waiting().front(), big);
  EXPECT_EQ(big->num_cached_tokens, 0);
  while (!h.sched->is_finished()) h.step();
  EXPECT_EQ(a->num_completion_tokens(), 8);
  EXPECT_EQ(big->num_completion_tokens(), 2);
  EXPECT_EQ(h.bm->num_free_blocks(), 6);
}

// Async scheduling's step ahead: reserved only where the next step is certain, and then with a
// block exactly when the coming token starts one.
TEST(Scheduler, ReserveAheadOnlyWhereTheNextStepIsCertain) {
  Harness h(6, 4, 64, 512, true, /*mixed=*/true);
  auto* a = h.add(6, 20);
  auto* b = h.add(3, 3);
  h.step();                      // prefill: a 2 blocks, b 1 block; then a has 7 tokens, b 4
  auto d = h.sched->schedule();  // decode: a computes position 6, b position 3 (no new blocks)
  ASSERT_EQ(d.num_decodes, 2);
  EXPECT_EQ(h.bm->num_free_blocks(), 3);
  // b's coming token is its 2nd of 3: the step after may still run; its position 4 needs a block.
  ASSERT_TRUE(h.sched->reserve_ahead(d));
  EXPECT_EQ(h.bm->num_free_blocks(), 2);
  EXPECT_EQ(a->block_table.size(), 2u);  // a's position 7 is in its 2nd block
  EXPECT_EQ(b->block_table.size(), 2u);
  EXPECT_EQ(h.bm->check_invariants(h.live()), "");
  h.sched->postprocess(d, {7, 7});
  auto next = h.sched->resume_ahead({a, b});
  ASSERT_EQ(next.num_decodes, 2);
  EXPECT_EQ(next.num_tokens, 2);
  // Now b's coming token is its 3rd and last: no step ahead.
  EXPECT_FALSE(h.sched->reserve_ahead(next));
  EXPECT_EQ(h.bm->num_free_blocks(), 2);
  h.sched->postprocess(next, {7, 7});
  EXPECT_TRUE(b->is_finished());
  EXPECT_EQ(h.bm->num_free_blocks(), 4);  // b's two blocks, the reserved one too
  // A waiting request: the next step would admit it.
  d = h.sched->schedule();  // a decodes position 8: a third block
  ASSERT_EQ(d.seqs.size(), 1u);
  EXPECT_EQ(h.bm->num_free_blocks(), 3);
  h.add(2, 4);
  EXPECT_FALSE(h.sched->reserve_ahead(d));
  EXPECT_EQ(h.bm->num_free_blocks(), 3);
  EXPECT_EQ(h.bm->check_invariants(h.live()), "");
}

// Where the coming slot needs a block the pool does not have, nothing is reserved: the next step
// is schedule()'s (which preempts).
TEST(Scheduler, ReserveAheadNeedsFreeBlocks) {
  Harness h(1, 4, 64, 512, true, /*mixed=*/true);
  auto* a = h.add(3, 20);
  h.step();                      // prefill: 1 block, 4 tokens
  auto d = h.sched->schedule();  // decode of position 3: the block is full after it
  ASSERT_EQ(d.num_decodes, 1);
  EXPECT_FALSE(h.sched->reserve_ahead(d));
  EXPECT_EQ(a->block_table.size(), 1u);
  EXPECT_EQ(h.bm->num_free_blocks(), 0);
}
