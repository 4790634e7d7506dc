// Component behaviour on small synthetic tokenizers (merge formats, added-token flags, Split
// behaviors, ignore_merges, config parsing) and Qwen3 facts, thread safety and long inputs.
#include <chrono>
#include <thread>

#include "nanovllm/tokenizer/byte_level.h"
#include "nanovllm/tokenizer/hf_tokenizer.h"
#include "nanovllm/tokenizer/pre_tokenizer.h"
#include "nanovllm/tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace nanovllm::test {
namespace {

// Byte-level vocab of all 256 bytes plus the given multi-byte tokens, in id order.
nlohmann::json byte_vocab(const std::vector<std::string>& extra) {
  nlohmann::json v = nlohmann::json::object();
  const ByteLevelTable& t = byte_level_table();
  for (int b = 0; b < 256; ++b) v[t.to_text(std::string(1, static_cast<char>(b)))] = b;
  int id = 256;
  for (const auto& e : extra) v[t.to_text(e)] = id++;
  return v;
}

std::unique_ptr<Tokenizer> make(const nlohmann::json& model, const nlohmann::json& added = nullptr,
                                const nlohmann::json& pre = nullptr, const std::string& config = "") {
  nlohmann::json j = {{"model", model},
                      {"added_tokens", added},
                      {"decoder", {{"type", "ByteLevel"}}},
                      {"normalizer", {{"type", "NFC"}}}};
  j["pre_tokenizer"] = pre.is_null() ? nlohmann::json{{"type", "ByteLevel"}, {"use_regex", true}} : pre;
  return tokenizer_from_json(j.dump(), config);
}

TEST(TokenizerComponents, Utf8Helpers) {
  EXPECT_EQ(utf8::find_invalid("plain ascii and 中文 😀"), utf8::kValid);
  std::string out;
  utf8::append_lossy(
      "a\xe4\xb8"
      "b\xff\xf0\x9f\x98",
      out);
  EXPECT_EQ(out,
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::incomplete_tail("ab\xf0\x9f\x98"), 3u);
  EXPECT_EQ(utf8::incomplete_tail("ab\xf0\x9f\x98\x80"), 0u);
}

TEST(TokenizerComponents, ByteLevelTableRoundTrips) {
  const ByteLevelTable& t = byte_level_table();
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(t.to_bytes(t.to_text(all)), all);
  EXPECT_EQ(t.to_text(" the"), "\xC4\xA0the");  // "Ġthe"
  EXPECT_FALSE(t.to_bytes("中").has_value());
}

TEST(TokenizerComponents, BothMergeFormatsGiveTheSameIds) {
  const auto vocab = byte_vocab({"ab", "abc", "cd"});
  auto a = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b", "ab c", "c d"}}});
  auto b =
      make({{"type", "BPE"},
            {"vocab", vocab},
            {"merges", nlohmann::json::array({nlohmann::json::array({"a", "b"}), nlohmann::json::array({"ab", "c"}),
                                              nlohmann::json::array({"c", "d"})})}});
  EXPECT_EQ(a->encode("abcd"), (std::vector<int32_t>{257, 'd'}));  // "ab c" (rank 1) before "c d" (rank 2)
  EXPECT_EQ(a->encode("abcd"), b->encode("abcd"));
  EXPECT_EQ(a->encode("xcd"), (std::vector<int32_t>{'x', 258}));
  EXPECT_EQ(a->decode(a->encode("abcd xcd"), false), "abcd xcd");
}

TEST(TokenizerComponents, LowestRankMergesFirstLeftmostOnTies) {
  const auto vocab = byte_vocab({"aa", "aaa"});
  auto t = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a a", "aa a"}}});
  EXPECT_EQ(t->encode("aaa"), (std::vector<int32_t>{257}));
  EXPECT_EQ(t->encode("aaaa"), (std::vector<int32_t>{256, 256}));
  // Long words take the heap path; it must agree with the short path's rules.
  EXPECT_EQ(t->encode("aaaaa"), (std::vector<int32_t>{256, 257}));
  std::string long_word(301, 'a');  // 150 x "aa" + "a", then the last "aa a" merges
  std::vector<int32_t> expect(149, 256);
  expect.push_back(257);
  EXPECT_EQ(t->encode(long_word), expect);
}

TEST(TokenizerComponents, IgnoreMergesTakesWholeVocabWords) {
  const auto vocab = byte_vocab({"ab", "abc"});  // "abc" is not reachable by merges
  auto t = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}, {"ignore_merges", true}});
  EXPECT_EQ(t->encode("abc"), (std::vector<int32_t>{257}));
  auto u = make({{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}});
  EXPECT_EQ(u->encode("abc"), (std::vector<int32_t>{256, 'c'}));
}

