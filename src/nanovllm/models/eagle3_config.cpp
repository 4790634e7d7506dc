// EAGLE-3 heads' config.json -> Eagle3Config (eagle3_config.h).
#include "nanovllm/models/eagle3_config.h"

#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "nanovllm/models/hf_config.h"
#include "nanovllm/utils/error.h"
#include "nanovllm/utils/file_io.h"

namespace nanovllm {

namespace {

using nlohmann::json;

// The eagle_config keys of published heads and the one value of each that we implement (vLLM
// reads only use_aux_hidden_state; the others describe the layer we build).
bool implemented_eagle_key(const std::string& key, const json& v) {
  if (key == "use_aux_hidden_state" || key == "use_input_layernorm_in_first_layer" || key == "use_last_layernorm")
    return v == json(true);
  if (key == "use_mtp_layernorm") return v == json(false);
  return false;
}

std::vector<int64_t> layer_ids(const json& v, const std::string& where, const std::string& key) {
  if (!v.is_array() || v.size() != 3)
    throw LoadError(where + ": '" + key + "' must be a list of three layer ids (got " + v.dump() + ")");
  std::vector<int64_t> ids;
  for (const json& x : v) {
    if (!x.is_number_integer()) throw LoadError(where + ": '" + key + "' holds a non-integer (" + x.dump() + ")");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

}  // namespace

Eagle3Config parse_eagle3_config(const std::string& text, const std::string& where, const ModelConfig& target) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw LoadError(where + ": not valid JSON (" + e.what() + ")");
  }
  if (!j.is_object()) throw LoadError(where + ": not a JSON object");
  std::string arch;
  if (auto a = j.find("architectures"); a != j.end() && a->is_array() && a->size() == 1 && (*a)[0].is_string())
    arch = (*a)[0].get<std::string>();
  if (arch != "LlamaForCausalLMEagle3" && arch != "Eagle3LlamaForCausalLM")
    throw LoadError(where + ": architecture '" + arch +
                    "' is not an EAGLE-3 head we load (LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM; the "
                    "speculators format and EAGLE-1/2 heads are not implemented)");
  Eagle3Config c;
  std::vector<int64_t> ids;
  auto take_ids = [&](const json& v, const std::string& key) {
    std::vector<int64_t> got = layer_ids(v, where, key);
    if (!ids.empty() && ids != got)
      throw LoadError(where + ": 'eagle_aux_hidden_state_layer_ids' is given twice with different values");
    ids = got;
  };
  if (auto e = j.find("eagle_config"); e != j.end() && !e->is_null()) {
    if (!e->is_object()) throw LoadError(where + ": 'eagle_config' must be an object");
    for (auto& [key, v] : e->items()) {
      if (key == "eagle_aux_hidden_state_layer_ids")
        take_ids(v, "eagle_config." + key);
      else if (!implemented_eagle_key(key, v))
        throw LoadError(where + ": eagle_config." + key + " = " + v.dump() + " is not implemented");
    }
  }
  if (auto v = j.find("eagle_aux_hidden_state_layer_ids"); v != j.end() && !v->is_null())
    take_ids(*v, "eagle_aux_hidden_state_layer_ids");
  if (auto v = j.find("norm_before_residual"); v != j.end() && !v->is_null()) {
    if (!v->is_boolean()) throw LoadError(where + ": 'norm_before_residual' must be a boolean");
    c.norm_before_residual = v->get<bool>();
  }
  for (const char* key : {"parallel_drafting", "logit_scale"})
    if (auto v = j.find(key); v != j.end() && !v->is_null() && *v != json(false) && *v != json(1.0) && *v != json(1))
      throw LoadError(where + ": '" + key + "' = " + v->dump() + " is not implemented");
  int64_t draft_vocab = 0, target_hidden = 0;
  for (auto [key, dst] : {std::pair{"draft_vocab_size", &draft_vocab}, {"target_hidden_size", &target_hidden}})
    if (auto v = j.find(key); v != j.end() && !v->is_null()) {
      if (!v->is_number_integer() || v->get<int64_t>() < 1)
        throw LoadError(where + ": '" + key + "' must be a positive integer (got " + v->dump() + ")");
      *dst = v->get<int64_t>();
    }
  // The decoder layer: a Llama config (biases, activation, RoPE checked there).
  json layer = j;
  layer["architectures"] = json::array({"LlamaForCausalLM"});
  layer["model_type"] = "llama";
  for (const char* key : {"eagle_config", "eagle_aux_hidden_state_layer_ids", "draft_vocab_size", "target_hidden_size",
                          "norm_before_residual", "quantization_config"})
    layer.erase(key);
  if (j.contains("quantization_config"))
    throw LoadError(where + ": 'quantization_config': quantized EAGLE-3 heads are not implemented");
  c.layer = parse_model_config(layer.dump(), where);
  const ModelConfig& m = c.layer;
  if (m.num_hidden_layers != 1)
    throw LoadError(where + ": num_hidden_layers is " + std::to_string(m.num_hidden_layers) +
                    "; EAGLE-3 heads of more than one layer are not implemented");
  if (m.vocab_size != target.vocab_size)
    throw LoadError(where + ": vocab_size is " + std::to_string(m.vocab_size) + ", the target's " +
                    std::to_string(target.vocab_size) + ": the head must share the target's vocabulary");
  if (m.hidden_size != target.hidden_size || (target_hidden && target_hidden != target.hidden_size))
    throw LoadError(where + ": hidden_size " + std::to_string(m.hidden_size) +
                    (target_hidden ? " (target_hidden_size " + std::to_string(target_hidden) + ")" : "") +
                    " differs from the target's " + std::to_string(target.hidden_size) +
                    "; heads of another width than the target are not implemented");
  c.draft_vocab_size = draft_vocab ? draft_vocab : m.vocab_size;
  if (c.draft_vocab_size > m.vocab_size)
    throw LoadError(where + ": draft_vocab_size " + std::to_string(c.draft_vocab_size) + " exceeds vocab_size " +
                    std::to_string(m.vocab_size));
  const int64_t L = target.num_hidden_layers;
  if (ids.empty()) ids = {2, L / 2, L - 3};  // vLLM's default (get_eagle3_aux_hidden_state_layers)
  std::sort(ids.begin(), ids.end());         // the target appends them in layer order
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= L || (i > 0 && ids[i] == ids[i - 1]))
      throw LoadError(where + ": the aux hidden-state layers (" + std::to_string(ids[0]) + ", " +
                      std::to_string(ids[1]) + ", " + std::to_string(ids[2]) + ") must be three distinct layers of " +
                      "the target's " + std::to_string(L) + " (set eagle_aux_hidden_state_layer_ids)");
  c.aux_layer_ids = ids;
  return c;
}

