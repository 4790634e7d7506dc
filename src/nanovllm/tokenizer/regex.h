// A compiled PCRE2 pattern (UTF + Unicode properties, JIT when available) that many threads can
// use at once; per-call state lives in RegexScratch.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace nanovllm {

class Regex;

// Per-thread match state (PCRE2 match data and, when a match needs it, a larger JIT stack).
class RegexScratch {
 public:
  RegexScratch();
  ~RegexScratch();
  RegexScratch(const RegexScratch&) = delete;
  RegexScratch& operator=(const RegexScratch&) = delete;
 private:
  friend class Regex;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Regex {
 public:
  // Throws TokenizerError naming the pattern and PCRE2's message.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Finds the first non-empty match in text[from..]; returns false when there is none.
  // `text` must be valid UTF-8 (it is not re-checked).
  bool find(std::string_view text, size_t from, RegexScratch& scratch, size_t* begin,
            size_t* end) const;

  // Escapes a literal string for use inside a pattern.
  static std::string quote(std::string_view literal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
