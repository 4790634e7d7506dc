#include "nanovllm/config/generation_defaults.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nanovllm/utils/error.h"

namespace nanovllm {
namespace fs = std::filesystem;

namespace {

// Reads the keys vLLM takes from a generation config into `d` (present keys override).
void merge(const nlohmann::json& j, GenerationDefaults& d, const std::string& where) {
  if (!j.is_object()) throw UserError(where + ": must be a JSON object");
  auto num = [&](const char* key, std::optional<double>& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    if (!it->is_number()) throw UserError(where + ": '" + key + "' must be a number");
    out = it->get<double>();
  };
  auto integer = [&](const char* key, std::optional<int64_t>& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return;
    if (!it->is_number_integer()) throw UserError(where + ": '" + key + "' must be an integer");
    out = it->get<int64_t>();
  };
  num("temperature", d.temperature);
  num("top_p", d.top_p);
  num("min_p", d.min_p);
  num("repetition_penalty", d.repetition_penalty);
  integer("top_k", d.top_k);
  integer("max_new_tokens", d.max_tokens);
  integer("max_tokens", d.max_tokens);  // --override-generation-config may use vLLM's request name
  if (d.max_tokens && *d.max_tokens < 1) throw UserError(where + ": max_new_tokens must be at least 1");
  try {
    d.params().validate();
  } catch (const InvalidRequest& e) {
    throw UserError(where + ": " + e.what());
  }
}

nlohmann::json parse(const std::string& text, const std::string& where) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(where + ": not valid JSON: " + e.what());
  }
}

}  // namespace

nlohmann::json GenerationDefaults::as_json() const {
  nlohmann::json j = nlohmann::json::object();
  if (repetition_penalty) j["repetition_penalty"] = *repetition_penalty;
  if (temperature) j["temperature"] = *temperature;
  if (top_k) j["top_k"] = *top_k;
  if (top_p) j["top_p"] = *top_p;
  if (min_p) j["min_p"] = *min_p;
  if (max_tokens) j["max_tokens"] = *max_tokens;
  return j;
}

std::string GenerationDefaults::log_line() const {
  return "Default sampling parameters have been overridden by the model's Hugging Face generation config: " +
         as_json().dump() + " (--generation-config vllm ignores it)";
}

SamplingParams GenerationDefaults::params() const {
  SamplingParams sp;
  if (temperature) sp.temperature = float(*temperature);
  if (top_k) sp.top_k = int(*top_k);
  if (top_p) sp.top_p = float(*top_p);
  if (min_p) sp.min_p = float(*min_p);
  if (repetition_penalty) sp.repetition_penalty = float(*repetition_penalty);
  return sp;
}

GenerationDefaults load_generation_defaults(const std::string& mode, const std::string& model_dir,
                                            const std::string& override_json) {
  GenerationDefaults d;
  if (mode != "vllm") {
    const fs::path dir = mode == "auto" ? fs::path(model_dir) : fs::path(mode);
    const fs::path file = dir / "generation_config.json";
    std::error_code ec;
    if (mode != "auto" && !fs::is_directory(dir, ec))
      throw UserError("--generation-config " + mode + ": not auto, vllm or a directory");
    if (fs::is_regular_file(file, ec)) {
      std::ifstream in(file);
      std::ostringstream ss;
      ss << in.rdbuf();
      if (!in) throw UserError(file.string() + ": cannot read");
      merge(parse(ss.str(), file.string()), d, file.string());
    } else if (mode != "auto") {
      throw UserError("--generation-config " + mode + ": no generation_config.json there");
    }
  }
  if (!override_json.empty())
    merge(parse(override_json, "--override-generation-config"), d, "--override-generation-config");
  return d;
}

}  // namespace nanovllm
