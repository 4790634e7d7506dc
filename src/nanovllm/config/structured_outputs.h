// What a request asks its output to conform to (vLLM's StructuredOutputsParams): exactly one of a
// JSON schema, any JSON object, a regular expression, a choice of strings or a grammar. Plain data:
// the server, the Python layer and `generate --input` fill it; the engine compiles it
// (structured/compiler.h) into the matcher that masks each step's tokens.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace nanovllm {

struct StructuredOutputs {
  enum class Kind : uint8_t {
    None,        // unconstrained
    JsonSchema,  // `text` is a JSON Schema (JSON text)
    JsonObject,  // any JSON object (response_format json_object)
    Regex,       // `text` is a regular expression the whole output matches
    Choice,      // the output is exactly one of `choices`
    Grammar,     // `text` is an EBNF grammar (xgrammar's / GBNF dialect, root rule `root`)
  };
  Kind kind = Kind::None;
  std::string text;
  std::vector<std::string> choices;
  // JSON kinds: allow any whitespace between tokens ([ \n\t]*), as vLLM's xgrammar default does;
  // false (our default, vLLM's disable_any_whitespace) allows only the separators ", " and ": ".
  bool any_whitespace = false;
  // Reasoning models (set by the front end with --reasoning-parser, not by the user): the output is
  // free until this token (e.g. Qwen3's </think>) has been generated, constrained after it; -1:
  // constrained from the first token.
  int32_t start_after_token = -1;

  bool active() const { return kind != Kind::None; }
  // A stable key for the compiled-grammar cache (kind + options + text).
  std::string cache_key() const;
  // Throws InvalidRequest("structured_outputs", ...) on an empty schema/regex/grammar or choice list.
  void validate() const;
};

const char* structured_kind_name(StructuredOutputs::Kind k);

}  // namespace nanovllm
