// Qwen3 for causal LM: Llama (llama.h) with an RMSNorm over each q and k head before RoPE, as
// transformers' modular_qwen3.py adds q_norm / k_norm to the attention it takes from Llama/Qwen2.
#pragma once
#include "nanovllm/models/llama.h"

namespace nanovllm {

class Qwen3ForCausalLM final : public LlamaForCausalLM {
 public:
  Qwen3ForCausalLM(const ModelConfig& cfg, Backend& be, Communicator* comm)
      : LlamaForCausalLM(cfg, be, comm, {.qkv_bias = false, .qk_norm = true}) {}
};

}  // namespace nanovllm
