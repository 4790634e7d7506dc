// Integer and decimal ranges as grammars (json_number_ranges.h). Integers: for each digit count,
// the strings between two same-length bounds (prefix equal, then one digit strictly between, then
// free digits). Decimals: the integer part compared first, then the fraction digits compared
// lexicographically (0.s >= 0.d is a regular language of s, built digit by digit).
#include "nanovllm/structured/json_number_ranges.h"

#include <string>
#include <vector>

namespace nanovllm::structured::detail {

namespace {

using Digits = std::string;  // a non-negative integer, canonical ("0", "17")

Digits canon(const std::string& d) { return d.empty() ? "0" : d; }

int cmp_digits(const Digits& a, const Digits& b) {
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  int c = a.compare(b);
  return c < 0 ? -1 : c > 0 ? 1 : 0;
}

Digits inc(Digits d) {
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] != '9') return ++d[i], d;
    d[i] = '0';
  }
  return "1" + d;
}

Digits dec(Digits d) {  // d >= 1
  for (size_t i = d.size(); i-- > 0;) {
    if (d[i] != '0') {
      --d[i];
      break;
    }
    d[i] = '9';
  }
  size_t nz = d.find_first_not_of('0');
  return nz == std::string::npos ? "0" : d.substr(nz);
}

class Builder {
 public:
  explicit Builder(Grammar& g) : g_(g) {}

  int32_t digit_class(char lo, char hi) { return g_.char_class({{uint32_t(lo), uint32_t(hi)}}); }
  int32_t any_digits(int n) { return n == 0 ? g_.empty() : g_.repeat(digit_class('0', '9'), n, n); }
  int32_t lit(char c) { return g_.literal(std::string(1, c)); }
  int32_t alt(std::vector<int32_t> xs) {
    std::vector<int32_t> keep;
    for (int32_t x : xs)
      if (x >= 0) keep.push_back(x);
    return keep.empty() ? -1 : g_.choice(std::move(keep));
  }
  int32_t seq2(int32_t a, int32_t b) {
    if (a < 0 || b < 0) return -1;
    return g_.expr(b).kind == ExprKind::Empty ? a : g_.seq({a, b});
  }

  // Same-length digit strings >= s / <= s / in [x, y].
  int32_t ge(const std::string& s) {
    if (s.empty()) return g_.empty();
    if (s.find_first_not_of('0') == std::string::npos) return any_digits(int(s.size()));
    int n = int(s.size()) - 1;
    return alt({seq2(lit(s[0]), ge(s.substr(1))), s[0] < '9' ? seq2(digit_class(s[0] + 1, '9'), any_digits(n)) : -1});
  }
  int32_t le(const std::string& s) {
    if (s.empty()) return g_.empty();
    if (s.find_first_not_of('9') == std::string::npos) return any_digits(int(s.size()));
    int n = int(s.size()) - 1;
    return alt({seq2(lit(s[0]), le(s.substr(1))), s[0] > '0' ? seq2(digit_class('0', s[0] - 1), any_digits(n)) : -1});
  }
  int32_t same_len(const std::string& x, const std::string& y) {
    if (x.empty()) return g_.empty();
    if (x[0] == y[0]) return seq2(lit(x[0]), same_len(x.substr(1), y.substr(1)));  // (x.size() > 1 usually)
    int n = int(x.size()) - 1;
    return alt({seq2(lit(x[0]), ge(x.substr(1))),
                x[0] + 1 <= y[0] - 1 ? seq2(digit_class(x[0] + 1, y[0] - 1), any_digits(n)) : -1,
                seq2(lit(y[0]), le(y.substr(1)))});
  }

  // Canonical non-negative integers in [a, b] (b nullopt: unbounded).
  int32_t nonneg(const Digits& a, const std::optional<Digits>& b) {
    if (b && cmp_digits(a, *b) > 0) return -1;
    std::vector<int32_t> parts;
    size_t last = b ? b->size() : a.size();
    for (size_t len = a.size(); len <= last; ++len) {
      Digits lo = len == a.size() ? a : "1" + std::string(len - 1, '0');
      Digits hi = b && len == b->size() ? *b : std::string(len, '9');
      if (cmp_digits(lo, hi) <= 0) parts.push_back(same_len(lo, hi));
    }
    if (!b)  // every longer number
      parts.push_back(g_.seq({digit_class('1', '9'), g_.repeat(digit_class('0', '9'), int32_t(a.size()), kUnbounded)}));
    return alt(parts);
  }

