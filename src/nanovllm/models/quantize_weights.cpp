#include "nanovllm/models/quantize_weights.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

void quantize_weights(Backend& be, CausalLM& model, Quantization q, const std::string& architecture) {
  if (q == Quantization::None) return;
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty())
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": not implemented for " + architecture);
  auto quantize = [&](Tensor& weight, WeightScales& weight_scales) {
    Tensor codes;
    WeightScales scales;
    be.quantize_weight(weight, q, codes, scales);
    weight = codes;  // the unquantized weight is freed here (unless the embedding shares it)
    weight_scales = scales;
  };
  for (Linear* l : linears) quantize(l->weight, l->weight_scales);
  // int8 converts the LM head too (llama.cpp's Q8_0 does); tied to the embedding, the embedding keeps
  // the unquantized table for its row lookups.
  if (LMHead* head = model.lm_head(); head && q == Quantization::INT8) quantize(head->weight, head->weight_scales);
}

}  // namespace nanovllm
