// Bad input never crashes: invalid UTF-8, missing or malformed files, unsupported components and
// out-of-range ids all throw a TokenizerError that says what and where.
#include <filesystem>
#include <fstream>

#include "nanovllm/tokenizer/hf_tokenizer.h"
#include "nanovllm/utils/error.h"
#include "tokenizer_test_support.h"

namespace nanovllm::test {
namespace {

// Runs f, expects a TokenizerError whose message contains `needle`.
template <class F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no TokenizerError (expected one mentioning '" << needle << "')";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

// A minimal byte-level tokenizer.json with the given replacements applied to its JSON.
nlohmann::json tiny(const nlohmann::json& patch = nlohmann::json::object()) {
  nlohmann::json vocab = {{"a", 0}, {"b", 1}, {"ab", 2}};
  nlohmann::json j = {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"a b"}}}},
                      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
                      {"decoder", {{"type", "ByteLevel"}}}};
  j.merge_patch(patch);
  return j;
}

TEST(TokenizerErrors, InvalidUtf8NamesTheByteOffset) {
  NANOVLLM_REQUIRE_QWEN3();
  expect_error(
      [] {
        qwen3()->encode(
            "abc\xff"
            "def");
      },
      "byte offset 3");
  expect_error([] { qwen3()->encode("\xe4\xb8"); }, "byte offset 0");            // truncated
  expect_error([] { qwen3()->encode("ok \xed\xa0\x80"); }, "byte offset 3");     // surrogate
  expect_error([] { qwen3()->encode("\xc0\xaf"); }, "byte offset 0");            // overlong
  expect_error([] { qwen3()->encode("xy\xf4\x90\x80\x80"); }, "byte offset 2");  // > U+10FFFF
  expect_error([] { qwen3()->encode("<|im_start|>\x80"); }, "byte offset 12");
}

TEST(TokenizerErrors, MissingDirectoryOrFile) {
  expect_error([] { Tokenizer::from_dir("/nonexistent/model/dir"); }, "tokenizer.json: file not found");
}

