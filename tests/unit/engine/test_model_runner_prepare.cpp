// ModelRunner::prepare's layouts of multi-token rows that are not prompt chunks: a verify row and
// a draft model's catch-up row each become a decode row per position (context up to it, the block
// table repeated), sharing one loop; a verify row samples every position, a catch-up row its last
// only; a prompt chunk in the batch makes every row a prefill row again.
#include <gtest/gtest.h>

#include "nanovllm/engine/model_runner.h"

using namespace nanovllm;

namespace {

constexpr int64_t kBlock = 4;

// A sequence of n tokens (ids 100 + position) over blocks 10, 11, ... with `cached` of them computed.
std::unique_ptr<Sequence> seq(int64_t id, int64_t n, int64_t cached, int64_t scheduled) {
  std::vector<int32_t> tokens;
  for (int64_t p = 0; p < n; ++p) tokens.push_back(int32_t(100 + p));
  auto s = std::make_unique<Sequence>(id, tokens, SamplingParams{}, kBlock, 0);
  for (int64_t b = 0; b < (n + 3 + kBlock - 1) / kBlock; ++b) s->block_table.push_back(int32_t(10 * id + b));
  s->num_cached_tokens = cached;
  s->num_scheduled_tokens = scheduled;
  return s;
}

// A batch of seqs counted as the scheduler counts decodes and verify rows; the catch-up rows (the
// draft model's drafter counts them) and prompt tokens as given.
ScheduledBatch batch(const std::vector<Sequence*>& seqs, int64_t catch_up_rows, int64_t prefill_tokens) {
  ScheduledBatch b;
  b.seqs = seqs;
  for (const Sequence* s : seqs) {
    b.num_tokens += s->num_scheduled_tokens;
    b.num_decodes += s->num_scheduled_tokens == 1;
    b.num_verify_rows += !s->draft_ids.empty();
    b.num_draft_tokens += int64_t(s->draft_ids.size());
  }
  b.num_catch_up_rows = catch_up_rows;
  b.num_prefill_tokens = prefill_tokens;
  b.is_prefill = b.num_tokens > int64_t(seqs.size());
  return b;
}

TEST(ModelRunnerPrepare, CatchUpRowsBecomeDecodeRowsSampledAtTheirLast) {
  auto decode = seq(1, 6, 5, 1), catch_up = seq(2, 9, 6, 3);
  const StepInputs in = ModelRunner::prepare(batch({decode.get(), catch_up.get()}, 1, 0), kBlock);
  EXPECT_TRUE(in.rows_as_decodes);
  EXPECT_FALSE(in.md.is_prefill);
  EXPECT_EQ(in.md.num_seqs, 4) << "a row per position";
  EXPECT_EQ(in.input_ids, (std::vector<int32_t>{105, 106, 107, 108}));
  EXPECT_EQ(in.positions, (std::vector<int32_t>{5, 6, 7, 8}));
  EXPECT_EQ(in.md.context_lens, (std::vector<int32_t>{6, 7, 8, 9}));
  EXPECT_EQ(in.md.cu_seqlens_q, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(in.md.cu_seqlens_k, (std::vector<int32_t>{0, 6, 13, 21, 30}));
  EXPECT_EQ(in.md.max_seqlen_q, 1);
  // Sequence 2's slots: positions 6, 7 in block 21, 8 in block 22.
  EXPECT_EQ(in.md.slot_mapping, (std::vector<int32_t>{11 * 4 + 1, 21 * 4 + 2, 21 * 4 + 3, 22 * 4 + 0}));
  EXPECT_EQ(in.last_rows, (std::vector<int32_t>{0, 3})) << "each sequence's last position only";
  // The catch-up row's block table, once per position.
  const int64_t mb = in.md.max_blocks;
  ASSERT_EQ(int64_t(in.md.block_tables.size()), 4 * mb);
  for (int64_t r = 1; r < 4; ++r)
    for (int64_t i = 0; i < int64_t(catch_up->block_table.size()); ++i)
      EXPECT_EQ(in.md.block_tables[size_t(r * mb + i)], catch_up->block_table[size_t(i)]);
}

TEST(ModelRunnerPrepare, VerifyRowsShareTheLayoutAndSampleEveryPosition) {
  auto verify = seq(1, 7, 6, 3);
  verify->draft_ids = {7, 8};
  const StepInputs in = ModelRunner::prepare(batch({verify.get()}, 0, 0), kBlock);
  EXPECT_TRUE(in.rows_as_decodes);
  EXPECT_EQ(in.input_ids, (std::vector<int32_t>{106, 7, 8}));
  EXPECT_EQ(in.md.context_lens, (std::vector<int32_t>{7, 8, 9}));
  EXPECT_EQ(in.last_rows, (std::vector<int32_t>{0, 1, 2}));
}

TEST(ModelRunnerPrepare, APromptChunkKeepsEveryRowAPrefillRow) {
  auto catch_up = seq(2, 9, 6, 3), chunk = seq(3, 20, 0, 8);
  const StepInputs in = ModelRunner::prepare(batch({catch_up.get(), chunk.get()}, 1, 8), kBlock);
  EXPECT_FALSE(in.rows_as_decodes);
  EXPECT_TRUE(in.md.is_prefill);
  EXPECT_EQ(in.md.num_seqs, 2);
  EXPECT_EQ(in.md.cu_seqlens_q, (std::vector<int32_t>{0, 3, 11}));
  EXPECT_EQ(in.md.context_lens, (std::vector<int32_t>{9, 8}));
  EXPECT_EQ(in.last_rows, (std::vector<int32_t>{2, 10}));
}

}  // namespace
