// The host side of logits processing (backends/logits_processing.h): which tokens a request's
// penalties, bias and min_tokens touch, built from the sequence's tokens; a prompt longer than the
// tokens given is refused (it read past them before, as garbage token ids).
#include <gtest/gtest.h>

#include <map>

#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

TEST(LogitsProcessingBuilder, PenaltiesCountPromptAndOutputTokens) {
  LogitsProcessingBuilder b(16);
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  p.frequency_penalty = 0.5f;
  const LogitsProcessing lp = b.build(p, {3, 4, 3, 5, 5}, 3, {});
  std::map<int32_t, LogitAdjust> by;
  for (const LogitAdjust& e : lp.entries) by[e.token] = e;
  ASSERT_EQ(by.size(), 3u);
  EXPECT_EQ(by[3].output_count, 0);  // prompt only
  EXPECT_EQ(by[5].output_count, 2);
  EXPECT_TRUE(by[4].flags & kAdjustSeen);
}

TEST(LogitsProcessingBuilder, APromptLongerThanTheTokensIsRefused) {
  LogitsProcessingBuilder b(16);
  SamplingParams p;
  p.repetition_penalty = 1.2f;
  EXPECT_THROW(b.build(p, {1, 2, 3}, 4, {}), Error);
  EXPECT_NO_THROW(b.build(p, {1, 2, 3}, 3, {}));
}
