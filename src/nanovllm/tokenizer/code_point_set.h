// A set of code points given as sorted ranges, with a bitmap of 256-code-point blocks in front so
// that the usual answer ("not in the set": text outside the few blocks concerned) costs one bit
// test. Used to find the rare characters on which our Unicode libraries and Hugging Face differ.
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "nanovllm/tokenizer/unicode_data.h"

namespace nanovllm::unicode {

class CodePointSet {
 public:
  explicit CodePointSet(std::vector<Range> ranges) : ranges_(std::move(ranges)) {
    for (const Range& r : ranges_) {
      for (uint32_t block = r.first >> 8; block <= (r.last >> 8); ++block)
        blocks_[block >> 6] |= uint64_t{1} << (block & 63);
      // The UTF-8 lead bytes of the range: each covers 1, 64, 4096 or 262144 code points.
      for (uint32_t cp = r.first; cp <= r.last;) {
        const uint32_t span = cp < 0x80 ? 1 : cp < 0x800 ? 64 : cp < 0x10000 ? 4096 : 262144;
        lead_[cp < 0x80      ? cp
              : cp < 0x800   ? 0xC0 | (cp >> 6)
              : cp < 0x10000 ? 0xE0 | (cp >> 12)
                             : 0xF0 | (cp >> 18)] = true;
        cp = (cp | (span - 1)) + 1;
      }
    }
  }

  bool contains(uint32_t cp) const {
    return cp <= 0x10FFFF && ((blocks_[cp >> 14] >> ((cp >> 8) & 63)) & 1) && unicode::contains(ranges_, cp);
  }

  // Byte offset of the first member in valid UTF-8 `text` from `from` on (a character boundary),
  // or text.size() when there is none; *length gets its byte length. Characters whose lead byte
  // no member shares (most of CJK, say) are skipped without decoding them.
  size_t find(std::string_view text, size_t from = 0, size_t* length = nullptr) const {
    const auto* p = reinterpret_cast<const unsigned char*>(text.data());
    for (size_t i = from; i < text.size();) {
      const size_t n = p[i] < 0x80 ? 1 : p[i] >= 0xF0 ? 4 : p[i] >= 0xE0 ? 3 : 2;
      if (lead_[p[i]]) {
        uint32_t cp = n == 1 ? p[i] : p[i] & (0x7F >> n);
        for (size_t k = 1; k < n && i + k < text.size(); ++k) cp = (cp << 6) | (p[i + k] & 0x3F);
        if (contains(cp)) {
          if (length) *length = n;
          return i;
        }
      }
      i += n;
    }
    return text.size();
  }

  bool empty() const { return ranges_.empty(); }

 private:
  std::vector<Range> ranges_;
  std::array<uint64_t, 0x110000 / 256 / 64> blocks_{};  // bit per 256-code-point block
  std::array<bool, 256> lead_{};                        // UTF-8 lead bytes of members
};

}  // namespace nanovllm::unicode
