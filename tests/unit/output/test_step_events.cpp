// step_events with several tokens of one request in a step (speculative decoding): one event per
// token in order, the prompt logprobs on the first, the finish on the last.
#include <gtest/gtest.h>

#include "nanovllm/output/step_events.h"

using namespace nanovllm;

TEST(StepEvents, SeveralTokensOfARequestFinishOnTheLast) {
  StepResult r;
  r.new_tokens = {{1, 10}, {2, 20}, {1, 11}, {1, 12}};
  r.prompt_logprobs.emplace_back(1, std::vector<TokenLogprobs>(3));
  RequestOutput done;
  done.request_id = 1;
  done.finish_reason = FinishReason::Stop;
  r.finished.push_back(done);
  const auto ev = output::step_events(r);
  ASSERT_EQ(ev.size(), 4u);
  EXPECT_EQ(ev[0].token, 10);
  EXPECT_NE(ev[0].prompt_logprobs, nullptr);
  EXPECT_EQ(ev[0].finish, FinishReason::None);
  EXPECT_EQ(ev[2].token, 11);
  EXPECT_EQ(ev[2].prompt_logprobs, nullptr);
  EXPECT_EQ(ev[2].finish, FinishReason::None);
  EXPECT_EQ(ev[3].token, 12);
  EXPECT_EQ(ev[3].finish, FinishReason::Stop);
  EXPECT_EQ(ev[3].finished, &r.finished[0]);
  EXPECT_EQ(ev[1].finish, FinishReason::None);
}
