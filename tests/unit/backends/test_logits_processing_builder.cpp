// LogitsProcessingBuilder (backends/logits_processing.h): a row's entries from a sequence's tokens,
// its prompt's first; tokens that hold less than the prompt are refused with an error (a prompt
// chunk samples no token to process; reading on past the tokens once scanned memory until a
// "token" fell outside the vocabulary).
#include <gtest/gtest.h>

#include "nanovllm/backends/logits_processing.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm;

TEST(LogitsProcessingBuilder, PromptAndOutputTokensAreTold) {
  LogitsProcessingBuilder b(16);
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  const LogitsProcessing lp = b.build(p, {3, 4, 4, 5, 5}, 3, {});
  ASSERT_EQ(lp.entries.size(), 3u);
  for (const LogitAdjust& e : lp.entries) {
    EXPECT_TRUE(e.flags & kAdjustSeen) << e.token;
    EXPECT_EQ(e.output_count, e.token == 5 ? 2 : 0) << e.token;
  }
}

TEST(LogitsProcessingBuilder, TokensShorterThanThePromptAreRefused) {
  LogitsProcessingBuilder b(16);
  SamplingParams p;
  p.repetition_penalty = 1.5f;
  EXPECT_THROW(b.build(p, {3, 4}, 5, {}), Error);
  EXPECT_THROW(b.build(p, {3, 4}, -1, {}), Error);
  EXPECT_NO_THROW(b.build(p, {3, 4}, 2, {}));
}
