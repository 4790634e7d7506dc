// EBNF grammar text -> grammar (grammar.h): xgrammar's EBNF dialect, which is also llama.cpp's GBNF
// (`name ::= ...`, "literals", [classes], ( ), |, * + ?, {m,n}, # comments).
#pragma once
#include <string>
#include <string_view>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

// Throws GrammarError naming the line:column and what was expected, or the undefined rule.
Grammar parse_ebnf(std::string_view text, const std::string& root_rule = "root");

}  // namespace nanovllm::structured
