// EAGLE-3 draft heads' config.json (the layout vLLM loads: yuhuili/EAGLE3-LLaMA3.1-Instruct-8B,
// Tengyunw/qwen3_8b_eagle3, AngelSlim/Qwen3-8B_eagle3; architectures LlamaForCausalLMEagle3 or
// Eagle3LlamaForCausalLM): one Llama decoder layer whose attention reads [embed(token), fused
// hidden] (2H wide q/k/v), an `fc` fusing three of the target's hidden states (3H -> H), its own LM
// head over draft_vocab_size tokens (d2t maps them to the target's ids).
// The head's decoder layer is read as a LlamaForCausalLM config (hf_config.h: biases, activations,
// RoPE scaling checked there); the EAGLE keys here. Refused by name: more than one layer,
// use_aux_hidden_state false (EAGLE-1 style heads), another hidden size than the target's, another
// vocabulary, the speculators format (Eagle3Speculator), eagle_config keys we do not implement.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "nanovllm/config/config.h"

namespace nanovllm {

struct Eagle3Config {
  ModelConfig layer;             // the head's decoder layer (num_hidden_layers 1; vocab_size: the target's)
  int64_t draft_vocab_size = 0;  // rows of the head's lm_head (default: vocab_size)
  // The target layers whose input residual streams are fused, ascending (vLLM's
  // eagle_aux_hidden_state_layer_ids: id j = the stream entering layer j, 0 = the embedding output;
  // default 2, L/2, L-3 for a target of L layers).
  std::vector<int64_t> aux_layer_ids;
  bool norm_before_residual = false;  // the residual after the layer is hidden_norm(h), not h
};

// <dir>/config.json of a head for `target`; errors name the file and the key.
Eagle3Config load_eagle3_config(const std::string& dir, const ModelConfig& target);
Eagle3Config parse_eagle3_config(const std::string& text, const std::string& where, const ModelConfig& target);
// The shape of a head for `target` (--load-format dummy without a head directory): the target's
// hidden size, heads and intermediate size, a draft vocabulary of min(32000, V), default layers.
Eagle3Config dummy_eagle3_config(const ModelConfig& target);

}  // namespace nanovllm
