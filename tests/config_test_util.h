// Shared helpers of the config.json parsing tests: parse a json object as a model's config.json,
// or the LoadError message it gets ("" when it parses).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "nanovllm/config/config.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"

namespace nanovllm::test {

inline ModelConfig parse_config(const nlohmann::json& j) { return parse_model_config(j.dump(), "m/config.json"); }

inline std::string config_error(const nlohmann::json& j) {
  try {
    parse_config(j);
  } catch (const LoadError& e) {
    return e.what();
  }
  return "";
}

}  // namespace nanovllm::test