  // An optional fraction ("" or "." digits) from: whether "" is allowed, and the non-empty digit
  // strings allowed (-1: none).
  int32_t fraction(bool empty_ok, int32_t ne) {
    if (ne < 0) return empty_ok ? g_.empty() : -1;
    int32_t f = g_.seq({g_.literal("."), ne});
    return empty_ok ? g_.optional(f) : f;
  }
  // Digit `d` followed by a tail t, given whether t may be empty and its non-empty language.
  int32_t then(char d, bool empty_ok, int32_t ne) {
    if (ne < 0) return empty_ok ? lit(d) : -1;
    return g_.seq({lit(d), empty_ok ? g_.optional(ne) : ne});
  }

  // Non-empty digit strings s with 0.s >= 0.D (> when !incl). D has no trailing zeros.
  static bool ge_empty_ok(const std::string& D, bool incl) { return D.empty() && incl; }
  int32_t ge_ne(const std::string& D, bool incl) {
    if (D.empty())
      return incl ? g_.plus(digit_class('0', '9'))
                  : g_.seq({g_.star(lit('0')), digit_class('1', '9'), g_.star(digit_class('0', '9'))});
    std::string R = D.substr(1);
    return alt({D[0] < '9' ? g_.seq({digit_class(D[0] + 1, '9'), g_.star(digit_class('0', '9'))}) : -1,
                then(D[0], ge_empty_ok(R, incl), ge_ne(R, incl))});
  }
  // Non-empty digit strings s with 0.s <= 0.D (< when !incl).
  static bool le_empty_ok(const std::string& D, bool incl) { return !D.empty() || incl; }
  int32_t le_ne(const std::string& D, bool incl) {
    if (D.empty()) return incl ? g_.plus(lit('0')) : -1;
    std::string R = D.substr(1);
    return alt({D[0] > '0' ? g_.seq({digit_class('0', D[0] - 1), g_.star(digit_class('0', '9'))}) : -1,
                then(D[0], le_empty_ok(R, incl), le_ne(R, incl))});
  }
  // Non-empty s with 0.L <= 0.s <= 0.H (each end inclusive or not); 0.L <= 0.H.
  int32_t between_ne(const std::string& L, bool li, const std::string& H, bool hi) {
    if (L.empty() && H.empty()) return li && hi ? g_.plus(lit('0')) : -1;
    char dl = L.empty() ? '0' : L[0], dh = H.empty() ? '0' : H[0];
    std::string RL = L.empty() ? "" : L.substr(1), RH = H.empty() ? "" : H.substr(1);
    if (dl == dh) return then(dl, ge_empty_ok(RL, li) && le_empty_ok(RH, hi), between_ne(RL, li, RH, hi));
    return alt({then(dl, ge_empty_ok(RL, li), ge_ne(RL, li)),
                dl + 1 <= dh - 1 ? g_.seq({digit_class(dl + 1, dh - 1), g_.star(digit_class('0', '9'))}) : -1,
                then(dh, le_empty_ok(RH, hi), le_ne(RH, hi))});
  }

  // Magnitudes int(.digits)? in [a, b] (each end inclusive or not; b nullopt: unbounded).
  int32_t magnitude(const Decimal& a, bool ai, const std::optional<Decimal>& b, bool bi) {
    if (b) {
      int c = compare(a, *b);
      if (c > 0 || (c == 0 && !(ai && bi))) return -1;
    }
    Digits ia = canon(a.int_digits);
    if (b && canon(b->int_digits) == ia)
      return seq2(g_.literal(ia), fraction(ge_empty_ok(a.frac_digits, ai) && le_empty_ok(b->frac_digits, bi),
                                           between_ne(a.frac_digits, ai, b->frac_digits, bi)));
    std::vector<int32_t> parts;
    parts.push_back(seq2(g_.literal(ia), fraction(ge_empty_ok(a.frac_digits, ai), ge_ne(a.frac_digits, ai))));
    std::optional<Digits> mid_hi;
    if (b) mid_hi = canon(b->int_digits) == "0" ? std::nullopt : std::optional<Digits>(dec(canon(b->int_digits)));
    if (!b || (mid_hi && cmp_digits(inc(ia), *mid_hi) <= 0))
      parts.push_back(seq2(nonneg(inc(ia), mid_hi), fraction(true, g_.plus(digit_class('0', '9')))));
    if (b)
      parts.push_back(
          seq2(g_.literal(canon(b->int_digits)), fraction(le_empty_ok(b->frac_digits, bi), le_ne(b->frac_digits, bi))));
    return alt(parts);
  }