TEST(TokenizerComponents, AddedTokenFlags) {
  const auto model = nlohmann::json{{"type", "BPE"}, {"vocab", byte_vocab({})}, {"merges", nlohmann::json::array()}};
  const nlohmann::json added = {
      {{"id", 300}, {"content", "<s>"}, {"special", true}, {"lstrip", true}, {"rstrip", true}},
      {{"id", 301}, {"content", "<sep>"}, {"special", false}},
      {{"id", 302}, {"content", "<sep>long"}, {"special", true}},
      {{"id", 303}, {"content", "cat"}, {"special", false}, {"single_word", true}},
      {{"id", 304}, {"content", "\xC3\xA9!"}, {"special", false}, {"normalized", true}}};
  auto t = make(model, added);
  EXPECT_EQ(t->encode("x  <s>  y"), (std::vector<int32_t>{'x', 300, 'y'}));
  EXPECT_EQ(t->encode("<sep>longer"), (std::vector<int32_t>{302, 'e', 'r'}));  // longest match
  EXPECT_EQ(t->encode("<sep>lon"), (std::vector<int32_t>{301, 'l', 'o', 'n'}));
  EXPECT_EQ(t->encode("cat"), (std::vector<int32_t>{303}));
  EXPECT_EQ(t->encode("cats").front(), 'c');                        // not a single word
  EXPECT_EQ(t->encode("e\xCC\x81!"), (std::vector<int32_t>{304}));  // matched after NFC
  EXPECT_EQ(t->decode({'a', 300, 301}, true), "a<sep>");
  EXPECT_EQ(t->decode({'a', 300, 301}, false), "a<s><sep>");
  EXPECT_TRUE(t->is_special(300));
  EXPECT_FALSE(t->is_special(301));
  EXPECT_EQ(t->vocab_size(), 305);
  EXPECT_EQ(t->token_to_id("<sep>"), 301);
  EXPECT_EQ(t->token_to_id("\xC4\xA0"), ' ');  // "Ġ"
  EXPECT_FALSE(t->token_to_id("nope").has_value());
}

std::vector<std::string> pieces_of(const nlohmann::json& config, std::string_view text) {
  PreTokenizer pre(config);
  PreTokenizer::Scratch scratch;
  std::vector<std::string_view> pieces;
  pre.split(text, scratch, pieces);
  return {pieces.begin(), pieces.end()};
}

