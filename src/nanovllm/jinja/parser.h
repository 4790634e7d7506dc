// Recursive-descent parser from tokens to the syntax tree. Grammar and operator precedence follow
// @huggingface/jinja's parser.ts (lowest first): inline if/else, or, and, not, comparisons and
// `in`, + - ~, * / // %, **, `is` tests, `|` filters, unary sign, calls/members, primaries.
// Nesting is bounded (kMaxParseDepth) so that hostile input cannot overflow the stack: blocks,
// brackets and every link of a chain (a|f|g, a + b + c, a.b.c) count as one level each.
#pragma once
#include <string_view>
#include <vector>

#include "nanovllm/jinja/ast.h"
#include "nanovllm/jinja/lexer.h"

namespace nanovllm::jinja {

constexpr int kMaxParseDepth = 200;

// Throws TokenizerError naming the construct and its line:col.
NodeList parse(std::string_view source, const std::vector<Token>& tokens);

}  // namespace nanovllm::jinja
