// RequestChannel (server/request_channel.h): deltas of one choice that queue up are merged, and
// the merged event keeps what the last one carried (its finish and vLLM's stop_reason).
#include <gtest/gtest.h>

#include "nanovllm/server/request_channel.h"

using namespace nanovllm;
using namespace nanovllm::server;

TEST(RequestChannel, MergedDeltasKeepTheFinishAndStopReason) {
  int notified = 0;
  RequestChannel ch(2, [&] { ++notified; });
  ChoiceEvent a;
  a.text = "he";
  a.num_tokens = 1;
  ch.push(a);
  ChoiceEvent b;
  b.text = "llo";
  b.num_tokens = 1;
  b.finish = FinishReason::Stop;
  b.stop_reason = std::string("END");
  ch.push(b);
  ChoiceEvent other;
  other.index = 1;
  other.finish = FinishReason::Stop;
  other.stop_reason = int32_t(42);
  ch.push(other);
  std::vector<ChoiceEvent> got;
  EXPECT_TRUE(ch.take(got));  // both choices ended
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].text, "hello");
  EXPECT_EQ(got[0].num_tokens, 2);
  EXPECT_EQ(got[0].finish, FinishReason::Stop);
  EXPECT_EQ(got[0].stop_reason, StopReason(std::string("END")));
  EXPECT_EQ(got[1].stop_reason, StopReason(int32_t(42)));
  EXPECT_EQ(notified, 3);
}

// n >= 2: deltas of interleaved choices merge per choice (they used to stop merging as soon as
// another choice's event came between), in the order the choices first had output.
TEST(RequestChannel, InterleavedChoicesMergePerChoice) {
  RequestChannel ch(3, [] {});
  for (int step = 0; step < 100; ++step)
    for (int i : {2, 0, 1}) {
      ChoiceEvent e;
      e.index = i;
      e.text = std::to_string(i);
      e.num_tokens = 1;
      ch.push(e);
    }
  std::vector<ChoiceEvent> got;
  EXPECT_FALSE(ch.take(got));
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].index, 2);
  EXPECT_EQ(got[1].index, 0);
  EXPECT_EQ(got[2].index, 1);
  EXPECT_EQ(got[0].text, std::string(100, '2'));
  EXPECT_EQ(got[2].num_tokens, 100);
  EXPECT_EQ(ch.pending_bytes(), 0);
}

// Past max_pending_bytes the reader is too slow: the request fails, is marked for abort, and
// what waited is dropped; below it nothing happens.
TEST(RequestChannel, PendingBytesPastTheBoundFailTheRequest) {
  RequestChannel ch(
      2, [] {}, 1000);
  ChoiceEvent e;
  e.text = std::string(600, 'x');
  ch.push(e);
  EXPECT_FALSE(ch.too_slow());
  EXPECT_EQ(ch.pending_bytes(), 600);
  e.index = 1;
  ch.push(e);
  EXPECT_TRUE(ch.too_slow());
  EXPECT_TRUE(ch.cancelled.load());
  ASSERT_TRUE(ch.error().has_value());
  EXPECT_EQ(ch.error()->status, 503);
  std::vector<ChoiceEvent> got;
  EXPECT_TRUE(ch.take(got));  // ended
  EXPECT_TRUE(got.empty());
}

TEST(RequestChannel, ChoiceOutOfRangeIsAnError) {
  RequestChannel ch(1, [] {});
  ChoiceEvent e;
  e.index = 1;
  EXPECT_THROW(ch.push(e), std::out_of_range);
}
