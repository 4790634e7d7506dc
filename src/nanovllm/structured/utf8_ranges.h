// Code point ranges -> the UTF-8 byte sequences that encode them, as sequences of byte ranges
// (RE2's and Rust regex-syntax's utf8 sequences): [U+0000, U+10FFFF] minus surrogates becomes
//   [00-7F] | [C2-DF][80-BF] | E0[A0-BF][80-BF] | [E1-EC][80-BF][80-BF] | ED[80-9F][80-BF] | ...
// so a character class turns into a handful of byte-range paths in a byte automaton.
#pragma once
#include <cstdint>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

struct ByteRange {
  uint8_t lo = 0, hi = 0;
  bool operator==(const ByteRange&) const = default;
};

// One alternative: a byte sequence whose i-th byte lies in seq[i] (1 to 4 ranges).
using ByteSequence = std::vector<ByteRange>;

// The alternatives matching exactly the UTF-8 encodings of the code points in `ranges` (sorted,
// disjoint, no surrogates: normalize_ranges' output). Their languages are disjoint.
std::vector<ByteSequence> utf8_sequences(const std::vector<CharRange>& ranges);

}  // namespace nanovllm::structured
