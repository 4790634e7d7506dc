// Translates a tokenizer.json regex, written for Hugging Face tokenizers (Oniguruma, Ruby syntax),
// into PCRE2 patterns that match what Oniguruma matches, where the two read escapes differently:
//   \s \S  Unicode White_Space (PCRE2 adds U+180E and other "horizontal space")
//   \w \W  letters, marks, decimal and letter numbers, connector punctuation, plus what
//          Oniguruma adds (²³¹¼½¾, circled letters)
//   \d \D  decimal numbers (Nd)            \h \H  hex digits (PCRE2: horizontal space)
//   \v \V  U+000B only (PCRE2: vertical space)
//   \p{..} \P{..} \p{^..}  general categories by Hugging Face's tables (see regex_unicode.h);
//          scripts and other properties stay PCRE2's
//   \uHHHH  a code point (PCRE2 has no \u)      \Q \E  the letters (no quoting in Ruby syntax)
// Known gaps: case-insensitive matching of properties inside a class ((?i)[\p{Lu}]: Oniguruma
// folds, PCRE2 does not), POSIX classes such as [[:alpha:]], \b and \B (PCRE2's word characters).
#pragma once
#include <string>

namespace nanovllm {

struct Pcre2Patterns {
  std::string fast;   // with PCRE2's category properties: right unless the text has a character
                      // whose category PCRE2 sees differently (regex_unicode::pcre2_agrees)
  std::string exact;  // right for every text; equals `fast` when the two tables agree
};

Pcre2Patterns to_pcre2(const std::string& pattern);

}  // namespace nanovllm
