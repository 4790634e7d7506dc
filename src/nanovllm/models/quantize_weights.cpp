#include "nanovllm/models/quantize_weights.h"

#include <algorithm>

#include "nanovllm/models/int_experts.h"
#include "nanovllm/utils/error.h"

namespace nanovllm {

WeightQuantizer::WeightQuantizer(Backend& be, CausalLM& model, Quantization q, const std::string& architecture,
                                 const std::vector<WeightSpec>& specs)
    : be_(be), model_(model), q_(q) {
  const std::vector<Linear*> linears = model.quantizable_linears();
  if (linears.empty())
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": not implemented for " + architecture);
  experts_ = model.moe_expert_weights();
  if (!experts_.empty() && !is_int_weight_only(q))
    throw UserError(std::string("--quantization ") + quantization_name(q) + ": not implemented for " + architecture +
                    " (its MoE experts have no " + quantization_name(q) + " path)");
  for (Linear* l : linears) pending_[&l->weight] = {l, 0};
  for (const WeightSpec& s : specs)
    if (auto it = pending_.find(s.dst); it != pending_.end()) ++it->second.specs_left;
}

void WeightQuantizer::quantize(Tensor& weight, WeightScales& weight_scales) {
  Tensor codes;
  WeightScales scales;
  be_.quantize_weight(weight, q_, codes, scales);
  if (is_int_weight_only(q_)) be_.prepare_int_weight(codes, scales);  // the backend's layout (int_weights.h)
  weight = codes;  // the unquantized weight is freed here (unless the embedding shares it)
  weight_scales = scales;
}

void WeightQuantizer::loaded(const WeightSpec& s) {
  if (std::find(experts_.begin(), experts_.end(), s.dst) != experts_.end()) {
    round_trip_int_expert(be_, q_, s);  // held dequantized (int_experts.h)
    return;
  }
  auto it = pending_.find(s.dst);
  if (it == pending_.end() || --it->second.specs_left > 0) return;
  Linear* l = it->second.linear;
  pending_.erase(it);
  quantize(l->weight, l->weight_scales);
}

void WeightQuantizer::finish() {
  for (auto& [weight, p] : pending_) quantize(p.linear->weight, p.linear->weight_scales);
  pending_.clear();
  // int8 converts the LM head too (llama.cpp's Q8_0 does); tied to the embedding, the embedding keeps
  // the unquantized table for its row lookups.
  if (LMHead* head = model_.lm_head(); head && q_ == Quantization::INT8) quantize(head->weight, head->weight_scales);
}

}  // namespace nanovllm
