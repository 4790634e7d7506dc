// --structured-outputs-config JSON <-> StructuredOutputsConfig (structured_outputs_config.h).
#include "nanovllm/config/structured_outputs_config.h"

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {

bool is_structured_backend(const std::string& name) {
  return name == "auto" || name == "xgrammar" || name == "guidance" || name == "outlines" || name == "nanovllm";
}

std::string unknown_structured_backend(const std::string& what, const std::string& name) {
  return what + ": backend '" + name +
         "' is not available; structured outputs here use nanovllm's own grammar engine (accepted names: auto, "
         "xgrammar, guidance, outlines, nanovllm)";
}

StructuredOutputsConfig StructuredOutputsConfig::parse(const std::string& text, const std::string& flag) {
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(flag + " must be a JSON object: " + e.what());
  }
  if (!j.is_object()) throw UserError(flag + " must be a JSON object (got " + j.dump() + ")");
  StructuredOutputsConfig c;
  auto text_of = [&](const std::string& key, const nlohmann::ordered_json& v) {
    if (!v.is_string()) throw UserError(flag + ": '" + key + "' must be a string (got " + v.dump() + ")");
    return v.get<std::string>();
  };
  auto bool_of = [&](const std::string& key, const nlohmann::ordered_json& v) {
    if (!v.is_boolean()) throw UserError(flag + ": '" + key + "' must be true or false (got " + v.dump() + ")");
    return v.get<bool>();
  };
  for (auto& [key, v] : j.items()) {
    if (v.is_null()) continue;  // vLLM's None: the default
    if (key == "backend") {
      c.backend = text_of(key, v);
      if (!is_structured_backend(c.backend)) throw UserError(unknown_structured_backend(flag, c.backend));
    } else if (key == "disable_any_whitespace") {
      c.disable_any_whitespace = bool_of(key, v);
    } else if (key == "disable_additional_properties") {
      c.disable_additional_properties = bool_of(key, v);
    } else if (key == "disable_fallback") {
      c.disable_fallback = bool_of(key, v);
    } else if (key == "enable_in_reasoning") {
      c.enable_in_reasoning = bool_of(key, v);
    } else if (key == "reasoning_parser") {
      c.reasoning_parser = text_of(key, v);
    } else if (key == "reasoning_parser_plugin") {
      throw UserError(flag + ": 'reasoning_parser_plugin' is not supported (no Python plugins)");
    } else {
      throw UserError(flag + ": unknown key '" + key +
                      "' (known: backend, disable_any_whitespace, disable_additional_properties, disable_fallback, "
                      "enable_in_reasoning, reasoning_parser)");
    }
  }
  return c;
}

std::string StructuredOutputsConfig::to_json() const {
  nlohmann::ordered_json j = {{"backend", backend},
                              {"disable_any_whitespace", disable_any_whitespace},
                              {"disable_additional_properties", disable_additional_properties},
                              {"disable_fallback", disable_fallback},
                              {"enable_in_reasoning", enable_in_reasoning},
                              {"reasoning_parser", reasoning_parser}};
  return j.dump();
}

}  // namespace nanovllm
