// Regex syntax -> syntax tree (regex_parser.h). The accepted syntax is what vLLM users send: the
// common subset of Python `re` and ECMAScript, matched against the whole output.
//
// Where the two dialects read the same text differently we either take Python's reading (a `{`
// that does not start a valid quantifier is a literal, `{,m}` means {0,m}, `}` and `]` alone are
// literals, \A and \Z are anchors) or refuse it with an explanation (`[]...` / `[^]...`). Constructs
// that a grammar cannot express, or that would silently change the language, are refused with the
// construct and its offset: backreferences, lookaround, word boundaries, inline flags,
// conditionals, atomic groups and possessive quantifiers (`a*+a` matches nothing in a backtracking
// engine, while a grammar would match "aa"), Unicode property escapes, `^`/`$` anywhere but at the
// ends. Lazy quantifiers are accepted: for a whole-string match they admit the same strings.
#include "nanovllm/structured/regex_parser.h"

#include <cctype>
#include <cstdint>
#include <string>

#include "nanovllm/structured/regex_chars.h"

namespace nanovllm::structured::regex {
namespace {

constexpr uint32_t kEnd = 0xFFFFFFFF;  // past the last code point

// One escape's meaning: a single code point or a set of them.
struct Escape {
  bool is_set = false;
  uint32_t cp = 0;
  std::vector<CharRange> set;
};

// What a parsed piece tells the enclosing sequence about anchors.
struct Anchors {
  bool any = false;    // contains ^ or $ somewhere
  bool ended = false;  // some path through it ends with $: nothing may follow it
  size_t end_offset = 0;
};

class Parser {
 public:
  Parser(std::string_view pattern, const ParseLimits& limits) : src_(pattern), limits_(limits) {
    for (size_t i = 0; i < pattern.size();) {
      uint32_t cp = 0;
      size_t n = chars::decode_utf8(pattern, i, cp);
      if (n == 0) fail_at_byte(i, "the pattern is not valid UTF-8");
      cps_.push_back(cp);
      offs_.push_back(i);
      i += n;
    }
    offs_.push_back(pattern.size());
  }

  Node parse_all() {
    Anchors a;
    Node n = parse_alt(true, a);
    if (peek() == ')') fail(i_, "unbalanced ')': no group is open");
    return n;
  }

 private:
  [[noreturn]] void fail_at_byte(size_t byte, const std::string& what) const {
    throw GrammarError("regex at offset " + std::to_string(byte) + ": " + what);
  }
  [[noreturn]] void fail(size_t i, const std::string& what) const { fail_at_byte(offs_[i], what); }

  uint32_t peek(size_t k = 0) const { return i_ + k < cps_.size() ? cps_[i_ + k] : kEnd; }
  bool eat(uint32_t c) {
    if (peek() != c) return false;
    ++i_;
    return true;
  }
  std::string text(size_t from, size_t to) const {
    return std::string(src_.substr(offs_[from], offs_[std::min(to, cps_.size())] - offs_[from]));
  }

