// UTF-8 validation and lossy decoding (Unicode Table 3-7: well-formed byte sequences).
#include "nanovllm/tokenizer/utf8.h"

namespace nanovllm::utf8 {
namespace {

// Valid range for the second byte, given the lead byte (Table 3-7); {0,0} for invalid leads.
struct Range {
  uint8_t lo, hi;
};
Range second_byte_range(uint8_t lead) {
  if (lead >= 0xC2 && lead <= 0xDF) return {0x80, 0xBF};
  if (lead == 0xE0) return {0xA0, 0xBF};
  if ((lead >= 0xE1 && lead <= 0xEC) || lead == 0xEE || lead == 0xEF) return {0x80, 0xBF};
  if (lead == 0xED) return {0x80, 0x9F};  // no surrogates
  if (lead == 0xF0) return {0x90, 0xBF};
  if (lead >= 0xF1 && lead <= 0xF3) return {0x80, 0xBF};
  if (lead == 0xF4) return {0x80, 0x8F};  // <= U+10FFFF
  return {0, 0};
}

size_t expected_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xC2) return 0;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  if (lead < 0xF5) return 4;
  return 0;
}

// Length of the maximal prefix of a well-formed sequence at s[i] (>= 1 when s[i] is a valid
// lead byte), and whether it is complete.
size_t valid_prefix(std::string_view s, size_t i, bool* complete) {
  const auto lead = static_cast<uint8_t>(s[i]);
  const size_t need = expected_length(lead);
  *complete = false;
  if (need == 0) return 0;
  if (need == 1) {
    *complete = true;
    return 1;
  }
  size_t n = 1;
  const Range r = second_byte_range(lead);
  while (n < need && i + n < s.size()) {
    const auto b = static_cast<uint8_t>(s[i + n]);
    const bool ok = n == 1 ? (b >= r.lo && b <= r.hi) : (b >= 0x80 && b <= 0xBF);
    if (!ok) return n;
    ++n;
  }
  *complete = n == need;
  return n;
}

}  // namespace

size_t sequence_length(std::string_view s, size_t i) {
  bool complete = false;
  const size_t n = valid_prefix(s, i, &complete);
  return complete ? n : 0;
}

size_t find_invalid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= s.size()) {
      uint64_t w = 0;
      for (int k = 0; k < 8; ++k) w |= static_cast<uint64_t>(static_cast<uint8_t>(s[i + k])) << (8 * k);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= s.size()) break;
    const size_t n = sequence_length(s, i);
    if (n == 0) return i;
    i += n;
  }
  return kValid;
}

void append_lossy(std::string_view bytes, std::string& out) {
  size_t i = 0, run = 0;  // [run, i) is a well-formed stretch not yet copied
  while (i < bytes.size()) {
    if (static_cast<uint8_t>(bytes[i]) < 0x80) {
      ++i;
      continue;
    }
    bool complete = false;
    const size_t n = valid_prefix(bytes, i, &complete);
    if (complete) {
      i += n;
      continue;
    }
    out.append(bytes.substr(run, i - run));
    out.append(kReplacement);
    i += n == 0 ? 1 : n;  // a maximal subpart is replaced by a single U+FFFD
    run = i;
  }
  out.append(bytes.substr(run));
}

void append_code_point(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t incomplete_tail(std::string_view s) {
  // A sequence is at most 4 bytes: look for its lead among the last 3 bytes.
  const size_t lo = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = s.size(); i-- > lo;) {
    const auto b = static_cast<uint8_t>(s[i]);
    if ((b & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
    bool complete = false;
    const size_t n = valid_prefix(s, i, &complete);
    return (!complete && n == s.size() - i) ? n : 0;
  }
  return 0;
}

}  // namespace nanovllm::utf8
