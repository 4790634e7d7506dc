// Loading an AWQ, GPTQ or compressed-tensors checkpoint into the canonical layout of
// backends/int_weights.h. Every quantizable linear layer of the model (CausalLM::quantizable_linears)
// that the format quantizes (its targets, minus modules_to_not_convert / ignore) gets U4 / U8 codes
// [N, K], F32 scales (and zeros) [N, K / G] and an optional perm [K] in place of its weight; the
// parts of a packed layer (q/k/v -> qkv_proj, gate/up -> gate_up_proj) fill consecutive row ranges
// and must agree on quantized or not (and on g_idx). Each part is unpacked on the host from the
// mmapped files (int_formats.h) for this rank's slice only and uploaded; once a layer's last part is
// in, Backend::prepare_int_weight may re-layout it. A layer the format leaves unquantized loads its
// "<module>.weight" as usual (its spec stays in `specs`). MoE experts (CausalLM::moe_expert_weights)
// that the format quantizes (AWQ's modules_to_not_convert matched against the experts' prefix
// "model.layers.L.mlp.experts", as vLLM) are dequantized into the model's stacked expert tensors
// (int_experts.h);
// a MoE router the checkpoint holds quantized is refused by name (the formats leave it unquantized:
// its "<module>.weight" loads even where the quantization_config's targets would include it).
// Tensor parallelism: column-parallel layers take whole rows; a row-parallel layer (o_proj,
// down_proj) takes K / tp columns, which must be whole groups, and cannot have act order (g_idx
// that reorders the groups) with tp > 1: both refused naming the tensor.
#pragma once
#include <string>
#include <vector>

#include "nanovllm/config/quantization.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

class CausalLM;

// Loads the quantized layers of `specs` from the checkpoint and removes their specs (the caller
// loads the rest with load_weights). Throws UserError for an architecture without a quantized path,
// LoadError naming the tensor for anything the checkpoint gets wrong.
void load_int_checkpoint(Backend& be, CausalLM& model, const IntCheckpointFormat& fmt, const std::string& architecture,
                         const SafetensorsCheckpoint& ckpt, std::vector<WeightSpec>& specs);

// Whether the format quantizes module `name` (e.g. "model.layers.0.self_attn.q_proj"): it matches a
// target (all when there are none; "Linear", "re:<regex>" anchored at the start as Python's
// re.match, or the name) and no unconverted entry (AWQ: a substring; else "re:<regex>" or the name).
bool int_format_quantizes(const IntCheckpointFormat& fmt, const std::string& name);

}  // namespace nanovllm
