// Qwen2 / Qwen2.5 for causal LM: Llama (llama.h) with biases in q_proj, k_proj and v_proj (not in
// o_proj), as transformers' modular_qwen2.py builds Qwen2Attention. Its sliding window (only with
// use_sliding_window, from layer max_window_layers on) comes from the config (models/hf_config.cpp).
#pragma once
#include "nanovllm/models/llama.h"

namespace nanovllm {

class Qwen2ForCausalLM final : public LlamaForCausalLM {
 public:
  Qwen2ForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm)
      : LlamaForCausalLM(cfg, be, comm, {.qkv_bias = true, .qk_norm = false}) {}
};

}  // namespace nanovllm
