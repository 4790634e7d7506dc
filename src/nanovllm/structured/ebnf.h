// EBNF grammar text -> grammar (grammar.h): xgrammar's EBNF dialect, which is also llama.cpp's GBNF
// (`name ::= ...`, "literals", [classes], ( ), |, * + ?, {m,n}, # comments).
//
// Rule names are [A-Za-z0-9_.-]+; a rule's body runs until the next `name ::=` or the end of the
// text, so it may span lines. Literals are "..." or '...' (xgrammar knows only "..."); the escapes
// in literals and classes are listed in ebnf_lexer.cpp (\xHH takes exactly two hex digits, as GBNF;
// classes also take \d \w \s \D \W \S). xgrammar's lookahead assertion `(= ...)` at the end of a
// rule is parsed and dropped: it only helps xgrammar's matcher and never changes the language.
// xgrammar's macros (TagDispatch(...), Regex(...)) and rule attributes (name[max_tokens=..]) are
// not part of the dialect. Repetition bounds are taken as written (up to 2^31-1); bounding their
// expansion is the automaton compiler's job.
#pragma once
#include <string>
#include <string_view>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

// Throws GrammarError "ebnf at LINE:COLUMN: ..." naming what was expected, the undefined or
// duplicated rule; or "ebnf: the root rule 'NAME' is not defined".
Grammar parse_ebnf(std::string_view text, const std::string& root_rule = "root");

}  // namespace nanovllm::structured
