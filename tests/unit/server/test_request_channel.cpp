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
