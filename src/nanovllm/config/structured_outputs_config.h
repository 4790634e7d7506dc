// The engine-wide structured-output settings (vLLM's --structured-outputs-config JSON, and the older
// --guided-decoding-backend): which backend (we have one, our own grammar engine: vLLM's names are
// accepted as meaning it), the JSON whitespace default, and the reasoning options. One setting of the
// table (settings_table.cpp); the request side reads it (structured_request.h).
#pragma once
#include <string>

namespace nanovllm {

struct StructuredOutputsConfig {
  // auto, xgrammar, guidance, outlines or nanovllm: all mean our engine; anything else is refused.
  std::string backend = "auto";
  // JSON kinds: compact separators unless a request allows any whitespace. vLLM's default is false
  // (any whitespace); ours is true (compact), which keeps models from padding JSON with newlines.
  bool disable_any_whitespace = true;
  // vLLM's guidance-only option (no additionalProperties where a schema leaves it out): accepted;
  // our engine always reads schemas that way (xgrammar's strict mode), whatever its value.
  bool disable_additional_properties = false;
  // vLLM: fall back to another backend on an unsupported schema. Accepted; we have no other, so a
  // schema we cannot compile is always a 400.
  bool disable_fallback = false;
  // The grammar applies inside the reasoning too (vLLM's enable_in_reasoning): no start token.
  bool enable_in_reasoning = false;
  // The reasoning parser (vLLM lets this JSON name it; `serve --reasoning-parser` is the same).
  std::string reasoning_parser;

  // `text`: a JSON object of the fields above; unknown keys and wrong types throw UserError
  // naming `flag` and the key.
  static StructuredOutputsConfig parse(const std::string& text, const std::string& flag);
  std::string to_json() const;  // every field, compact
};

// Whether `name` is a structured-output backend we take as ours (auto, xgrammar, guidance,
// outlines, nanovllm).
bool is_structured_backend(const std::string& name);
// The message refusing another backend name, naming where it was given (`what`).
std::string unknown_structured_backend(const std::string& what, const std::string& name);

}  // namespace nanovllm
