// Mistral for causal LM: Llama (llama.h) whose every layer attends only to the last
// `sliding_window` keys when config.json sets one (transformers' MistralModel masks with
// create_sliding_window_causal_mask): the window comes from the config (models/hf_config.cpp,
// ModelConfig::layer_window) and the attention kernels apply it.
#pragma once
#include "nanovllm/models/llama.h"

namespace nanovllm {

class MistralForCausalLM final : public LlamaForCausalLM {
 public:
  MistralForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm) : LlamaForCausalLM(cfg, be, comm) {}
};

}  // namespace nanovllm
