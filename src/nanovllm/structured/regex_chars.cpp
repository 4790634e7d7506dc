// Code-point helpers for the regex and EBNF front ends (regex_chars.h).
#include "nanovllm/structured/regex_chars.h"

#include <cstdio>

#include "nanovllm/tokenizer/utf8.h"

namespace nanovllm::structured::chars {

size_t decode_utf8(std::string_view s, size_t i, uint32_t& cp) {
  if (i >= s.size()) return 0;
  const auto b = [&](size_t k) { return uint8_t(s[k]); };
  const uint8_t c = b(i);
  if (c < 0x80) return cp = c, 1;
  const size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > kMaxCodePoint || is_surrogate(cp)) return 0;
  return n;
}

void append_utf8(std::string& out, uint32_t cp) { utf8::append_code_point(cp, out); }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string code_point_name(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "U+%04X", unsigned(cp));
  return buf;
}

std::vector<CharRange> shorthand_ranges(char letter) {
  static const std::vector<CharRange> kDigit = {{'0', '9'}};
  static const std::vector<CharRange> kWord = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  static const std::vector<CharRange> kSpace = {{0x09, 0x0D},     {0x20, 0x20},     {0xA0, 0xA0},     {0x1680, 0x1680},
                                                {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                                                {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  switch (letter) {
    case 'd': return kDigit;
    case 'w': return kWord;
    case 's': return kSpace;
    case 'D': return normalize_ranges(kDigit, true);
    case 'W': return normalize_ranges(kWord, true);
    case 'S': return normalize_ranges(kSpace, true);
    default: return {};
  }
}

std::vector<CharRange> dot_ranges() { return normalize_ranges({{'\n', '\n'}}, true); }

}  // namespace nanovllm::structured::chars