  Node parse_alt(bool at_start, Anchors& anchors) {
    Node alt;
    alt.kind = NodeKind::Alt;
    alt.offset = offs_[i_];
    for (;;) {
      Anchors a;
      alt.kids.push_back(parse_seq(at_start, a));
      anchors.any |= a.any;
      if (a.ended && !anchors.ended) anchors.ended = true, anchors.end_offset = a.end_offset;
      if (!eat('|')) break;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Node parse_seq(bool at_start, Anchors& anchors) {
    Node seq;
    seq.kind = NodeKind::Seq;
    seq.offset = offs_[i_];
    bool can_start = at_start;
    while (peek() != kEnd && peek() != '|' && peek() != ')') {
      const size_t at = i_;
      const bool start_anchor = peek() == '^' || (peek() == '\\' && peek(1) == 'A');
      const bool end_anchor = peek() == '$' || (peek() == '\\' && peek(1) == 'Z');
      if (start_anchor || end_anchor) {
        i_ += peek() == '\\' ? 2 : 1;
        if (start_anchor && !can_start)
          fail(at, "'" + text(at, i_) + "' (start anchor) is only accepted at the start of the pattern");
        if (end_anchor && !anchors.ended) anchors.ended = true, anchors.end_offset = offs_[at];
        anchors.any = true;
        if (quantifier_follows()) fail(i_, "nothing to repeat: a quantifier after the anchor '" + text(at, i_) + "'");
        continue;
      }
      if (anchors.ended)
        fail_at_byte(anchors.end_offset, "'$' (end anchor) is only accepted at the end of the pattern");
      Anchors a;
      Node atom = parse_atom(can_start, a);
      atom = parse_quantifier(std::move(atom), a, at);
      can_start = false;
      anchors.any |= a.any;
      if (a.ended) anchors.ended = true, anchors.end_offset = a.end_offset;
      if (atom.kind == NodeKind::Empty) continue;
      if (atom.kind == NodeKind::Chars && !seq.kids.empty() && seq.kids.back().kind == NodeKind::Chars)
        seq.kids.back().chars.insert(seq.kids.back().chars.end(), atom.chars.begin(), atom.chars.end());
      else
        seq.kids.push_back(std::move(atom));
    }
    if (seq.kids.empty()) return Node{NodeKind::Empty, seq.offset, {}, {}, {}, 0, 0};
    if (seq.kids.size() == 1) return std::move(seq.kids[0]);
    return seq;
  }

  // True when the next code points start a quantifier (* + ? or a well-formed {...}).
  bool quantifier_follows() {
    if (peek() == '*' || peek() == '+' || peek() == '?') return true;
    size_t save = i_;
    int32_t lo = 0, hi = 0;
    bool q = parse_braces(lo, hi);
    i_ = save;
    return q;
  }

  // Reads digits into v (saturating at INT32_MAX, which is past any limit); false if there are none.
  bool read_number(int32_t& v) {
    v = 0;
    const size_t from = i_;
    for (; peek() >= '0' && peek() <= '9'; ++i_) v = v >= 100000000 ? INT32_MAX : v * 10 + int32_t(peek() - '0');
    return i_ > from;
  }

  // {n} {n,} {,m} {n,m} {,} at i_; consumes it and returns true, or leaves i_ and returns false
  // (then the `{` is a literal, as in Python).
  bool parse_braces(int32_t& lo, int32_t& hi) {
    if (peek() != '{') return false;
    size_t save = i_;
    ++i_;
    const bool has_lo = read_number(lo);
    if (eat('}')) {
      if (!has_lo) return i_ = save, false;
      hi = lo;
      return true;
    }
    if (!eat(',')) return i_ = save, false;
    const bool has_hi = read_number(hi);
    if (!eat('}')) return i_ = save, false;
    if (!has_lo) lo = 0;
    if (!has_hi) hi = kUnbounded;
    return true;
  }

  Node parse_quantifier(Node atom, const Anchors& a, size_t atom_at) {
    const size_t at = i_;
    int32_t lo = 0, hi = 0;
    if (eat('*'))
      lo = 0, hi = kUnbounded;
    else if (eat('+'))
      lo = 1, hi = kUnbounded;
    else if (eat('?'))
      lo = 0, hi = 1;
    else if (!parse_braces(lo, hi))
      return atom;
    const std::string q = text(at, i_);
    for (int32_t b : {lo, hi})
      if (b > limits_.max_repeat)
        fail(at, "repetition bound in '" + q + "' is past the limit of " + std::to_string(limits_.max_repeat));
    if (hi != kUnbounded && hi < lo) fail(at, "repetition '" + q + "' has its minimum above its maximum");
    if (eat('+'))
      fail(at, "possessive quantifier '" + q +
                   "+' is not supported: it can change which strings match "
                   "(write '" +
                   q + "')");
    eat('?');  // lazy: the same strings match the whole pattern
    if (quantifier_follows()) fail(i_, "multiple repeat: a quantifier after '" + text(at, i_) + "'");
    if (a.any && (hi == kUnbounded || hi > 1))
      fail(atom_at, "an anchor (^ or $) inside a repeated group is not supported");
    Node r;
    r.kind = NodeKind::Repeat;
    r.offset = offs_[atom_at];
    r.min = lo;
    r.max = hi;
    r.kids.push_back(std::move(atom));
    return r;
  }

  Node parse_atom(bool at_start, Anchors& anchors) {
    const size_t at = i_;
    Node n;
    n.offset = offs_[at];
    const uint32_t c = peek();
    if (c == '(') return parse_group(at_start, anchors);
    if (c == '*' || c == '+' || c == '?' || (c == '{' && quantifier_follows()))
      fail(at, "nothing to repeat before '" + text(at, at + 1) + "'");
    ++i_;
    if (c == '[') {
      n.kind = NodeKind::Class;
      n.ranges = parse_class(at);
    } else if (c == '.') {
      n.kind = NodeKind::Class;
      n.ranges = chars::dot_ranges();
    } else if (c == '\\') {
      Escape e = parse_escape(false, at);
      if (e.is_set) {
        n.kind = NodeKind::Class;
        n.ranges = std::move(e.set);
      } else {
        n.kind = NodeKind::Chars;
        n.chars = {e.cp};
      }
    } else {
      n.kind = NodeKind::Chars;
      n.chars = {c};
    }
    return n;
  }

  Node parse_group(bool at_start, Anchors& anchors) {
    const size_t at = i_;
    ++i_;  // (
    if (eat('?')) {
      const uint32_t k = peek();
      if (k == ':') {
        ++i_;
      } else if (k == '=' || k == '!' || (k == '<' && (peek(1) == '=' || peek(1) == '!'))) {
        fail(at, "lookaround '" + text(at, i_ + (k == '<' ? 2 : 1)) + "' is not supported");
      } else if (k == 'P' && peek(1) == '=') {
        fail(at, "backreference '(?P=...)' is not supported");
      } else if (k == '<' || (k == 'P' && peek(1) == '<')) {
        i_ += k == 'P' ? 2 : 1;
        read_group_name(at);
      } else if (k == '#') {
        while (peek() != kEnd && peek() != ')') ++i_;
        if (!eat(')')) fail(at, "unterminated comment '(?#'");
        return Node{NodeKind::Empty, offs_[at], {}, {}, {}, 0, 0};
      } else if (k == '>') {
        fail(at, "atomic group '(?>' is not supported: it can change which strings match");
      } else if (k == '(') {
        fail(at, "conditional group '(?(' is not supported");
      } else {
        fail(at, "inline flags or unknown group syntax '" + text(at, i_ + 1) + "' are not supported");
      }
    }
    if (++depth_ > limits_.max_nesting)
      fail(at, "groups nested more than " + std::to_string(limits_.max_nesting) + " deep");
    Node body = parse_alt(at_start, anchors);
    --depth_;
    if (!eat(')')) fail(at, "unbalanced '(': the group is never closed");
    return body;
  }

  void read_group_name(size_t at) {
    const size_t from = i_;
    while (peek() == '_' || (peek() < 0x80 && std::isalnum(int(peek())))) ++i_;
    if (i_ == from || (cps_[from] >= '0' && cps_[from] <= '9') || !eat('>'))
      fail(at, "bad group name in '" + text(at, i_ + 1) + "'");
  }

  // A class body after '['; `at` is the '['.
  std::vector<CharRange> parse_class(size_t at) {
    const bool negated = eat('^');
    if (peek() == ']')
      fail(at,
           "a ']' first in a class is read differently by Python (a literal) and JavaScript (an "
           "empty class): escape it as '\\]'");
    std::vector<CharRange> ranges;
    while (!eat(']')) {
      if (peek() == kEnd) fail(at, "unterminated character class");
      const size_t item_at = i_;
      Escape lo = class_atom();
      if (peek() == '-' && peek(1) != ']' && peek(1) != kEnd) {
        ++i_;
        Escape hi = class_atom();
        if (lo.is_set || hi.is_set)
          fail(item_at, "bad range '" + text(item_at, i_) + "': a shorthand class cannot be a range end");
        if (lo.cp > hi.cp) fail(item_at, "bad range '" + text(item_at, i_) + "': its start is after its end");
        ranges.push_back({lo.cp, hi.cp});
      } else if (lo.is_set) {
        ranges.insert(ranges.end(), lo.set.begin(), lo.set.end());
      } else {
        ranges.push_back({lo.cp, lo.cp});
      }
    }
    return normalize_ranges(std::move(ranges), negated);
  }

  Escape class_atom() {
    const size_t at = i_;
    const uint32_t c = cps_[i_++];
    if (c != '\\') return Escape{false, c, {}};
    return parse_escape(true, at);
  }

  uint32_t read_hex(size_t at, int digits, const char* what) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      const uint32_t c = peek();
      const int h = c < 0x80 ? chars::hex_value(char(c)) : -1;
      if (h < 0) fail(at, std::string(what) + " needs " + std::to_string(digits) + " hex digits");
      v = v * 16 + uint32_t(h);
      ++i_;
    }
    return v;
  }

