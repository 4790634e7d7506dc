// The architectures we implement: config.json's `architectures` name -> its model_type and the
// class that builds it. A new family registers here (and its config keys in models/hf_config.cpp).
#include <array>

#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/hf_config.h"
#include "nanovllm/models/mistral.h"
#include "nanovllm/models/qwen2.h"
#include "nanovllm/models/qwen3.h"
#include "nanovllm/models/qwen3_moe.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

namespace {

struct Architecture {
  const char* name;        // config.json architectures[0]
  const char* model_type;  // config.json model_type
  std::unique_ptr<CausalLM> (*create)(const ModelConfig&, Backend&, Communicator*);
};

template <class Model>
std::unique_ptr<CausalLM> make(const ModelConfig& cfg, Backend& be, Communicator* comm) {
  return std::make_unique<Model>(cfg, be, comm);
}

constexpr std::array kArchitectures = {
    Architecture{"Qwen3ForCausalLM", "qwen3", make<Qwen3ForCausalLM>},
    Architecture{"Qwen3MoeForCausalLM", "qwen3_moe", make<Qwen3MoeForCausalLM>},
    Architecture{"Qwen2ForCausalLM", "qwen2", make<Qwen2ForCausalLM>},
    Architecture{"LlamaForCausalLM", "llama", make<LlamaForCausalLM>},
    Architecture{"MistralForCausalLM", "mistral", make<MistralForCausalLM>},
};

const Architecture* find_architecture(const std::string& name) {
  for (const auto& a : kArchitectures)
    if (name == a.name) return &a;
  return nullptr;
}

}  // namespace

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const auto& a : kArchitectures) names.emplace_back(a.name);
  return names;
}

std::string model_type_of(const std::string& architecture) {
  const Architecture* a = find_architecture(architecture);
  return a ? a->model_type : "";
}

void CausalLM::capture_aux_hidden(const std::vector<int64_t>& /*layers*/, int64_t /*max_tokens*/) {
  throw UserError("EAGLE-3: this model does not expose its hidden states to a draft head");
}

std::unique_ptr<CausalLM> create_model(const ModelConfig& cfg, Backend& be, Communicator* comm) {
  if (const Architecture* a = find_architecture(cfg.architecture)) return a->create(cfg, be, comm);
  std::string list;
  for (const auto& a : kArchitectures) list += std::string(list.empty() ? "" : ", ") + a.name;
  throw LoadError("unsupported architecture '" + cfg.architecture + "'; supported: " + list);
}

void validate_tensor_parallel(const ModelConfig& cfg, int world) {
  if (world < 1) throw UserError("--tensor-parallel-size must be positive (got " + std::to_string(world) + ")");
  const std::pair<const char*, int64_t> dims[] = {{"num_attention_heads", cfg.num_attention_heads},
                                                  {"num_key_value_heads", cfg.num_key_value_heads},
                                                  {"intermediate_size", cfg.intermediate_size},
                                                  {"vocab_size", cfg.vocab_size}};
  if (cfg.num_experts > 0 && cfg.moe_intermediate_size % world != 0)
    throw UserError("--tensor-parallel-size " + std::to_string(world) + " does not divide the model's " +
                    "moe_intermediate_size (" + std::to_string(cfg.moe_intermediate_size) + ")");
  for (auto& [name, v] : dims)
    if (v % world != 0)
      throw UserError("--tensor-parallel-size " + std::to_string(world) + " does not divide the model's " + name +
                      " (" + std::to_string(v) + "); choose a size that divides num_attention_heads (" +
                      std::to_string(cfg.num_attention_heads) + ") and num_key_value_heads (" +
                      std::to_string(cfg.num_key_value_heads) + ")");
}

}  // namespace nanovllm
