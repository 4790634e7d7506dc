// MoE experts of AWQ / GPTQ / compressed-tensors models, held dequantized. Each expert's gate_proj,
// up_proj and down_proj is a linear layer of the format, packed exactly as a dense one
// ("model.layers.L.mlp.experts.E.gate_proj.qweight", ...): it is read for this rank's slice with the
// canonical readers (int_formats.h), dequantized on the host with the canonical semantics
// (int_weights.h: int_dequantize_row, act order through int_act_order_perm) and written in the
// weight dtype into the model's stacked expert tensor (CausalLM::moe_expert_weights: Qwen3-MoE's
// w13 [E * 2I, H] and w2 [E * H, I]), where the backends' MoE ops read it unchanged. Correct on every
// backend with no kernel for codes in the MoE ops, at a cost in memory: the experts take the bytes
// of BF16 (Qwen3-30B-A3B: ~58 GB of experts rather than ~16 GB of 4-bit codes and scales); the attention
// projections and dense MLPs keep their codes (int_checkpoint.h).
// Tensor parallelism: the rank's rows are dequantized whole and its columns kept, so a row-parallel
// down_proj may cut groups and have act order at any tensor-parallel size.
// --quantization awq|gptq|compressed-tensors on an unquantized checkpoint (or dummy weights) rounds
// each expert to the format's usual scheme (usual_int_weight_scheme, the groups as the dense layers'
// quantize_weight takes them) and keeps the rounded values, so the model computes what the same
// model would from such a checkpoint.
#pragma once
#include "nanovllm/config/quantization.h"
#include "nanovllm/models/weights.h"

namespace nanovllm {

// Fills the rows of s.dst that spec `s` ("<module>.weight", shape [N, K] of the checkpoint, this
// rank's slice) names with the dequantized values of the checkpoint's quantized "<module>".
// Throws LoadError naming the tensor that is missing or malformed.
void load_int_expert(Backend& be, const IntCheckpointFormat& fmt, const SafetensorsCheckpoint& ckpt,
                     const WeightSpec& s);

// After spec `s` is loaded in the weight dtype: its rows of s.dst quantized with q's usual scheme
// and replaced by their dequantized values. Throws UserError when the rows cannot be quantized so.
void round_trip_int_expert(Backend& be, Quantization q, const WeightSpec& s);

}  // namespace nanovllm
