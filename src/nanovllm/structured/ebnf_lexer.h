// The EBNF front end's tokens (internal to ebnf.cpp and ebnf_lexer.cpp): the grammar text cut into
// names, `::=`, literals (escapes already decoded to UTF-8), character classes (already decoded to
// code point ranges), punctuation and the end, each with its line:column for error messages.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured::ebnf {

enum class Tok : uint8_t {
  Name,       // [A-Za-z0-9_.-]+: a rule name, or a number inside { }
  Assign,     // ::=
  Literal,    // "..." or '...'; `text` holds the UTF-8 value
  Class,      // [...] / [^...]; `ranges` and `negated`
  LParen,     // (
  LookParen,  // (=  (xgrammar's lookahead assertion)
  RParen,     // )
  Pipe,       // |
  Star,       // *
  Plus,       // +
  Question,   // ?
  LBrace,     // {
  RBrace,     // }
  Comma,      // ,
  End,
};

struct Token {
  Tok kind = Tok::End;
  std::string text;  // Name: the name; Literal: the value; otherwise the source text
  std::vector<CharRange> ranges;
  bool negated = false;
  int line = 1, column = 1;
};

// "ebnf at LINE:COLUMN: what" as a GrammarError.
[[noreturn]] void fail_at(int line, int column, const std::string& what);

// The whole text as tokens, the last one End. Throws GrammarError at the offending line:column
// (bad escapes, unterminated literals or classes, stray characters, text that is not UTF-8).
std::vector<Token> tokenize(std::string_view text);

// How a token kind reads in an error message.
std::string describe(const Token& t);

}  // namespace nanovllm::structured::ebnf
