// The qwen3 reasoning parser: <think>...</think> is reasoning, the rest content, whatever the
// streaming split (every byte position of the tags, and byte by byte).
#include <gtest/gtest.h>

#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm::output;

namespace {

ReasoningDelta run(const std::vector<std::string>& pieces) {
  Qwen3ReasoningParser p;
  ReasoningDelta all;
  for (auto& s : pieces) {
    ReasoningDelta d = p.push(s);
    all.reasoning += d.reasoning;
    all.content += d.content;
  }
  ReasoningDelta d = p.finish();
  all.reasoning += d.reasoning;
  all.content += d.content;
  return all;
}

// Every split of `text` into two pieces, and byte by byte, gives `reasoning` and `content`.
void expect_every_split(const std::string& text, const std::string& reasoning, const std::string& content) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ReasoningDelta d = run({text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(d.reasoning, reasoning) << "split at " << cut << " of " << text;
    EXPECT_EQ(d.content, content) << "split at " << cut << " of " << text;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ReasoningDelta d = run(bytes);
  EXPECT_EQ(d.reasoning, reasoning);
  EXPECT_EQ(d.content, content);
}

}  // namespace

TEST(Qwen3ReasoningParser, ThinkBlockIsReasoning) {
  expect_every_split("<think>\nLet me think.\n</think>\n\nThe answer is 4.", "\nLet me think.\n",
                     "\n\nThe answer is 4.");
  expect_every_split("<think></think>Hi", "", "Hi");
}

TEST(Qwen3ReasoningParser, OutputWithoutThinkIsAllContent) {
  // Thinking disabled in the template: the model writes the answer only.
  expect_every_split("The answer is 4. A </think> here is text.", "", "The answer is 4. A </think> here is text.");
  expect_every_split("a < b and <thin", "", "a < b and <thin");
}

TEST(Qwen3ReasoningParser, UnclosedThinkIsReasoning) {
  expect_every_split("<think>\nStill thinking about </thi", "\nStill thinking about </thi", "");
}

TEST(Qwen3ReasoningParser, OnlyTheFirstThinkBlockIsReasoning) {
  expect_every_split("<think>r</think>c<think>d</think>", "r", "c<think>d</think>");
}

TEST(Qwen3ReasoningParser, DeltasComeOutAsSoonAsTheyAreKnown) {
  Qwen3ReasoningParser p;
  EXPECT_EQ(p.push("<thi").content, "");  // could be the tag
  ReasoningDelta d = p.push("nk>abc</");
  EXPECT_EQ(d.reasoning, "abc");  // "</" held back
  d = p.push("think>x");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "x");
  EXPECT_EQ(p.push("<think>").content, "<think>");  // after the answer began: plain text
}

TEST(ReasoningParsers, UnknownNameIsAnError) {
  EXPECT_TRUE(is_reasoning_parser("qwen3"));
  EXPECT_FALSE(is_reasoning_parser("deepseek_r1"));
  EXPECT_THROW(make_reasoning_parser("deepseek_r1"), nanovllm::UserError);
}
