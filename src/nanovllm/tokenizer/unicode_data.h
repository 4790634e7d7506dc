// Unicode tables that the tokenizer shares with Hugging Face tokenizers, whose regexes (Oniguruma)
// and normalizers each follow their own Unicode version, neither of them the one of our PCRE2 or
// utf8proc. unicode_data.cpp is generated from the oracle itself by scripts/gen_unicode_tables.mjs.
#pragma once
#include <algorithm>
#include <cstdint>
#include <span>

namespace nanovllm::unicode {

// General categories, in the order of the generated table (bit i of a mask is category i).
enum Category : uint8_t {
  Lu,
  Ll,
  Lt,
  Lm,
  Lo,
  Mn,
  Mc,
  Me,
  Nd,
  Nl,
  No,
  Pc,
  Pd,
  Ps,
  Pe,
  Pi,
  Pf,
  Po,
  Sm,
  Sc,
  Sk,
  So,
  Zs,
  Zl,
  Zp,
  Cc,
  Cf,
  Cs,
  Co,
  Cn,
  kNumCategories
};

// Code points [first, next run's first) have `category`; the runs cover 0..0x10FFFF in order.
struct CategoryRun {
  uint32_t first;
  Category category;
};

struct Range {  // inclusive
  uint32_t first, last;
};

// What an escape such as \w matches: the categories in the mask plus the extra code points.
struct EscapeSet {
  uint32_t categories;
  std::span<const Range> extra;  // sorted, disjoint
};

const char* oracle_version();                  // where the tables come from
std::span<const CategoryRun> category_runs();  // as the oracle's regexes see them
const EscapeSet* escape_set(char letter);      // 's', 'w', 'd', 'h', 'v'; null for others
// Code points that the oracle's normalizers treat as unassigned (no decomposition, combining
// class 0, no composition) although newer Unicode versions do not.
std::span<const Range> normalization_inert();

// Whether `cp` lies in one of the sorted, disjoint `ranges`.
inline bool contains(std::span<const Range> ranges, uint32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp, [](uint32_t c, const Range& r) { return c < r.first; });
  return it != ranges.begin() && cp <= (it - 1)->last;
}

}  // namespace nanovllm::unicode
