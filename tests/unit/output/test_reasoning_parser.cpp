// The reasoning parsers: qwen3 (<think>...</think> is reasoning, the rest content) and deepseek_r1
// (all before </think> is reasoning), whatever the streaming split (every byte position of the
// tags, and byte by byte).
#include <gtest/gtest.h>

#include "nanovllm/output/reasoning_parser.h"
#include "nanovllm/utils/error.h"

using namespace nanovllm::output;

namespace {

template <class Parser = Qwen3ReasoningParser>
ReasoningDelta run(const std::vector<std::string>& pieces) {
  Parser p;
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
template <class Parser = Qwen3ReasoningParser>
void expect_every_split(const std::string& text, const std::string& reasoning, const std::string& content) {
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    ReasoningDelta d = run<Parser>({text.substr(0, cut), text.substr(cut)});
    EXPECT_EQ(d.reasoning, reasoning) << "split at " << cut << " of " << text;
    EXPECT_EQ(d.content, content) << "split at " << cut << " of " << text;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  ReasoningDelta d = run<Parser>(bytes);
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
  EXPECT_FALSE(is_reasoning_parser("granite"));
  EXPECT_THROW(make_reasoning_parser("granite"), nanovllm::UserError);
}

TEST(DeepSeekR1ReasoningParser, TextBeforeTheEndTagIsReasoningWithoutAStartTag) {
  expect_every_split<DeepSeekR1ReasoningParser>("Let me think: 2+2.\n</think>\n\nIt is 4.", "Let me think: 2+2.\n",
                                                "\n\nIt is 4.");
  expect_every_split<DeepSeekR1ReasoningParser>("<think>Hmm, ü.</think>Answer", "Hmm, ü.", "Answer");
  expect_every_split<DeepSeekR1ReasoningParser>("</think>Answer </think>", "", "Answer </think>");
}

TEST(DeepSeekR1ReasoningParser, OutputThatNeverClosesIsAllReasoning) {
  expect_every_split<DeepSeekR1ReasoningParser>("Still thinking <thi", "Still thinking <thi", "");
  expect_every_split<DeepSeekR1ReasoningParser>("<thi", "<thi", "");
  expect_every_split<DeepSeekR1ReasoningParser>("", "", "");
  expect_every_split<DeepSeekR1ReasoningParser>("a <think> b", "a <think> b", "");  // only a leading <think> is the tag
}

TEST(DeepSeekR1ReasoningParser, ReasoningStreamsAsItArrives) {
  DeepSeekR1ReasoningParser p;
  EXPECT_EQ(p.push("<th").reasoning, "");  // could be the start tag
  EXPECT_EQ(p.push("ink>So").reasoning, "So");
  EXPECT_EQ(p.push(" </").reasoning, " ");
  ReasoningDelta d = p.push("think>Yes");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Yes");
}

TEST(ReasoningParsers, NamesAndTags) {
  for (const char* name : {"qwen3", "deepseek_r1"}) {
    EXPECT_TRUE(is_reasoning_parser(name));
    EXPECT_NE(make_reasoning_parser(name), nullptr);
    EXPECT_EQ(reasoning_tags(name).end, "</think>");
    EXPECT_NE(reasoning_parser_names().find(name), std::string::npos);
  }
  try {
    make_reasoning_parser("granite");
    ADD_FAILURE() << "no error";
  } catch (const nanovllm::UserError& e) {
    EXPECT_NE(std::string(e.what()).find("deepseek_r1, qwen3"), std::string::npos);
  }
}
