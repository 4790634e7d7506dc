// The grammar builder and its EBNF printer (grammar.h).
#include "nanovllm/structured/grammar.h"

#include <algorithm>
#include <cstdio>

namespace nanovllm::structured {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800, kSurrogateHi = 0xDFFF;

// Removes the surrogate block from sorted, merged ranges.
std::vector<CharRange> drop_surrogates(const std::vector<CharRange>& in) {
  std::vector<CharRange> out;
  for (const CharRange& r : in) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

std::string hex(uint32_t v, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%0*X", digits, unsigned(v));
  return buf;
}

// One code point inside "..." (in_class false) or [...] (in_class true).
std::string escape_code_point(uint32_t c, bool in_class) {
  switch (c) {
    case '\n': return "\\n";
    case '\t': return "\\t";
    case '\r': return "\\r";
    case '\\': return "\\\\";
    default: break;
  }
  if (!in_class && c == '"') return "\\\"";
  if (in_class && (c == ']' || c == '[' || c == '^' || c == '-')) return std::string("\\") + char(c);
  if (c < 0x80 && c >= 0x20 && c != 0x7F) return std::string(1, char(c));
  std::string out = c < 0x80 ? "\\x" : c <= 0xFFFF ? "\\u" : "\\U";
  out += hex(c, c < 0x80 ? 2 : c <= 0xFFFF ? 4 : 8);
  return out;
}

// Decodes one UTF-8 code point at s[i]; returns its length, or 0 if the bytes are not valid UTF-8.
size_t decode_utf8(const std::string& s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return uint8_t(s[k]); };
  uint8_t c = b(i);
  if (c < 0x80) return cp = c, 1;
  size_t n = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 0;
  if (n == 0 || c > 0xF4 || i + n > s.size()) return 0;
  cp = c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b(i + k) & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > kMaxCodePoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) return 0;
  return n;
}

std::string escape_literal(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = decode_utf8(s, i, cp);
    if (n == 0) {  // a lone byte: printed as \xHH (xgrammar reads it as U+00HH: only for invalid UTF-8)
      out += "\\x";
      out += hex(uint8_t(s[i]), 2);
      ++i;
      continue;
    }
    out += escape_code_point(cp, false);
    i += n;
  }
  return out + "\"";
}

}  // namespace

std::vector<CharRange> normalize_ranges(std::vector<CharRange> ranges, bool negated) {
  for (const CharRange& r : ranges)
    if (r.lo > r.hi || r.hi > kMaxCodePoint)
      throw GrammarError("character class range " + hex(r.lo, 4) + "-" + hex(r.hi, 4) + " is empty or past U+10FFFF");
  std::sort(ranges.begin(), ranges.end(), [](const CharRange& a, const CharRange& b) { return a.lo < b.lo; });
  std::vector<CharRange> merged;
  for (const CharRange& r : ranges) {
    if (!merged.empty() && r.lo <= merged.back().hi + 1)
      merged.back().hi = std::max(merged.back().hi, r.hi);
    else
      merged.push_back(r);
  }
  if (negated) {
    std::vector<CharRange> comp;
    uint32_t next = 0;
    for (const CharRange& r : merged) {
      if (r.lo > next) comp.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) comp.push_back({next, kMaxCodePoint});
    merged = std::move(comp);
  }
  return drop_surrogates(merged);
}

int32_t Grammar::add(Expr e) {
  exprs_.push_back(std::move(e));
  return int32_t(exprs_.size() - 1);
}

int32_t Grammar::empty() { return add({}); }

int32_t Grammar::literal(std::string bytes) {
  if (bytes.empty()) return empty();
  Expr e;
  e.kind = ExprKind::Literal;
  e.literal = std::move(bytes);
  return add(std::move(e));
}

int32_t Grammar::char_class(std::vector<CharRange> ranges, bool negated) {
  Expr e;
  e.kind = ExprKind::CharClass;
  e.ranges = normalize_ranges(std::move(ranges), negated);
  return add(std::move(e));
}

int32_t Grammar::ref(int32_t rule) {
  if (rule < 0 || size_t(rule) >= rules_.size())
    throw GrammarError("reference to rule #" + std::to_string(rule) + " which does not exist");
  Expr e;
  e.kind = ExprKind::RuleRef;
  e.rule = rule;
  return add(std::move(e));
}

int32_t Grammar::seq(std::vector<int32_t> items) {
  if (items.empty()) return empty();
  if (items.size() == 1) return items[0];
  for (int32_t i : items) (void)expr(i);  // range check
  Expr e;
  e.kind = ExprKind::Sequence;
  e.items = std::move(items);
  return add(std::move(e));
}

int32_t Grammar::choice(std::vector<int32_t> items) {
  if (items.size() == 1) return items[0];
  for (int32_t i : items) (void)expr(i);
  Expr e;
  e.kind = ExprKind::Choice;
  e.items = std::move(items);
  return add(std::move(e));
}

