// --quantization on a checkpoint loaded in the weight dtype: every quantizable linear layer of
// the model (CausalLM::quantizable_linears) gets its weight replaced by codes and scales
// (Backend::quantize_weight) as soon as the last checkpoint tensor that fills it is loaded, so the
// unquantized model never exists whole: the peak is the quantized model, one unquantized layer and
// the unquantized embedding. Biases stay as they are. int8 converts the LM head too
// (CausalLM::lm_head, once finalize_weights has tied it). awq, gptq and compressed-tensors quantize to
// their usual checkpoints' scheme (usual_int_weight_scheme), then Backend::prepare_int_weight; MoE
// experts are rounded to that scheme and kept dequantized (int_experts.h), which fp8 and int8 refuse.
#pragma once
#include <map>
#include <string>
#include <vector>

#include "nanovllm/config/quantization.h"
#include "nanovllm/models/causal_lm.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

class WeightQuantizer {
 public:
  // `specs`: what the load will fill (load_weights / load_dummy_weights with loaded() as their
  // callback). Throws UserError when the architecture has no quantized path for q (fp8 and int8 on
  // Qwen3-MoE's experts), before anything is loaded.
  WeightQuantizer(Backend& be, CausalLM& model, Quantization q, const std::string& architecture,
                  const std::vector<WeightSpec>& specs);
  // After each spec: quantizes its layer when this was the layer's last tensor.
  void loaded(const WeightSpec& s);
  // After CausalLM::finalize_weights: the layers loaded() did not complete (optional tensors
  // absent), then the int8 LM head.
  void finish();

 private:
  struct Pending {
    Linear* linear;
    int64_t specs_left;
  };
  void quantize(Tensor& weight, WeightScales& weight_scales);
  Backend& be_;
  CausalLM& model_;
  Quantization q_;
  std::map<const Tensor*, Pending> pending_;  // by the layer's weight tensor
  std::vector<const Tensor*> experts_;        // CausalLM::moe_expert_weights
};

}  // namespace nanovllm
