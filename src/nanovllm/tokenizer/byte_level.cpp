// GPT-2 bytes_to_unicode: printable Latin-1 bytes map to themselves, the 68 others (controls,
// space, DEL, NBSP, soft hyphen...) to U+0100.. in byte order.
#include "nanovllm/tokenizer/byte_level.h"

#include "nanovllm/tokenizer/utf8.h"

namespace nanovllm {

ByteLevelTable::ByteLevelTable() {
  char_to_byte_.fill(-1);
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
    const uint32_t c = printable ? static_cast<uint32_t>(b) : next++;
    byte_to_char_[b] = c;
    char_to_byte_[c] = static_cast<int16_t>(b);
  }
}

std::optional<std::string> ByteLevelTable::to_bytes(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = utf8::sequence_length(text, i);
    if (n == 0 || n > 2) return std::nullopt;  // mapped code points need at most 2 bytes
    uint32_t cp = static_cast<uint8_t>(text[i]);
    if (n == 2) cp = ((cp & 0x1F) << 6) | (static_cast<uint8_t>(text[i + 1]) & 0x3F);
    if (cp >= char_to_byte_.size() || char_to_byte_[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(char_to_byte_[cp]));
    i += n;
  }
  return out;
}

std::string ByteLevelTable::to_text(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) utf8::append_code_point(byte_to_char_[static_cast<uint8_t>(c)], out);
  return out;
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table;  // immutable after construction (thread-safe static init)
  return table;
}

}  // namespace nanovllm
