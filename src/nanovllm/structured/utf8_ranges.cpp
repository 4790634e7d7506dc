// Splitting of code point ranges into UTF-8 byte-range sequences (utf8_ranges.h). A range is cut
// where the encoded length changes (7F/7FF/FFFF), then recursively where a continuation byte
// would not cover its whole 80-BF span, until every piece is a product of byte ranges.
#include "nanovllm/structured/utf8_ranges.h"

namespace nanovllm::structured {

namespace {

int encode(uint32_t c, uint8_t* out) {
  if (c < 0x80) return out[0] = uint8_t(c), 1;
  if (c < 0x800) {
    out[0] = uint8_t(0xC0 | (c >> 6));
    out[1] = uint8_t(0x80 | (c & 0x3F));
    return 2;
  }
  if (c < 0x10000) {
    out[0] = uint8_t(0xE0 | (c >> 12));
    out[1] = uint8_t(0x80 | ((c >> 6) & 0x3F));
    out[2] = uint8_t(0x80 | (c & 0x3F));
    return 3;
  }
  out[0] = uint8_t(0xF0 | (c >> 18));
  out[1] = uint8_t(0x80 | ((c >> 12) & 0x3F));
  out[2] = uint8_t(0x80 | ((c >> 6) & 0x3F));
  out[3] = uint8_t(0x80 | (c & 0x3F));
  return 4;
}

void split(uint32_t lo, uint32_t hi, std::vector<ByteSequence>& out) {
  // Cut at the encoded-length boundaries.
  static constexpr uint32_t kMax[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (uint32_t m : kMax) {
    if (lo <= m && hi > m) {
      split(lo, m, out);
      split(m + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push_back({{uint8_t(lo), uint8_t(hi)}});
    return;
  }
  // Cut so that the low 6*i bits of lo are all 0 and of hi all 1 (whole continuation spans).
  for (int i = 1; i < 4; ++i) {
    uint32_t mask = (1u << (6 * i)) - 1;
    if ((lo & ~mask) != (hi & ~mask)) {
      if ((lo & mask) != 0) {
        split(lo, lo | mask, out);
        split((lo | mask) + 1, hi, out);
        return;
      }
      if ((hi & mask) != mask) {
        split(lo, (hi & ~mask) - 1, out);
        split(hi & ~mask, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  int n = encode(lo, a);
  encode(hi, b);
  ByteSequence seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(seq);
}

}  // namespace

std::vector<ByteSequence> utf8_sequences(const std::vector<CharRange>& ranges) {
  std::vector<ByteSequence> out;
  for (const CharRange& r : ranges) split(r.lo, r.hi, out);
  return out;
}

}  // namespace nanovllm::structured
