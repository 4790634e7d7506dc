// GPT-2 byte-level mapping: every byte is shown as a printable code point so that BPE vocabularies
// can be stored as text ("Ġthe" is " the"). We run BPE directly on raw bytes, so this table is only
// needed to translate vocabulary strings at load time and for token_to_id lookups.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nanovllm {

class ByteLevelTable {
 public:
  ByteLevelTable();
  // Code point that shows byte b.
  uint32_t to_char(uint8_t b) const { return byte_to_char_[b]; }
  // Raw bytes of a byte-level string, or nullopt if a character is not one of the 256 mapped ones.
  std::optional<std::string> to_bytes(std::string_view text) const;
  // Byte-level string of raw bytes (inverse of to_bytes).
  std::string to_text(std::string_view bytes) const;

 private:
  std::array<uint32_t, 256> byte_to_char_{};
  std::array<int16_t, 324> char_to_byte_{};  // mapped code points are all < 324
};

// The one shared, immutable table.
const ByteLevelTable& byte_level_table();

}  // namespace nanovllm
