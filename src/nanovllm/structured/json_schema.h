// JSON Schema -> grammar (grammar.h), with vLLM's / xgrammar's conventions: properties in schema
// order, strict mode (no properties or items beyond the schema's unless additionalProperties /
// items say so), compact separators ", " and ": " unless any_whitespace.
//
// The grammar is exact for what it accepts: every keyword that applies at a position is honoured
// together (a `const` beside a `type`, `allOf` branches, `$ref` with sibling keywords, anyOf
// branches each merged with their parent), and a keyword that cannot be honoured is refused with a
// GrammarError naming it and its JSON pointer, never dropped. Where a value has several JSON
// spellings the grammar admits one canonical subset (object keys in schema order, numbers with
// bounds without exponents, no lone surrogate escapes). `oneOf` is treated as `anyOf` (xgrammar
// does the same): a value matching two branches is accepted. `minLength` / `maxLength` count
// characters, an escape sequence being one (xgrammar forbids escapes there).
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

struct JsonSchemaOptions {
  bool any_whitespace = false;                // [ \n\t]* between tokens instead of the fixed separators
  bool strict = true;                         // additionalProperties / unevaluated items default to false
  int max_depth = 64;                         // schema nesting refused past this
  size_t max_schema_bytes = size_t(1) << 20;  // schema text refused past this (json_schema_to_grammar)
  int max_rules = 20000;                      // grammar rules one schema may produce
  int max_alternatives = 4096;                // anyOf / oneOf combinations (branches multiply when nested or merged)
};

// Adds the rules of `schema` to `g` (rule names start with `prefix`) and returns the rule that
// matches one JSON value valid against it. Throws GrammarError naming the unsupported keyword or
// the fault (with its JSON pointer).
// The ordered_json form keeps the schema's property order (the order the grammar imposes); the
// nlohmann::json form sees properties sorted by name.
int32_t add_json_schema(Grammar& g, const nlohmann::json& schema, const JsonSchemaOptions& opt,
                        const std::string& prefix = "root");
int32_t add_json_schema(Grammar& g, const nlohmann::ordered_json& schema, const JsonSchemaOptions& opt,
                        const std::string& prefix = "root");
// A grammar whose root is the schema (text: JSON; a parse error names the offset).
Grammar json_schema_to_grammar(std::string_view schema_text, const JsonSchemaOptions& opt);
// Any JSON object (response_format json_object).
Grammar json_object_grammar(const JsonSchemaOptions& opt);

}  // namespace nanovllm::structured
