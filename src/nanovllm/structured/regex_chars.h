// Code-point helpers shared by the two text front ends that read patterns and grammars (regex.cpp,
// ebnf.cpp): UTF-8 decoding with a clear failure, UTF-8 encoding, hex digits, and the code point
// sets of the shorthand classes \d \w \s (and their negations) as both front ends define them.
//
// The shorthand sets follow ECMAScript (what JSON Schema's `pattern` is defined by, and what our
// regex oracle runs): \d = [0-9], \w = [A-Za-z0-9_] (ASCII only, as xgrammar and JavaScript; Python's
// str patterns also admit Unicode digits and letters), \s = ECMAScript's WhiteSpace and
// LineTerminator code points.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured::chars {

inline constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

inline bool is_surrogate(uint32_t c) { return c >= kSurrogateLo && c <= kSurrogateHi; }

// Decodes the code point at s[i]; returns its length in bytes, or 0 when the bytes there are not
// well-formed UTF-8 (overlong forms, surrogates and values past U+10FFFF are not well formed).
size_t decode_utf8(std::string_view s, size_t i, uint32_t& cp);

// Appends the UTF-8 encoding of `cp` (which must be a valid scalar value).
void append_utf8(std::string& out, uint32_t cp);

// The value of a hex digit, or -1.
int hex_value(char c);

// "U+00E9"-style name of a code point, for error messages.
std::string code_point_name(uint32_t cp);

// The ranges of \d, \w, \s, \D, \W, \S for the letter after the backslash; empty when `letter` is
// not one of those six.
std::vector<CharRange> shorthand_ranges(char letter);

// The code points of the regex `.`: everything but \n.
std::vector<CharRange> dot_ranges();

}  // namespace nanovllm::structured::chars
