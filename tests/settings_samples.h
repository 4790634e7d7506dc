// A value other than the default for each engine setting (config/settings.h), valid on its own:
// the tests of the CLI flags, the Python keywords and the tensor-parallel wire set every setting
// to it and check that it arrives.
#pragma once
#include <string>

#include "nanovllm/config/settings.h"

namespace nanovllm::test {

// The CLI's text of a value that differs from s's default.
inline std::string other_value_text(const Setting& s) {
  const EngineConfig defaults;
  const std::string d = setting_text(s.get(defaults));
  switch (s.type) {
    case SettingType::Bool:
    case SettingType::OptionalBool: return d == "true" ? "false" : "true";
    case SettingType::Int: return std::to_string(std::stoll(d) + 1);
    case SettingType::Float: return "0.5";
    case SettingType::Text:
      if (s.name == "kernel_options") return "pdl=off,decode_warps=4";
      if (s.name == "structured_outputs_config") return R"({"backend": "xgrammar", "disable_any_whitespace": false})";
      if (s.name == "speculative_config") return R"({"method":"ngram","num_speculative_tokens":3,"prompt_lookup_min":2,"prompt_lookup_max":4})";
      if (s.name == "pooler_config") return R"({"pooling_type":"MEAN","normalize":false,"activation":false})";
      if (s.name == "hf_overrides") return R"({"classifier_from_token":["no","yes"],"method":"from_2_way_softmax"})";
      return "host.example";
    case SettingType::Choice:
      for (auto it = s.choices.rbegin(); it != s.choices.rend(); ++it)
        if (*it != d) return *it;
      return d;  // a single accepted value (scheduling_policy: fcfs)
  }
  return d;
}

}  // namespace nanovllm::test