int32_t Grammar::repeat(int32_t item, int32_t min, int32_t max) {
  (void)expr(item);
  if (min < 0 || (max != kUnbounded && max < min))
    throw GrammarError("repetition bounds {" + std::to_string(min) + "," + std::to_string(max) + "} are invalid");
  if (min == 1 && max == 1) return item;
  Expr e;
  e.kind = ExprKind::Repeat;
  e.items = {item};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

int32_t Grammar::add_rule(const std::string& name) {
  if (name.empty()) throw GrammarError("a rule needs a name");
  if (by_name_.count(name)) throw GrammarError("rule '" + name + "' is defined twice");
  rules_.push_back({name, -1});
  int32_t id = int32_t(rules_.size() - 1);
  by_name_[name] = id;
  return id;
}

void Grammar::define(int32_t rule, int32_t body) {
  (void)expr(body);
  Rule& r = rules_.at(size_t(rule));
  if (r.body >= 0) throw GrammarError("rule '" + r.name + "' is defined twice");
  r.body = body;
}

int32_t Grammar::rule_named(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? -1 : it->second;
}

std::string Grammar::fresh_name(const std::string& base) const {
  if (!by_name_.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string n = base + "_" + std::to_string(i);
    if (!by_name_.count(n)) return n;
  }
}

void Grammar::check_complete() const {
  if (root_ < 0 || size_t(root_) >= rules_.size()) throw GrammarError("the grammar has no root rule");
  for (const Rule& r : rules_)
    if (r.body < 0) throw GrammarError("rule '" + r.name + "' is used but never defined");
}

std::string Grammar::to_ebnf() const {
  // Precedence: choice 0 < sequence 1 < repeat/atom 2; parenthesize a child of lower precedence.
  auto prec = [&](int32_t id) {
    switch (expr(id).kind) {
      case ExprKind::Choice: return 0;
      case ExprKind::Sequence: return 1;
      default: return 2;
    }
  };
  std::string out;
  auto print = [&](auto&& self, int32_t id, int need) -> void {
    const Expr& e = expr(id);
    bool paren = prec(id) < need;
    if (paren) out += "(";
    switch (e.kind) {
      case ExprKind::Empty: out += "\"\""; break;
      case ExprKind::Literal: out += escape_literal(e.literal); break;
      case ExprKind::CharClass:
        if (e.ranges.empty()) {
          out += "[^\\x00-\\U0010FFFF]";  // nothing
          break;
        }
        {
          // Print the complement, negated, when it is shorter ([^"\\] rather than six ranges).
          std::vector<CharRange> comp = normalize_ranges(e.ranges, true);
          const bool negate = !comp.empty() && comp.size() < e.ranges.size();
          out += negate ? "[^" : "[";
          for (const CharRange& r : negate ? comp : e.ranges) {
            out += escape_code_point(r.lo, true);
            if (r.hi != r.lo) {
              out += '-';
              out += escape_code_point(r.hi, true);
            }
          }
          out += "]";
        }
        break;
      case ExprKind::RuleRef: out += rule(e.rule).name; break;
      case ExprKind::Sequence:
        for (size_t i = 0; i < e.items.size(); ++i) {
          if (i) out += " ";
          self(self, e.items[i], 2);
        }
        break;
      case ExprKind::Choice:
        if (e.items.empty()) {
          out += "[^\\x00-\\U0010FFFF]";
          break;
        }
        for (size_t i = 0; i < e.items.size(); ++i) {
          if (i) out += " | ";
          self(self, e.items[i], 1);
        }
        break;
      case ExprKind::Repeat:
        out += "(";
        self(self, e.items[0], 0);
        out += ")";
        if (e.min == 0 && e.max == kUnbounded)
          out += "*";
        else if (e.min == 1 && e.max == kUnbounded)
          out += "+";
        else if (e.min == 0 && e.max == 1)
          out += "?";
        else {
          out += '{';
          out += std::to_string(e.min);
          if (e.max != e.min) out += ',';
          if (e.max != e.min && e.max != kUnbounded) out += std::to_string(e.max);
          out += '}';
        }
        break;
    }
    if (paren) out += ")";
  };
  std::vector<int32_t> order;
  if (root_ >= 0) order.push_back(root_);
  for (int32_t r = 0; r < int32_t(rules_.size()); ++r)
    if (r != root_) order.push_back(r);
  for (int32_t r : order) {
    out += rules_[size_t(r)].name + " ::= ";
    if (rules_[size_t(r)].body < 0)
      out += "\"\"";
    else
      print(print, rules_[size_t(r)].body, 0);
    out += "\n";
  }
  return out;
}

}  // namespace nanovllm::structured