TEST(TokenizerErrors, MalformedJsonNamesTheFile) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("nanovllm_badtok_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << "{\"model\": {\"type\": \"BPE\", ";
  expect_error([&] { Tokenizer::from_dir(dir.string()); }, "tokenizer.json: malformed JSON");
  std::ofstream(dir / "tokenizer.json") << tiny().dump();
  std::ofstream(dir / "tokenizer_config.json") << "{not json";
  expect_error([&] { Tokenizer::from_dir(dir.string()); }, "tokenizer_config.json: malformed JSON");
  std::ofstream(dir / "tokenizer_config.json") << "{}";
  EXPECT_NO_THROW(Tokenizer::from_dir(dir.string()));
  std::ofstream(dir / "tokenizer.json") << "[1, 2, 3]";
  expect_error([&] { Tokenizer::from_dir(dir.string()); }, "not a JSON object");
  fs::remove_all(dir);
}

TEST(TokenizerErrors, UnsupportedComponentsAreNamed) {
  auto build = [](const nlohmann::json& j) { tokenizer_from_json(j.dump(), ""); };
  expect_error([&] { build(tiny({{"model", {{"type", "WordPiece"}}}})); }, "unsupported model type 'WordPiece'");
  expect_error([&] { build(tiny({{"model", {{"type", "Unigram"}}}})); }, "'Unigram'");
  expect_error([&] { build(tiny({{"pre_tokenizer", {{"type", "Whitespace"}}}})); }, "pre_tokenizer type 'Whitespace'");
  expect_error([&] { build(tiny({{"normalizer", {{"type", "Lowercase"}}}})); }, "normalizer type 'Lowercase'");
  expect_error([&] { build(tiny({{"decoder", {{"type", "WordPiece"}}}})); }, "decoder type 'WordPiece'");
  expect_error([&] { build(tiny({{"model", {{"merges", {"a c"}}}}})); }, "not in the vocab");
  expect_error([&] { build(tiny({{"model", {{"merges", {"abc"}}}}})); }, "is not \"a b\"");
  expect_error([&] { build(tiny({{"model", {{"merges", {42}}}}})); }, "neither");
  expect_error([&] { build(tiny({{"model", {{"vocab", {{"a", "zero"}}}}}})); }, "invalid id");
  expect_error([&] { build(tiny({{"model", nullptr}})); }, "model");
  expect_error(
      [&] {
        build(tiny({{"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"Regex", "(unclosed"}}}}}}));
      },
      "cannot compile regex");
  expect_error([&] { build(tiny({{"model", {{"byte_fallback", true}}}})); }, "byte_fallback");
  expect_error([&] { build(tiny({{"added_tokens", "nope"}})); }, "added_tokens");
  expect_error([&] { tokenizer_from_json("{", ""); }, "malformed JSON");
  // Post-processors: an unknown type, a template naming an undefined special, an id outside the vocab.
  expect_error(
      [&] {
        build(tiny({{"post_processor", {{"type", "Unknownish"}}}}));
      },
      "post_processor type 'Unknownish'");
  const nlohmann::json bos = {{"SpecialToken", {{"id", "<s>"}}}}, seq = {{"Sequence", {{"id", "A"}}}};
  expect_error(
      [&] {
        build(tiny({{"post_processor", {{"type", "TemplateProcessing"}, {"single", {bos, seq}}}}}));
      },
      "special token '<s>'");
  expect_error(
      [&] {
        build(tiny({{"post_processor",
                     {{"type", "TemplateProcessing"},
                      {"single", {bos, seq}},
                      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {7}}, {"tokens", {"<s>"}}}}}}}}}));
      },
      "token id 7, outside the vocabulary");
}

// The single-sequence template's specials: before and after the text, Bert-style cls/sep too.
TEST(TokenizerErrors, PostProcessorSpecialsAreAdded) {
  const nlohmann::json a = {{"SpecialToken", {{"id", "A0"}}}}, b = {{"SpecialToken", {{"id", "B1"}}}},
                       seq = {{"Sequence", {{"id", "A"}}}};
  const nlohmann::json specials = {{"A0", {{"id", "A0"}, {"ids", {0}}}}, {"B1", {{"id", "B1"}, {"ids", {1, 0}}}}};
  auto t = tokenizer_from_json(
      tiny(
          {{"post_processor", {{"type", "TemplateProcessing"}, {"single", {a, seq, b}}, {"special_tokens", specials}}}})
          .dump(),
      "");
  EXPECT_EQ(t->encode("ab", true), (std::vector<int32_t>{0, 2, 1, 0}));
  EXPECT_EQ(t->encode("ab", false), (std::vector<int32_t>{2}));
  auto bert = tokenizer_from_json(
      tiny({{"post_processor", {{"type", "BertProcessing"}, {"cls", {"b", 1}}, {"sep", {"a", 0}}}}}).dump(), "");
  EXPECT_EQ(bert->encode("ab", true), (std::vector<int32_t>{1, 2, 0}));
}

// Sequences nested `depth` deep around `leaf`, as tokenizer.json spells them.
nlohmann::json nested(const char* list_key, nlohmann::json leaf, int depth) {
  for (int i = 0; i < depth; ++i) leaf = {{"type", "Sequence"}, {list_key, nlohmann::json::array({leaf})}};
  return leaf;
}

// Text of a tokenizer.json whose `key` holds Sequences nested `depth` deep (built as text: a
// deep nlohmann::json would itself recurse that deep when dumped).
std::string deeply_nested(const std::string& key, const char* list_key, const std::string& leaf, int depth) {
  std::string open, close;
  for (int i = 0; i < depth; ++i) {
    open += std::string("{\"type\": \"Sequence\", \"") + list_key + "\": [";
    close += "]}";
  }
  nlohmann::json j = tiny();
  j[key] = "@";
  const std::string text = j.dump();
  const size_t at = text.find("\"@\"");
  return text.substr(0, at) + open + leaf + close + text.substr(at + 3);
}

TEST(TokenizerErrors, DeeplyNestedSequencesAreRefused) {
  // Thousands deep (once a stack overflow): refused when read, like Hugging Face does.
  for (int depth : {5000, 200000}) {
    expect_error(
        [&] { tokenizer_from_json(deeply_nested("normalizer", "normalizers", R"({"type": "NFC"})", depth), ""); },
        "JSON nested deeper than 128 levels");
    expect_error(
        [&] {
          tokenizer_from_json(deeply_nested("pre_tokenizer", "pretokenizers", R"({"type": "ByteLevel"})", depth), "");
        },
        "JSON nested deeper than 128 levels");
    expect_error(
        [&] { tokenizer_from_json(deeply_nested("decoder", "decoders", R"({"type": "ByteLevel"})", depth), ""); },
        "JSON nested deeper than 128 levels");
  }
  expect_error([] { tokenizer_from_json("{\"x\": " + std::string(100000, '[') + std::string(100000, ']') + "}", ""); },
               "at byte offset 133");
  // Brackets in strings do not count; 40 levels load (Hugging Face reads them too).
  EXPECT_NO_THROW(tokenizer_from_json(deeply_nested("normalizer", "normalizers", R"({"type": "NFC"})", 40), ""));
  nlohmann::json ok = tiny();
  ok["model"]["vocab"][std::string(500, '[')] = 3;
  EXPECT_NO_THROW(tokenizer_from_json(ok.dump(), ""));
  // Built in memory rather than read, the components bound the nesting themselves.
  expect_error(
      [] {
        HfTokenizer(tiny({{"normalizer", nested("normalizers", {{"type", "NFC"}}, 100)}}), nullptr);
      },
      "normalizer Sequences nested deeper than 64 levels");
  expect_error(
      [] {
        HfTokenizer(tiny({{"pre_tokenizer", nested("pretokenizers", {{"type", "ByteLevel"}}, 100)}}), nullptr);
      },
      "pre_tokenizer Sequences nested deeper than 64 levels");
  expect_error(
      [] {
        HfTokenizer(tiny({{"decoder", nested("decoders", {{"type", "ByteLevel"}}, 100)}}), nullptr);
      },
      "decoder Sequences nested deeper than 64 levels");
}

TEST(TokenizerErrors, EmptyVocabularyIsRefused) {
  nlohmann::json j = tiny();
  j["model"]["vocab"] = nlohmann::json::object();
  j["model"]["merges"] = nlohmann::json::array();
  expect_error([&] { tokenizer_from_json(j.dump(), ""); }, "empty \"vocab\"");
}

// An id of 2^31 - 1 once asked for a table of 2^31 entries (std::length_error, or the OOM killer
// for ids of a few hundred million), and overflowed vocab_size() as an added token.
TEST(TokenizerErrors, HugeIdsAreRefused) {
  auto build = [](const nlohmann::json& j) { tokenizer_from_json(j.dump(), ""); };
  nlohmann::json j = tiny();
  j["model"]["vocab"]["ab"] = 2147483647;
  expect_error([&] { build(j); }, "vocab entry 'ab' has id 2147483647, above the supported 4194303");
  expect_error(
      [&] {
        build(tiny({{"added_tokens", {{{"id", 2147483647}, {"content", "<x>"}}}}}));
      },
      "added token id 2147483647 is above the supported");
  expect_error(
      [&] {
        build(tiny({{"added_tokens", {{{"id", 1LL << 40}, {"content", "<x>"}}}}}));
      },
      "is above the supported");
  j["model"]["vocab"]["ab"] = kMaxTokenId;
  EXPECT_EQ(tokenizer_from_json(j.dump(), "")->vocab_size(), kMaxTokenId + 1);
}

TEST(TokenizerErrors, DecodeRejectsOutOfRangeIds) {
  NANOVLLM_REQUIRE_QWEN3();
  expect_error([] { qwen3()->decode({9707, -1}, false); }, "token id -1");
  expect_error([] { qwen3()->decode({qwen3()->vocab_size()}, false); }, "out of range");
  IncrementalDetokenizer detok(*qwen3(), false);
  EXPECT_EQ(detok.push(9707), "Hello");
  EXPECT_THROW(detok.push(1 << 30), TokenizerError);
  EXPECT_EQ(detok.push(1879), " world");  // the stream is still usable
}

TEST(TokenizerErrors, EmptyInput) {
  NANOVLLM_REQUIRE_QWEN3();
  EXPECT_TRUE(qwen3()->encode("").empty());
  EXPECT_EQ(qwen3()->decode({}, true), "");
  IncrementalDetokenizer detok(*qwen3(), true);
  EXPECT_EQ(detok.flush(), "");
}

}  // namespace
}  // namespace nanovllm::test
