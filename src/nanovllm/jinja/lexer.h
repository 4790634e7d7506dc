// Jinja lexer. Follows @huggingface/jinja's tokenizer exactly (which is what Hugging Face chat
// templates are rendered with in JavaScript): the template is first preprocessed the way HF
// configures Jinja for chat templates (trim_blocks=True, lstrip_blocks=True, one trailing
// newline dropped, the transformers-only {% generation %} tag removed), then split into tokens.
// Every token remembers its byte offset in the ORIGINAL source, for line:col in errors.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nanovllm::jinja {

enum class Tok : uint8_t {
  Text,
  Number,
  String,
  Ident,
  Equals,
  LParen,
  RParen,
  OpenStmt,
  CloseStmt,
  OpenExpr,
  CloseExpr,
  LBracket,
  RBracket,
  LBrace,
  RBrace,
  Comma,
  Dot,
  Colon,
  Pipe,
  Additive,
  Multiplicative,
  Power,
  Comparison,
  Unary,
  Comment,
};
const char* tok_name(Tok t);

struct Token {
  Tok type;
  std::string value;
  uint32_t offset;  // byte offset in the original template source
};

// Byte offset -> "line:col" (1-based; col counts bytes).
std::string line_col(std::string_view source, uint32_t offset);

// Throws TokenizerError naming the offending construct and its line:col.
std::vector<Token> tokenize(std::string_view source);

}  // namespace nanovllm::jinja
