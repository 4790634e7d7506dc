// Test-only random strings over the grammar IR: positives drawn from a grammar's language (a
// bounded random derivation) and negatives made by mutating them, for the oracle tests that ask
// xgrammar and JavaScript whether each string belongs to the language.
//
// Sampling is bounded: past `max_depth` nested rule references (or once the output passes
// `soft_max_bytes`) every choice takes its shortest alternative and every repeat its minimum, so a
// recursive grammar still terminates. Expressions that derive no string at all (an empty class, a
// rule that never finishes) are avoided; sample() returns nullopt when the root derives nothing.
#pragma once
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "nanovllm/structured/grammar.h"
#include "nanovllm/structured/regex_chars.h"

namespace nanovllm::structured::test {

class RegexTextSampler {
 public:
  explicit RegexTextSampler(const Grammar& g, uint64_t seed = 1, int max_depth = 8, size_t soft_max_bytes = 400)
      : g_(g), rng_(seed), max_depth_(max_depth), soft_max_(soft_max_bytes) {
    compute_min_lengths();
  }

  std::optional<std::string> sample() {
    const int32_t body = g_.rule(g_.root()).body;
    if (min_len_[size_t(body)] == kNever) return std::nullopt;
    std::string out;
    gen(body, 0, out);
    return out;
  }

 private:
  static constexpr int64_t kNever = std::numeric_limits<int64_t>::max() / 4;

  static int64_t add(int64_t a, int64_t b) { return std::min(a + b, kNever); }

  // Shortest string (in bytes) each expression derives, kNever if none: a fixpoint over the rules.
  void compute_min_lengths() {
    min_len_.assign(g_.num_exprs(), kNever);
    for (bool changed = true; changed;) {
      changed = false;
      for (size_t id = 0; id < g_.num_exprs(); ++id) {
        const int64_t v = min_len_of(g_.expr(int32_t(id)));
        if (v < min_len_[id]) min_len_[id] = v, changed = true;
      }
    }
  }

  int64_t min_len_of(const Expr& e) const {
    switch (e.kind) {
      case ExprKind::Empty: return 0;
      case ExprKind::Literal: return int64_t(e.literal.size());
      case ExprKind::CharClass: return e.ranges.empty() ? kNever : utf8_len(e.ranges[0].lo);
      case ExprKind::RuleRef: {
        const int32_t body = g_.rule(e.rule).body;
        return body < 0 ? kNever : min_len_[size_t(body)];
      }
      case ExprKind::Sequence: {
        int64_t s = 0;
        for (int32_t k : e.items) s = add(s, min_len_[size_t(k)]);
        return s;
      }
      case ExprKind::Choice: {
        int64_t m = kNever;
        for (int32_t k : e.items) m = std::min(m, min_len_[size_t(k)]);
        return m;
      }
      case ExprKind::Repeat: {
        const int64_t item = min_len_[size_t(e.items[0])];
        if (e.min == 0) return 0;
        return item == kNever ? kNever : std::min(item * e.min, kNever);
      }
    }
    return kNever;
  }

  static int64_t utf8_len(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng_); }

  uint32_t pick_code_point(const std::vector<CharRange>& ranges) {
    const CharRange& r = ranges[pick(ranges.size())];
    const uint64_t width = uint64_t(r.hi) - r.lo + 1;
    // Half the time stay near the range start, where the interesting (ASCII) code points are.
    const uint64_t span = pick(2) ? std::min<uint64_t>(width, 96) : width;
    return r.lo + uint32_t(std::uniform_int_distribution<uint64_t>(0, span - 1)(rng_));
  }

  void gen(int32_t id, int depth, std::string& out) {
    const Expr& e = g_.expr(id);
    const bool shortest = depth > max_depth_ || out.size() > soft_max_;
    switch (e.kind) {
      case ExprKind::Empty: return;
      case ExprKind::Literal: out += e.literal; return;
      case ExprKind::CharClass: chars::append_utf8(out, pick_code_point(e.ranges)); return;
      case ExprKind::RuleRef: gen(g_.rule(e.rule).body, depth + 1, out); return;
      case ExprKind::Sequence:
        for (int32_t k : e.items) gen(k, depth, out);
        return;
      case ExprKind::Choice: {
        std::vector<int32_t> ok;
        int32_t best = -1;
        for (int32_t k : e.items) {
          if (min_len_[size_t(k)] == kNever) continue;
          ok.push_back(k);
          if (best < 0 || min_len_[size_t(k)] < min_len_[size_t(best)]) best = k;
        }
        gen(shortest ? best : ok[pick(ok.size())], depth, out);
        return;
      }
      case ExprKind::Repeat: {
        int64_t n = e.min;
        if (!shortest && min_len_[size_t(e.items[0])] != kNever) {
          const int64_t room = e.max == kUnbounded ? 3 : std::min<int64_t>(e.max - e.min, 3);
          n += int64_t(pick(size_t(room) + 1));
        }
        for (int64_t k = 0; k < n; ++k) gen(e.items[0], depth, out);
        return;
      }
    }
  }

