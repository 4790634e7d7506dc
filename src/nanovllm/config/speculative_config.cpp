// --speculative-config JSON <-> SpeculativeConfig (speculative_config.h).
#include "nanovllm/config/speculative_config.h"

#include <nlohmann/json.hpp>

#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

// vLLM's methods we do not have yet: refused by name rather than as unknown.
bool is_unimplemented_method(const std::string& m) {
  return m == "eagle" || m == "medusa" || m == "mlp_speculator" || m == "deepseek_mtp" || m == "mtp" || m == "suffix";
}

}  // namespace

SpeculativeConfig SpeculativeConfig::parse(const std::string& text, const std::string& flag) {
  if (text.empty()) return {};
  nlohmann::ordered_json j;
  try {
    j = nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw UserError(flag + " must be a JSON object: " + e.what());
  }
  if (j.is_null()) return {};
  if (!j.is_object()) throw UserError(flag + " must be a JSON object (got " + j.dump() + ")");
  if (j.empty()) return {};
  SpeculativeConfig c;
  auto int_of = [&](const std::string& key, const nlohmann::ordered_json& v) {
    if (!v.is_number_integer()) throw UserError(flag + ": '" + key + "' must be an integer (got " + v.dump() + ")");
    return v.get<int64_t>();
  };
  bool has_min = false, has_max = false, has_k = false;
  for (auto& [key, v] : j.items()) {
    if (v.is_null()) continue;  // vLLM's None: the default
    if (key == "method") {
      if (!v.is_string()) throw UserError(flag + ": 'method' must be a string (got " + v.dump() + ")");
      c.method = v.get<std::string>();
      if (c.method == "[ngram]") c.method = "ngram";  // vLLM's older spelling
      if (is_unimplemented_method(c.method))
        throw UserError(flag + ": method '" + c.method +
                        "' is not implemented yet (available: ngram, draft_model, eagle3)");
      if (c.method != "ngram" && c.method != "draft_model" && c.method != "eagle3")
        throw UserError(flag + ": unknown method '" + c.method + "' (available: ngram, draft_model, eagle3)");
    } else if (key == "num_speculative_tokens") {
      c.num_speculative_tokens = int_of(key, v);
      has_k = true;
    } else if (key == "prompt_lookup_min") {
      c.prompt_lookup_min = int_of(key, v);
      has_min = true;
    } else if (key == "prompt_lookup_max") {
      c.prompt_lookup_max = int_of(key, v);
      has_max = true;
    } else if (key == "model") {
      if (!v.is_string() || v.get<std::string>().empty())
        throw UserError(flag + ": 'model' must be a non-empty string, the draft model's directory (got " + v.dump() +
                        ")");
      c.model = v.get<std::string>();
    } else if (key == "disable_by_batch_size") {
      c.disable_by_batch_size = int_of(key, v);
      if (c.disable_by_batch_size < 2)
        throw UserError(flag + ": 'disable_by_batch_size' must be at least 2 (got " +
                        std::to_string(c.disable_by_batch_size) + ")");
    } else if (key == "draft_tensor_parallel_size") {
      // vLLM's key: under tensor parallelism our drafter runs un-sharded on rank 0 (vLLM's 1).
      if (const int64_t n = int_of(key, v); n != 1)
        throw UserError(flag + ": 'draft_tensor_parallel_size' " + std::to_string(n) +
                        " is not supported: the draft model or EAGLE-3 head runs un-sharded on rank 0 (1 only)");
    } else if (key == "backoff") {
      if (!v.is_boolean()) throw UserError(flag + ": 'backoff' must be true or false (got " + v.dump() + ")");
      c.backoff = v.get<bool>();
    } else {
      throw UserError(flag + ": unknown key '" + key +
                      "' (known: method, model, num_speculative_tokens, prompt_lookup_min, prompt_lookup_max, "
                      "disable_by_batch_size, draft_tensor_parallel_size, backoff)");
    }
  }
  if (c.method.empty() && !c.model.empty()) c.method = "draft_model";  // vLLM: a model without a method
  if (c.method.empty()) throw UserError(flag + ": 'method' is required (available: ngram, draft_model, eagle3)");
  if (c.method == "draft_model" && c.model.empty())
    throw UserError(flag + ": method 'draft_model' needs 'model', the draft model's directory");
  if (c.method == "ngram" && !c.model.empty())
    throw UserError(flag + ": method 'ngram' takes no 'model' (a draft model is method 'draft_model')");
  if (c.method != "ngram" && (has_min || has_max))
    throw UserError(flag + ": 'prompt_lookup_min' / 'prompt_lookup_max' belong to method 'ngram', not '" + c.method +
                    "'");
  if (!has_k) throw UserError(flag + ": 'num_speculative_tokens' is required");
  if (c.num_speculative_tokens < 1 || c.num_speculative_tokens > 64)
    throw UserError(flag + ": 'num_speculative_tokens' must be in [1, 64] (got " +
                    std::to_string(c.num_speculative_tokens) + ")");
  if (c.method != "ngram") return c;
  if (!has_min && !has_max) c.prompt_lookup_min = c.prompt_lookup_max = 5;
  if (!has_min) c.prompt_lookup_min = c.prompt_lookup_max;
  if (!has_max) c.prompt_lookup_max = c.prompt_lookup_min;
  if (c.prompt_lookup_min < 1)
    throw UserError(flag + ": 'prompt_lookup_min' must be at least 1 (got " + std::to_string(c.prompt_lookup_min) +
                    ")");
  if (c.prompt_lookup_max > 1024)
    throw UserError(flag + ": 'prompt_lookup_max' must be at most 1024 (got " + std::to_string(c.prompt_lookup_max) +
                    ")");
  if (c.prompt_lookup_min > c.prompt_lookup_max)
    throw UserError(flag + ": 'prompt_lookup_min' (" + std::to_string(c.prompt_lookup_min) +
                    ") must not exceed 'prompt_lookup_max' (" + std::to_string(c.prompt_lookup_max) + ")");
  return c;
}

std::string SpeculativeConfig::to_json() const {
  if (!enabled()) return "";
  nlohmann::ordered_json j = {{"method", method}, {"num_speculative_tokens", num_speculative_tokens}};
  if (method == "ngram") {
    j["prompt_lookup_min"] = prompt_lookup_min;
    j["prompt_lookup_max"] = prompt_lookup_max;
  }
  if (!model.empty()) j["model"] = model;
  if (disable_by_batch_size > 0) j["disable_by_batch_size"] = disable_by_batch_size;
  if (!backoff) j["backoff"] = false;
  return j.dump();
}

}  // namespace nanovllm