Eagle3Config load_eagle3_config(const std::string& dir, const ModelConfig& target) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw LoadError(path + ": missing config.json of the EAGLE-3 head");
  return parse_eagle3_config(read_regular_file(path, size_t(1) << 20), path, target);
}

Eagle3Config dummy_eagle3_config(const ModelConfig& target) {
  Eagle3Config c;
  c.layer = target;
  c.layer.architecture = "LlamaForCausalLM";
  c.layer.num_hidden_layers = 1;
  c.layer.num_experts = 0;  // a dense layer even for a MoE target
  c.layer.sliding_window = 0;
  c.layer.sliding_layers.clear();
  c.layer.mlp_only_layers.clear();
  c.layer.checkpoint_quantization = Quantization::None;
  if (c.layer.intermediate_size <= 0) c.layer.intermediate_size = target.moe_intermediate_size;
  c.draft_vocab_size = std::min<int64_t>(32000, target.vocab_size);
  const int64_t L = target.num_hidden_layers;
  c.aux_layer_ids = {2, L / 2, L - 3};
  std::sort(c.aux_layer_ids.begin(), c.aux_layer_ids.end());
  if (c.aux_layer_ids[0] < 0 || c.aux_layer_ids[2] >= L || c.aux_layer_ids[0] == c.aux_layer_ids[1] ||
      c.aux_layer_ids[1] == c.aux_layer_ids[2])
    c.aux_layer_ids = {0, L / 2, L - 1};  // a small target (vLLM's default needs 6 layers)
  if (L < 3)
    throw UserError("an EAGLE-3 head needs a target of at least 3 layers (it fuses three), '" + target.architecture +
                    "' has " + std::to_string(L));
  return c;
}

}  // namespace nanovllm
