// A compiled tokenizer.json regex (PCRE2: UTF + Unicode properties, JIT when available) that many
// threads can use at once; per-call state lives in RegexScratch. Patterns are read as Hugging Face
// tokenizers reads them (regex_rewrite.h): each compiles into a fast form on PCRE2's Unicode
// tables and, where those differ from Hugging Face's, an exact form.
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
  // `text` must be valid UTF-8 (it is not re-checked). `fast_ok`: the caller has checked with
  // fast_ok_for() that the whole text being split allows the fast form (false is always right).
  bool find(std::string_view text, size_t from, RegexScratch& scratch, size_t* begin, size_t* end,
            bool fast_ok = false) const;

  // Whether the fast form matches `text` (and any part of it) exactly as the exact one does.
  static bool fast_ok_for(std::string_view text);

  // Escapes a literal string for use inside a pattern.
  static std::string quote(std::string_view literal);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nanovllm
