// Character classes for the tokenizer regexes, as Hugging Face tokenizers (Oniguruma, Unicode 16
// with tokenizers 0.23) understands them, written for PCRE2, whose own tables may follow another
// Unicode version (PCRE2 10.42: Unicode 14).
//
// A class written with PCRE2's properties (\p{L}) is fast and right for every character whose
// general category PCRE2 sees as Hugging Face does: the "fast" form. For the few where they
// differ (letters new in Unicode 15 and 16, for instance), the "exact" form adds or spells out
// the code points from our generated tables (unicode_data.h). Which characters differ is found
// once per process by asking PCRE2 (a scan of every code point, a few tens of milliseconds).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/tokenizer/unicode_data.h"

namespace nanovllm::regex_unicode {

// Code points: the general categories of `categories` (a mask) and the `extra` ranges.
struct CharSet {
  uint32_t categories = 0;
  std::vector<unicode::Range> extra;  // sorted, disjoint
};

// The category mask of a property name as Oniguruma spells it (\p{L}, \p{Lu}, \p{Letter},
// \p{Uppercase_Letter}, \p{L&}; case, spaces, '-' and '_' ignored); 0 for other names (scripts,
// binary properties), which stay PCRE2's.
uint32_t category_mask(std::string_view name);

// The inside of a bracketed class (no brackets) matching `set` in the fast or the exact form.
std::string class_items(const CharSet& set, bool exact);
// The inside of a bracketed class matching every code point outside `set` (always exact).
std::string complement_items(const CharSet& set);
// "\p{Xx}" when `set` is one category or one whole group such as L, else empty.
std::string single_property(const CharSet& set);

// Whether PCRE2 sees the general category of every character of the valid UTF-8 `text` as
// Hugging Face does, so that the fast form matches it exactly.
bool pcre2_agrees(std::string_view text);

}  // namespace nanovllm::regex_unicode
