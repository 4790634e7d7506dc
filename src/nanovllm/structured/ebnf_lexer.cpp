// EBNF text -> tokens (ebnf_lexer.h). Whitespace (space, tab, CR, LF) separates tokens; `#` starts
// a comment that runs to the end of the line (outside literals and classes).
//
// Escapes, in literals and classes: \n \t \r \\ \" \' \a \b \f \v \0 \e \/ \? , \xHH (exactly two
// hex digits, as GBNF: xgrammar reads \x greedily, so "\x41B" is "AB" here and U+041B there),
// \uHHHH and \UHHHHHHHH. Inside a class also the escaped metacharacters \^ \$ \. \* \+ \? \( \) \[
// \] \{ \} \| \- , and the shorthands \d \w \s \D \W \S (as regex_chars.h; xgrammar refuses them).
#include "nanovllm/structured/ebnf_lexer.h"

#include <cstring>

#include "nanovllm/structured/regex_chars.h"

namespace nanovllm::structured::ebnf {

void fail_at(int line, int column, const std::string& what) {
  throw GrammarError("ebnf at " + std::to_string(line) + ":" + std::to_string(column) + ": " + what);
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::Name: return "name '" + t.text + "'";
    case Tok::Literal: return "a string literal";
    case Tok::Class: return "a character class";
    case Tok::End: return "the end of the grammar";
    default: return "'" + t.text + "'";
  }
}

namespace {

bool is_name_char(char c) {
  return c == '_' || c == '-' || c == '.' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// One escape's meaning: a code point, or (in a class) a shorthand's set.
struct Escaped {
  uint32_t cp = 0;
  std::vector<CharRange> set;
};

class Lexer {
 public:
  explicit Lexer(std::string_view s) : s_(s) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    for (;;) {
      skip_space();
      Token t;
      t.line = line_;
      t.column = column();
      if (i_ >= s_.size()) {
        out.push_back(std::move(t));
        return out;
      }
      lex_one(t);
      out.push_back(std::move(t));
    }
  }

 private:
  int column() const { return int(i_ - line_start_) + 1; }
  [[noreturn]] void fail(const std::string& what) const { fail_at(line_, column(), what); }
  char peek(size_t k = 0) const { return i_ + k < s_.size() ? s_[i_ + k] : '\0'; }
  bool at_end() const { return i_ >= s_.size(); }

  void newline() {
    ++line_;
    line_start_ = i_;
  }

  void skip_space() {
    while (!at_end()) {
      const char c = peek();
      if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++i_;
      } else if (c == '\n' || c == '\r') {
        ++i_;
        if (c == '\r' && peek() == '\n') ++i_;
        newline();
      } else if (c == ' ' || c == '\t') {
        ++i_;
      } else {
        return;
      }
    }
  }

  void lex_one(Token& t) {
    static constexpr struct {
      const char* text;
      Tok kind;
    } kPunct[] = {{"::=", Tok::Assign}, {"(=", Tok::LookParen}, {"(", Tok::LParen}, {")", Tok::RParen},
                  {"|", Tok::Pipe},     {"*", Tok::Star},       {"+", Tok::Plus},   {"?", Tok::Question},
                  {"{", Tok::LBrace},   {"}", Tok::RBrace},     {",", Tok::Comma}};
    for (const auto& p : kPunct) {
      const size_t n = std::strlen(p.text);
      if (s_.substr(i_, n) == p.text) {
        t.kind = p.kind;
        t.text = p.text;
        i_ += n;
        return;
      }
    }
    const char c = peek();
    if (c == '"' || c == '\'') return lex_literal(t);
    if (c == '[') return lex_class(t);
    if (is_name_char(c)) {
      const size_t from = i_;
      while (is_name_char(peek())) ++i_;
      t.kind = Tok::Name;
      t.text = std::string(s_.substr(from, i_ - from));
      return;
    }
    uint32_t cp = 0;
    if (chars::decode_utf8(s_, i_, cp) == 0) fail("the text is not valid UTF-8");
    fail("unexpected character " + chars::code_point_name(cp) +
         (cp >= 0x21 && cp < 0x7F ? " '" + std::string(1, c) + "'" : ""));
  }

  // The next code point of a literal or class, raw (UTF-8) or escaped; `in_class` allows the class
  // escapes. Leaves i_ after it.
  Escaped next_char(bool in_class) {
    const char c = peek();
    if (c == '\n' || c == '\r')
      fail(in_class ? "a newline inside a character class" : "a newline inside a string literal");
    if (c != '\\') {
      uint32_t cp = 0;
      const size_t n = chars::decode_utf8(s_, i_, cp);
      if (n == 0) fail("the text is not valid UTF-8");
      i_ += n;
      return {cp, {}};
    }
    const int col = column();
    const char e = peek(1);
    i_ += 2;
    static constexpr const char* kSimple = "n\nt\tr\r\\\\\"\"''a\ab\bf\fv\vee//??";
    for (const char* p = kSimple; *p; p += 2)
      if (*p == e) return {uint32_t(e == 'e' ? 0x1B : uint8_t(p[1])), {}};
    if (e == '0') return {0, {}};
    if (e == 'x' || e == 'u' || e == 'U') return {read_hex(e == 'x' ? 2 : e == 'u' ? 4 : 8, col, in_class), {}};
    if (in_class) {
      if (std::strchr("^$.*+?()[]{}|-", e) && e != '\0') return {uint32_t(e), {}};
      if (auto set = chars::shorthand_ranges(e); !set.empty()) return {0, std::move(set)};
    }
    fail_at(line_, col,
            e == '\0' ? "a backslash at the end of the text" : "unknown escape '\\" + std::string(1, e) + "'");
  }

  uint32_t read_hex(int digits, int col, bool in_class) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k, ++i_) {
      const int h = chars::hex_value(peek());
      if (h < 0) fail_at(line_, col, "the escape needs " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(h);
    }
    if (v > kMaxCodePoint) fail_at(line_, col, "escape past U+10FFFF");
    if (!in_class && chars::is_surrogate(v))
      fail_at(line_, col, "escape of the surrogate " + chars::code_point_name(v) + ", which UTF-8 cannot encode");
    return v;
  }

  void lex_literal(Token& t) {
    const char quote = peek();
    ++i_;
    t.kind = Tok::Literal;
    while (peek() != quote) {
      if (at_end()) fail_at(t.line, t.column, "unterminated string literal");
      chars::append_utf8(t.text, next_char(false).cp);
    }
    ++i_;
  }

  void lex_class(Token& t) {
    ++i_;
    t.kind = Tok::Class;
    if (peek() == '^') t.negated = true, ++i_;
    while (peek() != ']') {
      if (at_end()) fail_at(t.line, t.column, "unterminated character class");
      const int col = column();
      Escaped lo = next_char(true);
      if (peek() == '-' && peek(1) != ']' && i_ + 1 < s_.size()) {
        ++i_;
        Escaped hi = next_char(true);
        if (!lo.set.empty() || !hi.set.empty()) fail_at(line_, col, "a shorthand class cannot be a range end");
        if (lo.cp > hi.cp) fail_at(line_, col, "range start is after its end");
        t.ranges.push_back({lo.cp, hi.cp});
      } else if (!lo.set.empty()) {
        t.ranges.insert(t.ranges.end(), lo.set.begin(), lo.set.end());
      } else {
        t.ranges.push_back({lo.cp, lo.cp});
      }
    }
    ++i_;
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  size_t line_start_ = 0;
};

}  // namespace

std::vector<Token> tokenize(std::string_view text) { return Lexer(text).run(); }

}  // namespace nanovllm::structured::ebnf
