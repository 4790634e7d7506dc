// Works around a bug of the xgrammar build the oracle tests run (@mlc-ai/web-xgrammar 0.1.27):
// character classes holding code points past U+007F are compiled wrongly. A positive class with
// a multi-byte range rejects its own members (`[\u00E0-\u00FF]` refuses "é") and can admit ASCII it
// does not hold (`[!-?A-Z\u3001-\uD7FF]+ "@" ...` accepts "A@B@C"); a negated class accepts every
// multi-byte character and warns "clamping to 127". Upstream fixed it in mlc-ai/xgrammar#909
// ("fix: preserve Unicode character class ranges"), after the npm build we have.
//
// The workaround keeps xgrammar an exact oracle for the strings a test asks about: those strings
// use a known set of code points, and over that alphabet a class C matches the same strings as
// (the ASCII part of C) | "c1" | "c2" ... for the non-ASCII members ci of C that occur in the
// strings. restrict_to_alphabet rebuilds a grammar that way (literals are compiled correctly), and
// an empty class becomes a literal of a code point the strings never use.
#pragma once
#include <set>
#include <string>
#include <vector>

#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/regex_chars.h"

namespace nanovllm::structured::test {

// The code points (past U+007F) used by `strings`.
inline std::set<uint32_t> non_ascii_alphabet(const std::vector<std::string>& strings) {
  std::set<uint32_t> out;
  for (const std::string& s : strings)
    for (size_t i = 0; i < s.size();) {
      uint32_t cp = 0;
      const size_t n = chars::decode_utf8(s, i, cp);
      if (n && cp >= 0x80) out.insert(cp);
      i += n ? n : 1;
    }
  return out;
}

// `g` with every class limited to its ASCII part plus the members of `alphabet` (see above). Same
// rule names and root; the same language over ASCII plus `alphabet`.
inline Grammar restrict_to_alphabet(const Grammar& g, const std::set<uint32_t>& alphabet) {
  Grammar h;
  for (size_t r = 0; r < g.num_rules(); ++r) h.add_rule(g.rule(int32_t(r)).name);
  uint32_t unused = 0x4E00;  // stands for "no string": a code point the strings never use
  while (alphabet.count(unused)) ++unused;
  std::string never;
  chars::append_utf8(never, unused);
  std::vector<int32_t> done(g.num_exprs(), -1);
  auto copy = [&](auto&& self, int32_t id) -> int32_t {
    if (done[size_t(id)] >= 0) return done[size_t(id)];
    const Expr& e = g.expr(id);
    std::vector<int32_t> items;
    for (int32_t k : e.items) items.push_back(self(self, k));
    int32_t out = -1;
    switch (e.kind) {
      case ExprKind::Empty: out = h.empty(); break;
      case ExprKind::Literal: out = h.literal(e.literal); break;
      case ExprKind::RuleRef: out = h.ref(e.rule); break;
      case ExprKind::Sequence: out = h.seq(items); break;
      case ExprKind::Choice: out = items.empty() ? h.literal(never) : h.choice(items); break;
      case ExprKind::Repeat: out = h.repeat(items[0], e.min, e.max); break;
      case ExprKind::CharClass: {
        std::vector<CharRange> ascii;
        std::vector<int32_t> parts;
        for (const CharRange& r : e.ranges) {
          if (r.lo < 0x80) ascii.push_back({r.lo, std::min<uint32_t>(r.hi, 0x7F)});
          for (auto it = alphabet.lower_bound(r.lo); it != alphabet.end() && *it <= r.hi; ++it) {
            std::string lit;
            chars::append_utf8(lit, *it);
            parts.push_back(h.literal(lit));
          }
        }
        if (!ascii.empty()) parts.insert(parts.begin(), h.char_class(ascii));
        out = parts.empty() ? h.literal(never) : h.choice(parts);
        break;
      }
    }
    return done[size_t(id)] = out;
  };
  for (size_t r = 0; r < g.num_rules(); ++r)
    if (g.rule(int32_t(r)).body >= 0) h.define(int32_t(r), copy(copy, g.rule(int32_t(r)).body));
  h.set_root(g.root());
  return h;
}

}  // namespace nanovllm::structured::test