 private:
  Grammar& g_;
};

Decimal magnitude_of(Decimal d) {
  d.negative = false;
  return d;
}

Decimal make_int(bool negative, const Digits& m) {
  Decimal r;
  r.negative = negative && m != "0";
  r.int_digits = m == "0" ? "" : m;
  return r;
}

// The smallest integer satisfying a lower bound / the largest satisfying an upper bound.
Decimal int_lower(const NumBound& b) {
  const Decimal& v = b.value;
  Digits m = canon(v.int_digits);
  if (v.is_integer()) {
    if (!b.exclusive) return v;
    return v.negative ? make_int(true, dec(m)) : make_int(false, inc(m));  // v + 1
  }
  return v.negative ? make_int(true, m) : make_int(false, inc(m));  // ceil
}
Decimal int_upper(const NumBound& b) {
  const Decimal& v = b.value;
  Digits m = canon(v.int_digits);
  if (v.is_integer()) {
    if (!b.exclusive) return v;
    return v.negative || m == "0" ? make_int(true, inc(m)) : make_int(false, dec(m));  // v - 1
  }
  return v.negative ? make_int(true, inc(m)) : make_int(false, m);  // floor
}

}  // namespace

int32_t integer_range_expr(Grammar& g, const std::optional<NumBound>& lo, const std::optional<NumBound>& hi) {
  std::optional<Decimal> l, h;
  if (lo) l = int_lower(*lo);
  if (hi) h = int_upper(*hi);
  if (l && h && compare(*l, *h) > 0) return -1;
  Builder b(g);
  std::vector<int32_t> parts;
  if (!h || !h->negative) {
    Digits a = l && !l->negative ? canon(l->int_digits) : "0";
    parts.push_back(b.nonneg(a, h ? std::optional<Digits>(canon(h->int_digits)) : std::nullopt));
  }
  if (!l || l->negative) {
    Digits a = h && h->negative ? canon(h->int_digits) : "1";
    int32_t mags = b.nonneg(a, l ? std::optional<Digits>(canon(l->int_digits)) : std::nullopt);
    if (mags >= 0) parts.push_back(g.seq({g.literal("-"), mags}));
  }
  return b.alt(parts);
}

int32_t number_range_expr(Grammar& g, const std::optional<NumBound>& lo, const std::optional<NumBound>& hi) {
  if (lo && hi) {
    int c = compare(lo->value, hi->value);
    if (c > 0 || (c == 0 && (lo->exclusive || hi->exclusive))) return -1;
  }
  Builder b(g);
  std::vector<int32_t> parts;
  const Decimal zero;
  bool hi_nonneg = !hi || !hi->value.negative;
  if (hi_nonneg && !(hi && compare(hi->value, zero) == 0 && hi->exclusive)) {
    bool lo_nonneg = lo && !lo->value.negative;
    parts.push_back(b.magnitude(lo_nonneg ? lo->value : zero, lo_nonneg ? !lo->exclusive : true,
                                hi ? std::optional<Decimal>(hi->value) : std::nullopt, hi ? !hi->exclusive : true));
  }
  if (!lo || lo->value.negative) {  // v < 0: its magnitude in (max(0, -hi), -lo]
    bool hi_neg = hi && hi->value.negative;
    int32_t mags =
        b.magnitude(hi_neg ? magnitude_of(hi->value) : zero, hi_neg ? !hi->exclusive : false,
                    lo ? std::optional<Decimal>(magnitude_of(lo->value)) : std::nullopt, lo ? !lo->exclusive : true);
    if (mags >= 0) parts.push_back(g.seq({g.literal("-"), mags}));
  }
  return b.alt(parts);
}

}  // namespace nanovllm::structured::detail
