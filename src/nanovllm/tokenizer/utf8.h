// UTF-8 helpers for the tokenizer: strict validation (to report the first bad byte offset) and
// lossy decoding of arbitrary bytes (what a byte-level BPE decode produces) into valid UTF-8.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nanovllm::utf8 {

inline constexpr size_t kValid = static_cast<size_t>(-1);
inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Byte offset of the first byte that does not start a well-formed UTF-8 sequence (overlongs,
// surrogates, > U+10FFFF and truncated sequences included), or kValid when all is well-formed.
size_t find_invalid(std::string_view s);

// Length of the well-formed sequence starting at s[i], or 0 when it is ill-formed there.
size_t sequence_length(std::string_view s, size_t i);

// Appends `bytes` to `out`, replacing each maximal ill-formed subpart by one U+FFFD (the
// Unicode "maximal subpart" practice, as Rust's String::from_utf8_lossy and Python do).
void append_lossy(std::string_view bytes, std::string& out);

// Encodes one code point (assumed valid) as UTF-8.
void append_code_point(uint32_t cp, std::string& out);

// Number of bytes at the end of `s` that form an incomplete (but so far valid) sequence prefix;
// 0 when `s` ends on a character boundary.
size_t incomplete_tail(std::string_view s);

}  // namespace nanovllm::utf8