  const Grammar& g_;
  std::mt19937_64 rng_;
  int max_depth_;
  size_t soft_max_;
  std::vector<int64_t> min_len_;
};

// A random edit of `s` (code point aware): delete, insert, replace or duplicate a piece, or cut
// the end. Inserted code points come from `alphabet`. The result may still be in the language.
inline std::string mutate(const std::string& s, const std::vector<uint32_t>& alphabet, std::mt19937_64& rng) {
  std::vector<uint32_t> cps;
  for (size_t i = 0; i < s.size();) {
    uint32_t c = 0;
    const size_t n = chars::decode_utf8(s, i, c);
    cps.push_back(n ? c : uint32_t('?'));
    i += n ? n : 1;
  }
  auto rnd = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  const uint32_t fresh = alphabet[rnd(alphabet.size())];
  const size_t at = rnd(cps.size() + 1);
  switch (cps.empty() ? 0 : rnd(5)) {
    case 0: cps.insert(cps.begin() + long(at), fresh); break;
    case 1: cps.erase(cps.begin() + long(std::min(at, cps.size() - 1))); break;
    case 2: cps[std::min(at, cps.size() - 1)] = fresh; break;
    case 3: {
      const size_t from = std::min(at, cps.size() - 1), len = 1 + rnd(std::min<size_t>(4, cps.size() - from));
      std::vector<uint32_t> piece(cps.begin() + long(from), cps.begin() + long(from + len));
      cps.insert(cps.begin() + long(from), piece.begin(), piece.end());
      break;
    }
    default: cps.resize(std::min(at, cps.size() - 1)); break;
  }
  std::string out;
  for (uint32_t c : cps) chars::append_utf8(out, c);
  return out;
}

// How many strings of each kind oracle_strings makes.
struct StringMix {
  size_t positives = 12;      // distinct samples from the grammar (fewer if the language is small)
  size_t mutations = 16;      // edits of the positives
  size_t randoms = 4;         // random strings over the alphabet
  size_t max_random_len = 8;  // code points in a random string
  size_t max_alphabet = 64;   // `alphabet` grows by the positives' code points up to this size
};

// The strings an oracle test asks about: positives first, then negatives (mutations and random
// strings over `alphabet` plus the positives' code points), without repeats; the same for the
// same grammar and seed (the oracle cache keys on them).
inline std::vector<std::string> oracle_strings(const Grammar& g, uint64_t seed, const StringMix& mix,
                                               std::vector<uint32_t> alphabet) {
  std::mt19937_64 rng(seed);
  RegexTextSampler sampler(g, seed * 7919 + 1);
  std::set<std::string> seen;
  std::vector<std::string> pos;
  for (size_t k = 0; k < 2 * mix.positives + 16 && pos.size() < mix.positives; ++k)
    if (auto s = sampler.sample(); s && seen.insert(*s).second) pos.push_back(*s);
  for (const std::string& s : pos)
    for (size_t i = 0; i < s.size() && alphabet.size() < mix.max_alphabet;) {
      uint32_t cp = 0;
      const size_t n = chars::decode_utf8(s, i, cp);
      if (n) alphabet.push_back(cp);
      i += n ? n : 1;
    }
  auto rnd = [&](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); };
  std::vector<std::string> out = pos;
  for (size_t k = 0; k < mix.mutations && !pos.empty(); ++k)
    if (std::string m = mutate(pos[k % pos.size()], alphabet, rng); seen.insert(m).second) out.push_back(m);
  for (size_t k = 0; k < mix.randoms; ++k) {
    std::string r;
    for (size_t n = rnd(mix.max_random_len + 1); n > 0; --n) chars::append_utf8(r, alphabet[rnd(alphabet.size())]);
    if (seen.insert(r).second) out.push_back(r);
  }
  return out;
}

}  // namespace nanovllm::structured::test
