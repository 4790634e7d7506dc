// The structured-output fields of a request, as vLLM's OpenAI server reads them, into
// StructuredOutputs (structured_outputs.h). Shared by the server (/v1/completions and
// /v1/chat/completions), `generate --input` JSONL lines and the Python layer (which sends its
// StructuredOutputsParams / GuidedDecodingParams as the same JSON):
//   response_format      {"type": "text" | "json_object" | "json_schema",
//                         "json_schema": {"name", "schema", "strict", "description"}}
//   structured_outputs   {"json" (a schema object or its JSON text), "regex", "choice" (strings),
//                         "grammar", "json_object": true, "disable_any_whitespace",
//                         "whitespace_pattern", "disable_fallback", "disable_additional_properties"}
//   guided_json, guided_regex, guided_choice, guided_grammar, guided_decoding_backend,
//   guided_whitespace_pattern (vLLM's older fields)
// Refused with InvalidRequest naming the field: more than one kind of constraint ("You can only use
// one kind of structured outputs constraint"), structural tags (not implemented), a backend other
// than ours, a whitespace pattern other than the two we have, unknown keys of structured_outputs.
// JSON schemas keep their key order (property order is the output's), so the body is an
// ordered_json.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/config/structured_outputs.h"
#include "nanovllm/config/structured_outputs_config.h"

namespace nanovllm {

struct StructuredRequest {
  StructuredOutputs spec;  // kind None when the request asks for nothing
  // The field that set it ("response_format", "structured_outputs", "guided_json", ...): the
  // param of errors about the constraint (a schema the compiler refuses).
  std::string field;
};

// `body`: the request object. `cfg`: the engine's defaults (disable_any_whitespace).
StructuredRequest read_structured_fields(const nlohmann::ordered_json& body, const StructuredOutputsConfig& cfg);

// Whether a whitespace pattern is one we implement as any_whitespace: a character class of exactly
// space, newline and tab, repeated ("[ \n\t]*" in any order, the characters literal or escaped).
bool is_any_whitespace_pattern(const std::string& pattern);

}  // namespace nanovllm
