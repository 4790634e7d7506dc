// Hugging Face model configs -> ModelConfig (config/config.h holds the struct): config.json with
// generation_config.json (hf_config.cpp), the built-in presets for runs without weights
// (presets.cpp), and the architectures we implement (registry.cpp).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"

namespace nanovllm {

// Parses <dir>/config.json (+ generation_config.json if present). Throws LoadError naming the
// file and key of a wrong type, an out-of-range size or a feature we do not implement.
ModelConfig load_model_config(const std::string& dir);
// Parses a config.json text (already read); `where` names it in errors.
ModelConfig parse_model_config(const std::string& text, const std::string& where);

// Built-in presets for benchmarks without weights (preset_names(): Qwen3, Qwen3-MoE, Qwen2.5,
// Llama 3.x, Mistral).
std::optional<ModelConfig> preset_model_config(const std::string& name);
std::vector<std::string> preset_names();

// The config.json `architectures` we implement (registry.cpp).
std::vector<std::string> supported_architectures();
// The config.json model_type of a supported architecture; "" for any other.
std::string model_type_of(const std::string& architecture);

}  // namespace nanovllm
