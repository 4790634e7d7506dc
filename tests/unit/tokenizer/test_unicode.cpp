// Hugging Face's Unicode rather than our libraries': regex categories of Unicode 16 (Oniguruma's,
// PCRE2 10.42 has 14), Oniguruma's reading of \s \w \d \h \v, and normalization forms of Unicode
// 9 (HF's tables; utf8proc 2.8 has 15). Expected values were read off the oracle (npm tokenizers
// 0.23.2); the tables themselves come from scripts/gen_unicode_tables.mjs.
#include <algorithm>

#include "nanovllm/tokenizer/normalizer.h"
#include "nanovllm/tokenizer/regex.h"
#include "nanovllm/tokenizer/regex_unicode.h"
#include "nanovllm/tokenizer/unicode_data.h"
#include "nanovllm/tokenizer/utf8.h"
#include "tokenizer_test_support.h"

namespace nanovllm::test {
namespace {

using Strings = std::vector<std::string>;

std::string u8(std::initializer_list<uint32_t> cps) {
  std::string s;
  for (uint32_t c : cps) utf8::append_code_point(c, s);
  return s;
}

// Every match of `pattern` in `text`, as the pre-tokenizer finds them.
Strings matches(const std::string& pattern, const std::string& text) {
  const Regex re(pattern);
  RegexScratch scratch;
  const bool fast_ok = Regex::fast_ok_for(text);
  Strings out;
  size_t pos = 0, b = 0, e = 0;
  while (re.find(text, pos, scratch, &b, &e, fast_ok)) {
    out.push_back(text.substr(b, e - b));
    pos = e;
  }
  return out;
}

TEST(TokenizerUnicode, LettersAndDigitsOfUnicode15And16) {
  // U+31350 (CJK Ext H, Unicode 15.0), U+2EBF0 (Ext I, 15.1), U+10D50 (Garay, 16.0); U+323B0
  // (Ext J) is Unicode 17, which the oracle does not have yet.
  EXPECT_EQ(matches("\\p{L}+", "a" + u8({0x31350, 0x2EBF0, 0x10D50}) + "b." + u8({0x323B0}) + "c"),
            (Strings{"a" + u8({0x31350, 0x2EBF0, 0x10D50}) + "b", "c"}));
  EXPECT_EQ(matches("[^\\p{L}]+", "a" + u8({0x31350}) + "." + u8({0x323B0})), (Strings{"." + u8({0x323B0})}));
  EXPECT_EQ(matches("\\P{L}+", u8({0x2EBF0}) + "1"), (Strings{"1"}));
  EXPECT_EQ(matches("\\d+|\\p{N}+", u8({0x10D40, 0x10D41}) + "x"), (Strings{u8({0x10D40, 0x10D41})}));
  // U+1171E was a non-spacing mark in Unicode 14 and is a spacing one since 16.
  EXPECT_EQ(matches("\\p{Mc}", u8({0x1171E})).size(), 1u);
  EXPECT_TRUE(matches("\\p{Mn}", u8({0x1171E})).empty());
  // Long names and \p{^..}, as Oniguruma reads them.
  EXPECT_EQ(matches("\\p{Letter}+", "ab1" + u8({0x31350})), (Strings{"ab", u8({0x31350})}));
  EXPECT_EQ(matches("\\p{^L}+", "ab1." + u8({0x31350})), (Strings{"1."}));
  EXPECT_EQ(matches("\\p{Uppercase_Letter}", "aB"), (Strings{"B"}));
}

TEST(TokenizerUnicode, EscapesReadAsOniguruma) {
  // \s is White_Space: U+0085 yes, U+180E (a space before Unicode 6.3) no.
  EXPECT_EQ(matches("\\s+", "a \x85\xE1\xA0\x8E\v\t\nb"), (Strings{" \x85", "\v\t\n"}));
  EXPECT_EQ(matches("[^\\S\\n]+", "a \x85\xE1\xA0\x8E\v\t\nb"), (Strings{" \x85", "\v\t"}));
  EXPECT_EQ(matches("\\S+", "a \x85 b"), (Strings{"a", "b"}));
  // \w: letters, marks, digits, connector punctuation, and Oniguruma's extras such as ² and ⓐ.
  EXPECT_EQ(matches("\\w+", "\xC2\xB2\xE2\x93\x90\xCC\x81x_1\xC2\xB7y"),
            (Strings{"\xC2\xB2\xE2\x93\x90\xCC\x81x_1", "y"}));
  EXPECT_EQ(matches("\\W+", "a\xC2\xB7 b"), (Strings{"\xC2\xB7 "}));
  EXPECT_EQ(matches("[\\W\\d]+", "a1. b"), (Strings{"1. "}));
  // \h is a hex digit in Oniguruma (PCRE2: horizontal space); \v is U+000B only.
  EXPECT_EQ(matches("\\h+", "0x1fG \t"), (Strings{"0", "1f"}));
  EXPECT_EQ(matches("[^\\h]+", "0x1f"), (Strings{"x"}));
  EXPECT_EQ(matches("\\v+", "\v\t\n\r"), (Strings{"\v"}));
  EXPECT_EQ(matches("\\d+",
                    "\xD9\xA1\xD9\xA2"
                    "3\xC2\xB2"),
            (Strings{"\xD9\xA1\xD9\xA2"
                     "3"}));
  EXPECT_EQ(matches("\\u0041+", "bAAc"), (Strings{"AA"}));
  // Ruby syntax has no \Q..\E quoting: \Q is Q. Escapes in classes are found.
  EXPECT_EQ(matches("\\Q\\s\\E", "a\\sb sQ E"), (Strings{"Q E"}));
  EXPECT_EQ(matches("[]\\s]+", "a] b"), (Strings{"] "}));
  EXPECT_EQ(matches("[[:digit:]\\s]+", "a1 2b"), (Strings{"1 2"}));
}

// The membership of sample code points in each class, in both compiled forms, against the
// generated tables (so against Hugging Face).
TEST(TokenizerUnicode, ClassesFollowTheTablesOnSampleCodePoints) {
  std::vector<uint32_t> sample;
  for (uint32_t c = 1; c <= 0x10FFFF; c += c < 0x3000 ? 1 : 31)
    if (c < 0xD800 || c > 0xDFFF) sample.push_back(c);
  for (uint32_t c : {0x31350u, 0x2EBF0u, 0x1171Eu, 0x10D50u, 0x10D40u, 0x323B0u, 0xFFFFu, 0x10FFFFu})
    sample.push_back(c);
  std::string all, agreeing;  // agreeing: the code points on which PCRE2's tables agree
  std::vector<size_t> at;
  for (uint32_t c : sample) {
    at.push_back(all.size());
    const std::string s = u8({c});
    all += s;
    if (regex_unicode::pcre2_agrees(s)) agreeing += s;
  }
  const auto runs = unicode::category_runs();
  auto category = [&](uint32_t c) {
    return std::prev(
               std::upper_bound(runs.begin(), runs.end(), c, [](uint32_t x, const auto& r) { return x < r.first; }))
        ->category;
  };
  auto check = [&](const std::string& pattern, const std::function<bool(uint32_t)>& in_set) {
    SCOPED_TRACE(pattern);
    const Regex re(pattern);
    RegexScratch scratch;
    std::vector<char> hit(sample.size(), 0);
    size_t pos = 0, b = 0, e = 0;
    while (re.find(all, pos, scratch, &b, &e, false)) {
      hit[std::lower_bound(at.begin(), at.end(), b) - at.begin()] = 1;
      pos = e;
    }
    size_t wrong = 0;
    for (size_t i = 0; i < sample.size(); ++i)
      if (static_cast<bool>(hit[i]) != in_set(sample[i]) && ++wrong <= 3)
        ADD_FAILURE() << "U+" << std::hex << sample[i];
    size_t fast = 0;  // the fast form on the text it is allowed for
    for (pos = 0; re.find(agreeing, pos, scratch, &b, &e, true); pos = e) ++fast;
    size_t expected = 0;
    for (uint32_t c : sample) expected += regex_unicode::pcre2_agrees(u8({c})) && in_set(c);
    EXPECT_EQ(fast, expected);
  };
  for (const char* name : {"L",  "Lu", "Ll", "Lt", "Lm", "Lo", "M",  "Mn", "Mc", "N",  "Nd", "Nl",
                           "No", "P",  "Po", "S",  "So", "Z",  "Zs", "C",  "Cc", "Cf", "Co", "Cn"}) {
    const uint32_t mask = regex_unicode::category_mask(name);
    auto in = [&](uint32_t c) { return ((mask >> category(c)) & 1) != 0; };
    const std::string p = std::string("\\p{") + name + "}", P = std::string("\\P{") + name + "}";
    check(p, in);
    check("[" + p + "]", in);
    check(P, [&](uint32_t c) { return !in(c); });
    check("[^" + p + "]", [&](uint32_t c) { return !in(c); });
    check("[_" + P + "]", [&](uint32_t c) { return c == '_' || !in(c); });
  }
  for (char letter : {'s', 'w', 'd', 'h', 'v'}) {
    const unicode::EscapeSet* set = unicode::escape_set(letter);
    auto in = [&](uint32_t c) { return ((set->categories >> category(c)) & 1) || unicode::contains(set->extra, c); };
    const char upper = static_cast<char>(letter - 'a' + 'A');
    check(std::string("\\") + letter, in);
    check(std::string("[\\") + upper + "]", [&](uint32_t c) { return !in(c); });
    check(std::string("[^\\") + letter + "]", [&](uint32_t c) { return !in(c); });
  }
}

std::string normalized(const char* form, const std::string& s) {
  const Normalizer n(nlohmann::json{{"type", form}});
  std::string storage;
  return std::string(n.apply(s, storage));
}

TEST(TokenizerUnicode, NormalizersFollowHuggingFacesUnicode9) {
  // Combining marks newer than Unicode 9 (U+07FD: 11.0, U+0898: 14.0) are not reordered.
  EXPECT_EQ(normalized("NFC", u8({0x345, 0x7FD})), u8({0x345, 0x7FD}));
  EXPECT_EQ(normalized("NFD", u8({'a', 0x301, 0x7FD, 0x316})), u8({'a', 0x301, 0x7FD, 0x316}));
  EXPECT_EQ(normalized("NFC", u8({'a', 0x301, 0x898, 0x316})), u8({0xE1, 0x898, 0x316}));
  EXPECT_EQ(normalized("NFC", u8({'e', 0x301, 0x345, 0x7FD, 'e', 0x301})), u8({0xE9, 0x345, 0x7FD, 0xE9}));
  // Compatibility and canonical mappings of newer characters are not applied (U+A7F4: 14.0,
  // U+105C9 = U+105D2 U+0307: 16.0).
  EXPECT_EQ(normalized("NFKC", u8({0xA7F4})), u8({0xA7F4}));
  EXPECT_EQ(normalized("NFC", u8({0x105D2, 0x307})), u8({0x105D2, 0x307}));
  // Everything else as usual.
  EXPECT_EQ(normalized("NFKC", u8({0xFB01, 0x2460})), "fi1");
  EXPECT_EQ(normalized("NFD", u8({0xD55C})), u8({0x1112, 0x1161, 0x11AB}));
  EXPECT_EQ(normalized("NFC", u8({0x1112, 0x1161, 0x11AB})), u8({0xD55C}));
  EXPECT_EQ(normalized("NFKD", u8({0x1E9B, 0x323})), u8({'s', 0x323, 0x307}));
  EXPECT_EQ(normalized("NFC", u8({'A', 0x30A, 0x301})), u8({0x1FA}));
}

TEST(TokenizerUnicode, Qwen3IdsOfNewCharactersMatchHuggingFace) {
  NANOVLLM_REQUIRE_QWEN3();
  // Recorded from tokenizers 0.23.2 (tests/oracles/tokenize_oracle.mjs).
  EXPECT_EQ(qwen3()->encode(u8({0x31350}) + "'s and " + u8({0x2EBF0}) + "'S"),
            (std::vector<int32_t>{172, 109, 235, 238, 594, 323, 220, 172, 106, 107, 108, 13272}));
  EXPECT_EQ(qwen3()->encode(u8({'a', 0x345, 0x7FD, ' ', 'e', 0x301, 0x345, 0x7FD, 'e', 0x301})),
            (std::vector<int32_t>{64, 137, 227, 155, 121, 3958, 137, 227, 155, 121, 963}));
}

}  // namespace
}  // namespace nanovllm::test
