// EBNF tokens -> grammar (ebnf.h). A grammar is a list of rules `name ::= body`; a rule ends where
// the next one starts (a name followed by `::=`) or at the end of the text, so a body may span lines.
// Bodies: alternatives separated by `|`; a sequence of elements; an element is a literal, a class,
// a rule name or a parenthesized body (`()` is the empty string), followed by at most one of
// * + ? {m} {m,} {m,n}. All rule names are collected first, so a rule may be used before it is
// defined. xgrammar's lookahead assertion `(= body)` is accepted at the end of a rule and dropped.
#include "nanovllm/structured/ebnf.h"

#include "nanovllm/structured/ebnf_lexer.h"

namespace nanovllm::structured {
namespace {

using ebnf::fail_at;
using ebnf::Tok;
using ebnf::Token;

constexpr int kMaxNesting = 500;  // parentheses: keeps the recursive descent within the stack

class Parser {
 public:
  Parser(std::vector<Token> tokens, Grammar& g) : t_(std::move(tokens)), g_(g) {}

  void run(const std::string& root_rule) {
    declare_rules();
    const int32_t root = g_.rule_named(root_rule);
    if (root < 0) throw GrammarError("ebnf: the root rule '" + root_rule + "' is not defined");
    g_.set_root(root);
    while (peek().kind != Tok::End) {
      const Token& name = peek();
      if (!starts_rule()) fail(name, "expected a rule (name ::= ...), found " + ebnf::describe(name));
      i_ += 2;
      const int32_t body = parse_choices();
      if (peek().kind == Tok::LookParen) {  // (= ...): a hint for xgrammar's matcher; no effect on the language
        const Token& open = peek();
        ++i_;
        parse_choices();
        expect(Tok::RParen, open, "')' closing the lookahead assertion");
      }
      g_.define(g_.rule_named(name.text), body);
      if (peek().kind != Tok::End && !starts_rule())
        fail(peek(), "expected a new rule or the end of the grammar, found " + ebnf::describe(peek()));
    }
  }

 private:
  [[noreturn]] static void fail(const Token& at, const std::string& what) { fail_at(at.line, at.column, what); }
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool starts_rule() const { return peek().kind == Tok::Name && peek(1).kind == Tok::Assign; }

  void expect(Tok kind, const Token& opened_by, const std::string& what) {
    if (peek().kind != kind)
      fail(peek(), "expected " + what + " (opened at " + std::to_string(opened_by.line) + ":" +
                       std::to_string(opened_by.column) + "), found " + ebnf::describe(peek()));
    ++i_;
  }

  void declare_rules() {
    for (size_t k = 0; k + 1 < t_.size(); ++k) {
      if (t_[k].kind != Tok::Name || t_[k + 1].kind != Tok::Assign) continue;
      if (g_.rule_named(t_[k].text) >= 0) fail(t_[k], "rule '" + t_[k].text + "' is defined twice");
      g_.add_rule(t_[k].text);
    }
  }

  int32_t parse_choices() {
    std::vector<int32_t> alts = {parse_sequence()};
    while (peek().kind == Tok::Pipe) {
      ++i_;
      alts.push_back(parse_sequence());
    }
    return g_.choice(std::move(alts));
  }

  bool ends_sequence() const {
    const Tok k = peek().kind;
    return k == Tok::Pipe || k == Tok::RParen || k == Tok::LookParen || k == Tok::End || starts_rule();
  }

  int32_t parse_sequence() {
    if (peek().kind == Tok::LookParen) lookahead_misplaced(peek());
    if (ends_sequence()) fail(peek(), "expected an expression, found " + ebnf::describe(peek()));
    std::vector<int32_t> items;
    while (!ends_sequence()) items.push_back(parse_quantified());
    return g_.seq(std::move(items));
  }

  int32_t parse_quantified() {
    const int32_t item = parse_element();
    int32_t lo = 0, hi = 0;
    const Tok k = peek().kind;
    if (k == Tok::Star)
      lo = 0, hi = kUnbounded, ++i_;
    else if (k == Tok::Plus)
      lo = 1, hi = kUnbounded, ++i_;
    else if (k == Tok::Question)
      lo = 0, hi = 1, ++i_;
    else if (k == Tok::LBrace)
      parse_bounds(lo, hi);
    else
      return item;
    const Tok next = peek().kind;
    if (next == Tok::Star || next == Tok::Plus || next == Tok::Question || next == Tok::LBrace)
      fail(peek(), "a second quantifier: put the quantified element in parentheses");
    return g_.repeat(item, lo, hi);
  }

  [[noreturn]] static void lookahead_misplaced(const Token& t) {
    fail(t, "a lookahead assertion '(= ...)' is only accepted at the end of a rule");
  }

  int32_t read_bound() {
    const Token& t = peek();
    if (t.kind != Tok::Name || t.text.find_first_not_of("0123456789") != std::string::npos)
      fail(t, "expected a number in the repetition bounds, found " + ebnf::describe(t));
    if (t.text.size() > 10 || std::stoll(t.text) > INT32_MAX) fail(t, "repetition bound " + t.text + " is too large");
    ++i_;
    return int32_t(std::stoll(t.text));
  }

  void parse_bounds(int32_t& lo, int32_t& hi) {
    const Token& open = peek();
    ++i_;
    lo = read_bound();
    hi = lo;
    if (peek().kind == Tok::Comma) {
      ++i_;
      hi = peek().kind == Tok::RBrace ? kUnbounded : read_bound();
    }
    expect(Tok::RBrace, open, "'}' closing the repetition bounds");
    if (hi != kUnbounded && hi < lo)
      fail(open,
           "repetition {" + std::to_string(lo) + "," + std::to_string(hi) + "} has its minimum above its maximum");
  }

  int32_t parse_element() {
    const Token& t = peek();
    switch (t.kind) {
      case Tok::Literal: ++i_; return g_.literal(t.text);
      case Tok::Class: ++i_; return g_.char_class(t.ranges, t.negated);
      case Tok::Name: {
        const int32_t rule = g_.rule_named(t.text);
        if (rule < 0) fail(t, "undefined rule '" + t.text + "'");
        ++i_;
        return g_.ref(rule);
      }
      case Tok::LParen: {
        if (++depth_ > kMaxNesting) fail(t, "parentheses nested more than " + std::to_string(kMaxNesting) + " deep");
        ++i_;
        int32_t body = g_.empty();
        if (peek().kind != Tok::RParen) body = parse_choices();
        expect(Tok::RParen, t, "')'");
        --depth_;
        return body;
      }
      case Tok::LookParen: lookahead_misplaced(t);
      default: fail(t, "expected an expression, found " + ebnf::describe(t));
    }
  }

  std::vector<Token> t_;
  Grammar& g_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Grammar parse_ebnf(std::string_view text, const std::string& root_rule) {
  Grammar g;
  Parser(ebnf::tokenize(text), g).run(root_rule);
  g.check_complete();
  return g;
}

}  // namespace nanovllm::structured
