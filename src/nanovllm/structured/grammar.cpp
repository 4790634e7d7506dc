// The grammar builder and its EBNF printer (grammar.h).
#include "nanovllm/structured/grammar.h"

#include <algorithm>
#include <cstdio>
#include <unordered_set>

#include "nanovllm/structured/regex_chars.h"

namespace nanovllm::structured {

namespace {

using chars::kSurrogateHi;
using chars::kSurrogateLo;

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
  // \u00XX, not \xHH: xgrammar reads \x greedily ("\x01A" would be U+001A).
  if (c < 0x80 && c >= 0x20 && c != 0x7F) return std::string(1, char(c));
  std::string out = c <= 0xFFFF ? "\\u" : "\\U";
  out += hex(c, c <= 0xFFFF ? 4 : 8);
  return out;
}

std::string escape_literal(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    size_t n = chars::decode_utf8(s, i, cp);
    if (n == 0) {
      // A byte that is not part of valid UTF-8 cannot be written in the dialect (its text is
      // UTF-8 and its escapes are code points): printed as \u00HH, it reads back as U+00HH.
      out += "\\u00";
      out += hex(uint8_t(s[i]), 2);
      ++i;
      continue;
    }
    out += escape_code_point(cp, false);
    i += n;
  }
  return out + "\"";
}

// Rule names as printed: [A-Za-z_][A-Za-z0-9_-]* (what both xgrammar and ebnf.h read), other
// characters replaced by '_', names xgrammar reads as macros suffixed, clashes numbered.
std::vector<std::string> printable_rule_names(const std::vector<Rule>& rules) {
  static const std::unordered_set<std::string> kMacros = {"TagDispatch",      "Token", "ExcludeToken",
                                                          "TokenTagDispatch", "Regex", "Substring"};
  const auto ok = [](char c, bool first) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (!first && (c == '-' || (c >= '0' && c <= '9')));
  };
  std::vector<std::string> out(rules.size());
  std::unordered_set<std::string> taken;
  for (size_t r = 0; r < rules.size(); ++r) {
    std::string n = rules[r].name;
    bool clean = !n.empty() && !kMacros.count(n);
    for (size_t i = 0; i < n.size(); ++i) clean = clean && ok(n[i], i == 0);
    if (clean) taken.insert(n), out[r] = n;
  }
  for (size_t r = 0; r < rules.size(); ++r) {
    if (!out[r].empty()) continue;
    std::string n = rules[r].name;
    for (size_t i = 0; i < n.size(); ++i)
      if (!ok(n[i], i == 0)) n[i] = ok(n[i], false) ? n[i] : '_';
    if (n.empty() || !ok(n[0], true)) n = "r_" + n;
    if (kMacros.count(n)) n += "_";
    std::string unique = n;
    for (int k = 1; taken.count(unique); ++k) unique = n + "_" + std::to_string(k);
    taken.insert(unique);
    out[r] = unique;
  }
  return out;
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
      case ExprKind::Choice: return expr(id).items.empty() ? 2 : 0;  // an empty one prints as a class
      case ExprKind::Sequence: return 1;
      default: return 2;
    }
  };
  std::string out;
  const std::vector<std::string> names = printable_rule_names(rules_);
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
      case ExprKind::RuleRef: out += names[size_t(e.rule)]; break;
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
    out += names[size_t(r)] + " ::= ";
    if (rules_[size_t(r)].body < 0)
      out += "\"\"";
    else
      print(print, rules_[size_t(r)].body, 0);
    out += "\n";
  }
  return out;
}

}  // namespace nanovllm::structured
