#include "nanovllm/config/structured_outputs.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

const char* structured_kind_name(StructuredOutputs::Kind k) {
  switch (k) {
    case StructuredOutputs::Kind::None: return "none";
    case StructuredOutputs::Kind::JsonSchema: return "json";
    case StructuredOutputs::Kind::JsonObject: return "json_object";
    case StructuredOutputs::Kind::Regex: return "regex";
    case StructuredOutputs::Kind::Choice: return "choice";
    case StructuredOutputs::Kind::Grammar: return "grammar";
  }
  return "?";
}

std::string StructuredOutputs::cache_key() const {
  std::string key = structured_kind_name(kind);
  key += any_whitespace ? "|ws|" : "|compact|";
  if (kind == Kind::Choice) {
    for (const std::string& c : choices) {  // length-prefixed: no separator can be forged
      key += std::to_string(c.size());
      key += ':';
      key += c;
    }
  } else {
    key += text;
  }
  return key;
}

void StructuredOutputs::validate() const {
  switch (kind) {
    case Kind::None:
    case Kind::JsonObject: return;
    case Kind::Choice:
      if (choices.empty()) throw InvalidRequest("structured_outputs", "structured_outputs.choice must list at least one string");
      return;
    default:
      if (text.empty())
        throw InvalidRequest("structured_outputs",
                             std::string("structured_outputs.") + structured_kind_name(kind) + " must not be empty");
  }
}

}  // namespace nanovllm
