// Test-only: random strings of a Grammar's language (grammar.h), to check that everything a grammar
// produces is valid for whatever it was built from. Recursion is bounded: past `max_depth` rule
// expansions, each choice takes its alternative of least recursion height and each repetition its
// minimum count, so generation always ends.
#pragma once
#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured::test {

class GrammarSampler {
 public:
  GrammarSampler(const Grammar& g, uint64_t seed, int max_depth = 12) : g_(g), rng_(seed), max_depth_(max_depth) {
    // Least recursion height of each rule, by fixpoint (INT_MAX: the rule derives no string).
    height_.assign(g.num_rules(), INT_MAX);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t r = 0; r < g.num_rules(); ++r) {
        int h = expr_height(g.rule(int32_t(r)).body);
        if (h != INT_MAX && h + 1 < height_[r]) height_[r] = h + 1, changed = true;
      }
    }
  }

  bool can_generate() const { return height_.at(size_t(g_.root())) != INT_MAX; }

  std::string sample() {
    std::string out;
    gen(g_.expr(g_.rule(g_.root()).body), 0, out);
    return out;
  }

 private:
  int expr_height(int32_t id) const {
    if (id < 0) return INT_MAX;
    const Expr& e = g_.expr(id);
    switch (e.kind) {
      case ExprKind::Empty:
      case ExprKind::Literal: return 0;
      case ExprKind::CharClass: return e.ranges.empty() ? INT_MAX : 0;
      case ExprKind::RuleRef: return height_[size_t(e.rule)];
      case ExprKind::Sequence: {
        int h = 0;
        for (int32_t i : e.items) h = std::max(h, expr_height(i));
        return h;
      }
      case ExprKind::Choice: {
        int h = INT_MAX;
        for (int32_t i : e.items) h = std::min(h, expr_height(i));
        return h;
      }
      case ExprKind::Repeat: return e.min == 0 ? 0 : expr_height(e.items[0]);
    }
    return INT_MAX;
  }

  void put_code_point(uint32_t cp, std::string& out) {
    if (cp < 0x80)
      out += char(cp);
    else if (cp < 0x800)
      out += char(0xC0 | (cp >> 6)), out += char(0x80 | (cp & 0x3F));
    else if (cp < 0x10000)
      out += char(0xE0 | (cp >> 12)), out += char(0x80 | ((cp >> 6) & 0x3F)), out += char(0x80 | (cp & 0x3F));
    else
      out += char(0xF0 | (cp >> 18)), out += char(0x80 | ((cp >> 12) & 0x3F)), out += char(0x80 | ((cp >> 6) & 0x3F)),
          out += char(0x80 | (cp & 0x3F));
  }

  void gen(const Expr& e, int depth, std::string& out) {
    switch (e.kind) {
      case ExprKind::Empty: return;
      case ExprKind::Literal: out += e.literal; return;
      case ExprKind::CharClass: {
        // Mostly printable ASCII where the class has some, so texts stay readable; else anywhere.
        std::vector<CharRange> ascii;
        for (const CharRange& r : e.ranges)
          if (r.lo <= 0x7E && r.hi >= 0x20)
            ascii.push_back({std::max<uint32_t>(r.lo, 0x20), std::min<uint32_t>(r.hi, 0x7E)});
        const std::vector<CharRange>& pool = !ascii.empty() && pick(10) < 8 ? ascii : e.ranges;
        const CharRange& r = pool[pick(pool.size())];
        put_code_point(r.lo + uint32_t(pick(uint64_t(r.hi - r.lo) + 1)), out);
        return;
      }
      case ExprKind::RuleRef: gen(g_.expr(g_.rule(e.rule).body), depth + 1, out); return;
      case ExprKind::Sequence:
        for (int32_t i : e.items) gen(g_.expr(i), depth, out);
        return;
      case ExprKind::Choice: {
        std::vector<int32_t> ok;
        int best = INT_MAX;
        for (int32_t i : e.items) best = std::min(best, expr_height(i));
        for (int32_t i : e.items) {
          int h = expr_height(i);
          if (h != INT_MAX && (depth < max_depth_ || h == best)) ok.push_back(i);
        }
        gen(g_.expr(ok[pick(ok.size())]), depth, out);
        return;
      }
      case ExprKind::Repeat: {
        int64_t hi = e.max == kUnbounded ? int64_t(e.min) + 3 : std::min<int64_t>(e.max, int64_t(e.min) + 3);
        int64_t n = depth >= max_depth_ ? e.min : e.min + int64_t(pick(uint64_t(hi - e.min) + 1));
        for (int64_t k = 0; k < n; ++k) gen(g_.expr(e.items[0]), depth, out);
        return;
      }
    }
  }

  uint64_t pick(uint64_t n) { return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_); }

  const Grammar& g_;
  std::mt19937_64 rng_;
  int max_depth_;
  std::vector<int> height_;
};

}  // namespace nanovllm::structured::test