TEST(TokenizerComponents, SplitBehaviors) {
  auto split = [](const char* behavior, bool invert = false) {
    return nlohmann::json{
        {"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", behavior}, {"invert", invert}};
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(pieces_of(split("Isolated"), "a-b--c-"), (V{"a", "-", "b", "-", "-", "c", "-"}));
  EXPECT_EQ(pieces_of(split("Removed"), "a-b--c-"), (V{"a", "b", "c"}));
  EXPECT_EQ(pieces_of(split("MergedWithPrevious"), "a-b--c-"), (V{"a-", "b-", "-", "c-"}));
  // As Hugging Face documents it ("the-final--countdown" -> "the", "-final", "-", "-countdown"): a
  // delimiter joins the non-delimiter after it, never another delimiter (the mirror of the above).
  EXPECT_EQ(pieces_of(split("MergedWithNext"), "-a-b--c"), (V{"-a", "-b", "-", "-c"}));
  EXPECT_EQ(pieces_of(split("Contiguous"), "a-b--c"), (V{"a", "-", "b", "--", "c"}));
  EXPECT_EQ(pieces_of(split("Removed", true), "a-b--c"), (V{"-", "-", "-"}));
  const nlohmann::json seq = {{"type", "Sequence"},
                              {"pretokenizers",
                               {{{"type", "Split"}, {"pattern", {{"Regex", "\\s+"}}}, {"behavior", "Removed"}},
                                {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"use_regex", false}}}}};
  EXPECT_EQ(pieces_of(seq, "hello  big world"), (V{" hello", " big", " world"}));
  const nlohmann::json gpt2 = {{"type", "ByteLevel"}, {"add_prefix_space", false}};
  EXPECT_EQ(pieces_of(gpt2, "I'm  here!!"), (V{"I", "'m", " ", " here", "!!"}));
}

TEST(TokenizerComponents, ConfigFields) {
  const auto model = nlohmann::json{{"type", "BPE"}, {"vocab", byte_vocab({})}, {"merges", nlohmann::json::array()}};
  auto t = make(model, nullptr, nullptr,
                R"({"chat_template": [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}],
                    "bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"})");
  EXPECT_EQ(t->chat_template(), "D");
  EXPECT_EQ(t->bos_token(), "<s>");
  EXPECT_EQ(t->eos_token(), "</s>");
  auto u = make(model);
  EXPECT_EQ(u->chat_template(), "");
  EXPECT_EQ(u->bos_token(), "");
}

TEST(TokenizerQwen3, KnownFacts) {
  NANOVLLM_REQUIRE_QWEN3();
  const Tokenizer& t = *qwen3();
  EXPECT_EQ(t.vocab_size(), 151669);
  EXPECT_EQ(t.token_to_id("<|im_end|>"), 151645);
  EXPECT_EQ(t.token_to_id("\xC4\xA0the"), 279);  // "Ġthe"
  EXPECT_TRUE(t.is_special(151645));
  EXPECT_FALSE(t.is_special(151667));  // <think> is an added, non-special token
  EXPECT_EQ(t.eos_token(), "<|im_end|>");
  EXPECT_EQ(t.bos_token(), "");
  EXPECT_NE(t.chat_template().find("<|im_start|>"), std::string::npos);
  EXPECT_EQ(t.encode("Hello, my dog is cute"), (std::vector<int32_t>{9707, 11, 847, 5562, 374, 18838}));
  EXPECT_EQ(t.decode({151644, 872, 198, 6023, 151645}, true), "user\nhi");
}

TEST(TokenizerQwen3, ConcurrentEncodesAgree) {
  NANOVLLM_REQUIRE_QWEN3();
  const auto& texts = corpus();
  std::vector<std::vector<int32_t>> expect;
  for (const auto& s : texts) expect.push_back(qwen3()->encode(s));
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&, k] {
      for (size_t r = 0; r < 3; ++r)
        for (size_t i = k; i < texts.size(); i += 1 + (k % 2)) bad[k] += qwen3()->encode(texts[i]) != expect[i];
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(4, 0));
}

TEST(TokenizerQwen3, HugeWordsAndWhitespaceRunsStayFast) {
  NANOVLLM_REQUIRE_QWEN3();
  // About 0.3 s each in a Release build; sanitizer and Debug builds are several times slower.
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__)
  const double limit = 5.0;
#else
  const double limit = 60.0;
#endif
  const std::vector<std::string> inputs = {std::string(1 << 20, ' '), std::string(1 << 20, 'x'),
                                           std::string(1 << 20, '\n'), "a" + std::string(1 << 20, ' ') + "b",
                                           std::string(300000, '\t') + " \n"};
  for (const auto& s : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto ids = qwen3()->encode(s);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, limit) << "input of " << s.size() << " bytes";
    EXPECT_EQ(qwen3()->decode(ids, false), s);
  }
}

}  // namespace
}  // namespace nanovllm::test
