// A single pass over the pattern that knows just enough syntax to find escapes and character
// classes: \cX, POSIX [:name:] and a ']' right after '[' or '[^' are copied untouched.
#include "nanovllm/tokenizer/regex_rewrite.h"

#include <algorithm>
#include <cstring>

#include "nanovllm/tokenizer/regex_unicode.h"

namespace nanovllm {
namespace {

using regex_unicode::CharSet;

bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

class Rewriter {
 public:
  explicit Rewriter(const std::string& pattern) : p_(pattern) {}

  Pcre2Patterns run() {
    for (i_ = 0; i_ < p_.size(); ++i_) {
      const char c = p_[i_];
      if (c == '\\' && i_ + 1 < p_.size()) {
        escape();
      } else if (c == '[' && in_class_) {
        const size_t close = p_.compare(i_, 2, "[:") == 0 ? p_.find(":]", i_ + 2) : std::string::npos;
        copy(close == std::string::npos ? 1 : close + 2 - i_);
      } else if (c == '[') {
        in_class_ = true;
        size_t n = 1;
        if (i_ + n < p_.size() && p_[i_ + n] == '^') ++n;
        if (i_ + n < p_.size() && p_[i_ + n] == ']') ++n;  // a literal ']'
        copy(n);
      } else {
        if (c == ']') in_class_ = false;
        copy(1);
      }
    }
    return std::move(out_);
  }

 private:
  // Copies p_[i_, i_ + n) to both patterns and leaves i_ on the last character copied.
  void copy(size_t n) {
    n = std::min(n, p_.size() - i_);
    if (n == 0) return;
    out_.fast.append(p_, i_, n);
    out_.exact.append(p_, i_, n);
    i_ += n - 1;
  }
  void both(const std::string& s) {
    out_.fast += s;
    out_.exact += s;
  }

  void escape() {
    const char e = p_[i_ + 1];
    if (e == 'Q' || e == 'E') {  // no quoting in Oniguruma's Ruby syntax: the letter itself
      both(std::string(1, e));
      ++i_;
    } else if (e == 'p' || e == 'P') {
      property(e == 'P');
    } else if (std::strchr("sSwWdDhHvV", e)) {
      const char lower = static_cast<char>(e | 0x20);
      const unicode::EscapeSet* es = unicode::escape_set(lower);
      emit(CharSet{es->categories, {es->extra.begin(), es->extra.end()}}, e != lower);
      ++i_;
    } else if (e == 'u' && i_ + 5 < p_.size() && is_hex(p_[i_ + 2]) && is_hex(p_[i_ + 3]) && is_hex(p_[i_ + 4]) &&
               is_hex(p_[i_ + 5])) {
      both("\\x{" + p_.substr(i_ + 2, 4) + "}");
      i_ += 5;
    } else if (e == 'c') {  // \cX: X is taken as is, even a backslash
      copy(3);
    } else {
      copy(2);
    }
  }

  // \p{Name}, \p{^Name}, \pN and the \P forms.
  void property(bool negate) {
    if (i_ + 2 >= p_.size()) return copy(2);
    std::string name;
    size_t next = i_ + 3;  // just past the escape
    if (p_[i_ + 2] == '{') {
      const size_t close = p_.find('}', i_ + 3);
      if (close == std::string::npos) return copy(std::string::npos);  // PCRE2 reports the error
      name = p_.substr(i_ + 3, close - i_ - 3);
      next = close + 1;
    } else {
      name = p_.substr(i_ + 2, 1);
    }
    if (!name.empty() && name[0] == '^') {
      negate = !negate;
      name.erase(0, 1);
    }
    const uint32_t mask = regex_unicode::category_mask(name);
    if (!mask) return copy(next - i_);  // a script or another property: PCRE2's own
    emit(CharSet{mask, {}}, negate);
    i_ = next - 1;
  }

  void emit(const CharSet& set, bool negate) {
    if (in_class_) {
      if (negate) return both(regex_unicode::complement_items(set));
      out_.fast += regex_unicode::class_items(set, false);
      out_.exact += regex_unicode::class_items(set, true);
      return;
    }
    const std::string open = negate ? "[^" : "[";
    const std::string fast = regex_unicode::class_items(set, false), exact = regex_unicode::class_items(set, true);
    std::string single = regex_unicode::single_property(set);
    if (!single.empty() && negate) single[1] = 'P';
    out_.fast += single.empty() ? open + fast + "]" : single;
    out_.exact += single.empty() || exact != fast ? open + exact + "]" : single;
  }

  const std::string& p_;
  size_t i_ = 0;
  bool in_class_ = false;
  Pcre2Patterns out_;
};

}  // namespace

Pcre2Patterns to_pcre2(const std::string& pattern) { return Rewriter(pattern).run(); }

}  // namespace nanovllm
