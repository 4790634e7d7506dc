#include "nanovllm/models/quantize_weights.h"

#include "nanovllm/utils/error.h"

namespace nanovllm {

void quantize_weights(Backend& be, CausalLM& model, Quantization q, const std::string& architecture) {
  if (q == Quantization::None) return;
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty())
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": not implemented for " + architecture);
  for (Linear* l : linears) {
    Tensor codes;
    WeightScales scales;
    be.quantize_weight(l->weight, q, codes, scales);
    l->weight = codes;  // the unquantized weight is freed here
    l->weight_scales = scales;
  }
  // int8 converts the LM head too (llama.cpp's Q8_0 does); tied to the embedding, the embedding keeps
  // the unquantized table for its row lookups.
  if (LMHead* head = model.lm_head(); head && q == Quantization::INT8) {
    Tensor codes;
    WeightScales scales;
    be.quantize_weight(head->weight, q, codes, scales);
    head->weight = codes;
    head->weight_scales = scales;
  }
}

}  // namespace nanovllm
