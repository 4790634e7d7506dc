// A context-free grammar over Unicode text: the one form that JSON Schema, regular expressions,
// EBNF/GBNF grammars and choice lists are converted into (json_schema.h, regex.h, ebnf.h), and
// that the automaton compiler (automaton.h) turns into per-rule byte automata for matching.
//
// A grammar is a list of named rules; each rule has one body expression. Expressions live in one
// arena (ids are indices) and are built bottom-up with the factory methods:
//   literal("abc")          the exact bytes (any bytes, normally UTF-8 text)
//   char_class(ranges, neg) one code point in (or, negated, not in) the ranges, matched as its
//                           UTF-8 encoding; negation is over U+0000..U+10FFFF minus surrogates
//   ref(rule)               the body of another rule (recursion allowed, left recursion refused
//                           by the compiler with an error naming the rule)
//   seq({a, b}) choice({a, b}) repeat(e, min, max)  (max = kUnbounded for *, +, {m,})
//   empty()                 the empty string
// Nothing here matches; the grammar is data. Validation (undefined rules, bad ranges) happens in
// the builder (it throws GrammarError naming what is wrong) and in the compiler.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "nanovllm/utils/error.h"

namespace nanovllm::structured {

// A grammar, schema, regex or choice list that cannot be compiled; the message names the rule,
// keyword or offset at fault. The server answers it with a 400.
struct GrammarError : UserError {
  using UserError::UserError;
};

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;
inline constexpr int32_t kUnbounded = -1;

struct CharRange {
  uint32_t lo = 0, hi = 0;  // inclusive code points
  bool operator==(const CharRange&) const = default;
};

enum class ExprKind : uint8_t { Empty, Literal, CharClass, RuleRef, Sequence, Choice, Repeat };

struct Expr {
  ExprKind kind = ExprKind::Empty;
  std::string literal;            // Literal: the bytes
  std::vector<CharRange> ranges;  // CharClass: sorted, disjoint, merged, negation already applied
  int32_t rule = -1;              // RuleRef
  std::vector<int32_t> items;     // Sequence, Choice: the parts; Repeat: the one repeated expr
  int32_t min = 0, max = 0;       // Repeat: bounds (max = kUnbounded: no upper bound)
};

struct Rule {
  std::string name;
  int32_t body = -1;  // -1 while declared but not yet defined
};

class Grammar {
 public:
  // Expressions. Every factory returns the new expression's id.
  int32_t empty();
  int32_t literal(std::string bytes);
  // Ranges in any order, may overlap; lo <= hi <= kMaxCodePoint. An empty class (nothing left
  // after negation) is allowed and matches nothing.
  int32_t char_class(std::vector<CharRange> ranges, bool negated = false);
  int32_t any_char() { return char_class({{0, kMaxCodePoint}}); }
  int32_t ref(int32_t rule);
  int32_t seq(std::vector<int32_t> items);                 // of none: empty()
  int32_t choice(std::vector<int32_t> items);              // of none: matches nothing
  int32_t repeat(int32_t item, int32_t min, int32_t max);  // 0 <= min, max == kUnbounded or >= min
  int32_t star(int32_t item) { return repeat(item, 0, kUnbounded); }
  int32_t plus(int32_t item) { return repeat(item, 1, kUnbounded); }
  int32_t optional(int32_t item) { return repeat(item, 0, 1); }

  // Rules. add_rule declares a new rule (names are unique; a taken name throws); define sets its
  // body once. rule_named finds a rule by name (-1 if none). fresh_name returns "<base>",
  // "<base>_1", ... whichever is free (for converters that invent helper rules).
  int32_t add_rule(const std::string& name);
  void define(int32_t rule, int32_t body);
  int32_t add_rule(const std::string& name, int32_t body) {
    int32_t r = add_rule(name);
    define(r, body);
    return r;
  }
  int32_t rule_named(const std::string& name) const;
  std::string fresh_name(const std::string& base) const;

  void set_root(int32_t rule) { root_ = rule; }
  int32_t root() const { return root_; }

  const Expr& expr(int32_t id) const { return exprs_.at(size_t(id)); }
  const Rule& rule(int32_t id) const { return rules_.at(size_t(id)); }
  size_t num_exprs() const { return exprs_.size(); }
  size_t num_rules() const { return rules_.size(); }

  // Throws GrammarError when a rule is declared but never defined, or no root is set.
  void check_complete() const;

  // The grammar in xgrammar's EBNF dialect (also GBNF: `name ::= ...`, "literal" with escapes
  // \n \t \" \\ \uHHHH \UHHHHHHHH, [a-z] classes, ( ) | * + ? {m,n}), root rule first. Parsing the
  // printed text with ebnf.h's parser gives the same language; xgrammar's Grammar.fromEBNF accepts
  // it. Rule names outside [A-Za-z_][A-Za-z0-9_-]* are printed with '_' for the other characters
  // (numbered if that clashes). A literal's bytes that are not valid UTF-8 cannot be written in
  // the dialect: each is printed as \u00HH, which reads back as that code point.
  std::string to_ebnf() const;

 private:
  int32_t add(Expr e);
  std::vector<Expr> exprs_;
  std::vector<Rule> rules_;
  std::unordered_map<std::string, int32_t> by_name_;
  int32_t root_ = -1;
};

// Normalizes code point ranges: sorts, merges overlapping and adjacent ones; with `negated`,
// returns the complement within [0, kMaxCodePoint] (surrogates D800-DFFF excluded either way).
std::vector<CharRange> normalize_ranges(std::vector<CharRange> ranges, bool negated);

}  // namespace nanovllm::structured
