// JSON Schema -> grammar (grammar.h), with vLLM's / xgrammar's conventions: properties in schema
// order, strict mode (no properties or items beyond the schema's unless additionalProperties /
// items say so), compact separators ", " and ": " unless any_whitespace.
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "nanovllm/structured/grammar.h"

namespace nanovllm::structured {

struct JsonSchemaOptions {
  bool any_whitespace = false;  // [ \n\t]* between tokens instead of the fixed separators
  bool strict = true;           // additionalProperties / unevaluated items default to false
  int max_depth = 64;           // schema nesting refused past this
};

// Adds the rules of `schema` to `g` (rule names start with `prefix`) and returns the rule that
// matches one JSON value valid against it. Throws GrammarError naming the unsupported keyword or
// the fault (with its JSON pointer).
int32_t add_json_schema(Grammar& g, const nlohmann::json& schema, const JsonSchemaOptions& opt,
                        const std::string& prefix = "root");
// A grammar whose root is the schema (text: JSON; a parse error names the offset).
Grammar json_schema_to_grammar(std::string_view schema_text, const JsonSchemaOptions& opt);
// Any JSON object (response_format json_object).
Grammar json_object_grammar(const JsonSchemaOptions& opt);

}  // namespace nanovllm::structured
