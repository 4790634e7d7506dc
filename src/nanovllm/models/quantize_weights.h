// --quantization on a checkpoint loaded in the weight dtype: every quantizable linear layer of
// the model (CausalLM::quantizable_linears) gets its weight replaced by codes and scales
// (Backend::quantize_weight), one layer at a time, so the peak is the unquantized model plus one
// layer's codes. Biases stay as they are. int8 converts the LM head too (CausalLM::lm_head).
#pragma once
#include <string>

#include "nanovllm/models/causal_lm.h"
#include "nanovllm/quantization.h"

namespace nanovllm {

// Throws UserError when the architecture has no quantized path (e.g. Qwen3-MoE's experts).
void quantize_weights(Backend& be, CausalLM& model, Quantization q, const std::string& architecture);

}  // namespace nanovllm