  // After a backslash at `at` (i_ is past it).
  Escape parse_escape(bool in_class, size_t at) {
    const uint32_t c = peek();
    if (c == kEnd) fail(at, "the pattern ends with a lone backslash");
    ++i_;
    if (c < 0x80 && !chars::shorthand_ranges(char(c)).empty()) return Escape{true, 0, chars::shorthand_ranges(char(c))};
    switch (c) {
      case 'n': return Escape{false, '\n', {}};
      case 't': return Escape{false, '\t', {}};
      case 'r': return Escape{false, '\r', {}};
      case 'f': return Escape{false, '\f', {}};
      case 'v': return Escape{false, '\v', {}};
      case 'a': return Escape{false, 0x07, {}};
      case '0':
        if (peek() >= '0' && peek() <= '9') fail(at, "octal escapes are not supported (write \\xHH)");
        return Escape{false, 0, {}};
      case 'x': return Escape{false, read_hex(at, 2, "\\x"), {}};
      case 'U': return Escape{false, checked_scalar(at, read_hex(at, 8, "\\U")), {}};
      case 'u': return Escape{false, read_u_escape(at), {}};
      case 'b':
        if (in_class) return Escape{false, 0x08, {}};
        fail(at, "word boundary '\\b' is not supported");
      case 'B': fail(at, "'\\B' (not a word boundary) is not supported");
      case 'A':
      case 'Z': fail(at, "anchor '\\" + std::string(1, char(c)) + "' inside a character class");
      case 'k': fail(at, "backreference '\\k' is not supported");
      case 'p':
      case 'P': fail(at, "Unicode property escape '\\" + std::string(1, char(c)) + "' is not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') fail(at, "backreference '\\" + std::string(1, char(c)) + "' is not supported");
    if (c < 0x80 && std::isalnum(int(c))) fail(at, "unknown escape '\\" + std::string(1, char(c)) + "'");
    return Escape{false, c, {}};  // an escaped metacharacter or any other symbol stands for itself
  }

  uint32_t checked_scalar(size_t at, uint32_t v) {
    if (v > kMaxCodePoint) fail(at, "escape '" + text(at, i_) + "' is past U+10FFFF");
    if (chars::is_surrogate(v))
      fail(at, "escape '" + text(at, i_) + "' is a lone surrogate, which UTF-8 cannot encode");
    return v;
  }

  // \uHHHH (a surrogate pair of two of them is one code point) or \u{H...}.
  uint32_t read_u_escape(size_t at) {
    if (eat('{')) {
      uint32_t v = 0;
      int digits = 0;
      while (peek() != '}') {
        const int h = peek() < 0x80 ? chars::hex_value(char(peek())) : -1;
        if (h < 0) fail(at, "'\\u{' needs hex digits and a closing '}'");
        if (v <= kMaxCodePoint) v = v * 16 + uint32_t(h);
        ++digits;
        ++i_;
      }
      ++i_;
      if (digits == 0) fail(at, "'\\u{}' has no digits");
      return checked_scalar(at, v);
    }
    uint32_t v = read_hex(at, 4, "\\u");
    if (v >= 0xD800 && v <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
      const size_t save = i_;
      i_ += 2;
      bool ok = true;
      uint32_t lo = 0;
      for (int k = 0; k < 4 && ok; ++k, ++i_) {
        const int h = peek() < 0x80 ? chars::hex_value(char(peek())) : -1;
        ok = h >= 0;
        lo = lo * 16 + uint32_t(h < 0 ? 0 : h);
      }
      if (ok && lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
      i_ = save;
    }
    return checked_scalar(at, v);
  }

  std::string_view src_;
  ParseLimits limits_;
  std::vector<uint32_t> cps_;
  std::vector<size_t> offs_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Node parse(std::string_view pattern, const ParseLimits& limits) { return Parser(pattern, limits).parse_all(); }

}  // namespace nanovllm::structured::regex
